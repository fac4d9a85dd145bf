"""The plan's data model: concrete facts resolved from a spec, JSON-serializable.

Every renderer, provider, verify and fabric check reads these models. Field names are
part of ``plan.json``; add fields freely, rename with care. The models are frozen: a plan is
built once (plan/build.py computes every part before it builds the model that holds it), and
a changed plan is a new one (``model_copy(update=...)``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from clusterctl.spec.providers import LocalProvider, Provider, ProviderKind
from clusterctl.spec.types import Url

Role = Literal["controller", "login", "compute"]
_Item = TypeVar("_Item")


def _first(items: Iterable[_Item], matches: Callable[[_Item], bool], key: str) -> _Item:
    """The first of ``items`` that ``matches``; KeyError(``key``) when none does."""
    for item in items:
        if matches(item):
            return item
    raise KeyError(key)


class PlanModel(BaseModel):
    """Base of the plan models: unknown keys rejected so plan.json round-trips exactly; immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class PlanNode(PlanModel):
    """One node, fully resolved."""

    hostname: str
    fqdn: str
    group: str
    role: Role
    hardware: str
    index: int = Field(description="1-based index within its group")
    address: str
    rack: str
    spare: bool = Field(False, description="a free hot spare: in no partition")
    replaces: str | None = Field(None, description="the failed node whose place this spare took (node replace)")
    replaced_by: str | None = Field(None, description="out of service: the spare that took its place")
    burst: bool = False
    emulated: bool = False
    gpus: int = 0
    gpu_model: str | None = None
    gres_type: str | None = None
    rails: list[str] = Field(default_factory=list)
    storage_nics: list[str] = Field(default_factory=list, description="storage HCAs (PCI address or RDMA device)")
    storage_netdevs: list[str] = Field(default_factory=list)
    ipoib: list[str] = Field(default_factory=list, description="IPoIB address (CIDR) of rail i, for rail 0..")
    su: int | None = Field(None, description="scalable unit (1-based) for rail-optimized fabrics")
    leaves: list[str] = Field(default_factory=list, description="leaf switch of each rail, in rail order")
    topology_switch: str | None = None
    power_w: int = 0
    bmc: str | None = None
    mac: str | None = None

    @property
    def in_service(self) -> bool:
        """In its partitions: neither a free spare nor a failed node a spare replaced."""
        return not self.spare and self.replaced_by is None


class NodeGroupPlan(PlanModel):
    """A node group as planned."""

    name: str
    role: Role
    hardware: str
    count: int
    spares: int
    hosts: str = Field(description="hostlist of every node in the group")
    active_hosts: str = Field(description="hostlist of the nodes in service (neither spares nor replaced)")
    burst: bool = False
    provider: str | None = Field(None, description="where the nodes run: a burst group's provider, else the cluster's")
    fabric: str | None = Field(
        None, description="compute groups: the fabric their NCCL uses (a cloud GPU type's own, else fabric.kind)"
    )


class LeafPlan(PlanModel):
    """A leaf switch and what is cabled to it."""

    name: str
    su: int | None = None
    rack: str | None = None
    rail: int | None = None
    ports: list[tuple[str, str]] = Field(
        default_factory=list, description="(hostname, hca) cabled to this leaf, in port order"
    )


class ScalableUnit(PlanModel):
    """A rail group: the nodes whose rail i all land on one leaf."""

    index: int
    name: str
    hosts: str
    leaves: list[str]


class OpenSmPlacement(PlanModel):
    """A host that runs opensm (fabric.subnet_manager: opensm), never any other."""

    host: str
    priority: int = Field(description="opensm -p / sm_priority, 0..15; the highest is master")
    port: str | None = Field(None, description="HCA (PCI address or RDMA device) whose port 1 opensm binds to")


