"""Rules for cloud and bare-metal provisioning: instance types, networks, capacity, SSH exposure,
managed Lustre, and the vendor NCCL plugin versions.

Structural rules (phase 1) guarantee what ``plan.cloud`` relies on: every cloud node group has
a known instance type of its provider whose fabric matches the spec's. They run offline (the
catalog is data); none asks a cloud API. Facts and sources are in ``clusterctl.catalog``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from ipaddress import IPv4Network

from clusterctl.catalog.cloud_services import (
    DEFAULT_GPUDIRECT_PLUGIN,
    DEFAULT_NCCL_GIB,
    NCCL_GIB_NCCL,
    gpudirect_release,
)
from clusterctl.catalog.compat import at_least, version_tuple
from clusterctl.catalog.instances import INSTANCE_TYPES, InstanceType, instance_type
from clusterctl.plan.cloud import GPU_SUBNET_PREFIX, lustre_tiers, nic_network_counts, split_network
from clusterctl.plan.nodes import FIRST_HOST_OFFSET
from clusterctl.rules.engine import SAFETY_TAG, RuleContext, rule
from clusterctl.spec.findings import Finding, Level
from clusterctl.spec.models import HardwareProfile, LustreStorage, Spec
from clusterctl.spec.providers import AwsProvider, AzureProvider, BaremetalProvider, GcpProvider

CLOUDS = ("aws", "gcp", "azure")
# A scale set with singlePlacementGroup=true holds at most 100 VMs (Azure docs, "Virtual Machine
# Scale Sets and placement groups"); InfiniBand only reaches within one placement group.
AZURE_PLACEMENT_GROUP_MAX = 100
# GCP Managed Lustre file system names: 1-8 lower-case letters and digits (gcloud lustre
# instances create --filesystem); Lustre itself caps fsname at 8 characters.
_GCP_FSNAME = re.compile(r"^[a-z][a-z0-9]{0,7}$")
# Which spec fabric each instance-type fabric is written as.
_FABRIC_FOR = {
    "efa": "efa",
    "gpudirect-tcpx": "gpudirect-tcpx",
    "gpudirect-tcpxo": "gpudirect-tcpxo",
    "gcp-rdma": "roce",  # A3 Ultra: RoCE NICs, NCCL through Google's gIB plugin
}


def _cloud(spec: Spec) -> bool:
    return spec.provider.kind in CLOUDS


def _has_managed_lustre(spec: Spec) -> bool:
    return any(isinstance(t, LustreStorage) and t.managed for t in spec.storage)


def _fixed_groups(spec: Spec) -> Iterator[tuple[int, str, str]]:
    """(index, group name, hardware) of the node groups the stack creates (not burst)."""
    for i, group in enumerate(spec.nodes):
        if group.burst is None:
            yield i, group.group, group.hardware


def _typed_profiles(spec: Spec) -> Iterator[tuple[str, HardwareProfile, InstanceType]]:
    """(name, profile, instance type) of the hardware profiles whose instance type is the cloud's own."""
    if not _cloud(spec):
        return
    for name, profile in spec.hardware.items():
        itype = instance_type(profile.instance_type)
        if itype is not None and itype.provider == spec.provider.kind:
            yield name, profile, itype


@dataclass(frozen=True)
class CloudUse:
    """A cloud provider of the spec and the hardware profiles it creates machines of.

    The top level's provider creates the fixed groups; each burst group's provider its own group.
    Rules about what runs on a provider's machines (EFA, GPUDirect plugins) check every use, so a
    burst group's pins get the same checks as the top level's.
    """

    path: tuple[str | int, ...]
    provider: AwsProvider | GcpProvider | AzureProvider
    profiles: tuple[tuple[str, HardwareProfile, InstanceType], ...]
    group: str = ""  # the burst group's name; "" for the top level

    def where(self, field: str) -> tuple[str | int, ...]:
        """The spec path of one of the provider's fields."""
        return (*self.path, field)

    def named(self, field: str) -> str:
        """How a hint names one of the provider's fields: ``provider.efa_installer``, or a burst group's."""
        return f"the `{field}` of burst group `{self.group}`'s provider" if self.group else f"provider.{field}"

    @property
    def label(self) -> str:
        """What a message adds after the machines it names: `` (burst group `gpu-b`)``, nothing for the top level."""
        return f" (burst group `{self.group}`)" if self.group else ""


