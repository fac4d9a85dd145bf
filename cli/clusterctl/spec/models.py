"""Pydantic v2 models of the cluster spec (``spec.yaml``).

Field names are the interface users write; add fields freely, never rename. Models are
strict (unknown keys are errors), frozen, and describe every field so ``clusterctl schema``
gives editors a useful JSON Schema. Cross-field semantics live in ``clusterctl.rules``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    Field,
    StrictBool,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from clusterctl.catalog.gpus import GPU_MODELS
from clusterctl.catalog.tools import DEFAULT_CONTAINER_TOOLKIT, DEFAULT_NCCL_TESTS, nccl_tests_checksum
from clusterctl.spec.base import StrictModel
from clusterctl.spec.providers import Provider
from clusterctl.spec.types import (
    AbsolutePath,
    AptToken,
    BandwidthValue,
    DnsDomain,
    DnsLabel,
    Duration,
    DurationValue,
    HostLabel,
    Hostname,
    HostnamePattern,
    ImageReference,
    InstanceType,
    IPv4AddressValue,
    IPv4NetworkValue,
    LustreFsname,
    LustreNid,
    MountOption,
    MountPoint,
    NetdevName,
    NonNegativeInt,
    NumaNode,
    PositiveInt,
    RailDevice,
    SafeName,
    Sha256,
    SlurmConfName,
    SlurmConfValue,
    SlurmTime,
    Url,
    VersionStr,
    show,
)

# The stock image of verify's container transport check: NVIDIA's PyTorch container, the one the
# Cluster Toolkit's A3 Ultra NCCL test runs (GoogleCloudPlatform/cluster-toolkit:examples/
# machine-learning/a3-ultragpu-8g/nccl-tests/run-nccl-tests.sh@1047080 line 26).
DEFAULT_CONTAINER_CHECK_IMAGE = "nvcr.io/nvidia/pytorch:24.09-py3"

# Caps on node counts: far above any cluster built today (100k GPUs is 12,500 nodes of eight),
# low enough that a typo or a hostile spec cannot make the plan allocate millions of nodes.
MAX_NODES_PER_GROUP = 16384
MAX_NODES_TOTAL = 32768

NodeCount = Annotated[int, Field(gt=0, le=MAX_NODES_PER_GROUP, strict=True)]


def _gpu_model(value: Any) -> str:
    if not isinstance(value, str) or value not in GPU_MODELS:
        raise ValueError(f"unknown GPU model {show(value)}; known models: {', '.join(sorted(GPU_MODELS))}")
    return value


# A GPU model clusterctl's catalog knows.
GpuModel = Annotated[str, BeforeValidator(_gpu_model), WithJsonSchema({"type": "string", "enum": sorted(GPU_MODELS)})]

# --- network, versions -----------------------------------------------------------------------


class Network(StrictModel):
    """The management network every node has an address on."""

    management_cidr: IPv4NetworkValue = Field(
        description="Management network; node addresses are assigned from it in plan order.",
        examples=["10.20.0.0/16"],
    )
    domain: DnsDomain = Field(description="DNS domain of the nodes.", examples=["atlas.internal"])
    gateway: IPv4AddressValue | None = Field(None, description="Default gateway (default: first address).")


class Versions(StrictModel):
    """Pinned versions of the software stack. Quote every version in YAML."""

    nvidia_driver: VersionStr = Field(description="NVIDIA driver, exact.", examples=["570.133.20"])
    cuda: VersionStr = Field(description="CUDA toolkit, major.minor.", examples=["12.8"])
    nccl: VersionStr = Field(description="NCCL, exact.", examples=["2.26.2"])
    slurm: VersionStr = Field(description="Slurm, major.minor.", examples=["23.11"])
    dcgm: VersionStr = Field(description="DCGM, exact.", examples=["3.3.9"])
    enroot: VersionStr = Field("3.5.0", description="enroot, exact.")
    pyxis: VersionStr = Field("0.20.0", description="pyxis, exact.")
    fabric_manager: VersionStr | None = Field(
        None, description="NVIDIA fabric manager; must equal nvidia_driver (default: the driver's)."
    )
    nccl_tests: VersionStr = Field(
        DEFAULT_NCCL_TESTS,
        description="nccl-tests, exact; built on the GPU nodes from its source archive (verify runs all_reduce_perf).",
        examples=["2.13.6"],
    )
    nccl_tests_checksum: Sha256 | None = Field(
        None,
        description=(
            "Checksum of the nccl-tests source archive. Default: the one clusterctl knows for the release "
            "(GitHub's tag archive); required for other releases and for a mirror's own archive."
        ),
        examples=["sha256:52b472a58a4918d3221a9b8c4bd9335382643d7e241983918b64692d685cc3d1"],
    )
    nccl_tests_url: Url | None = Field(
        None,
        description="nccl-tests source archive (default: GitHub's archive of the nccl_tests tag), e.g. a site mirror.",
        examples=["https://mirror.example.com/nccl-tests/v2.13.6.tar.gz"],
    )
    nvidia_container_toolkit: VersionStr = Field(
        DEFAULT_CONTAINER_TOOLKIT,
        description="NVIDIA container toolkit / libnvidia-container, exact (enroot's GPU hook, docker's runtime).",
        examples=["1.17.8"],
    )

    @model_validator(mode="after")
    def _nccl_tests_archive_is_checked(self) -> Versions:
        if self.nccl_tests_checksum is None and (
            self.nccl_tests_url is not None or nccl_tests_checksum(self.nccl_tests) is None
        ):
            what = "the archive at nccl_tests_url" if self.nccl_tests_url else f"nccl-tests {self.nccl_tests}"
            raise ValueError(
                f'clusterctl knows no checksum for {what}; set nccl_tests_checksum to "sha256:<digest>" '
                "(sha256sum of the archive)"
            )
        return self


class Mirrors(StrictModel):
    """Site mirrors of vendor download sites, for clusters that cannot reach them."""

    cuda_repo: Url | None = Field(
        None,
        description=(
            "NVIDIA's CUDA apt repository (drivers, CUDA, NCCL, DCGM): the URL under which <distro>/<arch>/ "
            "holds what developer.download.nvidia.com/compute/cuda/repos/<distro>/<arch>/ does. With it, "
            "emulated GPU nodes (local provider) install NCCL from it too: it needs no GPU."
        ),
        examples=["https://mirror.example.com/nvidia/cuda/repos"],
    )
    cuda_repo_key: Url | None = Field(
        None,
        description="The mirror's signing key (default: NVIDIA's key file 3bf863cc.pub in <distro>/<arch>/).",
        examples=["https://mirror.example.com/nvidia/cuda/3bf863cc.pub"],
    )
    cuda_repo_key_sha256: Sha256 | None = Field(
        None,
        description=(
            "The signing key file's sha256, checked before the key is trusted. Required when the key is "
            "fetched over plain http (cuda_repo_key, or cuda_repo's own key file): that key signs every "
            "driver, CUDA, NCCL and DCGM package."
        ),
        examples=["sha256:52b472a58a4918d3221a9b8c4bd9335382643d7e241983918b64692d685cc3d1"],
    )

    @model_validator(mode="after")
    def _key_needs_repo(self) -> Mirrors:
        if self.cuda_repo_key is not None and self.cuda_repo is None:
            raise ValueError("cuda_repo_key is the key of the cuda_repo mirror; set cuda_repo too, or drop the key")
        key = self.cuda_repo_key or self.cuda_repo
        if key is not None and key.lower().startswith("http:") and self.cuda_repo_key_sha256 is None:
            raise ValueError(
                f"the signing key of the CUDA mirror is fetched over plain http ({key}), so anyone on the path "
                "could swap the key that signs every driver, CUDA, NCCL and DCGM package. Serve it over https, "
                "or set cuda_repo_key_sha256 to the key file's sha256 (sha256:<64 hex digits>)."
            )
        return self


# --- hardware ----------------------------------------------------------------------------------


class GpuSpec(StrictModel):
    """GPUs in one server."""

    model: GpuModel = Field(description="GPU model.", examples=sorted(GPU_MODELS))
    count: PositiveInt = Field(description="GPUs per server.", examples=[8])
    numa: list[NumaNode] | None = Field(
        None,
        max_length=64,
        description=(
            "NUMA node of GPU 0..N-1 (the NUMA Affinity column of nvidia-smi topo -m); gres.conf binds each GPU "
            "to that node's cores (Cores=). Default: the cloud instance type's map, else no Cores=."
        ),
        examples=[[0, 0, 0, 0, 1, 1, 1, 1]],
    )

    @model_validator(mode="after")
    def _one_numa_node_per_gpu(self) -> GpuSpec:
        if self.numa is not None and len(self.numa) != self.count:
            raise ValueError(f"numa lists {len(self.numa)} NUMA nodes for {self.count} GPUs; give one per GPU")
        return self


class CpuSpec(StrictModel):
    """CPU topology of one server (what slurmd reports)."""

    sockets: PositiveInt = Field(description="CPU sockets.")
    cores_per_socket: PositiveInt = Field(description="Physical cores per socket.")
    threads_per_core: PositiveInt = Field(1, description="Hardware threads per core.")
    numa_nodes: PositiveInt | None = Field(
        None,
        description=(
            "NUMA nodes (default: one per socket); more than the sockets where the BIOS splits them "
            "(AMD NPS2/NPS4, Intel SNC), each socket's cores divided evenly among its nodes."
        ),
        examples=[2, 8],
    )

    @model_validator(mode="after")
    def _numa_nodes_split_the_sockets(self) -> CpuSpec:
        nodes = self.numa_nodes
        if nodes is not None and (nodes % self.sockets or self.cores_per_socket % (nodes // self.sockets)):
            raise ValueError(
                f"{nodes} NUMA nodes do not divide {self.sockets} sockets of {self.cores_per_socket} cores evenly; "
                "give a multiple of the sockets that divides each socket's cores"
            )
        return self


class HardwareProfile(StrictModel):
    """A server model: GPUs, CPUs, memory and the NICs that matter to the fabric."""

    gpus: GpuSpec | None = Field(None, description="GPUs; absent for CPU-only servers.")
    cpus: CpuSpec = Field(description="CPU topology.")
    memory_gib: PositiveInt = Field(description="System memory in GiB.")
    rails: list[RailDevice] = Field(
        default_factory=list,
        description=(
            "Compute-fabric HCA for GPU 0..N-1 (rail i belongs to GPU i), each by PCI address (stable on every "
            "image) or by RDMA device name (where the image fixes names, e.g. DOCA/MOFED or DGX OS). Nodes map "
            "them to their actual RDMA device and netdev names from sysfs at converge time."
        ),
        examples=[
            ["0000:18:00.0", "0000:40:00.0", "0000:4f:00.0", "0000:5e:00.0"],
            ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"],
        ],
    )
    storage_nics: list[RailDevice] = Field(
        default_factory=list, description="HCAs of the storage network, by PCI address or RDMA device name."
    )
    storage_netdevs: list[NetdevName] = Field(
        default_factory=list,
        description=(
            "IPoIB/Ethernet interfaces of the storage NICs (LNet, Weka net=), in storage_nics order. Leave it out "
            "to use the netdev each node's sysfs gives its storage_nics (found at converge, like the rails')."
        ),
    )
    management_netdev: NetdevName = Field("eth0", description="Interface on the management network.")
    power_w: PositiveInt | None = Field(None, description="Maximum server power in watts (default: datasheet).")
    instance_type: InstanceType | None = Field(None, description="Cloud instance/machine type for cloud providers.")

    @model_validator(mode="after")
    def _gpu_numa_nodes_exist(self) -> HardwareProfile:
        nodes = self.cpus.numa_nodes or self.cpus.sockets
        if self.gpus is not None and self.gpus.numa and max(self.gpus.numa) >= nodes:
            raise ValueError(
                f"gpus.numa names NUMA node {max(self.gpus.numa)}, but the CPUs have {nodes} (0-{nodes - 1}); "
                "set cpus.numa_nodes when the BIOS splits the sockets (NPS/SNC)"
            )
        return self


# --- nodes -------------------------------------------------------------------------------------


class BurstSpec(StrictModel):
    """Elastic capacity: nodes that exist in Slurm and are provisioned on demand."""

    provider: Provider = Field(description="Where burst nodes are created.")
    resume_timeout: DurationValue = Field(
        default_factory=lambda: Duration(30, "m"),
        description="How long Slurm waits for a resumed node to register.",
    )
    suspend_after: DurationValue = Field(
        default_factory=lambda: Duration(15, "m"),
        description="Idle time before a burst node is released.",
    )
    mounts: list[DnsLabel] | None = Field(
        None,
        max_length=64,
        description=(
            "Storage tiers (their `name`) the burst nodes mount; `[]` for none. Only tiers the group can reach: "
            "NFS and Lustre over TCP through the routed network, never Lustre over RDMA (o2ib) or WEKA, whose "
            "storage NICs a burst node does not have. Left out, burst nodes mount nothing and validate says so."
        ),
        examples=[["home"], []],
    )


class NodeGroup(StrictModel):
    """A group of identical nodes with one role."""

    group: DnsLabel = Field(description="Group name; hostnames default to {group}{index:03d}.")
    role: Literal["controller", "login", "compute"] = Field(description="What the nodes do.")
    hardware: HostLabel = Field(description="Name of a profile under `hardware`.")
    count: NodeCount = Field(
        description=f"Physical nodes in the group (spares included); at most {MAX_NODES_PER_GROUP}."
    )
    spares: NonNegativeInt = Field(0, description="Nodes held out of the partitions as hot spares.")
    hostname: HostnamePattern = Field(
        "{group}{index:03d}",
        description=(
            "Hostname pattern; only {group} and {index} (1-based, optionally zero-padded as {index:03d}) are "
            "available, around letters, digits and '-'."
        ),
    )
    burst: BurstSpec | None = Field(None, description="Make this an elastic (cloud-burst) group.")

    @field_validator("spares")
    @classmethod
    def _spares_leave_nodes_in_service(cls, spares: int, info: ValidationInfo) -> int:
        count = info.data.get("count")
        # Every spare held out leaves the group's partitions one node fewer: with all of them spares,
        # Slurm would get partitions without nodes.
        if isinstance(count, int) and spares >= count:
            raise ValueError(
                f"{spares} spare(s) in a group of {count} node(s) leave none in service; spares are part of "
                f"`count`, so hold at most {count - 1} as spares or raise `count` to {spares + 1} or more"
            )
        return spares


# --- fabric ------------------------------------------------------------------------------------


class OpenSmHost(StrictModel):
    """A host that runs the InfiniBand subnet manager (opensm), with its priority."""

    host: HostLabel = Field(description="Hostname of a node of the plan.", examples=["ctl001"])
    priority: int | None = Field(
        None,
        ge=0,
        le=15,
        strict=True,
        description=(
            "SM priority, opensm -p / sm_priority: 0 (lowest) to 15; the highest becomes master, the others wait "
            "as standby (default: 15 for the first host listed, 14 for the second, ...)."
        ),
    )
    port: RailDevice | None = Field(
        None,
        description=(
            "HCA whose port 1 opensm binds to (opensm -g <port GUID>), by PCI address or RDMA device name; the "
            "node reads the port GUID from sysfs (default: the host's first rail)."
        ),
        examples=["0000:18:00.0"],
    )


class IpoibSpec(StrictModel):
    """IPoIB on the rails (storage traffic or bootstrap over the compute fabric)."""

    networks: list[IPv4NetworkValue] = Field(
        min_length=1,
        description=(
            "One IPv4 network per rail: rail i of every node with rails gets an address in networks[i], at the "
            "same host offset as its management address. Rails beyond the list get no IPoIB address."
        ),
        examples=[["10.40.0.0/16", "10.41.0.0/16"]],
    )
    mode: Literal["datagram", "connected"] = Field("datagram", description="IPoIB transport mode.")
    mtu: int | None = Field(
        None,
        ge=1280,
        le=65520,
        strict=True,
        description="Interface MTU (default: 2044 in datagram mode, 65520 in connected mode).",
    )


class Fabric(StrictModel):
    """The compute (east-west) fabric."""

    kind: Literal["infiniband", "roce", "ethernet", "efa", "gpudirect-tcpx", "gpudirect-tcpxo"] = Field(
        description="Fabric technology."
    )
    speed_gbps: PositiveInt = Field(description="Per-port link speed in Gb/s.", examples=[400])
    layout: Literal["rail-optimized", "rack-leaf"] = Field(
        "rail-optimized", description="How node ports are cabled to leaves."
    )
    switch_ports: int = Field(64, ge=4, le=1024, strict=True, description="Switch radix (ports per switch).")
    oversubscription: PositiveInt = Field(1, description="N for N:1 downlink:uplink at the leaf.")
    nodes_per_rack: PositiveInt | None = Field(None, description="Nodes per rack (rack-leaf layout).")
    subnet_manager: Literal["switch", "opensm", "ufm"] = Field(
        "switch",
        description=(
            "Where the InfiniBand subnet manager runs: switch (the managed switches' SM) or ufm (NVIDIA UFM) put "
            "nothing on the nodes; opensm runs it on the hosts in opensm_hosts, nowhere else."
        ),
    )
    opensm_hosts: list[OpenSmHost] = Field(
        default_factory=list,
        description="With subnet_manager: opensm, the hosts that run opensm (two, for failover), with priorities.",
        examples=[[{"host": "ctl001", "priority": 15}, {"host": "ctl002", "priority": 14}]],
    )
    ipoib: IpoibSpec | None = Field(None, description="IPoIB addresses on the rails (InfiniBand only).")
    sharp: StrictBool = Field(False, description="Enable SHARP in-network reductions.")


# --- storage -----------------------------------------------------------------------------------

Purpose = Literal["dataset", "checkpoint", "home", "scratch", "general"]


class StorageBase(StrictModel):
    """Fields every storage tier has."""

    name: DnsLabel = Field(description="Tier name.")
    mount: MountPoint = Field(
        description="Mount point on every node (not a system directory such as /etc, /usr or /var/lib).",
        examples=["/lustre/datasets"],
    )
    purpose: Purpose = Field("general", description="What the tier holds.")
    read_bw: BandwidthValue | None = Field(None, description="Aggregate read bandwidth.")
    write_bw: BandwidthValue | None = Field(None, description="Aggregate write bandwidth.")
    mount_options: list[MountOption] = Field(
        default_factory=list, description="Extra mount options, one per list item.", examples=[["noatime"]]
    )


class LustreStorage(StorageBase):
    """A Lustre file system (client mount over LNet)."""

    kind: Literal["lustre"] = Field(description="Lustre.")
    mgs: list[LustreNid] = Field(
        default_factory=list,
        description="NIDs of the MGS failover partners, one per MGS node (not for managed tiers: the service has it).",
        examples=[["10.30.0.11@o2ib"]],
    )
    fsname: LustreFsname = Field(description="Lustre file system name (at most 8 characters).")
    managed: StrictBool = Field(False, description="Create it as a cloud-managed Lustre (cloud providers).")
    capacity_tib: float | None = Field(
        None,
        gt=0,
        le=1e6,
        description=(
            "Managed tiers: the least capacity to provision (the data it must hold), in TiB. The plan rounds it up "
            "to what the bandwidth needs and the service's capacity steps."
        ),
        examples=[100],
    )


class WekaStorage(StorageBase):
    """A WEKA file system."""

    kind: Literal["weka"] = Field(description="WEKA.")
    backends: list[IPv4AddressValue] = Field(description="Backend addresses to mount from.")
    filesystem: SafeName = Field(description="WEKA file system name.")
    num_cores: NonNegativeInt = Field(1, description="Dedicated frontend cores (0: UDP mode).")


class NfsStorage(StorageBase):
    """An NFS export."""

    kind: Literal["nfs"] = Field(description="NFS.")
    server: Hostname = Field(description="NFS server address or name.")
    export: AbsolutePath = Field(description="Exported path.", examples=["/export/home"])
    version: Literal["3", "4.1", "4.2"] = Field("4.2", description="NFS protocol version.")


Storage = Annotated[LustreStorage | WekaStorage | NfsStorage, Field(discriminator="kind")]


# --- slurm, monitoring, workload ------------------------------------------------------------


class Partition(StrictModel):
    """A Slurm partition."""

    name: DnsLabel = Field(description="Partition name.")
    groups: list[DnsLabel] = Field(min_length=1, description="Node groups whose (non-spare) nodes it holds.")
    default: StrictBool = Field(False, description="The default partition (exactly one).")
    max_time: SlurmTime = Field("UNLIMITED", description='Time limit, e.g. "14-00:00:00".')
    max_nodes: PositiveInt | None = Field(None, description="Most nodes one job may use.")


class PackageRepo(StrictModel):
    """A package repository other than the OS's own (site mirror, locally built Slurm)."""

    url: Url = Field(description="Repository URL (deb line URL).")
    suite: AptToken | None = Field(None, description="Suite/distribution (default: the OS codename).")
    components: list[AptToken] = Field(default_factory=lambda: ["main"], description="Components.")
    key_url: Url | None = Field(None, description="Signing key URL; absent means trusted=yes.")


