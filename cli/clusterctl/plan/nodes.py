"""Nodes of the plan: where each one sits (address, rack, machine) and what it is.

Built in two steps so that no node is changed once made: :func:`place_nodes` gives each node
its :class:`Seat` (what the spec and machines.csv say about it); the fabric layout and the
RDMA settings are computed from the seats; :func:`make_nodes` then builds every
:class:`~clusterctl.plan.models.PlanNode` once, with its links and IPoIB addresses.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from ipaddress import IPv4Address
from pathlib import Path

from clusterctl.catalog.gpus import ASSUMED_CPU_SERVER_W, ASSUMED_GPU_SERVER_OVERHEAD_W, GPU_MODELS
from clusterctl.hostlist import compress
from clusterctl.plan.cloud import burst_addresses, is_cloud
from clusterctl.plan.models import NodeGroupPlan, PlanNode
from clusterctl.plan.nccl_cloud import profile_fabric
from clusterctl.plan.service import Swap, place
from clusterctl.spec.machines import Machine, MachinesError, read_machines
from clusterctl.spec.models import HardwareProfile, NodeGroup, Spec

# Addresses .1-.9 of the management network stay free for gateways, DNS and storage heads.
FIRST_HOST_OFFSET = 10
# Default rack density when neither machines.csv nor fabric.nodes_per_rack says: four
# 8-GPU servers (~10 kW each) is the common air-cooled DGX/HGX H100 rack.
DEFAULT_GPU_NODES_PER_RACK = 4
DEFAULT_CPU_NODES_PER_RACK = 16


@dataclass(frozen=True)
class Seat:
    """A node before the fabric is laid out: its name, address, rack and what it is made of."""

    hostname: str
    index: int
    address: str
    rack: str
    group: NodeGroup
    profile: HardwareProfile
    machine: Machine | None
    emulated: bool
    power_w: int

    @property
    def burst(self) -> bool:
        """The node belongs to an elastic (burst) group."""
        return self.group.burst is not None

    @property
    def rails(self) -> list[str]:
        """The rail HCAs of its hardware profile, in rail order."""
        return list(self.profile.rails)

    @property
    def hcas(self) -> list[str]:
        """What the node cables to the fabric: its rails, or one port when it names none."""
        return self.rails or ["port1"]

    @property
    def in_fabric(self) -> bool:
        """Compute nodes that are not burst nodes are cabled to the compute fabric."""
        return self.group.role == "compute" and not self.burst


@dataclass(frozen=True)
class NodeLinks:
    """Where the fabric layout puts a node: its scalable unit, leaf per rail and topology switch."""

    su: int | None = None
    leaves: tuple[str, ...] = ()
    topology_switch: str | None = None


def burst_switch(group: str) -> str:
    """The topology switch (and block) a burst group's nodes hang off."""
    return f"burst-{group}"


def _load_machines(spec: Spec, base_dir: Path) -> dict[str, Machine]:
    if spec.provider.kind != "baremetal":
        return {}
    try:
        return {m.hostname: m for m in read_machines(base_dir, spec.provider.machines)}
    except MachinesError:
        return {}


def _node_power_w(profile: HardwareProfile) -> tuple[int, str | None]:
    if profile.power_w:
        return profile.power_w, None
    if profile.gpus is None:
        return ASSUMED_CPU_SERVER_W, f"CPU servers without power_w: {ASSUMED_CPU_SERVER_W} W each (assumed)"
    model = GPU_MODELS[profile.gpus.model]
    if model.system_kw_8gpu is not None:
        return int(model.system_kw_8gpu * 1000 * profile.gpus.count / 8), None
    watts = model.tdp_w * profile.gpus.count + ASSUMED_GPU_SERVER_OVERHEAD_W
    return watts, f"{model.name} servers: GPU TDP + {ASSUMED_GPU_SERVER_OVERHEAD_W} W for the rest (assumed)"