def cloud_uses(spec: Spec) -> Iterator[CloudUse]:
    """The top level's cloud provider (its fixed groups' profiles), then each burst group's on a cloud."""

    def typed(
        provider: AwsProvider | GcpProvider | AzureProvider, names: list[str]
    ) -> tuple[tuple[str, HardwareProfile, InstanceType], ...]:
        out = []
        for name in dict.fromkeys(names):
            profile = spec.hardware.get(name)
            itype = instance_type(profile.instance_type) if profile is not None else None
            if profile is not None and itype is not None and itype.provider == provider.kind:
                out.append((name, profile, itype))
        return tuple(out)

    if isinstance(spec.provider, AwsProvider | GcpProvider | AzureProvider):
        yield CloudUse(("provider",), spec.provider, typed(spec.provider, [h for _, _, h in _fixed_groups(spec)]))
    for i, group in enumerate(spec.nodes):
        provider = group.burst.provider if group.burst is not None else None
        if isinstance(provider, AwsProvider | GcpProvider | AzureProvider):
            path = ("nodes", i, "burst", "provider")
            yield CloudUse(path, provider, typed(provider, [group.hardware]), group.group)


# --- phase 1: what the plan's cloud section relies on ------------------------------------------


@rule("CLD001", "cloud-instance-types", Level.ERROR, phase=1, tags=("cloud",))
def cloud_instance_types(ctx: RuleContext) -> Iterator[Finding]:
    """On a cloud, every node group's hardware names an instance type of that cloud."""
    spec = ctx.spec
    if not _cloud(spec):
        return
    kind = spec.provider.kind
    known = sorted(n for n, t in INSTANCE_TYPES.items() if t.provider == kind and t.is_gpu)
    use_known = f"Use one of: {', '.join(known)}."
    seen: set[str] = set()
    for _, group, hw in _fixed_groups(spec):
        if hw in seen or hw not in spec.hardware:
            continue
        seen.add(hw)
        profile = spec.hardware[hw]
        itype = instance_type(profile.instance_type)
        if profile.instance_type is None:
            yield cloud_instance_types.finding(
                ("hardware", hw),
                f"Profile `{hw}` (group `{group}`) has no `instance_type`; the {kind} stack cannot create its nodes.",
                f"Add e.g. `instance_type: {known[0] if known else '...'}`."
                if profile.gpus
                else "Add `instance_type`.",
            )
        elif itype is None:
            if profile.gpus is not None:
                yield cloud_instance_types.finding(
                    ("hardware", hw, "instance_type"),
                    f"`{profile.instance_type}` is not in clusterctl's catalog, so its GPUs, NICs and NCCL settings "
                    "are unknown.",
                    use_known,
                )
            else:
                yield cloud_instance_types.finding(
                    ("hardware", hw, "instance_type"),
                    f"`{profile.instance_type}` is not in clusterctl's catalog; its CPUs and memory cannot be checked.",
                    level=Level.WARNING,
                )
        elif itype.provider != kind:
            yield cloud_instance_types.finding(
                ("hardware", hw, "instance_type"),
                f"`{profile.instance_type}` is a {itype.provider} type, but the provider is {kind}.",
                use_known,
            )


@rule("CLD002", "instance-matches-profile", Level.ERROR, phase=1, tags=("cloud",))
def instance_matches_profile(ctx: RuleContext) -> Iterator[Finding]:
    """A hardware profile describes its instance type: GPUs, CPUs and memory the type has."""
    for name, profile, itype in _typed_profiles(ctx.spec):
        have = (profile.gpus.model, profile.gpus.count) if profile.gpus else (None, 0)
        if have != (itype.gpu_model, itype.gpus):
            want = f"{itype.gpus} x {itype.gpu_model}" if itype.gpus else "no GPUs"
            yield instance_matches_profile.finding(
                ("hardware", name, "gpus"),
                f"Profile `{name}` says {have[1]} x {have[0]} but {itype.name} has {want}.",
                f"Set `gpus: {{model: {itype.gpu_model}, count: {itype.gpus}}}`." if itype.gpus else "Remove `gpus`.",
            )
        cpus = profile.cpus.sockets * profile.cpus.cores_per_socket * profile.cpus.threads_per_core
        if cpus > itype.vcpus:
            yield instance_matches_profile.finding(
                ("hardware", name, "cpus"),
                f"Profile `{name}` has {cpus} CPUs but {itype.name} has {itype.vcpus} vCPUs; slurmd would mark the "
                "nodes INVAL.",
                f"Describe at most {itype.vcpus} vCPUs (sockets x cores_per_socket x threads_per_core).",
            )
        if profile.memory_gib > itype.memory_gib:
            yield instance_matches_profile.finding(
                ("hardware", name, "memory_gib"),
                f"Profile `{name}` has {profile.memory_gib} GiB but {itype.name} has {itype.memory_gib} GiB.",
                f"Set memory_gib to at most {itype.memory_gib}.",
            )