class SlurmSpec(StrictModel):
    """Scheduler settings."""

    partitions: list[Partition] = Field(min_length=1, description="Partitions.")
    accounting: StrictBool = Field(False, description="slurmdbd + MariaDB accounting.")
    topology: Literal["tree", "block", "none"] = Field("tree", description="Topology plugin.")
    package_repo: PackageRepo | None = Field(
        None, description="Where Slurm packages come from (default: the OS archive)."
    )
    health_check: StrictBool = Field(
        True, description="Run clusterctl's node health check from slurmd (drains nodes that fail it)."
    )
    dcgm_epilog: StrictBool = Field(
        False, description="Run `dcgmi diag -r 1` after every job on real GPU nodes; drain the node on failure."
    )
    state_save_location: MountPoint | None = Field(
        None,
        description=(
            "slurmctld's StateSaveLocation (default: /var/spool/slurmctld on the controller). With two controllers "
            "it must be a directory inside a storage tier both mount (a backup controller takes over from the "
            "state saved there); it is created owned by slurm, mode 0700."
        ),
        examples=["/home/slurm/state"],
    )
    heal_every: DurationValue | None = Field(
        default_factory=lambda: Duration(10, "m"),
        description=(
            "How often the controller's heal timer health-checks the nodes clusterctl drained and resumes the"
            " healthy ones (what `clusterctl heal` does); null: no timer. Needs health_check."
        ),
    )

    @field_validator("heal_every")
    @classmethod
    def _heal_every_at_least_a_minute(cls, value: Duration | None) -> Duration | None:
        if value is not None and value.seconds < 60:
            raise ValueError(f"heal_every is {value}; write at least 1m (each round health-checks drained nodes)")
        return value


