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

from typing import Any

from clusterctl.catalog import efa
from clusterctl.catalog.cloud_services import DEFAULT_GPUDIRECT_PLUGIN, GpuDirectRelease, gpudirect_release
from clusterctl.catalog.compat import at_least, version_tuple
from clusterctl.catalog.doca import AZURE_DOCA, AZURE_DOCA_SOURCE
from clusterctl.catalog.instances import InstanceType, instance_type
from clusterctl.plan.models import (
    DocaPlan,
    EfaStack,
    NcclJobDaemon,
    NcclProfile,
    NcclSetting,
    NcclTopoCpu,
    NcclTopology,
    NcclTopoPair,
    NcclVendorSlurm,
)
from clusterctl.spec.models import HardwareProfile, Spec
from clusterctl.spec.providers import AwsProvider, AzureProvider, GcpProvider, Provider

# Where Azure's HPC image keeps the topology files (roles/nccl installs ours there, the same way).
AZURE_TOPO_DIR = "/opt/microsoft"

AWS_SOURCES = [
    "aws/aws-ofi-nccl:doc/efa-env-var.md@2daf7d3 (EFA cheatsheet)",
    "aws-samples/awsome-distributed-training:1.architectures/efa-cheatsheet.md@7217859",
    "aws-samples/awsome-distributed-training:micro-benchmarks/nccl-tests/slurm/nccl-tests-ami.sbatch@7217859",
    "aws/aws-ofi-nccl:src/Makefile.am and src/platform-aws.cpp (per release tag)",
]
EFA_STACK_SOURCES = [
    "aws/aws-parallelcluster-cookbook:cookbooks/aws-parallelcluster-environment/resources/efa/partial/_common.rb@f75d84c",
    "aws-samples/awsome-distributed-training:2.ami_and_containers/1.amazon_machine_image/roles/aws_efa/tasks/main.yml@7217859",
    "EFA release notes (docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-changelog.html)",
    "aws/aws-ofi-nccl:contrib/debian-template/rules (per release tag)",
]
AZURE_SOURCES = [
    "Azure/azhpc-images:components/customizations/ndv5.sh@8e9d055",
    "Azure/azhpc-images:components/setup_sku_customizations.sh@8e9d055",
    "Azure/azhpc-images:topology/ndv5-topo.xml@8e9d055",
]


def _s(name: str, value: str, why: str) -> NcclSetting:
    return NcclSetting(name=name, value=value, why=why)


def _socket_ifname(ifname: str, why: str) -> list[NcclSetting]:
    """The nccl.conf settings that only name the bootstrap interface."""
    return [_s("NCCL_SOCKET_IFNAME", ifname, why)]


def _profile(name: str, itype: InstanceType, settings: list[NcclSetting], **vendor: Any) -> NcclProfile:
    """The NCCL profile of hardware profile ``name`` on ``itype`` with the vendor's settings and extras."""
    return NcclProfile(hardware=name, gpu_model=itype.gpu_model or "", settings=settings, **vendor)


# --- AWS EFA ------------------------------------------------------------------------------------


def efa_stack(provider: AwsProvider) -> EfaStack:
    """What roles/efa installs for ``provider``'s EFA installer and aws-ofi-nccl releases."""
    installer, plugin = provider.efa_installer, provider.aws_ofi_nccl
    shipped = efa.installer_ships(installer)
    return EfaStack(
        installer=installer,
        installer_checksum=provider.efa_installer_checksum or efa.installer_checksum(installer),
        aws_ofi_nccl=plugin,
        ofi_nccl_from_installer=shipped.ships if shipped.known else None,
        ofi_nccl_checksum=provider.aws_ofi_nccl_checksum or efa.OFI_NCCL_CHECKSUMS.get(plugin),
        ofi_nccl_libdir=efa.ofi_nccl_libdir(plugin),
        ofi_nccl_files=list(efa.ofi_nccl_files(plugin).names),
        gdrcopy=efa.GDRCOPY_VERSION,
        gdrcopy_checksum=efa.GDRCOPY_CHECKSUM,
        sources=EFA_STACK_SOURCES,
    )