@rule("CLD003", "cloud-fabric-kind", Level.ERROR, phase=1, tags=("cloud",))
def cloud_fabric_kind(ctx: RuleContext) -> Iterator[Finding]:
    """The spec's fabric is the one the GPU instance type has (EFA, GPUDirect-TCPX/O, InfiniBand)."""
    spec = ctx.spec
    for name, _, itype in _typed_profiles(spec):
        want = _FABRIC_FOR.get(itype.fabric, itype.fabric)
        if itype.is_gpu and spec.fabric.kind != want:
            yield cloud_fabric_kind.finding(
                ("fabric", "kind"),
                f"{itype.name} (profile `{name}`) talks {itype.fabric}, but the fabric is `{spec.fabric.kind}`; the "
                "NCCL settings would not match the NICs.",
                f"Set `fabric: {{kind: {want}, ...}}`.",
            )


@rule("CLD004", "cloud-network-fits", Level.ERROR, phase=1, tags=("cloud",))
def cloud_network_fits(ctx: RuleContext) -> Iterator[Finding]:
    """The management network splits into node, public and storage subnets that hold the cluster."""
    spec = ctx.spec
    provider = spec.provider
    if not isinstance(provider, AwsProvider | GcpProvider | AzureProvider):
        return
    existing = (
        (isinstance(provider, AwsProvider) and provider.subnet_id)
        or (isinstance(provider, GcpProvider) and provider.subnetwork)
        or (isinstance(provider, AzureProvider) and provider.subnet_id)
    )
    if existing:
        return
    network = spec.network.management_cidr
    lower, public, storage = split_network(network)
    nodes = sum(g.count for g in spec.nodes if g.burst is None)
    if nodes + FIRST_HOST_OFFSET + 1 > lower.num_addresses or public is None:
        need = 32 - math.ceil(math.log2(2 * (nodes + FIRST_HOST_OFFSET + 1)))
        yield cloud_network_fits.finding(
            ("network", "management_cidr"),
            f"On {provider.kind} the nodes live in the lower half of {network} ({lower}), which cannot hold "
            f"{nodes} nodes after the first {FIRST_HOST_OFFSET} addresses, with public and storage subnets above.",
            f"Use a /{min(need, 24)} or larger network.",
        )
    if _has_managed_lustre(spec) and storage is None:
        yield cloud_network_fits.finding(
            ("network", "management_cidr"),
            f"Managed Lustre needs its own subnet, and {network} has no room for one above the node and public "
            "subnets.",
            "Use a /22 or larger management network.",
        )


@rule("CLD005", "existing-network", Level.ERROR, phase=1, tags=("cloud",))
def existing_network(ctx: RuleContext) -> Iterator[Finding]:
    """Existing networks are named completely: a subnet with its VPC, a public subnet for the bastion."""
    provider = ctx.spec.provider
    if isinstance(provider, AwsProvider):
        if bool(provider.vpc_id) != bool(provider.subnet_id):
            yield existing_network.finding(
                ("provider", "vpc_id" if provider.subnet_id else "subnet_id"),
                "An existing VPC needs both `vpc_id` and `subnet_id` (security groups belong to the VPC).",
            )
        if provider.vpc_id and provider.allowed_ssh_cidrs and not provider.public_subnet_id:
            yield existing_network.finding(
                ("provider", "public_subnet_id"),
                "With an existing VPC and `allowed_ssh_cidrs`, the bastion needs a public subnet.",
                "Set `public_subnet_id` to a subnet with a route to an internet gateway.",
            )
    if isinstance(provider, GcpProvider) and bool(provider.network) != bool(provider.subnetwork):
        yield existing_network.finding(
            ("provider", "network" if provider.subnetwork else "subnetwork"),
            "An existing GCP network needs both `network` and `subnetwork`.",
        )
    managed = _has_managed_lustre(ctx.spec)
    if isinstance(provider, AzureProvider) and provider.subnet_id and (provider.allowed_ssh_cidrs or managed):
        yield existing_network.finding(
            ("provider", "subnet_id"),
            "With an existing Azure subnet clusterctl cannot add the bastion and managed Lustre subnets.",
            "Drop `subnet_id` (clusterctl creates the VNet) or `allowed_ssh_cidrs` and managed Lustre tiers.",
        )


