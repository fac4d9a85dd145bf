"""What every container started through pyxis/enroot gets from its node so NCCL works inside.

LLM training runs in containers (``srun --container-image``), and a stock image (NGC PyTorch)
has no NCCL network plugin of the node's fabric, no /etc/nccl.conf of the node, and an
environment of its own that pyxis puts over the job's. So, per GPU hardware profile:

- the plugin's and libraries' directories, /etc/nccl.conf and the files it names, the devices a
  plugin opens and the TaskProlog are bind-mounted read-only at the same paths (enroot's
  mounts.d, ``enroot/mounts.d/<hw>.fstab`` in the build directory);
- an enroot hook (``enroot/hooks.d/50-clusterctl-nccl.sh``) runs the node's TaskProlog with the
  job's and the image's environment and adds what it prints to the container's, so the vendor's
  NCCL defaults, and the plugin first on LD_LIBRARY_PATH, reach the task inside as they do on the
  host; a variable the job or the image sets is never overwritten (the TaskProlog's rule).

The vendors mount the same directories by hand in their job scripts (cited per mount); here the
node does it for every job.
"""

from __future__ import annotations

from clusterctl.catalog import efa
from clusterctl.plan.models import ContainerMount, NcclProfile
from clusterctl.plan.nccl_cloud import (
    A3MEGA_BLUEPRINT,
    A3MEGA_NCCL_TESTS,
    A3ULTRA_NCCL_TESTS,
    AZURE_TOPO_DIR,
    GIB_DIR,
    TCPXO_LIB_DIR,
)
from clusterctl.plan.slurm import TASK_PROLOG

NCCL_CONF = "/etc/nccl.conf"
# Where the a3mega blueprint keeps enroot's per-user runtime, cache and data: the local SSD array
# (GoogleCloudPlatform/cluster-toolkit:examples/machine-learning/a3-megagpu-8g/
# a3mega-slurm-blueprint.yaml@1047080 lines 230-236, /etc/enroot/enroot.conf).
LOCAL_SSD = "/mnt/localssd"
A3MEGA_ENROOT_CONF = f"{A3MEGA_BLUEPRINT}:230-236"
# The toolkit's job scripts mount the plugin directory into the container by hand.
A3MEGA_MOUNT = f"{A3MEGA_NCCL_TESTS}:54"
A3ULTRA_MOUNT = f"{A3ULTRA_NCCL_TESTS}:46"
AWS_CONTAINER_SBATCH = (
    "aws-samples/awsome-distributed-training:micro-benchmarks/nccl-tests/slurm/nccl-tests-container.sbatch@7217859"
)


def _mounts(profile: NcclProfile) -> list[ContainerMount]:
    out = [
        ContainerMount(
            path=NCCL_CONF,
            kind="file",
            why=(
                "the node's NCCL system settings: NCCL in a container reads the container's /etc/nccl.conf "
                "(NVIDIA/nccl src/misc/param.cc), which a stock image lacks"
            ),
        )
    ]
    if profile.job_env or profile.job_env_profile:
        out.append(
            ContainerMount(
                path=TASK_PROLOG,
                kind="file",
                why=(
                    "slurmstepd runs the TaskProlog inside the pyxis container (NVIDIA/pyxis#29, #163); "
                    "without it every task logs that the TaskProlog cannot run"
                ),
            )
        )
    fabric = profile.fabric
    if fabric == "efa" and profile.efa is not None:
        out += [
            ContainerMount(
                path=efa.EFA_PREFIX,
                kind="dir",
                why="libfabric with its efa provider, as the EFA installer put it on the node",
                source=AWS_CONTAINER_SBATCH,
            ),
            ContainerMount(
                path=profile.efa.ofi_nccl_libdir,
                kind="dir",
                why=f"the aws-ofi-nccl {profile.efa.aws_ofi_nccl} plugin and its tuner (NCCL_NET_PLUGIN and _TUNER_)",
                source=AWS_CONTAINER_SBATCH,
            ),
        ]
    elif fabric == "gpudirect-tcpxo":
        out += [
            ContainerMount(
                path=TCPXO_LIB_DIR,
                kind="dir",
                why="the GPUDirect-TCPXO plugin, the NCCL build it ships and nccl-env-profile.sh",
                source=A3MEGA_MOUNT,
            ),
            ContainerMount(
                path="/dev/aperture_devices",
                kind="dir",
                # Each device is a bind mount of a PCI resource file that the plugin maps read-write
                # (roles/gpudirect: the toolkit's 00-a3-megagpu.rules).
                writable=True,
                recursive=True,
                why="the LLCM aperture devices NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY names (enroot gives a fresh /dev)",
            ),
        ]
    elif fabric == "gpudirect-tcpx":
        out.append(
            ContainerMount(path="/var/lib/tcpx/lib64", kind="dir", why="the GPUDirect-TCPX plugin and its NCCL build")
        )
    elif fabric == "gcp-rdma":
        out.append(
            ContainerMount(
                path=GIB_DIR,
                kind="dir",
                why="the gIB plugin (NCCL_NET=gIB), its set_nccl_env.sh and tuner configuration",
                source=A3ULTRA_MOUNT,
            )
        )
    if profile.topo_path is not None and profile.topo_path.startswith(AZURE_TOPO_DIR + "/"):
        out.append(
            ContainerMount(
                path=AZURE_TOPO_DIR,
                kind="dir",
                why=f"the topology file NCCL_TOPO_FILE names ({profile.topo_path}) and the file it links to",
            )
        )
    return out


def with_containers(profile: NcclProfile) -> NcclProfile:
    """``profile`` with what its nodes' containers get (mounts; enroot's data on A3 Mega's local SSD)."""
    storage = LOCAL_SSD if profile.fabric == "gpudirect-tcpxo" else None
    return profile.model_copy(
        update={
            "container_mounts": _mounts(profile),
            "container_storage": storage,
            "container_storage_source": A3MEGA_ENROOT_CONF if storage else None,
        }
    )