class FabricPlan(PlanModel):
    """The compute fabric as sized."""

    kind: str
    layout: str
    speed_gbps: int
    radix: int
    tiers: int
    su_size: int | None
    down_ports_per_leaf: int
    uplinks_per_leaf: int
    leaf_switches: int
    spine_switches: int
    core_switches: int
    node_links: int
    leaf_spine_links: int
    spine_core_links: int
    oversubscription: float
    max_endpoints_2tier: int = Field(description="node links a two-tier tree of this radix holds at most")
    max_endpoints_3tier: int = Field(description="node links a three-tier tree of this radix holds at most")
    endpoints: int
    subnet_manager: str = "switch"
    opensm: list[OpenSmPlacement] = Field(default_factory=list)
    ipoib_mode: str | None = None
    ipoib_mtu: int | None = None
    sharp: bool = False
    sus: list[ScalableUnit] = Field(default_factory=list)
    leaves: list[LeafPlan] = Field(default_factory=list)


class TopologySwitch(PlanModel):
    """One line of Slurm's topology.conf (tree)."""

    name: str
    nodes: str | None = None
    switches: str | None = None


class TopologyBlock(PlanModel):
    """One block of Slurm's topology/block."""

    name: str
    nodes: str


class SlurmParam(PlanModel):
    """One slurm.conf parameter the site adds (spec ``site.slurm_conf``), its value as slurm.conf writes it."""

    name: str
    value: str


class SitePlan(PlanModel):
    """Name and time servers every node gets (spec ``site``); empty lists leave the node's own."""

    dns_servers: list[str] = Field(default_factory=list)
    search_domains: list[str] = Field(default_factory=list)
    ntp_servers: list[str] = Field(default_factory=list)


class SlurmNodeLine(PlanModel):
    """One NodeName= line of slurm.conf."""

    hosts: str
    cpus: int
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    real_memory_mb: int
    gres: str | None = None
    features: list[str] = Field(default_factory=list)
    state: Literal["UNKNOWN", "CLOUD"] = "UNKNOWN"
    weight: int = 1


class GresLine(PlanModel):
    """One NodeName= line of gres.conf."""

    hosts: str
    name: str = "gpu"
    type: str
    count: int
    file: str
    autodetect: str | None = Field(None, description="per-node AutoDetect (off for cloud nodes)")
    cores: str | None = Field(None, description="Cores=: logical core indexes of the GPU's NUMA node")
    note: str | None = Field(None, description="comment above the group's lines: where Cores= comes from")


class SlurmPartitionPlan(PlanModel):
    """A partition as rendered."""

    name: str
    hosts: str
    default: bool
    max_time: str
    max_nodes: int | None = None
    burst: bool = False
    suspend_time_s: int | None = None
    # Cloud vendors' partition settings for their GPU machine types (GCP A3 Mega / A3 Ultra).
    oversubscribe: Literal["EXCLUSIVE"] | None = Field(None, description="OverSubscribe= (whole nodes per job)")
    resume_timeout_s: int | None = None
    suspend_timeout_s: int | None = None
    vendor_sources: list[str] = Field(default_factory=list, description="vendor files these settings come from")


class BurstGroupPlan(PlanModel):
    """Power-saving settings of an elastic node group."""

    group: str
    provider: str
    hosts: str
    resume_timeout_s: int
    suspend_time_s: int
    topology_switch: str


