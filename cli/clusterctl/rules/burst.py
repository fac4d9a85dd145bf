"""Rules for elastic (burst) node groups: partitions, hardware on the burst provider, timeouts.

Why these: Slurm powers burst nodes up for jobs in their partitions only; a node that does not
register within ResumeTimeout is marked DOWN and its job requeued, so the timeout must cover
the provider's boot plus clusterctl's configuration of a fresh node.
"""

from __future__ import annotations

from collections.abc import Iterator
from ipaddress import IPv4Network

from clusterctl.catalog.instances import instance_type
from clusterctl.plan.cloud import RESERVED_ADDRESSES, burst_node_subnet, is_cloud
from clusterctl.rules.engine import RuleContext, rule
from clusterctl.spec.findings import Finding, Level
from clusterctl.spec.models import LustreStorage, NodeGroup, Storage, WekaStorage
from clusterctl.spec.providers import CloudProvider

# Seconds from "resume" to a registered slurmd: machine boot + a first converge of a fresh node.
# Local: container start is seconds, the converge installs Slurm, munge and exporters (~2-4 min
# on 2 cores). Clouds: GPU instance boot (3-8 min, longer for capacity blocks) + a first converge.
BOOT_PLUS_CONFIGURE_S = {"local": 300, "aws": 900, "gcp": 900, "azure": 1200}
BURST_PROVIDERS = tuple(BOOT_PLUS_CONFIGURE_S)


@rule("BUR001", "burst-in-partition", Level.ERROR, phase=1, tags=("burst",))
def burst_in_partition(ctx: RuleContext) -> Iterator[Finding]:
    """A burst group is a compute group, has no spares, and is named in at least one partition."""
    named = {g for p in ctx.spec.slurm.partitions for g in p.groups}
    for i, group in enumerate(ctx.spec.nodes):
        if group.burst is None:
            continue
        if group.role != "compute":
            yield burst_in_partition.finding(
                ("nodes", i, "burst"), f"Burst group `{group.group}` has role {group.role}; only compute nodes burst."
            )
        if group.spares:
            yield burst_in_partition.finding(
                ("nodes", i, "spares"),
                f"Burst group `{group.group}` has spares; elastic nodes are created on demand, spares make no sense.",
                "Remove `spares`.",
            )
        if group.group not in named:
            yield burst_in_partition.finding(
                ("nodes", i, "burst"),
                f"Burst group `{group.group}` is in no partition, so Slurm would never power it up.",
                f"Add a partition such as `{{name: burst, groups: [{group.group}]}}`.",
            )


@rule("BUR002", "burst-provider-hardware", Level.ERROR, phase=1, tags=("burst",))
def burst_provider_hardware(ctx: RuleContext) -> Iterator[Finding]:
    """The burst group's hardware profile exists on its provider."""
    for i, group in enumerate(ctx.spec.nodes):
        if group.burst is None:
            continue
        kind = group.burst.provider.kind
        if kind not in BURST_PROVIDERS:
            yield burst_provider_hardware.finding(
                ("nodes", i, "burst", "provider", "kind"),
                f"Burst group `{group.group}` uses provider {kind}; bursting needs on-demand machines.",
                f"Use one of: {', '.join(BURST_PROVIDERS)}.",
            )
            continue
        if kind == "local":
            continue
        profile = ctx.spec.hardware.get(group.hardware)
        if profile is None:
            continue
        itype = instance_type(profile.instance_type)
        if itype is None or itype.provider != kind:
            yield burst_provider_hardware.finding(
                ("hardware", group.hardware, "instance_type"),
                f"Burst group `{group.group}` runs on {kind}, but hardware `{group.hardware}` has no {kind} "
                f"instance type (instance_type: {profile.instance_type!r}).",
                f"Set `instance_type` to a {kind} GPU type from clusterctl's catalog.",
            )
        elif profile.gpus and itype.gpu_model and itype.gpu_model != profile.gpus.model:
            yield burst_provider_hardware.finding(
                ("hardware", group.hardware, "gpus", "model"),
                f"{itype.name} has {itype.gpu_model} GPUs, the profile says {profile.gpus.model}.",
            )
        # The profile's NCCL settings, fabric and image follow the provider its nodes run on: one
        # profile cannot be both an on-prem server and a cloud instance type.
        others = [g.group for g in ctx.spec.nodes if g.hardware == group.hardware and g.burst is None]
        if others:
            yield burst_provider_hardware.finding(
                ("nodes", i, "hardware"),
                f"Burst group `{group.group}` ({kind}) shares hardware `{group.hardware}` with `{others[0]}`, which "
                f"runs on {ctx.spec.provider.kind}; each gets its own fabric, NCCL settings and image.",
                f"Give `{group.group}` a hardware profile of its own (a copy of `{group.hardware}`).",
            )


@rule("BUR003", "burst-resume-timeout", Level.ERROR, tags=("burst",), phase=1, gates_plan=False)
def burst_resume_timeout(ctx: RuleContext) -> Iterator[Finding]:
    """resume_timeout covers the provider's boot plus configuration of a fresh node."""
    for i, group in enumerate(ctx.spec.nodes):
        if group.burst is None or group.burst.provider.kind not in BOOT_PLUS_CONFIGURE_S:
            continue
        need = BOOT_PLUS_CONFIGURE_S[group.burst.provider.kind]
        got = group.burst.resume_timeout.seconds
        if got < need:
            yield burst_resume_timeout.finding(
                ("nodes", i, "burst", "resume_timeout"),
                f"resume_timeout {group.burst.resume_timeout} is shorter than a {group.burst.provider.kind} node "
                f"takes to boot and be configured (about {need // 60} min); Slurm would mark nodes DOWN and requeue "
                "their jobs.",
                f'Set resume_timeout to at least "{need // 60}m".',
            )


