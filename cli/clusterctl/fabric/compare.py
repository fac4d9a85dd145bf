"""Compare a discovered fabric with the plan's cabling, structurally.

Switch names and GUIDs are never known in advance, so nothing is matched by name:
host HCAs are found by node description (``<host> <hca>`` by default), each planned
leaf is matched to the real switch that carries most of its HCAs (one switch per
planned leaf), and every HCA on another switch is a finding. Uplinks are counted per
matched leaf, link rates are compared with ``fabric.speed_gbps``.

A rail the spec names by PCI address, or a description that names no device
(``gpu001 HCA-1``) or another device than the spec (rdma-core's ``ibp24s0`` for
``mlx5_0``), is matched through the host's rail map (`clusterctl.fabric.host_hcas`: the
node's rails file and its devices' GUIDs) where one is given; what still matches no rail
is reported as unmapped, not as miscabled.

Each difference is a `clusterctl.spec.findings.Finding` (`clusterctl.fabric.cabling.cable_finding`):
its rule is the kind below, its node the host, its cable the ports concerned, its data the
expected and found values and every end of the cable. The work is split by concern:
`clusterctl.fabric.cabling` (the state and codes), `clusterctl.fabric.placement` (host HCAs on
their leaves) and `clusterctl.fabric.uplinks` (uplinks, switch ports, link rates and states).

Codes:
    FAB-C001 error: miscabled rail: a rail HCA is not on the leaf of that rail of its
        scalable unit (rail-optimized).
    FAB-C002 error: node on two leaves: a node's HCA is off its rack's leaves (rack-leaf).
    FAB-C003 error: missing node: a planned host, or one of its HCAs, is not on the fabric.
    FAB-C004 warning: unknown host: a host HCA that the plan does not cable to this fabric.
    FAB-C005 error: missing uplinks: a leaf has fewer spine uplinks than designed.
    FAB-C006 warning: extra uplinks: a leaf has more spine uplinks than designed.
    FAB-C007 error: degraded link: width or speed below ``fabric.speed_gbps``.
    FAB-C008 error: down port: a planned port that is not passing traffic.
    FAB-C009 error: unmapped HCA: a planned host's HCA that cannot be matched to one of its
        rails (rails by PCI address, or an ``HCA-<n>`` description, and no rail map), so
        the host's cabling is not checked.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from clusterctl.fabric.cabling import Cabling, HostPattern, HostResolver, Matcher, ca_guids, index_hosts
from clusterctl.fabric.expected import ExpectedFabric
from clusterctl.fabric.host_hcas import HostHcas
from clusterctl.fabric.model import Fabric
from clusterctl.fabric.placement import check_missing, check_placement, match_leaves, place_hcas
from clusterctl.fabric.uplinks import LeafReport, check_links, check_uplinks
from clusterctl.spec.findings import Finding, Level


@dataclass(frozen=True)
class CablingReport:
    """The outcome of `compare_fabric`.

    Attributes:
        findings: Every finding, errors first, then by code and location.
        leaves: Every discovered leaf (a switch with host CAs), by name.
        leaf_match: Planned leaf name -> GUID of the switch it was matched to.
        hosts_expected: Planned hosts on the fabric.
        hosts_found: Planned hosts with at least one HCA on it.
        hcas_expected: Planned host HCAs.
        hcas_found: Planned host HCAs cabled to a switch.
        leaves_expected: Planned leaves.
        hcas_unmapped: Host HCAs of planned hosts that could not be matched to a rail.
    """

    findings: tuple[Finding, ...]
    leaves: tuple[LeafReport, ...]
    leaf_match: dict[str, str] = field(default_factory=dict)
    hosts_expected: int = 0
    hosts_found: int = 0
    hcas_expected: int = 0
    hcas_found: int = 0
    leaves_expected: int = 0
    hcas_unmapped: int = 0

    def errors(self) -> list[Finding]:
        """The error-level findings."""
        return [f for f in self.findings if f.level is Level.ERROR]

    def warnings(self) -> list[Finding]:
        """The warning-level findings."""
        return [f for f in self.findings if f.level is Level.WARNING]

    def matches(self, strict: bool = False) -> bool:
        """Whether the fabric is as planned: no errors (nor warnings when ``strict``)."""
        return not self.errors() and not (strict and self.warnings())

    def summary(self) -> dict[str, int]:
        """Counts for a report header."""
        return {
            "errors": len(self.errors()),
            "warnings": len(self.warnings()),
            "hosts_expected": self.hosts_expected,
            "hosts_found": self.hosts_found,
            "hcas_expected": self.hcas_expected,
            "hcas_found": self.hcas_found,
            "leaves_expected": self.leaves_expected,
            "leaves_found": len(self.leaves),
            "hcas_unmapped": self.hcas_unmapped,
        }


# --- the comparison ----------------------------------------------------------------------


def compare_fabric(
    fabric: Fabric,
    expected: ExpectedFabric,
    *,
    host_pattern: HostPattern = None,
    host_hcas: Mapping[str, HostHcas] | None = None,
) -> CablingReport:
    """Compare a discovered fabric with the planned cabling.

    Args:
        fabric: The parsed ``ibnetdiscover`` or ``iblinkinfo`` output.
        expected: The plan's cabling (`clusterctl.fabric.expected.expected_fabric`).
        host_pattern: How to read ``(host, hca)`` from CA node descriptions; see
            `clusterctl.fabric.model.split_description`. Default ``<host> <hca>``.
        host_hcas: Per planned host, how its HCAs map to its rails (device names and
            GUIDs from its rails file); needed where the spec names rails by PCI address
            or descriptions do not name the spec's devices.

    Returns:
        The findings and a per-leaf report. The fabric matches when there are no
        error-level findings.

    Why: the check is structural so that it runs before anyone has recorded switch
    GUIDs or set switch names: a rail is right when its HCAs share one switch that
    carries no other rail, whatever that switch is called.
    """
    c = Cabling(fabric, expected, host_pattern, host_hcas or {})
    place_hcas(c)
    match_leaves(c)
    check_placement(c)
    check_missing(c)
    leaves = check_uplinks(c)
    check_links(c)
    return CablingReport(
        findings=tuple(sorted(c.findings, key=_order)),
        leaves=leaves,
        leaf_match=dict(c.match),
        hosts_expected=len(expected.hosts),
        hosts_found=len({h.host for h in c.placed}),
        hcas_expected=len(expected.hcas),
        hcas_found=len(c.placed),
        leaves_expected=len(expected.leaves),
        hcas_unmapped=sum(len(atts) for atts in c.unmapped.values()),
    )


def _order(finding: Finding) -> tuple[int, str, str, str, str, int]:
    """Errors first, then by code and the cable's host, HCA, switch and port."""
    d = finding.data
    return (-finding.level, finding.code, d["host"] or "", d["hca"] or "", d["switch"] or "", d["port"] or 0)