class SlurmPlan(PlanModel):
    """Everything slurm.conf, gres.conf, topology.conf and cgroup.conf need."""

    version: str
    cluster_name: str
    controllers: list[str]
    controller_addresses: list[str]
    accounting: bool
    dbd_host: str | None
    topology: Literal["tree", "block", "none"]
    switches: list[TopologySwitch] = Field(default_factory=list)
    blocks: list[TopologyBlock] = Field(default_factory=list)
    block_sizes: list[int] = Field(default_factory=list)
    node_lines: list[SlurmNodeLine] = Field(default_factory=list)
    gres_lines: list[GresLine] = Field(default_factory=list)
    partitions: list[SlurmPartitionPlan] = Field(default_factory=list)
    spares: str | None = Field(None, description="hostlist of hot spares (defined, in no partition)")
    replaced: str | None = Field(None, description="hostlist of failed nodes a spare replaced (in no partition)")
    burst: list[BurstGroupPlan] = Field(default_factory=list)
    suspend_exclude: str | None = Field(None, description="hostlist of nodes power saving never touches")
    suspend_exclude_states: bool = Field(False, description="SuspendExcStates is known to this Slurm (23.02+)")
    health_check_program: str | None = None
    health_check_interval_s: int = 300
    heal_interval_s: int | None = Field(None, description="the controller's heal timer period; None: no timer")
    prolog: str | None = Field(None, description="Prolog= (a glob of scripts)")
    epilog: str | None = Field(None, description="Epilog= (a glob of scripts)")
    task_prolog: str | None = None
    dcgm_epilog: bool = Field(False, description="dcgmi diag -r 1 after every job on real GPU nodes")
    slurmd_timeout_s: int = 300
    container_nodes: bool = False
    reboot_program: str | None = Field(
        None, description="what `scontrol reboot` runs on a node (none on container nodes, which never reboot)"
    )
    reboot_timeout_s: int = Field(1800, description="how long slurmctld waits for a rebooted node (ResumeTimeout)")
    pyxis: bool = False
    tree_width: int | None = None
    # Long prologs (GCP A3 Mega: the receive-datapath-manager starts in the prolog).
    message_timeout_s: int | None = None
    batch_start_timeout_s: int | None = None
    prolog_epilog_timeout_s: int | None = None
    cred_expire_s: int | None = Field(None, description="AuthInfo=cred_expire (seconds), with the long prologs")
    timeouts_source: str | None = Field(None, description="vendor file the long-prolog timeouts come from")
    state_save_location: str = Field("/var/spool/slurmctld", description="slurmctld's StateSaveLocation")
    state_save_tier: str | None = Field(None, description="storage tier holding StateSaveLocation (mounted first)")
    site_params: list[SlurmParam] = Field(default_factory=list, description="the site's slurm.conf parameters")


class LnetNetwork(PlanModel):
    """An LNet network and the interfaces a node uses for it."""

    net: str
    interfaces: list[str]


class StorageMount(PlanModel):
    """How one hardware profile mounts a tier (options differ by the profile's NICs)."""

    hardware: str
    hosts: str
    options: list[str]


class LnetProfile(PlanModel):
    """LNet networks of one hardware profile."""

    hardware: str
    hosts: str
    networks: list[LnetNetwork]


class StoragePlan(PlanModel):
    """A storage tier as mounted on the nodes."""

    name: str
    kind: Literal["lustre", "weka", "nfs"]
    mount: str
    purpose: str
    fstype: str
    source: str
    options: list[str]
    unit_name: str
    hosts: str
    requires_lnet: bool = False
    managed: bool = Field(False, description="a cloud's managed Lustre: the source comes from the stack outputs")
    mounts: list[StorageMount] = Field(default_factory=list)
    read_bw: str | None = None
    write_bw: str | None = None
    read_bytes_per_s: float | None = None
    write_bytes_per_s: float | None = None
    checkpoint_write_s: float | None = None


class NcclSetting(PlanModel):
    """One /etc/nccl.conf line with the reason it is there."""

    name: str
    value: str
    why: str
    per_node: bool = Field(False, description="each node writes the value (e.g. NCCL_IB_HCA from its sysfs)")


class NcclTopoPair(PlanModel):
    """A GPU and the NIC NCCL pairs it with, by PCI bus id."""

    gpu_busid: str
    nic_busid: str


class NcclTopoCpu(PlanModel):
    """One NUMA node of a topology XML and the GPU/NIC pairs under it."""

    numaid: int
    affinity: str = Field(description="CPU mask as NCCL writes it (comma-separated 32-bit words)")
    pairs: list[NcclTopoPair]


class NcclTopology(PlanModel):
    """What a vendor topology file declares (rendered as NCCL_TOPO_FILE's XML)."""

    name: str
    link_speed: str = "32.0 GT/s PCIe"
    link_width: int = 16
    cpu_vendor: str | None = None
    cpu_family: int | None = None
    cpu_model: int | None = None
    cpus: list[NcclTopoCpu]


