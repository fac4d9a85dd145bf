"""Resolve what the provisioning stacks create: cloud networks, instances, placement, capacity,
managed Lustre, the bastion; or, on bare metal, the PXE and BMC facts.

Pure, like the rest of ``plan``: the Pulumi programs in ``stacks/`` and the PXE render read
``plan.cloud`` / ``plan.baremetal`` and never the spec. Every node keeps the address the plan
gave it (the stacks pin private addresses), so ``hosts``, ``slurm.conf`` and the inventory agree
with what the cloud runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path
from typing import Literal, TypeGuard

from clusterctl.catalog.cloud_services import (
    AMLFS_TIERS,
    DEFAULT_GPUDIRECT_PLUGIN,
    FSX_TIERS,
    GCP_LUSTRE_TIERS,
    LustreTier,
    gpudirect_release,
)
from clusterctl.catalog.instances import BASTION_TYPES, InstanceType, instance_type
from clusterctl.plan.models import (
    AutoinstallGroupPlan,
    BaremetalMachinePlan,
    BaremetalPlan,
    BastionPlan,
    BmcPlan,
    CloudInstanceGroupPlan,
    CloudNicPlan,
    CloudPlan,
    CloudSubnetPlan,
    GcpRdmaNetworkPlan,
    ManagedLustrePlan,
    PlanNode,
)
from clusterctl.spec.machines import MachinesError, read_ca_bundle, read_machines
from clusterctl.spec.models import LustreStorage, NodeGroup, Spec
from clusterctl.spec.providers import AwsProvider, AzureProvider, BaremetalProvider, CloudProvider, GcpProvider

# Every resource a stack creates carries these (AWS tags, GCP labels, Azure tags).
CLUSTER_LABEL = "clusterctl-cluster"
MANAGED_BY_LABEL = "managed-by"

_CANONICAL_SSM = "resolve:ssm:/aws/service/canonical/ubuntu/server/"
# The vendor image of each OS when the spec names none. AWS takes an SSM parameter directly as
# the image id ("resolve:ssm:"), so the AMI is found at launch without a lookup in the program.
DEFAULT_IMAGES: dict[str, dict[str, str]] = {
    "aws": {
        "ubuntu-24.04": _CANONICAL_SSM + "24.04/stable/current/amd64/hvm/ebs-gp3/ami-id",
        "ubuntu-22.04": _CANONICAL_SSM + "22.04/stable/current/amd64/hvm/ebs-gp2/ami-id",
        "debian-12": "resolve:ssm:/aws/service/debian/release/12/latest/amd64",
    },
    "gcp": {
        "ubuntu-24.04": "projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64",
        "ubuntu-22.04": "projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts",
        "debian-12": "projects/debian-cloud/global/images/family/debian-12",
    },
    "azure": {
        # ND-series sizes boot Gen2 images only.
        "ubuntu-24.04": "Canonical:ubuntu-24_04-lts:server:latest",
        "ubuntu-22.04": "Canonical:0001-com-ubuntu-server-jammy:22_04-lts-gen2:latest",
        "debian-12": "Debian:debian-12:12-gen2:latest",
    },
}

# The Ubuntu live-server ISO the PXE server hands to the installer (casper's url=).
DEFAULT_INSTALLER_ISO: dict[str, str] = {
    "ubuntu-24.04": "ubuntu-24.04.2-live-server-amd64.iso",
    "ubuntu-22.04": "ubuntu-22.04.5-live-server-amd64.iso",
}

# GCP GPU NIC networks get a /20 each out of provider.gpu_network_cidr (Cluster Toolkit's
# multivpc module uses the same subnet size); so do A3 Ultra's second host network and the
# subnets of its RoCE network, after the GPU networks.
GPU_SUBNET_PREFIX = 20
# VPC MTUs of Google's A3 references (GoogleCloudPlatform/cluster-toolkit@1047080):
# examples/machine-learning/a3-megagpu-8g/a3mega-slurm-blueprint.yaml sets mtu 8244 on its
# networks; examples/machine-learning/a3-ultragpu-8g/a3ultra-slurm-blueprint.yaml sets 8896 on
# net-0 and net-1, and modules/network/gpu-rdma-vpc/variables.tf defaults the RoCE VPC to 8896.
GCP_MTU = 8244
GCP_RDMA_MTU = 8896
# A3 Ultra's RDMA NICs: one RoCE VPC with the zone's RoCE network profile and one subnet per
# NIC, attached as MRDMA after the two gVNIC host NICs (cluster-toolkit@1047080
# modules/network/gpu-rdma-vpc/main.tf: network_profile, one subnetwork per template count,
# subnetwork_interfaces nic_type MRDMA, no firewall rules; a3ultra-slurm-blueprint.yaml:
# a3ultra-slurm-rdma-net with network_profile .../networkProfiles/$(vars.zone)-vpc-roce and 8
# subnetworks, the nodeset's additional_networks net-1 (GVNIC) then the RDMA interfaces).
# The partial URL form is the one gpu-rdma-vpc's variables.tf (network_profile) documents.
ROCE_NETWORK_PROFILE = "projects/{project}/global/networkProfiles/{zone}-vpc-roce"
GCP_RDMA_SOURCES = [
    "GoogleCloudPlatform/cluster-toolkit:modules/network/gpu-rdma-vpc/main.tf@1047080",
    "GoogleCloudPlatform/cluster-toolkit:examples/machine-learning/a3-ultragpu-8g/a3ultra-slurm-blueprint.yaml@1047080",
]
# Subnets of the upper half of the management network (public/bastion, managed storage).
SERVICE_SUBNET_PREFIX = 24


def split_network(network: IPv4Network) -> tuple[IPv4Network, IPv4Network | None, IPv4Network | None]:
    """Split the management network: nodes in the lower half, then public and storage /24s.

    Why: node addresses are pinned from the bottom of the network (the plan's order); NAT
    gateways, the bastion and managed file systems take addresses the cloud picks, so they live
    in their own subnets where they can never take a node's address.
    """
    if network.prefixlen >= 31:
        return network, None, None
    lower, upper = network.subnets(prefixlen_diff=1)
    blocks = list(upper.subnets(new_prefix=max(upper.prefixlen, SERVICE_SUBNET_PREFIX)))
    public = blocks[0]
    storage = blocks[1] if len(blocks) > 1 else None
    return lower, public, storage


# Addresses each cloud keeps for itself in every subnet, (at the start, at the end): AWS the network
# address, the VPC router, DNS, one for future use and the broadcast address (Amazon VPC User Guide,
# "Subnet CIDR blocks"); GCP the network, the default gateway, the second-to-last and the broadcast
# address (VPC docs, "Reserved IP addresses in IPv4 subnets"); Azure the network, the gateway, two for
# Azure DNS and the broadcast address (Azure Virtual Network FAQ). Burst nodes never take one.
RESERVED_ADDRESSES: dict[str, tuple[int, int]] = {"aws": (4, 1), "gcp": (2, 2), "azure": (4, 1)}


def is_cloud(provider: object) -> TypeGuard[CloudProvider]:
    """Whether a provider block is one of the clouds (aws, gcp, azure)."""
    return isinstance(provider, AwsProvider | GcpProvider | AzureProvider)


def existing_subnet(provider: CloudProvider) -> str | None:
    """The existing node subnet (or subnetwork) the provider names, if any."""
    if isinstance(provider, AwsProvider | AzureProvider):
        return provider.subnet_id
    return provider.subnetwork


def burst_node_subnet(provider: CloudProvider) -> IPv4Network | None:
    """The subnet a cloud burst group's nodes are in: ``provider.cidr`` itself when it is an existing
    subnet's range, else the lower half of it (the node subnet the burst stack makes, as split_network)."""
    if provider.cidr is None:
        return None
    if existing_subnet(provider):
        return provider.cidr
    return split_network(provider.cidr)[0]


def burst_addresses(provider: CloudProvider, count: int) -> list[str] | None:
    """``count`` node addresses in the burst group's own subnet, past the provider's reserved ones.

    None when the provider names no ``cidr`` or the subnet is too small (rule BUR004 says which).
    """
    subnet = burst_node_subnet(provider)
    if subnet is None:
        return None
    first, last = RESERVED_ADDRESSES[provider.kind]
    if count > subnet.num_addresses - first - last:
        return None
    base = int(subnet.network_address) + first
    return [str(IPv4Address(base + i)) for i in range(count)]


def _labels(spec: Spec) -> dict[str, str]:
    return {CLUSTER_LABEL: spec.name, MANAGED_BY_LABEL: "clusterctl"}


def lustre_tiers(provider: CloudProvider) -> list[LustreTier]:
    """The managed Lustre tiers the provider offers, lowest throughput first."""
    if isinstance(provider, AwsProvider):
        return FSX_TIERS[provider.fsx_deployment_type]
    if isinstance(provider, GcpProvider):
        return GCP_LUSTRE_TIERS
    return AMLFS_TIERS


def _fixed_tier(provider: CloudProvider) -> LustreTier | None:
    tiers = lustre_tiers(provider)
    if isinstance(provider, AwsProvider) and provider.fsx_per_unit_storage_throughput is not None:
        return next((t for t in tiers if t.mbps_per_tib == provider.fsx_per_unit_storage_throughput), None)
    if isinstance(provider, GcpProvider) and provider.lustre_per_unit_storage_throughput is not None:
        return next((t for t in tiers if t.mbps_per_tib == provider.lustre_per_unit_storage_throughput), None)
    if isinstance(provider, AzureProvider) and provider.lustre_sku is not None:
        return next((t for t in tiers if t.name == provider.lustre_sku), None)
    return None


def size_managed_lustre(
    tiers: list[LustreTier], required_mbps: float | None, data_gib: float, fixed: LustreTier | None
) -> tuple[LustreTier, int, str]:
    """Pick a tier and capacity that hold ``data_gib`` and deliver ``required_mbps``.

    Without a tier in the spec: the lowest tier that meets the bandwidth at the capacity the
    data needs (more capacity at a slow tier costs more than the same capacity at the right
    one), else the fastest tier sized up until it meets the bandwidth.
    """
    if fixed is not None:
        needed = max(data_gib, (required_mbps or 0) / fixed.mbps_per_tib * 1024)
        capacity = fixed.capacity_for(needed)
        return fixed, capacity, f"tier {fixed.name} set in the spec; capacity sized for data and bandwidth"
    for tier in tiers:
        capacity = tier.capacity_for(data_gib)
        if required_mbps is None or tier.throughput_mbps(capacity) >= required_mbps:
            why = (
                "no bandwidth given: smallest tier and capacity"
                if required_mbps is None
                else f"lowest tier whose throughput at the data's capacity meets {required_mbps:.0f} MB/s"
            )
            return tier, capacity, why
    fastest = tiers[-1]
    assert required_mbps is not None
    capacity = fastest.capacity_for(max(data_gib, required_mbps / fastest.mbps_per_tib * 1024))
    return fastest, capacity, f"fastest tier, capacity raised until it delivers {required_mbps:.0f} MB/s"


def _managed_lustre(spec: Spec, provider: CloudProvider) -> list[ManagedLustrePlan]:
    out: list[ManagedLustrePlan] = []
    service = {"aws": "fsx", "gcp": "gcp-managed-lustre", "azure": "amlfs"}[provider.kind]
    for tier in spec.storage:
        if not isinstance(tier, LustreStorage) or not tier.managed:
            continue
        bandwidths = [bw.bytes_per_s for bw in (tier.read_bw, tier.write_bw) if bw is not None]
        required = max(bandwidths) / 1e6 if bandwidths else None
        data_gib = (tier.capacity_tib or 0) * 1024
        chosen, capacity, why = size_managed_lustre(lustre_tiers(provider), required, data_gib, _fixed_tier(provider))
        out.append(
            ManagedLustrePlan(
                name=tier.name,
                mount=tier.mount,
                # Azure Managed Lustre always names its file system "lustrefs".
                fsname="lustrefs" if service == "amlfs" else tier.fsname,
                service=service,
                tier=chosen.name,
                per_unit_mbps_per_tib=chosen.mbps_per_tib,
                capacity_gib=capacity,
                throughput_mbps=round(chosen.throughput_mbps(capacity), 1),
                required_mbps=round(required, 1) if required is not None else None,
                read_bw=str(tier.read_bw) if tier.read_bw else None,
                write_bw=str(tier.write_bw) if tier.write_bw else None,
                sizing=why,
            )
        )
    return out


def _subnets(spec: Spec, provider: CloudProvider, has_storage: bool) -> tuple[list[CloudSubnetPlan], str | None]:
    lower, public, storage = split_network(spec.network.management_cidr)
    prefix = spec.name
    if isinstance(provider, AwsProvider) and provider.subnet_id:
        subnets = [CloudSubnetPlan(name=f"{prefix}-nodes", purpose="nodes", existing_id=provider.subnet_id)]
        if provider.public_subnet_id:
            subnets.append(
                CloudSubnetPlan(name=f"{prefix}-public", purpose="public", existing_id=provider.public_subnet_id)
            )
        return subnets, provider.vpc_id
    if isinstance(provider, GcpProvider) and provider.subnetwork:
        return [CloudSubnetPlan(name=provider.subnetwork, purpose="nodes", existing_id=provider.subnetwork)], (
            provider.network
        )
    if isinstance(provider, AzureProvider) and provider.subnet_id:
        return [CloudSubnetPlan(name=f"{prefix}-nodes", purpose="nodes", existing_id=provider.subnet_id)], None
    subnets = [CloudSubnetPlan(name=f"{prefix}-nodes", cidr=str(lower), purpose="nodes")]
    if public is not None:
        subnets.append(CloudSubnetPlan(name=f"{prefix}-public", cidr=str(public), purpose="public"))
    if has_storage and storage is not None:
        subnets.append(CloudSubnetPlan(name=f"{prefix}-storage", cidr=str(storage), purpose="storage"))
    return subnets, None


def _stack_groups(spec: Spec) -> list[NodeGroup]:
    """The node groups the stack creates: burst nodes are created by Slurm's resume program."""
    return [g for g in spec.nodes if g.burst is None]


def _groups(
    spec: Spec, provider: CloudProvider, nodes: list[PlanNode], nics: _GcpNics | None
) -> list[CloudInstanceGroupPlan]:
    out: list[CloudInstanceGroupPlan] = []
    for group in _stack_groups(spec):
        profile = spec.hardware[group.hardware]
        members = [n for n in nodes if n.group == group.group]
        itype = instance_type(profile.instance_type)
        gpu_compute = group.role == "compute" and profile.gpus is not None
        placement = gpu_compute and not (isinstance(provider, AwsProvider) and provider.capacity_block)
        if isinstance(provider, GcpProvider) and provider.placement_policy == "none":
            placement = False
        # The vendor's reference does without compact placement for some types (A3 Ultra): an
        # explicit `placement_policy: compact` still asks for it.
        if (
            isinstance(provider, GcpProvider)
            and itype is not None
            and not itype.compact_placement
            and "placement_policy" not in provider.model_fields_set
        ):
            placement = False
        reserved = gpu_compute and bool(
            (isinstance(provider, AwsProvider) and provider.capacity_reservation_id)
            or (isinstance(provider, GcpProvider) and provider.reservation)
            or (isinstance(provider, AzureProvider) and provider.capacity_reservation_group_id)
        )
        out.append(
            CloudInstanceGroupPlan(
                group=group.group,
                role=group.role,
                hardware=group.hardware,
                instance_type=profile.instance_type or "",
                hosts=[n.hostname for n in members],
                addresses=[n.address for n in members],
                gpus=itype.gpus if itype else 0,
                gpu_model=itype.gpu_model if itype else None,
                fabric=itype.fabric if itype else "ethernet",
                efa_interfaces=itype.efa_interfaces if itype else 0,
                network_cards=itype.network_cards if itype else 1,
                gpu_nics=list(itype.gpu_nics) if itype else [],
                ib_devices=list(itype.ib_devices) if itype else [],
                nics=nics.of(itype) if nics is not None else [],
                boot_disk_type=((itype.boot_disk_type if itype else None) or "pd-ssd")
                if isinstance(provider, GcpProvider)
                else None,
                placement=placement,
                capacity_reservation=reserved,
                # The vendor's image for the type, unless the spec names one (provider.image).
                os_image=(itype.vendor_images.get(spec.os) if itype and provider.image is None else None),
                scale_set=f"{spec.name}-{group.group}" if isinstance(provider, AzureProvider) and gpu_compute else None,
            )
        )
    return out


def nic_network_counts(itypes: list[InstanceType | None]) -> tuple[int, int, int]:
    """GCP: how many GPU NIC VPCs, further host NIC VPCs and RoCE subnets the instance types need."""
    known = [t for t in itypes if t is not None]
    return (
        max((len(t.gpu_nics) for t in known), default=0),
        max((len(t.socket_nics) - 1 for t in known if t.rdma_nics), default=0),
        max((t.rdma_nics for t in known), default=0),
    )


@dataclass(frozen=True)
class _GcpNics:
    """GCP's per-NIC networks: GPU VPCs (A3 High/Mega), further host VPCs and the RoCE VPC (A3 Ultra)."""

    gpu_networks: list[CloudSubnetPlan]
    host_networks: list[CloudSubnetPlan]
    rdma_network: GcpRdmaNetworkPlan | None

    def of(self, itype: InstanceType | None) -> list[CloudNicPlan]:
        """An instance type's NICs after nic0 on these networks (:func:`_gcp_nics`)."""
        return _gcp_nics(itype, self.gpu_networks, self.host_networks, self.rdma_network)


def _gcp_networks(spec: Spec, provider: GcpProvider) -> _GcpNics:
    """The per-NIC networks the stack's instance types need.

    Each takes the next /20 of ``gpu_network_cidr``: GPU networks first, then the host
    networks, then the RoCE subnets (a cidr of None when the range runs out; rule CLD010 says so).
    """
    itypes = [instance_type(spec.hardware[g.hardware].instance_type) for g in _stack_groups(spec)]
    gpu, host, rdma = nic_network_counts(itypes)
    base = provider.gpu_network_cidr
    blocks = iter(base.subnets(new_prefix=max(base.prefixlen, GPU_SUBNET_PREFIX)))

    def cidr() -> str | None:
        block = next(blocks, None)
        return str(block) if block is not None else None

    gpu_networks = [CloudSubnetPlan(name=f"{spec.name}-gpunet-{i}", cidr=cidr(), purpose="gpu") for i in range(gpu)]
    host_networks = [
        CloudSubnetPlan(name=f"{spec.name}-hostnet-{i + 1}", cidr=cidr(), purpose="host") for i in range(host)
    ]
    rdma_network = None
    if rdma:
        rdma_network = GcpRdmaNetworkPlan(
            name=f"{spec.name}-rdma-net",
            network_profile=ROCE_NETWORK_PROFILE.format(project=provider.project, zone=provider.zone)
            if provider.project and provider.zone
            else None,
            mtu=GCP_RDMA_MTU,
            subnets=[
                CloudSubnetPlan(name=f"{spec.name}-mrdma-sub-{i}", cidr=cidr(), purpose="rdma") for i in range(rdma)
            ],
            sources=GCP_RDMA_SOURCES,
        )
    return _GcpNics(gpu_networks, host_networks, rdma_network)


def nic_subnetwork(network: CloudSubnetPlan) -> str:
    """The name of the one subnetwork of a per-NIC VPC (gpu or host network): ``<vpc>-sub``."""
    return f"{network.name}-sub"


def _gcp_nics(
    itype: InstanceType | None,
    gpu_networks: list[CloudSubnetPlan],
    host_networks: list[CloudSubnetPlan],
    rdma: GcpRdmaNetworkPlan | None,
) -> list[CloudNicPlan]:
    """An instance type's NICs after nic0, in the order the guest names them.

    A3 High/Mega: one gVNIC per GPU network (enp6s0, enp7s0, ...). A3 Ultra: the second host
    gVNIC (enp192s20), then one MRDMA NIC per RoCE subnet (the order of the toolkit's nodeset
    ``additional_networks``).
    """
    if itype is None:
        return []
    nics = [
        CloudNicPlan(subnetwork=nic_subnetwork(net), nic_type="GVNIC", guest_name=name)
        for net, name in zip(gpu_networks, itype.gpu_nics, strict=False)
    ]
    if itype.rdma_nics and rdma is not None:
        nics += [
            CloudNicPlan(subnetwork=nic_subnetwork(net), nic_type="GVNIC", guest_name=name)
            for net, name in zip(host_networks, itype.socket_nics[1:], strict=False)
        ]
        nics += [CloudNicPlan(subnetwork=sub.name, nic_type="MRDMA") for sub in rdma.subnets[: itype.rdma_nics]]
    return nics


def _plugins(provider: CloudProvider, groups: list[CloudInstanceGroupPlan]) -> dict[str, str]:
    if isinstance(provider, AwsProvider):
        return {"aws_ofi_nccl": provider.aws_ofi_nccl, "efa_installer": provider.efa_installer}
    if isinstance(provider, GcpProvider):
        fabrics = sorted({g.fabric for g in groups if g.fabric.startswith("gpudirect")})
        if not fabrics:
            return {}
        fabric = fabrics[0]
        version = (provider.gpudirect_plugin or DEFAULT_GPUDIRECT_PLUGIN[fabric]).removeprefix("v")
        out = {"gpudirect_fabric": fabric, "gpudirect_plugin": version}
        release = gpudirect_release(fabric, version)
        if release is not None:
            out.update(
                gpudirect_plugin_image=release.plugin_image,
                rxdm_image=release.rxdm_image,
                gpudirect_nccl=release.nccl,
            )
        return out
    return {}


def resolve_cloud(
    spec: Spec, nodes: list[PlanNode], *, labels: dict[str, str] | None = None, bastion_host: bool = True
) -> CloudPlan | None:
    """The cloud section of the plan, or None for local and bare-metal specs.

    Args:
        spec: the spec (for a burst stack, a one-group copy of it: plan/burst.py).
        nodes: the plan's nodes.
        labels: the tags/labels of every resource (default: the cluster's).
        bastion_host: whether an SSH jump host is made for ``allowed_ssh_cidrs``.
    """
    provider = spec.provider
    if not isinstance(provider, AwsProvider | GcpProvider | AzureProvider):
        return None
    nics = _gcp_networks(spec, provider) if isinstance(provider, GcpProvider) else None
    groups = _groups(spec, provider, nodes, nics)
    lustre = _managed_lustre(spec, provider)
    subnets, existing = _subnets(spec, provider, has_storage=bool(lustre))
    bastion = None
    if provider.allowed_ssh_cidrs and bastion_host:
        bastion = BastionPlan(
            name=f"{spec.name}-bastion",
            instance_type=BASTION_TYPES[provider.kind],
            allowed_cidrs=[str(c) for c in provider.allowed_ssh_cidrs],
        )
    strategy = {"aws": "cluster", "gcp": "compact", "azure": "single-placement-group"}[provider.kind]
    return CloudPlan(
        provider=provider.kind,
        cluster=spec.name,
        region=provider.region,
        zone=provider.zone,
        project=provider.project if isinstance(provider, GcpProvider) else None,
        resource_group=(provider.resource_group or f"clusterctl-{spec.name}")
        if isinstance(provider, AzureProvider)
        else None,
        image=provider.image or DEFAULT_IMAGES[provider.kind][spec.os],
        ssh_user=provider.ssh_user,
        root_volume_gib=provider.root_volume_gib,
        network_cidr=str(spec.network.management_cidr),
        existing_network=existing,
        subnets=subnets,
        gpu_networks=nics.gpu_networks if nics else [],
        host_networks=nics.host_networks if nics else [],
        rdma_network=nics.rdma_network if nics else None,
        network_mtu=(GCP_RDMA_MTU if nics.rdma_network else GCP_MTU) if nics else None,
        placement_strategy=strategy if any(g.placement for g in groups) else None,
        placement_group=provider.placement_group if isinstance(provider, AwsProvider) else None,
        capacity_reservation_id=provider.capacity_reservation_id if isinstance(provider, AwsProvider) else None,
        capacity_block=provider.capacity_block if isinstance(provider, AwsProvider) else False,
        reservation=provider.reservation if isinstance(provider, GcpProvider) else None,
        capacity_reservation_group_id=provider.capacity_reservation_group_id
        if isinstance(provider, AzureProvider)
        else None,
        groups=groups,
        bastion=bastion,
        allow_world_ssh=provider.allow_world_ssh,
        managed_lustre=lustre,
        labels=labels if labels is not None else _labels(spec),
        plugins=_plugins(provider, groups),
    )


def _bmc_plan(provider: BaremetalProvider, base_dir: Path) -> BmcPlan:
    """The BMC transport settings, with the CA bundle's PEM text (the run reads only the build dir)."""
    settings = provider.bmc
    pem = None
    if settings.ca_bundle is not None:
        try:
            pem = read_ca_bundle(base_dir, settings.ca_bundle)
        except MachinesError:
            # Rule BMC001 reports why; verification then stays on, against the system CAs.
            pem = None
    return BmcPlan(
        insecure_http=settings.insecure_http,
        verify_tls=settings.verify_tls,
        ca_bundle_file=settings.ca_bundle,
        ca_bundle=pem,
    )


def resolve_baremetal(spec: Spec, nodes: list[PlanNode], base_dir: Path = Path()) -> BaremetalPlan | None:
    """The PXE/BMC section of the plan, or None when the spec is not bare metal."""
    provider = spec.provider
    if not isinstance(provider, BaremetalProvider):
        return None
    network = spec.network.management_cidr
    gateway = spec.network.gateway or IPv4Address(int(network.network_address) + 1)
    pxe = provider.pxe_server or IPv4Address(int(network.network_address) + 2)
    firmware = _machine_boot_modes(provider, base_dir)
    machines = [
        BaremetalMachinePlan(
            hostname=n.hostname,
            fqdn=n.fqdn,
            group=n.group,
            role=n.role,
            rack=n.rack,
            address=n.address,
            mac=n.mac.lower(),
            bmc=n.bmc,
            boot_mode=firmware.get(n.hostname) or provider.boot_mode,
        )
        for n in nodes
        if not n.burst and n.mac and n.bmc
    ]
    autoinstall = [
        AutoinstallGroupPlan(
            group=group.group,
            role=group.role,
            hosts=[m.hostname for m in machines if m.group == group.group],
            macs={m.mac: m.hostname for m in machines if m.group == group.group},
            install_disk=provider.install_disk,
        )
        for group in spec.nodes
        if group.burst is None
    ]
    return BaremetalPlan(
        machines=machines,
        autoinstall=autoinstall,
        pxe_server=str(pxe),
        pxe_interface=provider.pxe_interface,
        http_port=provider.http_port,
        http_url=f"http://{pxe}:{provider.http_port}",
        host_key_port=provider.host_key_port,
        installer_iso=provider.installer_iso or DEFAULT_INSTALLER_ISO.get(spec.os, ""),
        boot_mode=provider.boot_mode,
        bmc=_bmc_plan(provider, base_dir),
        ready_port=provider.ready_port,
        ready_timeout_s=provider.ready_timeout.seconds,
        ssh_user=provider.ssh_user,
        ssh_authorized_keys=list(provider.ssh_authorized_keys),
        netmask=str(network.netmask),
        prefix_length=network.prefixlen,
        gateway=str(gateway),
        # The site's DNS servers, else the management gateway.
        dns=[str(a) for a in spec.site.dns_servers] or [str(gateway)],
        domain=spec.network.domain,
        image_boot=_image_boot(spec, provider),
        kernel_args=list(provider.kernel_args),
    )


def _machine_boot_modes(provider: BaremetalProvider, base_dir: Path) -> dict[str, str]:
    """hostname -> the firmware machines.csv gives it (only machines with a ``boot_mode`` cell)."""
    try:
        return {m.hostname: m.boot_mode for m in read_machines(base_dir, provider.machines) if m.boot_mode}
    except MachinesError:
        return {}  # rule BMF001 and the loader report the file's problems


def _image_boot(spec: Spec, provider: BaremetalProvider) -> dict[str, Literal["install", "stateless"]]:
    """node group -> install or stateless, for every group of a spec whose machines boot the baked image."""
    image = provider.image
    if image is None:
        return {}
    return {g.group: image.groups.get(g.group, image.default) for g in spec.nodes if g.burst is None}