def _cloud_burst(ctx: RuleContext) -> Iterator[tuple[int, NodeGroup, CloudProvider]]:
    for i, group in enumerate(ctx.spec.nodes):
        if group.burst is not None and is_cloud(group.burst.provider):
            yield i, group, group.burst.provider


@rule("BUR004", "burst-own-network", Level.ERROR, phase=1, tags=("burst",))
def burst_own_network(ctx: RuleContext) -> Iterator[Finding]:
    """A cloud burst group has its own network, apart from the on-prem one and the other groups'.

    Why: burst nodes live in a cloud subnet routed to the management network (VPN, Direct Connect,
    Interconnect, ExpressRoute); an overlapping range makes the route ambiguous, and the provider
    reserves addresses of every subnet that no node may take.
    """
    onprem = ctx.spec.network.management_cidr
    provider = ctx.spec.provider
    if is_cloud(provider) and provider.cidr is not None and provider.cidr != onprem:
        yield burst_own_network.finding(
            ("provider", "cidr"),
            f"provider.cidr ({provider.cidr}) is for burst groups; the cluster's own nodes are on "
            f"network.management_cidr ({onprem}).",
            "Remove `cidr` here, or set it to the management network.",
        )
    seen: list[tuple[str, IPv4Network]] = []
    for i, group, burst_provider in _cloud_burst(ctx):
        name = group.group
        path = ("nodes", i, "burst", "provider", "cidr")
        cidr = burst_provider.cidr
        if cidr is None:
            yield burst_own_network.finding(
                ("nodes", i, "burst", "provider"),
                f"Burst group `{name}` ({burst_provider.kind}) has no network of its own; its nodes would take "
                f"addresses of the on-prem management network {onprem}, which a cloud subnet cannot hold.",
                "Set `cidr` to the range of the cloud subnet routed to the on-prem network (e.g. 10.60.0.0/24), "
                "disjoint from network.management_cidr.",
            )
            continue
        if cidr.overlaps(onprem):
            yield burst_own_network.finding(
                path,
                f"Burst group `{name}`'s network {cidr} overlaps the on-prem management network {onprem}; "
                "routes across the VPN would be ambiguous and addresses could clash.",
                f"Use a range outside {onprem} for the burst subnet.",
            )
        for other, other_cidr in seen:
            if cidr.overlaps(other_cidr):
                yield burst_own_network.finding(
                    path,
                    f"Burst group `{name}`'s network {cidr} overlaps burst group `{other}`'s {other_cidr}.",
                    "Give each burst group a range of its own.",
                )
        seen.append((name, cidr))
        subnet = burst_node_subnet(burst_provider)
        first, last = RESERVED_ADDRESSES[burst_provider.kind]
        count = group.count
        if subnet is not None and count > subnet.num_addresses - first - last:
            where = "the subnet" if subnet == cidr else f"its node subnet {subnet} (the lower half the stack makes)"
            yield burst_own_network.finding(
                path,
                f"Burst group `{name}` has {count} nodes; {where} leaves "
                f"{max(subnet.num_addresses - first - last, 0)} addresses after the {first + last} "
                f"{burst_provider.kind} reserves.",
                "Use a larger range.",
            )


# Lustre over these LNet networks needs the storage fabric's RDMA NICs, which no cloud instance has.
_RDMA_LNETS = ("o2ib", "kfi", "gni", "ptl")


def _unreachable(tier: Storage) -> str | None:
    """Why a cloud burst node cannot mount ``tier``; None when it can (over the routed network)."""
    if isinstance(tier, WekaStorage):
        return "WEKA mounts name the storage NICs of on-prem servers"
    if isinstance(tier, LustreStorage):
        if tier.managed:
            return "it is the cluster cloud's managed Lustre, inside that cloud's network"
        rdma = [nid for nid in tier.mgs if nid.rsplit("@", 1)[-1].startswith(_RDMA_LNETS)]
        if rdma:
            return f"its MGS is reached over RDMA ({rdma[0]}), which does not cross the routed link"
    return None


@rule("BUR005", "burst-mounts", Level.ERROR, phase=1, tags=("burst",))
def burst_mounts(ctx: RuleContext) -> Iterator[Finding]:
    """What burst nodes mount is in the spec, and reachable from where they run."""
    tiers = {t.name: t for t in ctx.spec.storage}
    for i, group in enumerate(ctx.spec.nodes):
        if group.burst is None:
            continue
        cloud = is_cloud(group.burst.provider)
        if group.burst.mounts is None:
            if tiers:
                yield burst_mounts.finding(
                    ("nodes", i, "burst"),
                    f"Burst group `{group.group}` mounts none of the storage tiers "
                    f"({', '.join(f'{t.name} on {t.mount}' for t in tiers.values())}): jobs there see no such paths.",
                    "Say which with `mounts: [<tier>, ...]` (tiers it can reach), or `mounts: []` for none.",
                    level=Level.WARNING,
                )
            continue
        for j, name in enumerate(group.burst.mounts):
            tier = tiers.get(name)
            path = ("nodes", i, "burst", "mounts", j)
            if tier is None:
                yield burst_mounts.finding(
                    path,
                    f"Burst group `{group.group}` mounts `{name}`, which is not a storage tier.",
                    f"Use one of: {', '.join(tiers) or 'none (the spec has no storage)'}.",
                )
                continue
            why = _unreachable(tier) if cloud else None
            if why:
                yield burst_mounts.finding(
                    path,
                    f"Burst group `{group.group}` on {group.burst.provider.kind} cannot mount `{name}` "
                    f"({tier.mount}): {why}.",
                    "Remove it from `mounts`; stage data through a tier the group reaches (NFS, Lustre over TCP).",
                )