def _aws(spec: Spec, provider: AwsProvider, name: str, itype: InstanceType) -> NcclProfile:
    plugin, installer, nccl = provider.aws_ofi_nccl, provider.efa_installer, spec.versions.nccl
    stack = efa_stack(provider)
    settings = _socket_ifname(
        "en",
        "bootstrap over the ENA interfaces (ens*/enp*); EFA-only devices carry no IP (EFA cheatsheet: `en` "
        "covers p4d and p5; awsome-distributed-training:1.architectures/efa-cheatsheet.md@7217859)",
    )
    job: list[NcclSetting] = []
    net_plugin = efa.ofi_nccl_net_plugin(plugin)
    if net_plugin:
        job.append(
            _s(
                "NCCL_NET_PLUGIN",
                net_plugin,
                f"aws-ofi-nccl {plugin} installs libnccl-net-ofi.so; `ofi` makes NCCL load exactly it, never another "
                "libnccl-net.so found first (aws/aws-ofi-nccl:src/Makefile.am@v1.15.0)",
            )
        )
    tuner = efa.ofi_nccl_tuner(plugin)
    if tuner:
        job.append(
            _s(
                "NCCL_TUNER_PLUGIN",
                tuner,
                f"aws-ofi-nccl {plugin} ships its tuner as a separate library that NCCL only loads when named "
                "(awsome-distributed-training:micro-benchmarks/nccl-tests/slurm/nccl-tests-container.sbatch@7217859); "
                "from 1.16.0 the plugin names itself",
            )
        )
    if itype.name.startswith(("p5", "p6")) and not at_least(plugin, "1.16.0"):
        # AWS's nccl-tests scripts export both on p5 (awsome-distributed-training:micro-benchmarks/
        # nccl-tests/slurm/nccl-tests-container.sbatch@7217859 lines 40 and 43, nccl-tests-ami.sbatch
        # lines 40-41); aws-ofi-nccl sets them itself for p5/p5e/p5en/p6 from v1.16.0 only
        # (src/platform-aws.cpp@v1.16.0 platform_data_map .env, lines 146-147 for p5/p5e; absent at
        # v1.15.0). The two agree on the values; before 1.16.0 only the job can set them.
        for variable, value, why in (
            ("NCCL_BUFFSIZE", "8388608", "8 MiB buffers deepen the send queue over EFA"),
            ("NCCL_P2P_NET_CHUNKSIZE", "524288", "512 KiB chunks for send/recv, all-to-all over EFA"),
        ):
            job.append(
                _s(
                    variable,
                    value,
                    f"{why}: AWS's nccl-tests sbatch sets it on {itype.name}; aws-ofi-nccl {plugin} < 1.16.0 does not",
                )
            )
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
    return _profile(
        name,
        itype,
        settings,
        job_env=job,
        # The AMI sbatch's LD_LIBRARY_PATH: libfabric, Open MPI, then the plugin's directory of this release.
        job_env_ld_path=[f"{efa.EFA_PREFIX}/lib", f"{efa.OPENMPI_PREFIX}/lib", stack.ofi_nccl_libdir],
        fabric="efa",
        efa=stack,
        sources=AWS_SOURCES,
    )