class Site(StrictModel):
    """What every site sets on its nodes: name and time servers, and slurm.conf parameters clusterctl leaves alone."""

    dns_servers: list[IPv4AddressValue] = Field(
        default_factory=list,
        max_length=3,
        description="Name servers of every node, in order (at most 3, as resolv.conf uses); empty: left as installed.",
        examples=[["10.20.0.2", "10.20.0.3"]],
    )
    search_domains: list[DnsDomain] = Field(
        default_factory=list,
        max_length=6,
        description="DNS search domains of every node (at most 6); empty: left as installed.",
        examples=[["atlas.internal", "corp.example.com"]],
    )
    ntp_servers: list[Hostname] = Field(
        default_factory=list,
        max_length=8,
        description="NTP servers chrony uses on every node, instead of the distribution's pool; empty: the pool.",
        examples=[["ntp1.corp.example.com", "10.20.0.4"]],
    )
    slurm_conf: dict[SlurmConfName, SlurmConfValue] = Field(
        default_factory=dict,
        max_length=128,
        description=(
            "Extra slurm.conf parameters (`clusterctl rules`: SLU005 checks each name and value against Slurm's own "
            "list, SAF003 refuses those clusterctl writes itself). true/false are written YES/NO."
        ),
        examples=[{"MaxJobCount": 100000, "DefMemPerGPU": 131072, "EnforcePartLimits": "ALL"}],
    )


