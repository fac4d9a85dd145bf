"""NCCL configuration for cloud fabrics, as the vendors document it (techref §1.7-1.9).

Three places, kept apart on purpose:

- ``settings`` go to /etc/nccl.conf: only what describes the machine (which NICs, the topology
  file, PCI ordering), the same for every job.
- ``job_env`` is what vendors set per job (GCP's NCCL_ALGO/NCCL_PROTO and the GPUDirect-TCPX(O)
  variables, old aws-ofi-nccl's FI_PROVIDER/NCCL_PROTO): rendered into a per-job environment
  file that a Slurm TaskProlog exports -- for multi-node jobs only where the vendor says so.
- ``job_daemon`` is the receive-datapath-manager GCP runs beside every multi-node job, started
  by the Slurm prolog and stopped by the epilog.

Version-aware: what a newer plugin sets itself is not emitted (aws-ofi-nccl >= 1.7.0 needs none
of the FI_* variables; the TCPXO plugin's own ``nccl-env-profile.sh`` carries its tuning).
"""

from __future__ import annotations

from clusterctl.catalog.cloud_services import DEFAULT_GPUDIRECT_PLUGIN, gpudirect_release
from clusterctl.catalog.compat import at_least, version_tuple
from clusterctl.catalog.instances import InstanceType, instance_type
from clusterctl.plan.models import (
    NcclJobDaemon,
    NcclProfile,
    NcclSetting,
    NcclTopoCpu,
    NcclTopology,
    NcclTopoPair,
)
from clusterctl.spec.models import HardwareProfile, Spec
from clusterctl.spec.providers import AwsProvider, AzureProvider, GcpProvider

# Where the roles install a profile's topology XML on the node (NCCL_TOPO_FILE points here).
TOPO_DIR = "/etc/clusterctl/nccl"

AWS_SOURCES = [
    "aws-ofi-nccl doc/efa-env-var.md (EFA cheatsheet)",
    "awsome-distributed-training 1.architectures/efa-cheatsheet.md",
]
TCPX_SOURCES = [
    "GoogleCloudPlatform/cluster-toolkit examples/machine-learning/a3-highgpu-8g/nccl-tests/run-nccl-tests.sh",
    "GoogleCloudPlatform/container-engine-accelerators gpudirect-tcpx/README.md (release NCCL configs)",
]
TCPXO_SOURCES = [
    "GoogleCloudPlatform/cluster-toolkit examples/machine-learning/a3-megagpu-8g/nccl-tests/run-nccl-tests.sh",
    "GoogleCloudPlatform/container-engine-accelerators gpudirect-tcpxo/README.md (release notes)",
]
AZURE_SOURCES = ["Azure/azhpc-images components/customizations/ndv5.sh and topology/ndv5-topo.xml"]


def _s(name: str, value: str, why: str) -> NcclSetting:
    return NcclSetting(name=name, value=value, why=why)


# --- AWS EFA ------------------------------------------------------------------------------------


def _aws(spec: Spec, provider: AwsProvider, name: str, itype: InstanceType) -> NcclProfile:
    plugin, installer, nccl = provider.aws_ofi_nccl, provider.efa_installer, spec.versions.nccl
    settings = [
        _s(
            "NCCL_SOCKET_IFNAME",
            "en",
            "bootstrap over the ENA interfaces (ens*/enp*); EFA-only devices carry no IP (EFA cheatsheet: `en` "
            "covers p4d and p5)",
        )
    ]
    job: list[NcclSetting] = []
    if not at_least(plugin, "1.6.0"):
        # aws-ofi-nccl <= 1.5.0 did not pick the EFA provider or a safe protocol by itself.
        job.append(_s("FI_PROVIDER", "efa", f"aws-ofi-nccl {plugin} <= 1.5.0 does not select libfabric's efa itself"))
        job.append(
            _s("NCCL_PROTO", "simple", f"aws-ofi-nccl {plugin} <= 1.5.0 is only safe with the Simple protocol on EFA")
        )
    if not at_least(plugin, "1.7.0"):
        job.append(
            _s(
                "FI_EFA_USE_DEVICE_RDMA",
                "1",
                f"aws-ofi-nccl {plugin} < 1.7.0 does not turn on GPUDirect RDMA on {itype.name} itself",
            )
        )
    if version_tuple(installer) < (1, 29, 1) and at_least(nccl, "2.19.0"):
        job.append(
            _s(
                "FI_EFA_SET_CUDA_SYNC_MEMOPS",
                "0",
                f"EFA installer {installer} < 1.29.1 with NCCL {nccl} >= 2.19 raises libfabric errors without it",
            )
        )
    return NcclProfile(
        hardware=name,
        gpu_model=itype.gpu_model or "",
        settings=settings,
        job_env=job,
        fabric="efa",
        sources=AWS_SOURCES,
    )