# --- GCP GPUDirect-TCPX / TCPXO and A3 Ultra (gIB) -------------------------------------------
# The vendor files the GCP settings below follow (owner/repo:path@commit); the generated files
# and tests/conformance/gcp-* name them again.
CTK = "GoogleCloudPlatform/cluster-toolkit"
CTK_AT = "@1047080"
A3MEGA_BLUEPRINT = f"{CTK}:examples/machine-learning/a3-megagpu-8g/a3mega-slurm-blueprint.yaml{CTK_AT}"
A3MEGA_NCCL_TESTS = f"{CTK}:examples/machine-learning/a3-megagpu-8g/nccl-tests/run-nccl-tests.sh{CTK_AT}"
A3HIGH_BLUEPRINT = f"{CTK}:examples/machine-learning/a3-highgpu-8g/a3high-slurm-blueprint.yaml{CTK_AT}"
A3ULTRA_BLUEPRINT = f"{CTK}:examples/machine-learning/a3-ultragpu-8g/a3ultra-slurm-blueprint.yaml{CTK_AT}"
A3ULTRA_NCCL_TESTS = f"{CTK}:examples/machine-learning/a3-ultragpu-8g/nccl-tests/run-nccl-tests.sh{CTK_AT}"
A3ULTRA_DOCKERFILE = f"{CTK}:examples/machine-learning/a3-ultragpu-8g/nemo-framework/Dockerfile{CTK_AT}"
LONG_PROLOG_TPL = (
    f"{CTK}:community/modules/scheduler/schedmd-slurm-gcp-v6-controller/etc/long-prolog-slurm.conf.tpl{CTK_AT}"
)
RXDM_PROLOG = "GoogleCloudPlatform/slurm-gcp:tools/prologs-epilogs/receive-data-path-manager-mega@13fd92b"
TCPXO_README = "google/nccl-plugin-gpudirect-tcpxo:README.md@04815d1"
TCPXO_PROFILE = "google/nccl-plugin-gpudirect-tcpxo:tcpxo_scripts/nccl-env-profile.sh@04815d1"

TCPX_SOURCES = [
    "GoogleCloudPlatform/cluster-toolkit examples/machine-learning/a3-highgpu-8g/nccl-tests/run-nccl-tests.sh",
    "GoogleCloudPlatform/container-engine-accelerators gpudirect-tcpx/README.md (release NCCL configs)",
]
TCPXO_SOURCES = [
    A3MEGA_NCCL_TESTS,
    TCPXO_PROFILE,
    "GoogleCloudPlatform/container-engine-accelerators gpudirect-tcpxo/README.md (release notes)",
]
GIB_SOURCES = [A3ULTRA_NCCL_TESTS, A3ULTRA_DOCKERFILE, A3ULTRA_BLUEPRINT]

# Where the TCPXO plugin installer writes NCCL, the plugin and its profile (Google's prolog runs it
# with -v /var/lib:/var/lib; tcpxo_scripts/container_entry.sh, install_nccl_env_profile).
TCPXO_LIB_DIR = "/var/lib/tcpxo/lib64"
# Where the nccl-gib package installs (a3ultra blueprint: /etc/profile.d/nccl-gib.sh).
GIB_DIR = "/usr/local/gib"
# The log line Google's prolog waits for (60 checks, 2 s apart) before the job may start.
RXDM_READY = "Buffer manager initialization complete"

# The toolkit's long-prolog slurm.conf template (the a3-high and a3-mega blueprints use it): the
# plugin installer and the RxDM run in the prolog, minutes on a node's first job (image pulls).
_LONG_PROLOG = {
    "message_timeout_s": 600,
    "batch_start_timeout_s": 600,
    "prolog_epilog_timeout_s": 600,
    # Line 44 of the template, beside the timers: a step credential that outlives the 600 s prolog.
    "cred_expire_s": 600,
    "timeouts_source": LONG_PROLOG_TPL,
}


def _tcpx_bindings(nics: tuple[str, ...], cores: tuple[str, ...]) -> str:
    # Google publishes the bindings for eth1..eth4 (GKE names); the Slurm images name the same
    # NICs enp6s0, enp12s0, enp134s0, enp140s0 in the same order.
    return ";".join(f"{nic}:{core}" for nic, core in zip(nics, cores, strict=True))