@rule("CLD006", "cloud-zone", Level.ERROR, phase=1, tags=("cloud",))
def cloud_zone(ctx: RuleContext) -> Iterator[Finding]:
    """GPU capacity is zonal: the zone is given where the stack needs it."""
    provider = ctx.spec.provider
    need = (
        (isinstance(provider, AwsProvider) and not provider.subnet_id)
        or isinstance(provider, GcpProvider)
        or (isinstance(provider, AzureProvider) and _has_managed_lustre(ctx.spec))
    )
    if need and not provider.zone:  # type: ignore[union-attr]
        yield cloud_zone.finding(
            ("provider", "zone"),
            f"The {provider.kind} stack needs `zone`: "
            + (
                "instances and managed Lustre are zonal."
                if not isinstance(provider, AzureProvider)
                else "Azure Managed Lustre is zonal."
            ),
            "Set `zone` to where your GPU capacity (or reservation) is, e.g. `us-east-1a`, `us-central1-a` or `1`.",
        )


@rule("CLD007", "capacity-reservation", Level.ERROR, phase=1, tags=("cloud",))
def capacity_reservation(ctx: RuleContext) -> Iterator[Finding]:
    """Capacity Blocks name their reservation; ODCRs and placement groups agree (ParallelCluster's checks)."""
    provider = ctx.spec.provider
    if not isinstance(provider, AwsProvider):
        return
    if provider.capacity_block and not provider.capacity_reservation_id:
        yield capacity_reservation.finding(
            ("provider", "capacity_block"),
            "A Capacity Block is launched into by its reservation id; `capacity_reservation_id` is missing.",
            "Set `capacity_reservation_id: cr-...` (the Capacity Block's reservation).",
        )
    if provider.capacity_block and provider.placement_group:
        yield capacity_reservation.finding(
            ("provider", "placement_group"),
            "Capacity Block instances are already placed together in an UltraCluster; the placement group is not used.",
            level=Level.WARNING,
        )
    if provider.capacity_reservation_id and not provider.capacity_block and not provider.placement_group:
        yield capacity_reservation.finding(
            ("provider", "placement_group"),
            "The GPU nodes target an On-Demand Capacity Reservation but go into a new cluster placement group; an "
            "ODCR made in another placement group (or none) can leave them without capacity.",
            "If the ODCR was created in a placement group, set `placement_group` to its name.",
            level=Level.WARNING,
        )


@rule("CLD008", "managed-lustre", Level.ERROR, phase=1, tags=("cloud",))
def managed_lustre(ctx: RuleContext) -> Iterator[Finding]:
    """Managed Lustre only on clouds; self-run Lustre names its MGS; names fit the service."""
    spec = ctx.spec
    for i, tier in enumerate(spec.storage):
        if not isinstance(tier, LustreStorage):
            continue
        if tier.managed and not _cloud(spec):
            yield managed_lustre.finding(
                ("storage", i, "managed"),
                f"Tier `{tier.name}` is managed, but {spec.provider.kind} has no managed Lustre service.",
                "Remove `managed: true` and list the MGS NIDs under `mgs`.",
            )
        elif tier.managed and tier.mgs:
            yield managed_lustre.finding(
                ("storage", i, "mgs"),
                f"Tier `{tier.name}` is managed: the service provides the MGS; `mgs` is ignored.",
                level=Level.WARNING,
            )
        elif not tier.managed and not tier.mgs:
            yield managed_lustre.finding(
                ("storage", i, "mgs"),
                f"Lustre tier `{tier.name}` lists no MGS NIDs to mount from.",
                'Add e.g. `mgs: ["10.30.0.11@o2ib"]`, or `managed: true` on a cloud.',
            )
        if tier.managed and spec.provider.kind == "gcp" and not _GCP_FSNAME.match(tier.fsname):
            yield managed_lustre.finding(
                ("storage", i, "fsname"),
                f"`{tier.fsname}` is not a Managed Lustre file system name (1-8 lower-case letters and digits).",
            )
        if not tier.managed and tier.capacity_tib is not None:
            yield managed_lustre.finding(
                ("storage", i, "capacity_tib"),
                f"`capacity_tib` only sizes managed tiers; `{tier.name}` is not managed.",
                level=Level.WARNING,
            )


