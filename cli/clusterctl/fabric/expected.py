"""The cabling a plan expects: which host HCAs share a leaf, and how many uplinks a leaf has.

Read from `clusterctl.plan.Plan` only, never from a discovered fabric, so the
comparison in `clusterctl.fabric.compare` checks reality against the design and not
against itself. Switch names and GUIDs are not part of the design: a planned leaf is
a set of host HCAs, matched to a real switch by where those HCAs turn up.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from clusterctl.fabric.model import SPEED_TABLE
from clusterctl.plan.models import Plan

# The plan names a node's only fabric port "port1" when its hardware lists no rails
# (plan/nodes.py `Seat.hcas`); any one HCA of that host then satisfies it.
PLACEHOLDER_HCA = "port1"


@dataclass(frozen=True)
class ExpectedHca:
    """One host HCA the plan cables to the compute fabric.

    Attributes:
        host: The node's host name.
        hca: The HCA name as its node description gives it (``mlx5_3``); ``None``
            when the node declares no rails, so any one HCA of the host will do.
        leaf: Name of the planned leaf (``su1-leaf2``, ``leaf-r01``).
        group: The scheduling group whose leaves this HCA may use: the scalable unit
            for rail-optimized fabrics (``su1``), the rack for rack-leaf (``r01``).
        rail: 0-based rail index (rail-optimized), else ``None``.
    """

    host: str
    hca: str | None
    leaf: str
    group: str
    rail: int | None = None

    @property
    def label(self) -> str:
        """``host hca`` as in a node description; the host alone for a placeholder."""
        return f"{self.host} {self.hca}" if self.hca else self.host


@dataclass(frozen=True)
class ExpectedLeaf:
    """A planned leaf switch.

    Attributes:
        name: The planned name (``su1-leaf2``); real switches need not carry it.
        group: The scalable unit or rack it serves.
        rail: 0-based rail (rail-optimized), else ``None``.
        hcas: ``(host, hca)`` cabled to it, in planned port order.
        topology_switch: The plan's ``topology.conf`` line for its hosts (``su1``,
            ``leaf-r01``, ``leafgroup-r01``).
    """

    name: str
    group: str
    rail: int | None
    hcas: tuple[tuple[str, str | None], ...]
    topology_switch: str | None = None


@dataclass(frozen=True)
class ExpectedFabric:
    """The compute fabric as designed.

    Attributes:
        layout: ``rail-optimized`` or ``rack-leaf``.
        kind: ``infiniband`` or ``ethernet``.
        speed_gbps: Nominal rate of every link (400 for 4x NDR).
        uplinks_per_leaf: Spine uplinks each leaf should have (0 for a one-switch fabric).
        down_ports_per_leaf: Host ports a leaf may have.
        oversubscription: The designed down:up ratio at the leaf (1.0 is non-blocking).
        leaves: The planned leaves, in plan order.
        hcas: Every planned host HCA, in plan order.
        other_hosts: Plan nodes that are not cabled to the compute fabric by design
            (controllers, login nodes, cloud burst nodes).
    """

    layout: str
    kind: str
    speed_gbps: int
    uplinks_per_leaf: int
    down_ports_per_leaf: int
    oversubscription: float
    leaves: tuple[ExpectedLeaf, ...]
    hcas: tuple[ExpectedHca, ...]
    other_hosts: frozenset[str] = field(default_factory=frozenset)

    @property
    def group_kind(self) -> str:
        """What a group is, for messages: ``scalable unit`` or ``rack``."""
        return "scalable unit" if self.layout == "rail-optimized" else "rack"

    @cached_property
    def hosts(self) -> tuple[str, ...]:
        """Host names with planned fabric HCAs, in plan order."""
        return tuple(dict.fromkeys(h.host for h in self.hcas))

    @cached_property
    def hcas_of(self) -> Mapping[str, tuple[ExpectedHca, ...]]:
        """Planned HCAs by host, in rail order."""
        out: dict[str, list[ExpectedHca]] = {}
        for hca in self.hcas:
            out.setdefault(hca.host, []).append(hca)
        return {host: tuple(hcas) for host, hcas in out.items()}

    @cached_property
    def leaf_by_name(self) -> Mapping[str, ExpectedLeaf]:
        """Planned leaves by name."""
        return {leaf.name: leaf for leaf in self.leaves}

    @cached_property
    def groups(self) -> Mapping[str, tuple[str, ...]]:
        """Planned leaf names by group (scalable unit or rack), in plan order."""
        out: dict[str, list[str]] = {}
        for leaf in self.leaves:
            out.setdefault(leaf.group, []).append(leaf.name)
        return {group: tuple(names) for group, names in out.items()}

    @property
    def rate_label(self) -> str:
        """The designed link rate as ``ibnetdiscover`` prints it (``4xNDR``), or ``400 Gb/s``."""
        for speed in SPEED_TABLE:
            if abs(4 * speed.nominal_lane_gbps - self.speed_gbps) < 1e-9:
                return f"4x{speed.name} ({self.speed_gbps} Gb/s)"
        return f"{self.speed_gbps} Gb/s"


def expected_fabric(plan: Plan) -> ExpectedFabric:
    """Read the designed cabling from a plan.

    Args:
        plan: A resolved plan (`clusterctl.pipeline.load_and_validate(...).plan`).

    Returns:
        The planned leaves and host HCAs. For ``rail-optimized`` a leaf serves one rail
        of one scalable unit; for ``rack-leaf`` the leaves of a rack serve its nodes.
    """
    fabric = plan.fabric
    nodes = {n.hostname: n for n in plan.nodes}
    leaves: list[ExpectedLeaf] = []
    hcas: list[ExpectedHca] = []
    for leaf in fabric.leaves:
        group = f"su{leaf.su}" if leaf.su is not None else (leaf.rack or leaf.name)
        # The SU's own name (plan.fabric.sus) when there is one, so messages say what plan says.
        if leaf.su is not None:
            group = next((su.name for su in fabric.sus if su.index == leaf.su), group)
        ports: list[tuple[str, str | None]] = []
        for host, hca in leaf.ports:
            node = nodes.get(host)
            name: str | None = None if node is not None and not node.rails and hca == PLACEHOLDER_HCA else hca
            ports.append((host, name))
            hcas.append(ExpectedHca(host, name, leaf.name, group, leaf.rail))
        first = nodes.get(leaf.ports[0][0]) if leaf.ports else None
        leaves.append(ExpectedLeaf(leaf.name, group, leaf.rail, tuple(ports), first.topology_switch if first else None))
    cabled = {h.host for h in hcas}
    # A one-leaf fabric has no spines, so its leaf has no uplinks whatever the radix allows.
    uplinks = fabric.uplinks_per_leaf if fabric.spine_switches else 0
    return ExpectedFabric(
        layout=fabric.layout,
        kind=fabric.kind,
        speed_gbps=fabric.speed_gbps,
        uplinks_per_leaf=uplinks,
        down_ports_per_leaf=fabric.down_ports_per_leaf,
        oversubscription=fabric.oversubscription,
        leaves=tuple(leaves),
        hcas=tuple(hcas),
        other_hosts=frozenset(n.hostname for n in plan.nodes if n.hostname not in cabled),
    )