_TCPX_TX = ("8-21,112-125", "8-21,112-125", "60-73,164-177", "60-73,164-177")
_TCPX_RX = ("22-35,126-139", "22-35,126-139", "74-87,178-191", "74-87,178-191")

# The docker options every receive-datapath-manager runs with in Google's prologs.
_RXDM_DOCKER_ARGS = (
    "--cap-add=NET_ADMIN",
    "--network=host",
    "--privileged",
    "--gpus all",
    "--volume /var/lib/nvidia/lib64:/usr/local/nvidia/lib64",
)


def _host_nic(itype: InstanceType) -> str:
    return itype.host_nic or "enp0s12"


def _plugin_version(provider: GcpProvider, fabric: str) -> str:
    """The GPUDirect plugin release the spec pins for ``fabric`` (the default when it pins none)."""
    return (provider.gpudirect_plugin or DEFAULT_GPUDIRECT_PLUGIN[fabric]).removeprefix("v")


def _rxdm(release: GpuDirectRelease | None, docker_args: list[str], install_dir: str, **daemon: Any) -> NcclJobDaemon:
    """The receive-datapath-manager of ``release``, its plugin installed into ``install_dir``."""
    return NcclJobDaemon(
        name="receive-datapath-manager",
        image=release.rxdm_image if release else "",
        docker_args=[*_RXDM_DOCKER_ARGS, *docker_args],
        install_image=release.plugin_image if release else None,
        install_dir=install_dir,
        registry="us-docker.pkg.dev",
        **daemon,
    )


def _exclusive(partition_source: str, **timeouts: Any) -> NcclVendorSlurm:
    """Whole nodes per job, as the vendor's blueprint sets up the partition."""
    return NcclVendorSlurm(oversubscribe="EXCLUSIVE", partition_source=partition_source, **timeouts)


def _tcpx(name: str, itype: InstanceType, settings: list[NcclSetting], version: str) -> NcclProfile:
    host = _host_nic(itype)
    release = gpudirect_release("gpudirect-tcpx", version)
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
    ]
    entrypoint = "--entrypoint /tcpgpudmarxd/build/app/tcpgpudmarxd"
    daemon = _rxdm(
        release,
        [f"--volume {uds}:{uds}", "--env LD_LIBRARY_PATH=/usr/local/nvidia/lib64", entrypoint],
        "/var/lib/tcpx/lib64",
        args=["--gpu_nic_preset a3vm", "--gpu_shmem_type fd", f"--uds_path {uds}", '--setup_param "--verbose 128 2 0"'],
        install_check="/var/lib/tcpx/lib64/libnccl-net.so",
        sources=list(TCPX_SOURCES),
    )
    return _profile(
        name,
        itype,
        settings,
        job_env=job,
        fabric="gpudirect-tcpx",
        job_env_multinode_only=True,
        job_env_ld_path=["/var/lib/tcpx/lib64"],
        job_daemon=daemon,
        slurm=_exclusive(A3HIGH_BLUEPRINT, **_LONG_PROLOG),
        sources=TCPX_SOURCES,
    )