@rule("CLD009", "baremetal-os", Level.ERROR, tags=("baremetal",), phase=1, gates_plan=False)
def baremetal_os(ctx: RuleContext) -> Iterator[Finding]:
    """Where Ubuntu's autoinstall installs the machines, their OS is Ubuntu; baked images may be any OS."""
    spec = ctx.spec
    provider = spec.provider
    if not isinstance(provider, BaremetalProvider) or spec.os.startswith("ubuntu"):
        return
    if provider.image is None:
        yield baremetal_os.finding(
            ("os",),
            f"Bare-metal nodes without `provider.image` are installed with Ubuntu's autoinstall; `{spec.os}` has "
            "no autoinstall.",
            "Boot the baked image instead (`image: {default: install}` under `provider`, then `clusterctl image "
            "build`), or use `os: ubuntu-24.04` or `ubuntu-22.04`.",
        )


@rule("CLD018", "baremetal-image-groups", Level.ERROR, tags=("baremetal",))
def baremetal_image_groups(ctx: RuleContext) -> Iterator[Finding]:
    """``provider.image.groups`` names node groups of the spec that boot from PXE (not burst groups)."""
    provider = ctx.spec.provider
    if not isinstance(provider, BaremetalProvider) or provider.image is None:
        return
    groups = {g.group for g in ctx.spec.nodes if g.burst is None}
    for name in provider.image.groups:
        if name not in groups:
            yield baremetal_image_groups.finding(
                ("provider", "image", "groups", name),
                f"`{name}` is not a node group of this spec that boots from PXE.",
                f"Use one of: {', '.join(sorted(groups))}.",
            )


@rule("CLD010", "gpu-networks", Level.ERROR, phase=1, tags=("cloud",))
def gpu_networks(ctx: RuleContext) -> Iterator[Finding]:
    """GCP's per-NIC networks (GPU NICs; A3 Ultra's second host NIC and RoCE subnets) fit their range."""
    spec = ctx.spec
    provider = spec.provider
    if not isinstance(provider, GcpProvider):
        return
    gpu, host, rdma = nic_network_counts(
        [instance_type(spec.hardware[h].instance_type) for _, _, h in _fixed_groups(spec) if h in spec.hardware]
    )
    nics = gpu + host + rdma
    if not nics:
        return
    what = "the GPU NICs" if not (host or rdma) else "the second host NIC and the RDMA NICs"
    base: IPv4Network = provider.gpu_network_cidr
    if base.overlaps(spec.network.management_cidr):
        yield gpu_networks.finding(
            ("provider", "gpu_network_cidr"),
            f"{base} overlaps the management network {spec.network.management_cidr}.",
            "Pick a range that does not overlap, e.g. 172.16.0.0/16.",
        )
    available = 2 ** max(0, GPU_SUBNET_PREFIX - base.prefixlen)
    if available < nics:
        yield gpu_networks.finding(
            ("provider", "gpu_network_cidr"),
            f"{base} holds {available} /{GPU_SUBNET_PREFIX} subnet(s); {what} need {nics}.",
            f"Use a /{GPU_SUBNET_PREFIX - math.ceil(math.log2(nics))} or larger range.",
        )


# --- exposure, sizing, versions (phase 2 where they read the plan) ---------------------------------