class NcclJobDaemon(PlanModel):
    """A per-job daemon the vendor starts in the Slurm prolog (GCP's receive-datapath-manager)."""

    name: str
    image: str
    docker_args: list[str] = Field(description="docker run options before the image")
    args: list[str] = Field(description="arguments after the image")
    install_image: str | None = Field(None, description="plugin installer image run once when the plugin is missing")
    install_check: str | None = Field(None, description="file whose absence triggers the installer")
    install_dir: str | None = Field(None, description="where the installer writes the plugin (reinstalled per image)")
    modules: list[str] = Field(default_factory=list, description="kernel modules loaded before the daemon starts")
    ready_line: str | None = Field(None, description="log line that says the daemon is ready")
    ready_tries: int = Field(60, description="log checks before the prolog gives up")
    ready_interval_s: int = Field(2, description="seconds between log checks")
    registry: str | None = Field(None, description="image registry the node's gcloud credentials are set up for")
    sources: list[str] = Field(default_factory=list, description="vendor files the prolog/epilog follow")


class NcclVendorSlurm(PlanModel):
    """Slurm settings a cloud vendor's reference cluster uses for one GPU machine type."""

    oversubscribe: Literal["EXCLUSIVE"] | None = Field(None, description="partitions with these nodes")
    resume_timeout_s: int | None = Field(None, description="partitions with these nodes")
    suspend_timeout_s: int | None = Field(None, description="partitions with these nodes")
    message_timeout_s: int | None = None
    batch_start_timeout_s: int | None = None
    prolog_epilog_timeout_s: int | None = None
    cred_expire_s: int | None = Field(None, description="AuthInfo=cred_expire: step credentials outlive the prolog")
    partition_source: str = Field(description="vendor file of the partition settings")
    timeouts_source: str | None = Field(None, description="vendor file of the timeouts")


class EfaStack(PlanModel):
    """The AWS EFA software of a GPU profile: what roles/efa installs (catalog/efa.py)."""

    installer: str = Field(description="EFA installer release")
    installer_checksum: str | None = Field(None, description="'sha256:<hex>' of the tarball; None: unknown")
    aws_ofi_nccl: str = Field(description="aws-ofi-nccl release the jobs use")
    ofi_nccl_from_installer: bool | None = Field(
        None, description="the installer ships the plugin (True), does not (False), unknown: the role reads the tarball"
    )
    ofi_nccl_checksum: str | None = None
    ofi_nccl_libdir: str = Field(description="where the plugin's libraries are on the node")
    ofi_nccl_files: list[str] = Field(default_factory=list, description="the plugin's library names")
    gdrcopy: str = Field("", description="NVIDIA GDRCopy release roles/efa builds (ParallelCluster's); empty: none")
    gdrcopy_checksum: str = Field("", description="'sha256:<hex>' of its release archive")
    sources: list[str] = Field(default_factory=list)


class ContainerMount(PlanModel):
    """A host path every container on the profile's nodes gets, read-only at the same path (enroot mounts.d)."""

    path: str
    kind: Literal["dir", "file"] = Field(description="what enroot creates in the container to mount on (x-create)")
    writable: bool = Field(False, description="mounted read-write (devices a plugin maps), else read-only")
    recursive: bool = Field(False, description="with the mounts below it (rbind): a directory of bind mounts")
    why: str
    source: str | None = Field(None, description="vendor file (owner/repo:path@commit:line) that mounts it")


class DocaPlan(PlanModel):
    """NVIDIA DOCA-OFED from its host repository package (roles/rdma)."""

    version: str
    url: str
    checksum: str = Field(description="'sha256:<hex>' of the repository package")
    source: str