class Monitoring(StrictModel):
    """Metrics collection."""

    prometheus: StrictBool = Field(True, description="Prometheus on the controller.")
    node_exporter: StrictBool = Field(True, description="prometheus-node-exporter on every node.")
    dcgm_exporter: StrictBool = Field(True, description="dcgm-exporter on GPU nodes.")


class Workload(StrictModel):
    """The training run the cluster is sized for (drives the sizing report)."""

    model_params_b: float = Field(gt=0, le=1e6, description="Model parameters, in billions.")
    train_tokens_t: float = Field(gt=0, le=1e6, description="Training tokens, in trillions.")
    target_mfu: float = Field(0.4, gt=0, le=1, description="Expected model FLOPs utilization.")
    checkpoint_every_min: PositiveInt = Field(60, description="Minutes between checkpoints.")


# --- acceptance (verify) -------------------------------------------------------------------


class Acceptance(StrictModel):
    """Thresholds for ``clusterctl verify``; unset values take per-GPU-model defaults."""

    nccl_intra_busbw_gbps: float | None = Field(None, gt=0, le=1e5, description="Single-node all_reduce busbw.")
    nccl_inter_busbw_gbps: float | None = Field(None, gt=0, le=1e5, description="Multi-node ring all_reduce busbw.")
    dcgm_diag_level: Literal[1, 2, 3, 4] | None = Field(None, description="dcgmi diag -r level.")
    nccl_min_bytes: PositiveInt | None = Field(None, description="Smallest message size judged.")
    container_image: ImageReference | None = Field(
        DEFAULT_CONTAINER_CHECK_IMAGE,
        description=(
            "Image verify starts through pyxis (srun --container-image) on every node pair to check that NCCL in a "
            "container uses the fabric as on the host: a stock image with PyTorch, whose NCCL runs a small "
            "all_reduce. null: no container check. Only with container_runtime enroot."
        ),
        examples=[DEFAULT_CONTAINER_CHECK_IMAGE, "registry.example.com/nvidia/pytorch:24.09-py3"],
    )