def _tcpxo(name: str, itype: InstanceType, settings: list[NcclSetting], version: str) -> NcclProfile:
    host = _host_nic(itype)
    release = gpudirect_release("gpudirect-tcpxo", version)
    # The plugin's own nccl-env-profile.sh carries the tuning of its release; only the NIC names
    # (Google's Slurm images name them enp*, the profile's defaults are GKE's eth*) and the aperture
    # directory are set on top, exactly as run-nccl-tests.sh does after sourcing it.
    job = [
        _s("NCCL_FASTRAK_CTRL_DEV", host, "the plugin's control traffic goes over the host NIC"),
        _s("NCCL_FASTRAK_IFNAME", ",".join(itype.gpu_nics), "the eight GPU NICs carry the data"),
        _s("NCCL_SOCKET_IFNAME", host, "bootstrap over the host NIC"),
        _s("NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY", "/dev/aperture_devices", "where the LLCM aperture devices appear"),
    ]
    profile_script = f"{TCPXO_LIB_DIR}/nccl-env-profile.sh"
    daemon = _rxdm(
        release,
        # The flags of Google's own prolog (receive-data-path-manager-mega).
        [
            "--volume /dev/dmabuf_import_helper:/dev/dmabuf_import_helper",
            "--env LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu",
        ],
        TCPXO_LIB_DIR,
        # The flags of Google's prolog (receive-data-path-manager-mega@13fd92b line 73). The two
        # references disagree: google/nccl-plugin-gpudirect-tcpxo:README.md@04815d1 ("Notes for
        # Existing Users") retires all but --num_hops=2 from tcpgpudmarxd v1.0.20, where the others
        # are accepted and only logged. The prolog's are kept: every RxDM release takes them.
        args=["--num_hops=2", "--num_nics=8", "--uid=", "--alsologtostderr"],
        install_check=profile_script,
        # Google's prolog loads the dmabuf import helper (DKMS module import-helper) first.
        modules=["import-helper"],
        ready_line=RXDM_READY,
        ready_tries=60,
        ready_interval_s=2,
        sources=[RXDM_PROLOG, TCPXO_README],
    )
    return _profile(
        name,
        itype,
        settings,
        job_env=job,
        fabric="gpudirect-tcpxo",
        job_env_multinode_only=True,
        job_env_profile=profile_script,
        job_env_lib_dir=TCPXO_LIB_DIR,
        job_env_ld_path=[TCPXO_LIB_DIR],
        job_daemon=daemon,
        slurm=_exclusive(A3MEGA_BLUEPRINT, resume_timeout_s=900, suspend_timeout_s=600, **_LONG_PROLOG),
        sources=TCPXO_SOURCES,
    )


def _gib(name: str, itype: InstanceType) -> NcclProfile:
    """A3 Ultra: RoCE through Google's gIB NCCL plugin (no daemon, no long prolog)."""
    socket = ",".join(itype.socket_nics)
    settings = _socket_ifname(socket, "bootstrap over the two gVNIC NICs; the RDMA NICs belong to the gIB plugin")
    # run-nccl-tests.sh: NCCL_NET and NCCL_SOCKET_IFNAME after sourcing set_nccl_env.sh; the NeMo
    # Dockerfile mirrors what set_nccl_env.sh sets (its NCCL_DEBUG/NCCL_DEBUG_SUBSYS are debugging
    # aids, left to the user).
    job = [
        _s("NCCL_NET", "gIB", "use Google's gIB plugin, not NCCL's own IB transport or sockets"),
        _s("NCCL_SOCKET_IFNAME", socket, "bootstrap over the two gVNIC NICs"),
        _s("NCCL_CROSS_NIC", "0", "rail-aligned: rings stay on the same NIC index across nodes"),
        _s("NCCL_NET_GDR_LEVEL", "PIX", "GPUDirect RDMA only between a GPU and the NIC on its PCI switch"),
        _s("NCCL_P2P_NET_CHUNKSIZE", "131072", "Google's chunk size for gIB"),
        _s("NCCL_NVLS_CHUNKSIZE", "524288", "Google's NVLS chunk size for gIB"),
        _s("NCCL_IB_ADAPTIVE_ROUTING", "1", "the RoCE fabric routes adaptively"),
        _s("NCCL_IB_QPS_PER_CONNECTION", "4", "Google's queue pairs per connection"),
        _s("NCCL_IB_TC", "52", "the RoCE traffic class Google's network expects for data"),
        _s("NCCL_IB_FIFO_TC", "84", "the traffic class for NCCL's FIFO (control) messages"),
        _s(
            "NCCL_TUNER_CONFIG_PATH",
            f"{GIB_DIR}/configs/tuner_config_a3u.txtpb",
            "the gIB package's tuner configuration for A3 Ultra",
        ),
    ]
    return _profile(
        name,
        itype,
        settings,
        job_env=job,
        fabric="gcp-rdma",
        job_env_profile=f"{GIB_DIR}/scripts/set_nccl_env.sh",
        job_env_ld_path=[f"{GIB_DIR}/lib64"],
        slurm=_exclusive(A3ULTRA_BLUEPRINT, resume_timeout_s=1200, suspend_timeout_s=1200),
        sources=GIB_SOURCES,
    )


