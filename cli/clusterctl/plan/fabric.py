"""The compute fabric as laid out: leaves, scalable units, switch counts and Slurm's topology.

Computed from the nodes' seats (``plan.nodes``) before any node is built: the layout gives each
cabled node its links (scalable unit, leaf per rail, topology switch), which
:func:`clusterctl.plan.nodes.make_nodes` puts into the node. Rail-optimized fabrics put rail i
of every node of a scalable unit on one leaf; other layouts fill each rack's leaves in port order.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass

from clusterctl.hostlist import compress
from clusterctl.plan.fattree import size_fat_tree
from clusterctl.plan.models import FabricPlan, LeafPlan, ScalableUnit, TopologyBlock, TopologySwitch
from clusterctl.plan.nodes import NodeLinks, Seat
from clusterctl.plan.rdma import ipoib_spec, opensm_placements
from clusterctl.spec.models import Spec


@dataclass(frozen=True)
class FabricLayout:
    """The fabric plan, Slurm's topology lines of the fabric and every cabled node's links."""

    plan: FabricPlan
    switches: list[TopologySwitch]
    blocks: list[TopologyBlock]
    links: dict[str, NodeLinks]


@dataclass(frozen=True)
class _Cabling:
    """What one layout (rail-optimized or per rack) cables."""

    leaves: list[LeafPlan]
    sus: list[ScalableUnit]
    switches: list[TopologySwitch]
    blocks: list[TopologyBlock]
    links: dict[str, NodeLinks]
    children_per_parent: int
    su_size: int | None = None


def _parents(children: list[str], per_parent: int, prefix: str) -> list[TopologySwitch]:
    """Group switches under parents, ``per_parent`` children each, then a root above them."""
    if len(children) <= 1:
        return []
    if len(children) <= per_parent:
        return [TopologySwitch(name=f"{prefix}-root", switches=compress(children))]
    groups = [children[i : i + per_parent] for i in range(0, len(children), per_parent)]
    pods = [TopologySwitch(name=f"pod{i + 1}", switches=compress(g)) for i, g in enumerate(groups)]
    return [*pods, TopologySwitch(name=f"{prefix}-root", switches=compress([p.name for p in pods]))]


def _rail_optimized(members: list[Seat], down: int, radix: int) -> _Cabling:
    """Scalable units of ``down`` nodes; rail i of every node of a unit on the unit's leaf i."""
    leaves: list[LeafPlan] = []
    sus: list[ScalableUnit] = []
    switches: list[TopologySwitch] = []
    blocks: list[TopologyBlock] = []
    links: dict[str, NodeLinks] = {}
    rails = max((len(s.hcas) for s in members), default=0)
    for su_index in range(math.ceil(len(members) / down) if members else 0):
        su_seats = members[su_index * down : (su_index + 1) * down]
        su_name = f"su{su_index + 1}"
        su_leaves = [f"{su_name}-leaf{r + 1}" for r in range(rails)]
        for rail, leaf_name in enumerate(su_leaves):
            ports = [(s.hostname, s.hcas[rail]) for s in su_seats if rail < len(s.hcas)]
            leaves.append(LeafPlan(name=leaf_name, su=su_index + 1, rail=rail, ports=ports))
        for seat in su_seats:
            links[seat.hostname] = NodeLinks(
                su=su_index + 1, leaves=tuple(su_leaves[: len(seat.hcas)]), topology_switch=su_name
            )
        hosts = compress(s.hostname for s in su_seats)
        sus.append(ScalableUnit(index=su_index + 1, name=su_name, hosts=hosts, leaves=su_leaves))
        switches.append(TopologySwitch(name=su_name, nodes=hosts))
        blocks.append(TopologyBlock(name=f"block-{su_name}", nodes=hosts))
    return _Cabling(
        leaves=leaves,
        sus=sus,
        switches=switches,
        blocks=blocks,
        links=links,
        children_per_parent=max(1, (radix // 2) // max(rails, 1)),
        su_size=down,
    )


def _per_rack(members: list[Seat], down: int, radix: int) -> _Cabling:
    """Each rack's leaves, filled port by port with its nodes' HCAs in node order."""
    racks: OrderedDict[str, list[Seat]] = OrderedDict()
    for seat in members:
        racks.setdefault(seat.rack, []).append(seat)
    leaves: list[LeafPlan] = []
    switches: list[TopologySwitch] = []
    blocks: list[TopologyBlock] = []
    links: dict[str, NodeLinks] = {}
    for rack, rack_seats in racks.items():
        count = max(1, math.ceil(sum(len(s.hcas) for s in rack_seats) / down))
        names = [f"leaf-{rack}"] if count == 1 else [f"leaf-{rack}-{i + 1}" for i in range(count)]
        switch = names[0] if count == 1 else f"leafgroup-{rack}"
        ports: list[list[tuple[str, str]]] = [[] for _ in names]
        port = 0
        for seat in rack_seats:
            seat_leaves: list[str] = []
            for hca in seat.hcas:
                ports[port // down].append((seat.hostname, hca))
                seat_leaves.append(names[port // down])
                port += 1
            links[seat.hostname] = NodeLinks(leaves=tuple(seat_leaves), topology_switch=switch)
        leaves.extend(LeafPlan(name=name, rack=rack, ports=p) for name, p in zip(names, ports, strict=True))
        hosts = compress(s.hostname for s in rack_seats)
        switches.append(TopologySwitch(name=switch, nodes=hosts))
        blocks.append(TopologyBlock(name=f"block-{rack}", nodes=hosts))
    return _Cabling(
        leaves=leaves, sus=[], switches=switches, blocks=blocks, links=links, children_per_parent=max(1, radix // 2)
    )


def resolve_fabric(spec: Spec, seats: list[Seat]) -> FabricLayout:
    """Lay out the compute fabric for the nodes cabled to it (compute nodes that are not burst nodes)."""
    fabric = spec.fabric
    radix = fabric.switch_ports
    down = radix - radix // (fabric.oversubscription + 1)
    members = [s for s in seats if s.in_fabric]
    layout = _rail_optimized if fabric.layout == "rail-optimized" else _per_rack
    cabling = layout(members, down, radix)
    node_links = sum(len(s.hcas) for s in members)
    tree = size_fat_tree(radix, fabric.oversubscription, len(cabling.leaves), node_links)
    switches = [*cabling.switches, *_parents([s.name for s in cabling.switches], cabling.children_per_parent, "fabric")]
    ipoib = ipoib_spec(spec)
    plan = FabricPlan(
        kind=fabric.kind,
        layout=fabric.layout,
        speed_gbps=fabric.speed_gbps,
        radix=radix,
        tiers=tree.tiers,
        su_size=cabling.su_size,
        down_ports_per_leaf=tree.down_ports,
        uplinks_per_leaf=tree.up_ports,
        leaf_switches=tree.leaves,
        spine_switches=tree.spines,
        core_switches=tree.cores,
        node_links=tree.node_links,
        leaf_spine_links=tree.leaf_spine_links,
        spine_core_links=tree.spine_core_links,
        oversubscription=round(tree.oversubscription, 3),
        max_endpoints_2tier=tree.max_endpoints_2tier,
        max_endpoints_3tier=tree.max_endpoints_3tier,
        endpoints=node_links,
        subnet_manager=fabric.subnet_manager,
        opensm=opensm_placements(spec, seats),
        ipoib_mode=ipoib.mode if ipoib else None,
        ipoib_mtu=ipoib.mtu if ipoib else None,
        sharp=fabric.sharp,
        sus=cabling.sus,
        leaves=cabling.leaves,
    )
    return FabricLayout(plan=plan, switches=switches, blocks=cabling.blocks, links=cabling.links)