class NcclProfile(PlanModel):
    """NCCL configuration for one GPU hardware profile."""

    hardware: str
    gpu_model: str
    settings: list[NcclSetting]
    notes: list[str] = Field(default_factory=list, description="comment lines: what each node decides and why")
    topo_xml: str | None = Field(None, description="name of a topology XML shipped for this profile")
    job_env: list[NcclSetting] = Field(default_factory=list, description="per-job variables (prolog)")
    # Cloud fabrics: where the job environment comes from and when it applies.
    fabric: str | None = Field(None, description="cloud fabric the settings are for (efa, gpudirect-tcpxo, ...)")
    topology: NcclTopology | None = Field(None, description="content of topo_xml")
    topo_path: str | None = Field(None, description="where NCCL_TOPO_FILE points on the node")
    topo_file: str | None = Field(
        None, description="where the topology XML itself is installed, when topo_path is a link to it (Azure's layout)"
    )
    job_env_multinode_only: bool = Field(False, description="job_env and the daemon apply to multi-node jobs only")
    job_env_profile: str | None = Field(None, description="vendor script the task prolog sources before job_env")
    job_env_lib_dir: str | None = Field(None, description="NCCL_LIB_DIR for job_env_profile")
    job_env_ld_path: list[str] = Field(
        default_factory=list, description="plugin library directories put first on the task's LD_LIBRARY_PATH"
    )
    job_daemon: NcclJobDaemon | None = None
    slurm: NcclVendorSlurm | None = Field(None, description="Slurm settings the vendor's reference cluster uses")
    efa: EfaStack | None = Field(None, description="EFA installer and aws-ofi-nccl (AWS EFA profiles)")
    doca: DocaPlan | None = Field(None, description="DOCA-OFED the nodes get (Azure ND, as Azure's HPC image)")
    gpudirect: Literal["peermem", "dmabuf"] | None = Field(
        None, description="GPUDirect RDMA path the vendor's image takes (None: each node decides, roles/nvidia_driver)"
    )
    sources: list[str] = Field(default_factory=list, description="where the settings come from")
    container_mounts: list[ContainerMount] = Field(
        default_factory=list, description="what every pyxis/enroot container gets from the host for NCCL"
    )
    container_storage: str | None = Field(
        None, description="where enroot keeps its per-user data on these nodes (a local SSD array), if not the default"
    )
    container_storage_source: str | None = Field(None, description="vendor file that puts enroot's data there")


class PowerPlan(PlanModel):
    """Power sizing."""

    it_kw: float
    max_rack_kw: float
    racks: dict[str, float]
    switches_kw: float
    assumptions: list[str] = Field(default_factory=list)


class GpuPlan(PlanModel):
    """GPU totals."""

    total: int
    active: int
    hbm_gib: float
    by_model: dict[str, int]
    peak_bf16_pflops: float


class WorkloadPlan(PlanModel):
    """Sizing of the training run."""

    model_params_b: float
    train_tokens_t: float
    target_mfu: float
    training_flops: float
    model_state_tib: float
    min_gpus_for_state: int
    train_days: float | None
    checkpoint_tib: float
    checkpoint_every_min: int


class MonitoringPlan(PlanModel):
    """What is scraped."""

    prometheus: bool
    prometheus_host: str | None
    node_exporter_port: int = 9100
    dcgm_exporter_port: int = 9400
    node_exporter_targets: list[str] = Field(default_factory=list)
    dcgm_exporter_targets: list[str] = Field(default_factory=list)


class ClusterInfo(PlanModel):
    """Cluster-wide facts."""

    name: str
    domain: str
    os: str
    os_codename: str
    provider: ProviderKind
    provider_config: Provider = Field(
        description=(
            "the spec's provider block, one typed model per provider (discriminated by kind), validated as the "
            "spec validates it"
        )
    )
    spec_file: str
    management_cidr: str
    gateway: str
    versions: dict[str, str]
    container_runtime: str
    emulated_gpus: bool
    nccl_tests_url: str = Field("", description="nccl-tests source archive the GPU nodes build")
    nccl_tests_checksum: str = Field("", description="its checksum (sha256:<hex>)")
    cuda_repo: Url | None = Field(None, description="a mirror of NVIDIA's CUDA repository (None: NVIDIA's own)")
    cuda_repo_key: Url | None = Field(None, description="the mirror's signing key (None: the repository's key file)")
    cuda_repo_key_sha256: str | None = Field(None, description="the key file's sha256 (sha256:<hex>), checked")
    container_check_image: str | None = Field(
        None, description="image verify's container transport check starts through pyxis (None: no such check)"
    )

    @model_validator(mode="after")
    def _provider_is_its_config_s(self) -> ClusterInfo:
        if self.provider != self.provider_config.kind:
            raise ValueError(
                f"provider is {self.provider!r} but provider_config is for {self.provider_config.kind!r}; they "
                "come from the same spec block and must agree"
            )
        return self

    @property
    def ssh_user(self) -> str:
        """Who clusterctl logs in as over SSH: the provider's ``ssh_user`` (root for local containers)."""
        config = self.provider_config
        return "root" if isinstance(config, LocalProvider) else config.ssh_user

    @property
    def local_image(self) -> str | None:
        """The node image of a local cluster's containers; None for the other providers."""
        config = self.provider_config
        return config.image if isinstance(config, LocalProvider) else None