# --- GCP GPUDirect-TCPX / TCPXO --------------------------------------------------------------


def _tcpx_bindings(nics: tuple[str, ...], cores: tuple[str, ...]) -> str:
    # Google publishes the bindings for eth1..eth4 (GKE names); the Slurm images name the same
    # NICs enp6s0, enp12s0, enp134s0, enp140s0 in the same order.
    return ";".join(f"{nic}:{core}" for nic, core in zip(nics, cores, strict=True))


_TCPX_TX = ("8-21,112-125", "8-21,112-125", "60-73,164-177", "60-73,164-177")
_TCPX_RX = ("22-35,126-139", "22-35,126-139", "74-87,178-191", "74-87,178-191")


def _gcp(spec: Spec, provider: GcpProvider, name: str, itype: InstanceType) -> NcclProfile:
    host = itype.host_nic or "enp0s12"
    fabric = itype.fabric
    version = (provider.gpudirect_plugin or DEFAULT_GPUDIRECT_PLUGIN[fabric]).removeprefix("v")
    release = gpudirect_release(fabric, version)
    settings = [
        _s(
            "NCCL_SOCKET_IFNAME",
            host,
            f"bootstrap over the host NIC {host}; the GPU NICs belong to the GPUDirect plugin",
        )
    ]
    if fabric == "gpudirect-tcpx":
        algo = "Ring,Tree" if release is None or at_least(release.plugin, "3.1.12") else "Ring"
        uds = "/run/tcpx-${SLURM_JOB_ID}"
        job = [
            _s("NCCL_NET", "GPUDirectTCPX_v7", "use the GPUDirect-TCPX plugin, not NCCL's socket transport"),
            _s("NCCL_GPUDIRECTTCPX_CTRL_DEV", host, "the plugin's control traffic goes over the host NIC"),
            _s("NCCL_GPUDIRECTTCPX_SOCKET_IFNAME", ",".join(itype.gpu_nics), "the GPU NICs carry the data"),
            _s("NCCL_CROSS_NIC", "0", "each GPU NIC is its own VPC: rings must stay on the same NIC index"),
            _s("NCCL_ALGO", algo, f"Google's setting for plugin v{version} (multi-node jobs)"),
            _s("NCCL_PROTO", "Simple", "TCPX supports only the Simple protocol"),
            _s("NCCL_NET_GDR_LEVEL", "PIX", "GPUDirect only between a GPU and the NIC on its PCI switch"),
            _s("NCCL_P2P_PXN_LEVEL", "0", "Google's setting: no PXN over TCPX"),
            _s("NCCL_NSOCKS_PERTHREAD", "4", "Google's socket fan-out for TCPX"),
            _s("NCCL_SOCKET_NTHREADS", "1", "Google's socket fan-out for TCPX"),
            _s("NCCL_DYNAMIC_CHUNK_SIZE", "524288", "Google's chunk size for TCPX"),
            _s("NCCL_P2P_NET_CHUNKSIZE", "524288", "Google's chunk size for TCPX"),
            _s("NCCL_P2P_PCI_CHUNKSIZE", "524288", "Google's chunk size for TCPX"),
            _s("NCCL_P2P_NVL_CHUNKSIZE", "1048576", "Google's chunk size for TCPX"),
            _s("NCCL_BUFFSIZE", "4194304", "Google's buffer size for TCPX"),
            _s("NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX", uds, "the socket the job's receive-datapath-manager serves"),
            _s(
                "NCCL_GPUDIRECTTCPX_TX_BINDINGS",
                _tcpx_bindings(itype.gpu_nics, _TCPX_TX),
                "Google's TX CPU bindings per GPU NIC (cores near each NIC)",
            ),
            _s(
                "NCCL_GPUDIRECTTCPX_RX_BINDINGS",
                _tcpx_bindings(itype.gpu_nics, _TCPX_RX),
                "Google's RX CPU bindings per GPU NIC",
            ),
            _s(
                "NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS",
                "500000",
                "give the receive-datapath-manager time to program flow steering",
            ),
            _s(
                "LD_LIBRARY_PATH",
                "/var/lib/tcpx/lib64:${LD_LIBRARY_PATH}",
                "where the plugin installer puts the plugin",
            ),
        ]
        daemon = NcclJobDaemon(
            name="receive-datapath-manager",
            image=release.rxdm_image if release else "",
            docker_args=[
                "--cap-add=NET_ADMIN",
                "--network=host",
                "--privileged",
                "--gpus all",
                "--volume /var/lib/nvidia/lib64:/usr/local/nvidia/lib64",
                f"--volume {uds}:{uds}",
                "--env LD_LIBRARY_PATH=/usr/local/nvidia/lib64",
                "--entrypoint /tcpgpudmarxd/build/app/tcpgpudmarxd",
            ],
            args=[
                "--gpu_nic_preset a3vm",
                "--gpu_shmem_type fd",
                f"--uds_path {uds}",
                '--setup_param "--verbose 128 2 0"',
            ],
            install_image=release.plugin_image if release else None,
            install_check="/var/lib/tcpx/lib64/libnccl-net.so",
        )
        return NcclProfile(
            hardware=name,
            gpu_model=itype.gpu_model or "",
            settings=settings,
            job_env=job,
            fabric=fabric,
            job_env_multinode_only=True,
            job_daemon=daemon,
            sources=TCPX_SOURCES,
        )
    # TCPXO: the plugin's own profile script carries the tuning; only the NIC names are ours.
    lib_dir = "/var/lib/tcpxo/lib64"
    job = [
        _s("NCCL_FASTRAK_CTRL_DEV", host, "the plugin's control traffic goes over the host NIC"),
        _s("NCCL_FASTRAK_IFNAME", ",".join(itype.gpu_nics), "the eight GPU NICs carry the data"),
        _s("NCCL_SOCKET_IFNAME", host, "bootstrap over the host NIC"),
        _s("NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY", "/dev/aperture_devices", "where the LLCM aperture devices appear"),
    ]
    legacy = release.rxdm_legacy_flags if release else False
    daemon = NcclJobDaemon(
        name="receive-datapath-manager",
        image=release.rxdm_image if release else "",
        docker_args=[
            "--cap-add=NET_ADMIN",
            "--network=host",
            "--privileged",
            "--gpus all",
            "--volume /var/lib/nvidia/lib64:/usr/local/nvidia/lib64",
            "--volume /dev/dmabuf_import_helper:/dev/dmabuf_import_helper",
            "--env LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu",
        ],
        # RxDM before v1.0.18 still expects --uid= --alsologtostderr (retired since).
        args=["--num_hops=2", "--num_nics=8", *(["--uid=", "--alsologtostderr"] if legacy else [])],
        install_image=release.plugin_image if release else None,
        install_check=f"{lib_dir}/nccl-env-profile.sh",
    )
    return NcclProfile(
        hardware=name,
        gpu_model=itype.gpu_model or "",
        settings=settings,
        job_env=job,
        fabric=fabric,
        job_env_multinode_only=True,
        job_env_profile=f"{lib_dir}/nccl-env-profile.sh",
        job_env_lib_dir=lib_dir,
        job_daemon=daemon,
        sources=TCPXO_SOURCES,
    )