@rule("CLD011", "ssh-exposure", Level.ERROR, tags=("cloud", SAFETY_TAG), phase=1, gates_plan=False)
def ssh_exposure(ctx: RuleContext) -> Iterator[Finding]:
    """SSH from the whole internet only when the spec says allow_world_ssh; no SSH at all is said.

    A safety rule (``--skip-rule`` refuses it): the way to open SSH to the world is the spec
    field, which a reviewer sees; the stacks refuse a world-open rule without it as well.
    """
    provider = ctx.spec.provider
    if not isinstance(provider, AwsProvider | GcpProvider | AzureProvider):
        return
    world = [j for j, cidr in enumerate(provider.allowed_ssh_cidrs) if cidr.prefixlen == 0]
    for j in world:
        cidr = provider.allowed_ssh_cidrs[j]
        if provider.allow_world_ssh:
            yield ssh_exposure.finding(
                ("provider", "allowed_ssh_cidrs", j),
                f"{cidr} lets the whole internet try SSH on the bastion (allow_world_ssh is set).",
                "List only the networks you connect from, if you can.",
                level=Level.WARNING,
            )
        else:
            yield ssh_exposure.finding(
                ("provider", "allowed_ssh_cidrs", j),
                f"{cidr} would let the whole internet try SSH on the bastion.",
                "List only the networks you connect from (e.g. your office or VPN egress /24); if the bastion must "
                "really take SSH from anywhere, also set `allow_world_ssh: true` on the provider.",
            )
    if provider.allow_world_ssh and not world:
        yield ssh_exposure.finding(
            ("provider", "allow_world_ssh"),
            "`allow_world_ssh` is set, but no network in allowed_ssh_cidrs is world-open; it changes nothing.",
            "Remove `allow_world_ssh: true`, so a later 0.0.0.0/0 is caught.",
            level=Level.WARNING,
        )
    if not provider.allowed_ssh_cidrs:
        yield ssh_exposure.finding(
            ("provider", "allowed_ssh_cidrs"),
            "No SSH from outside the cluster network: clusterctl must run where it reaches the nodes' private "
            "addresses (VPN, peering, or a machine in the network).",
            "To go through a bastion, list your networks in `allowed_ssh_cidrs`.",
            level=Level.INFO,
        )


@rule("CLD012", "managed-lustre-sizing", Level.WARNING, tags=("cloud",))
def managed_lustre_sizing(ctx: RuleContext) -> Iterator[Finding]:
    """Managed Lustre is sized from the tier's bandwidth, within the service's limits."""
    plan = ctx.require_plan()
    if plan.cloud is None:
        return
    provider = ctx.spec.provider
    assert isinstance(provider, AwsProvider | GcpProvider | AzureProvider)
    index = {t.name: i for i, t in enumerate(ctx.spec.storage)}
    tiers = {t.name: t for t in lustre_tiers(provider)}
    for fs in plan.cloud.managed_lustre:
        i = index[fs.name]
        if fs.required_mbps is None:
            yield managed_lustre_sizing.finding(
                ("storage", i),
                f"Managed tier `{fs.name}` has no read_bw/write_bw, so it is sized at the service's minimum "
                f"({fs.capacity_gib} GiB, {fs.throughput_mbps:.0f} MB/s).",
                'State the bandwidth the workload needs, e.g. `read_bw: "60 GB/s"`.',
            )
        limit = tiers.get(fs.tier)
        if limit is not None and fs.capacity_gib > limit.max_gib:
            yield managed_lustre_sizing.finding(
                ("storage", i),
                f"`{fs.name}` needs {fs.capacity_gib} GiB at tier {fs.tier}, above the service's {limit.max_gib} GiB.",
                "Split the data over several tiers or lower the bandwidth.",
                level=Level.ERROR,
            )
        yield managed_lustre_sizing.finding(
            ("storage", i),
            f"`{fs.name}`: {fs.service} {fs.tier} at {fs.per_unit_mbps_per_tib} MB/s/TiB, {fs.capacity_gib} GiB, "
            f"{fs.throughput_mbps:.0f} MB/s ({fs.sizing}).",
            level=Level.INFO,
        )


@rule("CLD013", "azure-placement-group-size", Level.ERROR, tags=("cloud",))
def azure_placement_group_size(ctx: RuleContext) -> Iterator[Finding]:
    """An Azure scale set with a single placement group (the InfiniBand domain) holds at most 100 VMs."""
    plan = ctx.require_plan()
    if plan.cloud is None or plan.cloud.provider != "azure":
        return
    for i, group in enumerate(ctx.spec.nodes):
        planned = next((g for g in plan.cloud.groups if g.group == group.group and g.scale_set), None)
        if planned is not None and len(planned.hosts) > AZURE_PLACEMENT_GROUP_MAX:
            yield azure_placement_group_size.finding(
                ("nodes", i, "count"),
                f"Group `{group.group}` has {len(planned.hosts)} nodes; one placement group (and so one InfiniBand "
                f"domain) holds at most {AZURE_PLACEMENT_GROUP_MAX}.",
                "Split it into groups of at most 100 nodes (each becomes its own scale set and IB domain).",
            )