def place_nodes(spec: Spec, base_dir: Path) -> tuple[list[Seat], list[str]]:
    """Every node's seat, in spec order, and the sizing assumptions made on the way.

    Addresses follow one another from the management network's ``FIRST_HOST_OFFSET``; racks
    come from machines.csv, else from ``fabric.nodes_per_rack`` (GPU nodes first, CPU nodes in
    the racks after them), else from the default densities (an assumption).
    """
    machines = _load_machines(spec, base_dir)
    network = spec.network.management_cidr
    seats: list[Seat] = []
    assumptions: list[str] = []
    offset = FIRST_HOST_OFFSET
    racked_gpu = racked_cpu = 0
    per_rack = spec.fabric.nodes_per_rack
    for group in spec.nodes:
        profile = spec.hardware[group.hardware]
        power, assumption = _node_power_w(profile)
        if assumption and assumption not in assumptions:
            assumptions.append(assumption)
        provider_kind = group.burst.provider.kind if group.burst else spec.provider.kind
        # A cloud burst group has its own network (burst.provider.cidr): its addresses come from
        # there and take none of the management network's.
        own = None
        if group.burst is not None and is_cloud(group.burst.provider):
            own = burst_addresses(group.burst.provider, group.count)
        for index in range(1, group.count + 1):
            hostname = group.hostname.format(group=group.group, index=index)
            machine = machines.get(hostname)
            if machine is not None:
                rack = machine.rack
            elif group.burst is not None:
                rack = f"burst-{group.group}"
            elif group.role != "compute":
                rack = "r00"
            elif profile.gpus:
                rack = f"r{racked_gpu // (per_rack or DEFAULT_GPU_NODES_PER_RACK) + 1:02d}"
                racked_gpu += 1
            else:
                base = math.ceil(racked_gpu / (per_rack or DEFAULT_GPU_NODES_PER_RACK))
                rack = f"r{base + racked_cpu // (per_rack or DEFAULT_CPU_NODES_PER_RACK) + 1:02d}"
                racked_cpu += 1
            seats.append(
                Seat(
                    hostname=hostname,
                    index=index,
                    address=own[index - 1] if own else str(IPv4Address(int(network.network_address) + offset)),
                    rack=rack,
                    group=group,
                    profile=profile,
                    machine=machine,
                    emulated=bool(profile.gpus) and provider_kind == "local",
                    power_w=power,
                )
            )
            if not own:
                offset += 1
    if per_rack is None and not machines and any(s.in_fabric for s in seats):
        assumptions.append(
            f"racks: {DEFAULT_GPU_NODES_PER_RACK} GPU or {DEFAULT_CPU_NODES_PER_RACK} CPU nodes per rack "
            "(set fabric.nodes_per_rack or machines.csv racks)"
        )
    return seats, assumptions


def _links(seat: Seat, fabric_links: Mapping[str, NodeLinks]) -> NodeLinks:
    """A node's links: the fabric's, else a burst compute group's own switch, else none."""
    if seat.hostname in fabric_links:
        return fabric_links[seat.hostname]
    if seat.burst and seat.group.role == "compute":
        return NodeLinks(topology_switch=burst_switch(seat.group.group))
    return NodeLinks()


def make_nodes(
    spec: Spec,
    seats: list[Seat],
    fabric_links: Mapping[str, NodeLinks],
    ipoib: Mapping[str, list[str]],
    swaps: Sequence[Swap] = (),
) -> list[PlanNode]:
    """The plan's nodes, each built once from its seat, its links, its IPoIB addresses and the spares' swaps."""
    placed = place({s.hostname: (s.group.hardware, s.index > s.group.count - s.group.spares) for s in seats}, swaps)
    nodes: list[PlanNode] = []
    for seat in seats:
        profile, group = seat.profile, seat.group
        placement = placed[seat.hostname]
        gpu = GPU_MODELS[profile.gpus.model] if profile.gpus else None
        links = _links(seat, fabric_links)
        nodes.append(
            PlanNode(
                hostname=seat.hostname,
                fqdn=f"{seat.hostname}.{spec.network.domain}",
                group=group.group,
                role=group.role,
                hardware=group.hardware,
                index=seat.index,
                address=seat.address,
                rack=seat.rack,
                spare=placement.role == "spare",
                replaces=placement.replaces,
                replaced_by=placement.replaced_by,
                burst=seat.burst,
                emulated=seat.emulated,
                gpus=profile.gpus.count if profile.gpus else 0,
                gpu_model=profile.gpus.model if profile.gpus else None,
                gres_type=gpu.gres_type if gpu else None,
                rails=seat.rails,
                storage_nics=list(profile.storage_nics),
                storage_netdevs=list(profile.storage_netdevs),
                ipoib=list(ipoib.get(seat.hostname, [])),
                su=links.su,
                leaves=list(links.leaves),
                topology_switch=links.topology_switch,
                power_w=seat.power_w,
                bmc=seat.machine.bmc if seat.machine else None,
                mac=seat.machine.mac if seat.machine else None,
            )
        )
    return nodes


def node_groups(spec: Spec, nodes: list[PlanNode]) -> list[NodeGroupPlan]:
    """Each node group with the hostlists of its nodes and of its non-spare nodes."""
    groups = []
    for group in spec.nodes:
        members = [n for n in nodes if n.group == group.group]
        groups.append(
            NodeGroupPlan(
                name=group.group,
                role=group.role,
                hardware=group.hardware,
                count=group.count,
                spares=group.spares,
                hosts=compress(n.hostname for n in members),
                active_hosts=compress(n.hostname for n in members if n.in_service),
                burst=group.burst is not None,
                provider=group.burst.provider.kind if group.burst else spec.provider.kind,
                fabric=profile_fabric(spec, group.hardware) if group.role == "compute" else None,
            )
        )
    return groups