# --- the spec ---------------------------------------------------------------------------------


class Spec(StrictModel):
    """A cluster: what it runs on, what it is made of, and what it is for."""

    version: Literal[1] = Field(description="Spec format version.")
    name: DnsLabel = Field(description="Cluster name (DNS-safe).", examples=["atlas"])
    provider: Provider = Field(description="Where the nodes come from.")
    network: Network = Field(description="Management network.")
    os: Literal["ubuntu-22.04", "ubuntu-24.04", "debian-12"] = Field(description="Node OS.")
    versions: Versions = Field(description="Pinned software versions.")
    container_runtime: Literal["enroot", "docker"] = Field("enroot", description="enroot+pyxis or docker.")
    mirrors: Mirrors = Field(default_factory=Mirrors, description="Site mirrors of vendor download sites.")
    hardware: dict[HostLabel, HardwareProfile] = Field(min_length=1, description="Server profiles by name.")
    nodes: list[NodeGroup] = Field(
        min_length=1, description=f"Node groups; at most {MAX_NODES_TOTAL} nodes in all (burst groups included)."
    )
    fabric: Fabric = Field(description="Compute fabric.")
    storage: list[Storage] = Field(default_factory=list, description="Storage tiers.")
    slurm: SlurmSpec = Field(description="Slurm settings.")
    monitoring: Monitoring = Field(default_factory=Monitoring, description="Monitoring.")
    workload: Workload | None = Field(None, description="Training workload for the sizing report.")
    acceptance: Acceptance = Field(default_factory=Acceptance, description="verify thresholds.")
    site: Site = Field(default_factory=Site, description="Site settings: DNS, NTP, extra slurm.conf parameters.")

    @field_validator("nodes")
    @classmethod
    def _total_nodes_capped(cls, groups: list[NodeGroup]) -> list[NodeGroup]:
        total = sum(group.count for group in groups)
        if total > MAX_NODES_TOTAL:
            raise ValueError(
                f"the node groups hold {total} nodes in all; at most {MAX_NODES_TOTAL} are allowed in one spec. "
                "Check the `count` fields for a typo, or split the cluster into several specs"
            )
        return groups