@rule("CLD014", "efa-stack-versions", Level.ERROR, tags=("cloud",), phase=1, gates_plan=False)
def efa_stack_versions(ctx: RuleContext) -> Iterator[Finding]:
    """EFA GPU instances get the CUDA, NCCL and aws-ofi-nccl they need (aws-ofi-nccl EFA cheatsheet)."""
    versions = ctx.spec.versions
    for use in cloud_uses(ctx.spec):
        provider = use.provider
        if not isinstance(provider, AwsProvider):
            continue
        p5 = sorted({t.name for _, _, t in use.profiles if t.name.startswith("p5")})
        if p5:
            label = ", ".join(p5) + use.label
            if not at_least(versions.cuda, "12.0"):
                yield efa_stack_versions.finding(
                    ("versions", "cuda"), f"{label} needs CUDA >= 12.0; the spec has {versions.cuda}."
                )
            if not at_least(versions.nccl, "2.18.0"):
                yield efa_stack_versions.finding(
                    ("versions", "nccl"), f"{label} needs NCCL >= 2.18.0; the spec has {versions.nccl}."
                )
            elif not at_least(versions.nccl, "2.18.5"):
                yield efa_stack_versions.finding(
                    ("versions", "nccl"),
                    f"NCCL {versions.nccl} on {label}: NVLS is broken with EFA before 2.18.5 "
                    "(the plugin turns it off).",
                    'Use NCCL "2.18.5" or newer.',
                    level=Level.WARNING,
                )
            if not at_least(provider.aws_ofi_nccl, "1.7.2"):
                yield efa_stack_versions.finding(
                    use.where("aws_ofi_nccl"),
                    f"{label} needs aws-ofi-nccl >= 1.7.2; the spec has {provider.aws_ofi_nccl}.",
                )
            elif not at_least(provider.aws_ofi_nccl, "1.7.3"):
                yield efa_stack_versions.finding(
                    use.where("aws_ofi_nccl"),
                    f"aws-ofi-nccl {provider.aws_ofi_nccl}: AWS recommends at least 1.7.3 on {label}.",
                    level=Level.WARNING,
                )
        if version_tuple(provider.efa_installer) < (1, 29, 1) and at_least(versions.nccl, "2.19.0"):
            yield efa_stack_versions.finding(
                use.where("efa_installer"),
                f"EFA installer {provider.efa_installer}{use.label} with NCCL {versions.nccl}: jobs get "
                "FI_EFA_SET_CUDA_SYNC_MEMOPS=0 to avoid libfabric errors; EFA installer >= 1.29.1 needs no workaround.",
                level=Level.INFO,
            )


@rule("CLD015", "gpudirect-plugin", Level.WARNING, tags=("cloud",), phase=1, gates_plan=False)
def gpudirect_plugin(ctx: RuleContext) -> Iterator[Finding]:
    """The GPUDirect-TCPX(O) plugin release is known, and NCCL is the version Google qualified with it."""
    spec = ctx.spec
    for use in cloud_uses(spec):
        provider = use.provider
        fabrics = {t.fabric for _, _, t in use.profiles if t.fabric.startswith("gpudirect")}
        if not isinstance(provider, GcpProvider):
            continue
        for fabric in sorted(fabrics):
            version = (provider.gpudirect_plugin or DEFAULT_GPUDIRECT_PLUGIN[fabric]).removeprefix("v")
            release = gpudirect_release(fabric, version)
            if release is None:
                yield gpudirect_plugin.finding(
                    use.where("gpudirect_plugin"),
                    f"{fabric} plugin {version}{use.label} is not in clusterctl's catalog: its "
                    "receive-datapath-manager image is unknown.",
                    f"Use {DEFAULT_GPUDIRECT_PLUGIN[fabric]} or add the release to clusterctl.catalog.cloud_services.",
                    level=Level.ERROR,
                )
            elif version_tuple(spec.versions.nccl)[:3] != version_tuple(release.nccl)[:3]:
                yield gpudirect_plugin.finding(
                    ("versions", "nccl"),
                    f"Google qualified {fabric} plugin {version}{use.label} with NCCL {release.nccl}; the spec pins "
                    f"{spec.versions.nccl}.",
                    f'Set versions.nccl to "{release.nccl}" (the plugin installer ships it), or accept the difference.',
                )