# --- Azure ND (InfiniBand) ----------------------------------------------------------------------


def _affinity(vcpus: int, numa_nodes: int, numa: int) -> str:
    per = vcpus // numa_nodes
    mask = ((1 << per) - 1) << (numa * per)
    words = [(mask >> (32 * i)) & 0xFFFFFFFF for i in range((vcpus + 31) // 32)]
    return ",".join(f"{w:08x}" for w in reversed(words))


def topology_of(itype: InstanceType) -> NcclTopology | None:
    """The vendor topology of an instance type, ready to render as XML."""
    if not itype.pci_pairs or not itype.topology_name:
        return None
    cpus = [
        NcclTopoCpu(
            numaid=numa,
            affinity=_affinity(itype.vcpus, itype.numa_nodes, numa),
            pairs=[
                NcclTopoPair(gpu_busid=p.gpu_busid, nic_busid=p.nic_busid) for p in itype.pci_pairs if p.numa == numa
            ],
        )
        for numa in range(itype.numa_nodes)
    ]
    return NcclTopology(
        name=itype.topology_name,
        cpu_vendor=itype.cpu_vendor,
        cpu_family=itype.cpu_family,
        cpu_model=itype.cpu_model,
        cpus=cpus,
    )


def _azure(name: str, itype: InstanceType) -> NcclProfile:
    topology = topology_of(itype)
    settings = [
        _s(
            "NCCL_IB_HCA",
            "=" + ",".join(f"{dev}:1" for dev in itype.ib_devices),
            "exact (=) InfiniBand device names"
            + (f"; {', '.join(itype.excluded_nics)} (Ethernet) stays out" if itype.excluded_nics else ""),
        ),
        _s(
            "NCCL_IB_PCI_RELAXED_ORDERING",
            "1",
            "relaxed PCI ordering is what makes GPUDirect RDMA fast in Azure VMs (Azure's /etc/nccl.conf)",
        ),
        _s(
            "NCCL_IGNORE_CPU_AFFINITY",
            "1",
            "the VM's job CPU masks do not follow the host NUMA layout; use the GPU's affinity (Azure's setting)",
        ),
    ]
    topo_xml = topo_path = None
    if topology is not None:
        topo_xml = f"{topology.name}-topo.xml"
        topo_path = f"{TOPO_DIR}/{topo_xml}"
        settings.insert(
            1,
            _s(
                "NCCL_TOPO_FILE",
                topo_path,
                "the VM hides the PCI switches; this file pairs GPU i with IB NIC i as Azure's ndv5 file does",
            ),
        )
    return NcclProfile(
        hardware=name,
        gpu_model=itype.gpu_model or "",
        settings=settings,
        topo_xml=topo_xml,
        fabric="infiniband",
        topology=topology,
        topo_path=topo_path,
        sources=AZURE_SOURCES,
    )


def cloud_nccl_profile(spec: Spec, name: str, profile: HardwareProfile) -> NcclProfile | None:
    """The NCCL profile of a GPU hardware profile on a cloud provider; None when not on a cloud."""
    provider = spec.provider
    itype = instance_type(profile.instance_type)
    if itype is None or not itype.is_gpu:
        return None
    if isinstance(provider, AwsProvider) and itype.fabric == "efa":
        return _aws(spec, provider, name, itype)
    if isinstance(provider, GcpProvider) and itype.fabric in ("gpudirect-tcpx", "gpudirect-tcpxo"):
        return _gcp(spec, provider, name, itype)
    if isinstance(provider, AzureProvider) and itype.fabric == "infiniband":
        return _azure(name, itype)
    return None