# --- provisioning (cloud stacks and bare metal) ---------------------------------------------


class CloudSubnetPlan(PlanModel):
    """A subnet the cloud stack creates (or an existing one it uses)."""

    name: str
    cidr: str | None = Field(None, description="None for an existing subnet whose range the cloud knows")
    purpose: Literal["nodes", "public", "storage", "gpu", "host", "rdma"]
    existing_id: str | None = None


class CloudNicPlan(PlanModel):
    """GCP: one NIC of an instance after nic0 (the node subnet), in attach order."""

    subnetwork: str = Field(description="name of the subnetwork it is on (one the stack creates)")
    nic_type: Literal["GVNIC", "MRDMA"] = Field(description="vNIC type: gVNIC, or MRDMA on a RoCE network")
    guest_name: str | None = Field(None, description="the guest's name of the NIC, where the vendor's files say it")


class GcpRdmaNetworkPlan(PlanModel):
    """GCP A3 Ultra: one RoCE VPC (network profile ``<zone>-vpc-roce``) with one subnet per RDMA NIC."""

    name: str
    network_profile: str | None = Field(
        None, description="projects/<project>/global/networkProfiles/<zone>-vpc-roce (None: no project in the spec)"
    )
    mtu: int
    subnets: list[CloudSubnetPlan] = Field(description="one per RDMA NIC, in attach order")
    sources: list[str] = Field(default_factory=list, description="vendor files the layout follows")


class CloudInstanceGroupPlan(PlanModel):
    """One node group as the cloud stack creates it."""

    group: str
    role: Role
    hardware: str
    instance_type: str
    hosts: list[str]
    addresses: list[str] = Field(description="private address of each host (pinned), in host order")
    gpus: int = 0
    gpu_model: str | None = None
    fabric: str = "ethernet"
    efa_interfaces: int = Field(0, description="AWS: EFA devices per instance (one EFA-only NIC per network card)")
    network_cards: int = 1
    gpu_nics: list[str] = Field(default_factory=list, description="GCP: guest names of the GPU NICs, in attach order")
    ib_devices: list[str] = Field(default_factory=list, description="Azure: InfiniBand devices")
    nics: list[CloudNicPlan] = Field(
        default_factory=list, description="GCP: the NICs after nic0 (GPU, second host and RDMA NICs), in attach order"
    )
    boot_disk_type: str | None = Field(None, description="GCP: the boot disk type (pd-ssd, hyperdisk-balanced)")
    placement: bool = Field(False, description="joins the cluster placement group / compact policy / scale set")
    capacity_reservation: bool = Field(False, description="launches into the provider's capacity reservation")
    scale_set: str | None = Field(None, description="Azure: the scale set (single placement group) of the group")
    os_image: str | None = Field(
        None, description="the vendor's boot image for the machine type (A3 Ultra: Ubuntu's accelerator image)"
    )
    image: str | None = Field(
        None, description="the baked image of the group's hardware profile (clusterctl.lock); None: the OS image"
    )


class ManagedLustrePlan(PlanModel):
    """A managed Lustre file system sized from the tier's bandwidth."""

    name: str
    mount: str
    fsname: str
    service: Literal["fsx", "gcp-managed-lustre", "amlfs"]
    tier: str = Field(description="FSx deployment type, GCP performance tier or AMLFS SKU")
    per_unit_mbps_per_tib: int
    capacity_gib: int
    throughput_mbps: float = Field(description="aggregate MB/s = per-unit throughput x capacity")
    required_mbps: float | None = Field(None, description="max(read_bw, write_bw) of the tier, MB/s")
    read_bw: str | None = None
    write_bw: str | None = None
    sizing: str = Field(description="why this capacity and tier")


class BastionPlan(PlanModel):
    """The SSH jump host: the only thing reachable from outside, and only from allowed_cidrs."""

    name: str
    instance_type: str
    allowed_cidrs: list[str]