@rule("CLD016", "gib-nccl", Level.ERROR, tags=("cloud",), phase=1, gates_plan=False)
def gib_nccl(ctx: RuleContext) -> Iterator[Finding]:
    """A3 Ultra: NCCL is the build the pinned nccl-gib release goes with (catalog NCCL_GIB_NCCL).

    Google's a3ultra blueprint (GoogleCloudPlatform/cluster-toolkit@1047080
    examples/machine-learning/a3-ultragpu-8g/a3ultra-slurm-blueprint.yaml, vars nccl_gib_version
    and libnccl_version) installs nccl-gib 1.1.0 next to libnccl2 2.27.5-1+cuda12.9, both pinned.
    """
    spec = ctx.spec
    for use in cloud_uses(spec):
        rdma = sorted(name for name, _, t in use.profiles if t.fabric == "gcp-rdma")
        provider = use.provider
        if rdma and isinstance(provider, GcpProvider):
            yield from _gib_nccl(spec, use, provider, rdma)


def _gib_nccl(spec: Spec, use: CloudUse, provider: GcpProvider, rdma: list[str]) -> Iterator[Finding]:
    version = provider.nccl_gib
    want = NCCL_GIB_NCCL.get(version)
    if want is None:
        yield gib_nccl.finding(
            use.where("nccl_gib"),
            f"nccl-gib {version} is not in clusterctl's catalog, so the NCCL it was built for is unknown and "
            "versions.nccl cannot be checked against it.",
            f'Use "{DEFAULT_NCCL_GIB}" (NCCL {NCCL_GIB_NCCL[DEFAULT_NCCL_GIB]}), or add the release to NCCL_GIB_NCCL '
            "in clusterctl.catalog.cloud_services.",
            level=Level.WARNING,
        )
    elif version_tuple(spec.versions.nccl)[:3] != version_tuple(want)[:3]:
        yield gib_nccl.finding(
            ("versions", "nccl"),
            f"nccl-gib {version} (the gIB plugin on {', '.join(rdma)}{use.label}) goes with NCCL {want}, as Google's "
            f"A3 Ultra blueprint pins them; the spec pins NCCL {spec.versions.nccl}, which the plugin was not "
            "built for.",
            f'Set versions.nccl to "{want}", or set {use.named("nccl_gib")} to the release built for NCCL '
            f"{spec.versions.nccl}.",
        )


@rule("CLD017", "gcp-rdma-stack", Level.ERROR, phase=1, tags=("cloud",))
def gcp_rdma_stack(ctx: RuleContext) -> Iterator[Finding]:
    """What the gcp stack needs to bring up A3 Ultra nodes, refused here rather than at `up`.

    The RoCE network takes the zone's network profile by its project-qualified name
    (``projects/<project>/global/networkProfiles/<zone>-vpc-roce``, GoogleCloudPlatform/
    cluster-toolkit@1047080 modules/network/gpu-rdma-vpc/variables.tf, network_profile), so the
    provider must name its project; the zone is CLD006's.
    """
    spec = ctx.spec
    providers: list[tuple[tuple[str | int, ...], GcpProvider, list[str]]] = []
    if isinstance(spec.provider, GcpProvider):
        providers.append((("provider",), spec.provider, [h for _, _, h in _fixed_groups(spec)]))
    for i, group in enumerate(spec.nodes):
        if group.burst is not None and isinstance(group.burst.provider, GcpProvider):
            providers.append((("nodes", i, "burst", "provider"), group.burst.provider, [group.hardware]))
    for path, provider, hardware in providers:
        rdma = sorted(
            {
                t.name
                for h in hardware
                if h in spec.hardware
                and (t := instance_type(spec.hardware[h].instance_type)) is not None
                and t.fabric == "gcp-rdma"
            }
        )
        if rdma and provider.project is None:
            yield gcp_rdma_stack.finding(
                (*path, "project"),
                f"{', '.join(rdma)} needs a RoCE network with the zone's `<zone>-vpc-roce` network profile, which "
                "Google names by project; without `project` the gcp stack cannot create it.",
                "Set `project:` to the project that holds the A3 Ultra capacity (reservation).",
            )