def leaf_groups(
    fabric: Fabric,
    expected: ExpectedFabric,
    *,
    host_pattern: HostPattern = None,
    host_hcas: Mapping[str, HostHcas] | None = None,
) -> dict[str, set[str]]:
    """Group discovered leaves as the plan groups its leaves for scheduling.

    Each discovered leaf goes to the plan's ``topology.conf`` line (``su1`` for a
    scalable unit, ``leafgroup-r01`` for a rack with several leaves) that holds most
    of the planned HCAs cabled to it. Only lines the plan gives several leaves are
    returned, since a line of one leaf needs no grouping.

    Returns:
        ``{line name: {leaf switch GUID, ...}}``, for `derive_topology`'s ``group_leaves``.
    """
    resolve = HostResolver(expected.hosts)
    matcher = Matcher(expected, host_hcas or {})
    leaf_of = {leaf.name: leaf for leaf in expected.leaves}
    votes: dict[str, Counter[str]] = defaultdict(Counter)
    for att in index_hosts(fabric, host_pattern).attached:
        host = resolve(att.host)
        want = matcher.want(host, att.hca, ca_guids(fabric, att.ca_guid, att.ca_port)) if host else None
        if want is not None:
            line = leaf_of[want.leaf].topology_switch or want.group
            votes[att.switch_guid][line] += 1
    size: Counter[str] = Counter(leaf.topology_switch or leaf.group for leaf in expected.leaves)
    groups: dict[str, set[str]] = defaultdict(set)
    for guid, counts in sorted(votes.items()):
        line = min(counts, key=lambda name: (-counts[name], name))
        if size[line] > 1:
            groups[line].add(guid)
    return dict(groups)