class CloudPlan(PlanModel):
    """Everything a cloud stack creates, resolved: the stack reads only this (and the nodes)."""

    provider: Literal["aws", "gcp", "azure"]
    cluster: str
    region: str
    zone: str | None = None
    project: str | None = None
    resource_group: str | None = None
    image: str
    ssh_user: str
    root_volume_gib: int
    network_cidr: str
    peer_cidrs: list[str] = Field(
        default_factory=list,
        description="networks outside network_cidr the nodes admit: a burst group's on-prem management network",
    )
    existing_network: str | None = Field(None, description="VPC id / network name to use instead of creating one")
    subnets: list[CloudSubnetPlan]
    gpu_networks: list[CloudSubnetPlan] = Field(default_factory=list, description="GCP: one VPC per GPU NIC")
    host_networks: list[CloudSubnetPlan] = Field(
        default_factory=list, description="GCP: one VPC per further gVNIC host NIC (A3 Ultra's second)"
    )
    rdma_network: GcpRdmaNetworkPlan | None = Field(None, description="GCP: the RoCE VPC of the RDMA NICs")
    network_mtu: int | None = Field(None, description="GCP: MTU of the host, GPU and further host VPCs")
    placement_strategy: Literal["cluster", "compact", "single-placement-group"] | None = None
    placement_group: str | None = Field(None, description="existing placement group to use")
    capacity_reservation_id: str | None = None
    capacity_block: bool = False
    reservation: str | None = None
    capacity_reservation_group_id: str | None = None
    groups: list[CloudInstanceGroupPlan]
    bastion: BastionPlan | None = None
    allow_world_ssh: bool = Field(
        False, description="the spec's allow_world_ssh: SSH from 0.0.0.0/0 is meant (the stacks refuse it otherwise)"
    )
    managed_lustre: list[ManagedLustrePlan] = Field(default_factory=list)
    labels: dict[str, str] = Field(description="tags/labels every resource carries")
    plugins: dict[str, str] = Field(default_factory=dict, description="vendor NCCL plugin versions and images")

    def group(self, name: str) -> CloudInstanceGroupPlan:
        """The instance group ``name``."""
        return _first(self.groups, lambda group: group.group == name, name)


class BaremetalMachinePlan(PlanModel):
    """One physical server: how it is powered, booted and addressed."""

    hostname: str
    fqdn: str
    group: str
    role: Role
    rack: str
    address: str
    mac: str
    bmc: str
    boot_mode: Literal["UEFI", "Legacy"] = Field(
        "UEFI", description="the machine's firmware: machines.csv's boot_mode, else the spec's provider.boot_mode"
    )


class AutoinstallGroupPlan(PlanModel):
    """The Ubuntu autoinstall configuration of one node group."""

    group: str
    role: Role
    hosts: list[str]
    macs: dict[str, str] = Field(description="PXE MAC (lower case) -> hostname")
    install_disk: str | None = None


class BmcPlan(PlanModel):
    """How the Redfish client reaches the BMCs (the spec's ``provider.bmc``, the CA bundle read in)."""

    insecure_http: bool = False
    verify_tls: bool = True
    ca_bundle_file: str | None = Field(None, description="the spec's ca_bundle path (for messages)")
    ca_bundle: str | None = Field(None, description="PEM text of the only CAs trusted for the BMCs")


class BaremetalImagePlan(PlanModel):
    """A baked node image as a root filesystem archive the PXE server serves (clusterctl.lock, baremetal)."""

    name: str = Field(description="clusterctl-<os>-<hash12>: the folder of its kernel and initramfs under images/")
    hash: str = Field(description="the image's content hash")
    archive: str = Field(description="the archive's file name under the PXE server's images/ (.tar.zst, .tar.gz)")
    sha256: str = Field(description="the archive's sha256 (hex): the initramfs refuses any other")
    default: Literal["install", "stateless"] = Field(
        "install", description="what a machine's PXE menu boots by default: write the image to disk, or run from RAM"
    )