def _gcp(spec: Spec, provider: GcpProvider, name: str, itype: InstanceType) -> NcclProfile:
    if itype.fabric == "gcp-rdma":
        return _gib(name, itype)
    host = _host_nic(itype)
    settings = _socket_ifname(host, f"bootstrap over the host NIC {host}; the GPU NICs belong to the GPUDirect plugin")
    version = _plugin_version(provider, itype.fabric)
    if itype.fabric == "gpudirect-tcpx":
        return _tcpx(name, itype, settings, version)
    return _tcpxo(name, itype, settings, version)


def gcp_versions(spec: Spec) -> dict[str, str]:
    """The GCP GPUDirect pieces a spec pins, for the plan's ``versions`` (empty elsewhere).

    The roles install exactly these: the TCPXO plugin installer and RxDM image tags (the prolog
    runs them), the dmabuf-import-helper DKMS module on A3 Mega, nccl-gib on A3 Ultra.
    """
    out: dict[str, str] = {}
    for name, profile in sorted(spec.hardware.items()):
        provider = profile_provider(spec, name)
        itype = instance_type(profile.instance_type)
        if isinstance(provider, GcpProvider) and profile.gpus and itype is not None:
            out.update(_gcp_versions(provider, {itype.fabric}))
    return out


def _gcp_versions(provider: GcpProvider, fabrics: set[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    if "gpudirect-tcpxo" in fabrics:
        version = _plugin_version(provider, "gpudirect-tcpxo")
        out["gpudirect_tcpxo_plugin"] = version
        release = gpudirect_release("gpudirect-tcpxo", version)
        if release is not None:
            out["gpudirect_tcpxo_rxdm"] = release.rxdm
        out["dmabuf_import_helper"] = provider.dmabuf_import_helper
    if "gcp-rdma" in fabrics:
        out["nccl_gib"] = provider.nccl_gib
    return out


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


def _azure_doca(spec: Spec) -> DocaPlan | None:
    """DOCA-OFED of Azure's HPC image for the spec's OS (None where Azure's image pins none)."""
    release = AZURE_DOCA.get(spec.os)
    if release is None:
        return None
    return DocaPlan(
        version=release.version, url=release.url, checksum=f"sha256:{release.sha256}", source=AZURE_DOCA_SOURCE
    )


def _azure(spec: Spec, name: str, itype: InstanceType) -> NcclProfile:
    """Azure ND: the /etc/nccl.conf and topology file of Azure's HPC image, at the image's paths.

    Azure/azhpc-images:components/customizations/ndv5.sh@8e9d055 writes exactly these three lines
    and links /opt/microsoft/<family>/topo.xml to the topology file the image copies to
    /opt/microsoft (components/setup_sku_customizations.sh@8e9d055). The same file and paths here
    mean a node booted from Azure's image (whose sku-customizations.service rewrites them at every
    boot) and one converged by clusterctl agree. No NCCL_IB_HCA: the topology pairs GPU and HCA by
    PCI bus id, so NCCL needs no device names (the image sets none either).
    """
    topology = topology_of(itype)
    settings = [
        _s(
            "NCCL_IB_PCI_RELAXED_ORDERING",
            "1",
            "relaxed PCI ordering is what makes GPUDirect RDMA fast in Azure VMs (azhpc-images ndv5.sh)",
        ),
    ]
    topo_xml = topo_path = topo_file = None
    if topology is not None:
        # The names Azure's image uses: topology/<family>-topo.xml installed in /opt/microsoft, and
        # NCCL_TOPO_FILE=/opt/microsoft/<family>/topo.xml, a link to it.
        topo_xml = f"{topology.name}-topo.xml"
        topo_file = f"{AZURE_TOPO_DIR}/{topo_xml}"
        topo_path = f"{AZURE_TOPO_DIR}/{topology.name}/topo.xml"
        settings.append(
            _s(
                "NCCL_TOPO_FILE",
                topo_path,
                f"the VM hides the PCI switches; this file pairs GPU i with IB NIC i (azhpc-images "
                f"topology/{topo_xml}, linked as in ndv5.sh)",
            )
        )
    settings.append(
        _s(
            "NCCL_IGNORE_CPU_AFFINITY",
            "1",
            "the VM's job CPU masks do not follow the host NUMA layout; use the GPU's affinity (azhpc-images ndv5.sh)",
        )
    )
    doca = _azure_doca(spec)
    return _profile(
        name,
        itype,
        settings,
        topo_xml=topo_xml,
        fabric="infiniband",
        topology=topology,
        topo_path=topo_path,
        topo_file=topo_file,
        sources=AZURE_SOURCES,
        # Azure's image: DOCA-OFED and nvidia-peermem (ndv5.sh line 31), not inbox rdma-core with DMA-BUF.
        doca=doca,
        gpudirect="peermem" if doca is not None else None,
        notes=[
            "GPUDirect RDMA: nvidia-peermem with DOCA-OFED "
            + (f"{doca.version} " if doca else "")
            + "as Azure's HPC image has it (Azure/azhpc-images:components/customizations/ndv5.sh@8e9d055 line 31, "
            "versions.json doca); DMA-BUF would also work with the open kernel modules, but the image's path is "
            "the one Azure qualifies."
        ]
        if doca
        else [],
    )


def profile_provider(spec: Spec, name: str) -> Provider:
    """The provider the nodes of hardware profile ``name`` run on.

    A profile that only burst groups use runs on their provider (a p5 profile of an on-prem
    cluster's AWS burst group is on EFA, not on the on-prem fabric); otherwise the cluster's.
    Rule BUR002 refuses a profile shared by groups on different providers.
    """
    groups = [g for g in spec.nodes if g.hardware == name]
    if groups and all(g.burst is not None for g in groups):
        first = groups[0].burst
        assert first is not None
        return first.provider
    return spec.provider


def profile_fabric(spec: Spec, name: str) -> str:
    """The fabric kind hardware profile ``name``'s nodes use: a cloud GPU type's own, else fabric.kind."""
    profile = spec.hardware.get(name)
    itype = instance_type(profile.instance_type) if profile else None
    provider = profile_provider(spec, name)
    if itype is not None and itype.is_gpu and itype.provider == provider.kind and itype.fabric:
        return itype.fabric
    return spec.fabric.kind


def cloud_nccl_profile(spec: Spec, name: str, profile: HardwareProfile) -> NcclProfile | None:
    """The NCCL profile of a GPU hardware profile on a cloud provider; None when not on a cloud.

    The provider is the one its nodes run on (:func:`profile_provider`): a burst group's.
    """
    provider = profile_provider(spec, name)
    itype = instance_type(profile.instance_type)
    if itype is None or not itype.is_gpu:
        return None
    if isinstance(provider, AwsProvider) and itype.fabric == "efa":
        return _aws(spec, provider, name, itype)
    if isinstance(provider, GcpProvider) and itype.fabric in ("gpudirect-tcpx", "gpudirect-tcpxo", "gcp-rdma"):
        return _gcp(spec, provider, name, itype)
    if isinstance(provider, AzureProvider) and itype.fabric == "infiniband":
        return _azure(spec, name, itype)
    return None