class BaremetalPlan(PlanModel):
    """PXE (dnsmasq + autoinstall) and Redfish facts of a bare-metal cluster."""

    machines: list[BaremetalMachinePlan]
    autoinstall: list[AutoinstallGroupPlan]
    pxe_server: str
    pxe_interface: str
    http_port: int
    http_url: str
    host_key_port: int = Field(8081, description="where `clusterctl up` serves each machine its host key (pxe_server)")
    installer_iso: str
    boot_mode: Literal["UEFI", "Legacy"]
    bmc: BmcPlan = Field(default_factory=BmcPlan)
    ready_port: int
    ready_timeout_s: int
    ssh_user: str
    ssh_authorized_keys: list[str] = Field(default_factory=list)
    netmask: str
    prefix_length: int
    gateway: str
    dns: list[str]
    domain: str
    images: dict[str, BaremetalImagePlan] = Field(
        default_factory=dict,
        description="node group -> the baked image (clusterctl.lock) its machines boot instead of the installer",
    )
    image_boot: dict[str, Literal["install", "stateless"]] = Field(
        default_factory=dict,
        description=(
            "node group -> how its machines boot the baked image (the spec's provider.image); empty: the installer "
            "unless the lock has an image, which is then installed"
        ),
    )
    kernel_args: list[str] = Field(default_factory=list, description="extra kernel arguments of the image entries")

    @property
    def host_key_url(self) -> str:
        """Base URL of the host key server ``clusterctl up`` runs during the installs."""
        return f"http://{self.pxe_server}:{self.host_key_port}"


class Plan(PlanModel):
    """The resolved cluster."""

    cluster: ClusterInfo
    nodes: list[PlanNode]
    groups: list[NodeGroupPlan]
    fabric: FabricPlan
    slurm: SlurmPlan
    storage: list[StoragePlan]
    lnet: list[LnetProfile] = Field(default_factory=list)
    nccl: list[NcclProfile]
    power: PowerPlan
    gpus: GpuPlan
    workload: WorkloadPlan | None
    monitoring: MonitoringPlan
    findings: list[dict[str, Any]] = Field(default_factory=list)
    cloud: CloudPlan | None = Field(None, description="what the cloud stack creates (aws, gcp, azure)")
    baremetal: BaremetalPlan | None = Field(None, description="PXE and BMC facts (baremetal)")
    burst_cloud: dict[str, CloudPlan] = Field(default_factory=dict, description="cloud burst group -> its burst stack")
    site: SitePlan = Field(default_factory=SitePlan, description="name and time servers of every node")

    def node(self, hostname: str) -> PlanNode:
        """The node named ``hostname``."""
        return _first(self.nodes, lambda node: node.hostname == hostname, hostname)

    def launcher(self) -> str:
        """Where Slurm commands run: the first login node, else the first controller.

        Raises:
            ValueError: The plan has neither.
        """
        for role in ("login", "controller"):
            for node in self.nodes:
                if node.role == role:
                    return node.hostname
        raise ValueError("The plan has neither a login node nor a controller to run Slurm commands from.")

    def summary(self) -> dict[str, Any]:
        """The sizing report (what ``clusterctl plan --output json`` prints)."""
        by_group: dict[str, int] = {g.name: g.count for g in self.groups}
        by_role: dict[str, int] = {}
        for node in self.nodes:
            by_role[node.role] = by_role.get(node.role, 0) + 1
        fabric = self.fabric.model_dump(exclude={"sus", "leaves"})
        fabric["sus"] = len(self.fabric.sus)
        return {
            "cluster": self.cluster.name,
            "provider": self.cluster.provider,
            "nodes": {
                "total": len(self.nodes),
                "by_group": by_group,
                "by_role": by_role,
                "spares": sum(1 for n in self.nodes if n.spare),
                "replaced": sum(1 for n in self.nodes if n.replaced_by),
                "burst": sum(1 for n in self.nodes if n.burst),
            },
            "gpus": self.gpus.model_dump(),
            "fabric": fabric,
            "power": self.power.model_dump(),
            "storage": [
                {
                    "name": s.name,
                    "kind": s.kind,
                    "mount": s.mount,
                    "purpose": s.purpose,
                    "read_bw": s.read_bw,
                    "write_bw": s.write_bw,
                    **({"checkpoint_write_s": s.checkpoint_write_s} if s.checkpoint_write_s is not None else {}),
                }
                for s in self.storage
            ],
            "workload": self.workload.model_dump() if self.workload else None,
            "findings": self.findings,
        }
