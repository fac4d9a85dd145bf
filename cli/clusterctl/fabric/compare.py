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

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from clusterctl.fabric.discovered_topology import switch_names
from clusterctl.fabric.expected import ExpectedFabric, ExpectedHca
from clusterctl.fabric.host_hcas import HostHcas, names_a_device
from clusterctl.fabric.model import Fabric, Link, degraded_links, split_description

Level = Literal["error", "warning"]
HostPattern = str | re.Pattern[str] | None

MISCABLED_RAIL = "FAB-C001"
TWO_LEAVES = "FAB-C002"
MISSING_NODE = "FAB-C003"
UNKNOWN_HOST = "FAB-C004"
MISSING_UPLINKS = "FAB-C005"
EXTRA_UPLINKS = "FAB-C006"
DEGRADED_LINK = "FAB-C007"
DOWN_PORT = "FAB-C008"
UNMAPPED_HCA = "FAB-C009"

CODES: dict[str, tuple[str, Level]] = {
    MISCABLED_RAIL: ("miscabled-rail", "error"),
    TWO_LEAVES: ("node-on-two-leaves", "error"),
    MISSING_NODE: ("missing-node", "error"),
    UNKNOWN_HOST: ("unknown-host", "warning"),
    MISSING_UPLINKS: ("missing-uplinks", "error"),
    EXTRA_UPLINKS: ("extra-uplinks", "warning"),
    DEGRADED_LINK: ("degraded-link", "error"),
    DOWN_PORT: ("down-port", "error"),
    UNMAPPED_HCA: ("unmapped-hca", "error"),
}
# Logical port states that pass traffic; iblinkinfo prints "Active" (and the SM's "LinkUp" physically).
_ACTIVE_STATES = frozenset({"active"})
_DOWN_STATES = frozenset({"down", "polling", "disabled", "sleep"})


@dataclass(frozen=True)
class CablingFinding:
    """One difference between the plan and the fabric.

    Attributes:
        code: ``FAB-C001`` ... ``FAB-C008``.
        level: ``error`` (the cluster must not enter a partition like this) or ``warning``.
        message: A full sentence saying what is wrong and what to change.
        expected: What the plan calls for, in a few words.
        found: What the fabric shows, in a few words.
        host: The host of the HCA concerned, if any.
        hca: The HCA name, if any.
        switch: Name of the switch end (see `clusterctl.fabric.discovered_topology.switch_names`).
        switch_guid: GUID of that switch.
        port: Port number on that switch, when known.
        peer: Name of the switch at the far end of a switch-to-switch cable.
        peer_guid: Its GUID.
        peer_port: Its port.
    """

    code: str
    level: Level
    message: str
    expected: str
    found: str
    host: str | None = None
    hca: str | None = None
    switch: str | None = None
    switch_guid: str | None = None
    port: int | None = None
    peer: str | None = None
    peer_guid: str | None = None
    peer_port: int | None = None

    @property
    def kind(self) -> str:
        """The short name of the code (``miscabled-rail``)."""
        return CODES[self.code][0]

    @property
    def where(self) -> str:
        """The cable or port: ``gpu005 mlx5_3 -> su1-rail2 (0x...) port 5``."""
        parts: list[str] = []
        if self.host:
            parts.append(f"{self.host} {self.hca}" if self.hca else self.host)
        if self.switch:
            switch = f"{self.switch} ({self.switch_guid})" if self.switch_guid else self.switch
            parts.append(f"{switch} port {self.port}" if self.port is not None else switch)
        if self.peer:
            peer = f"{self.peer} ({self.peer_guid})" if self.peer_guid else self.peer
            parts.append(f"{peer} port {self.peer_port}" if self.peer_port is not None else peer)
        return " -> ".join(parts) or "(fabric)"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; absent fields are ``null``."""
        return {
            "code": self.code,
            "kind": self.kind,
            "level": self.level,
            "where": self.where,
            "host": self.host,
            "hca": self.hca,
            "switch": self.switch,
            "switch_guid": self.switch_guid,
            "port": self.port,
            "peer": self.peer,
            "peer_guid": self.peer_guid,
            "peer_port": self.peer_port,
            "expected": self.expected,
            "found": self.found,
            "message": self.message,
        }


@dataclass(frozen=True)
class LeafReport:
    """One discovered leaf: what it carries and its real oversubscription.

    Attributes:
        switch: Its name.
        guid: Its GUID.
        planned: The planned leaf it was matched to, ``None`` when none.
        down: Cables to host CAs.
        up: Cables to other switches.
        planned_down: Host HCAs the plan puts on it (``None`` when unmatched).
        planned_up: Uplinks the plan gives it (``None`` when unmatched).
    """

    switch: str
    guid: str
    planned: str | None
    down: int
    up: int
    planned_down: int | None
    planned_up: int | None

    @property
    def oversubscription(self) -> float | None:
        """Down:up ratio as cabled (``None`` without uplinks)."""
        return self.down / self.up if self.up else None

    @property
    def ratio(self) -> str:
        """The ratio as text: ``1:1``, ``1.03:1``, ``no uplinks``."""
        ratio = self.oversubscription
        return f"{ratio:.3g}:1" if ratio is not None else "no uplinks"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        ratio = self.oversubscription
        return {
            "switch": self.switch,
            "guid": self.guid,
            "planned": self.planned,
            "down": self.down,
            "up": self.up,
            "planned_down": self.planned_down,
            "planned_up": self.planned_up,
            "oversubscription": round(ratio, 3) if ratio is not None else None,
        }


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

    findings: tuple[CablingFinding, ...]
    leaves: tuple[LeafReport, ...]
    leaf_match: dict[str, str] = field(default_factory=dict)
    hosts_expected: int = 0
    hosts_found: int = 0
    hcas_expected: int = 0
    hcas_found: int = 0
    leaves_expected: int = 0
    hcas_unmapped: int = 0

    def errors(self) -> list[CablingFinding]:
        """The error-level findings."""
        return [f for f in self.findings if f.level == "error"]

    def warnings(self) -> list[CablingFinding]:
        """The warning-level findings."""
        return [f for f in self.findings if f.level == "warning"]

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


# --- where the host HCAs are -----------------------------------------------------------


@dataclass(frozen=True)
class _Attachment:
    """A host CA port and the switch port it is cabled to."""

    host: str
    hca: str
    ca_guid: str
    ca_port: int
    switch_guid: str
    switch_port: int
    link: Link


@dataclass
class _Hosts:
    """Host CAs of a fabric, by the names their descriptions give."""

    attached: list[_Attachment]
    # CAs whose description names a host, with their ports that are not cabled to a switch.
    unlinked: dict[tuple[str, str], list[tuple[str, int, str | None]]]
    nameless: list[str]


def _index_hosts(fabric: Fabric, host_pattern: HostPattern) -> _Hosts:
    attached: list[_Attachment] = []
    unlinked: dict[tuple[str, str], list[tuple[str, int, str | None]]] = defaultdict(list)
    nameless: list[str] = []
    for ca in fabric.cas():
        names = split_description(ca.description, host_pattern)
        if names is None:
            nameless.append(fabric.describe(ca.guid))
            continue
        host, hca = names
        linked: set[int] = set()
        for link in fabric.links_of(ca.guid):
            for end, port in link.ends():
                if end != ca.guid:
                    continue
                far, far_port = link.other_end(ca.guid, port)
                far_node = fabric.nodes.get(far)
                if far_node is not None and far_node.kind == "switch":
                    attached.append(_Attachment(host, hca, ca.guid, port, far, far_port, link))
                    linked.add(port)
        for ca_port in ca.ports:
            if ca_port.number not in linked and not ca_port.connected:
                unlinked[(host, hca)].append((ca.guid, ca_port.number, ca_port.state))
    return _Hosts(attached, dict(unlinked), nameless)


class _HostResolver:
    """Match description host names to plan host names: exact, then case, then short name."""

    def __init__(self, planned: Iterable[str]) -> None:
        self.exact = set(planned)
        self.folded: dict[str, str] = {}
        for name in sorted(self.exact):
            self.folded.setdefault(name.lower(), name)

    def __call__(self, name: str) -> str | None:
        if name in self.exact:
            return name
        lowered = name.lower()
        return self.folded.get(lowered) or self.folded.get(lowered.split(".", 1)[0])


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
    return _Comparison(fabric, expected, host_pattern, host_hcas or {}).run()


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
    resolve = _HostResolver(expected.hosts)
    matcher = _Matcher(expected, host_hcas or {})
    leaf_of = {leaf.name: leaf for leaf in expected.leaves}
    votes: dict[str, Counter[str]] = defaultdict(Counter)
    for att in _index_hosts(fabric, host_pattern).attached:
        host = resolve(att.host)
        want = matcher.want(host, att.hca, _ca_guids(fabric, att.ca_guid, att.ca_port)) if host else None
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


def _planned_lookup(expected: ExpectedFabric) -> dict[tuple[str, str | None], ExpectedHca]:
    return {(h.host, h.hca): h for h in expected.hcas}


def _ca_guids(fabric: Fabric, ca_guid: str, port: int) -> tuple[str | None, ...]:
    """The GUIDs a host CA port is known by: the CA's (node GUID, or port GUID for -p input) and its port's."""
    node = fabric.nodes.get(ca_guid)
    found = node.port(port) if node is not None else None
    return (ca_guid, found.guid if found is not None else None)


class _Matcher:
    """Which planned HCA a discovered one is: by the plan's name, by the host's rail map, or the placeholder."""

    def __init__(self, expected: ExpectedFabric, host_hcas: Mapping[str, HostHcas]) -> None:
        self.expected = expected
        self.planned = _planned_lookup(expected)
        self.host_hcas = host_hcas

    def planned_name(self, host: str, hca: str, guids: tuple[str | None, ...]) -> str | None:
        """The plan's name of the rail ``hca`` of ``host`` is (itself when the plan uses it); None if none."""
        if (host, hca) in self.planned:
            return hca
        hcas = self.host_hcas.get(host)
        return hcas.rail_of(hca, guids) if hcas is not None else None

    def want(self, host: str, hca: str, guids: tuple[str | None, ...]) -> ExpectedHca | None:
        """The planned HCA, or the host's placeholder when it declares no rails."""
        name = self.planned_name(host, hca, guids)
        found = self.planned.get((host, name)) if name is not None else None
        return found or self.planned.get((host, None))

    def unmapped(self, host: str, hca: str) -> str | None:
        """Why an HCA of a planned host that matched no rail might still be one; None when it is no rail.

        It is no rail when the host's own map does not list it, or when the spec and the
        description both use device names (a storage HCA, say). Otherwise the names cannot
        be compared: the spec names rails by PCI address, or the description names no device.
        """
        wanted = [w.hca for w in self.expected.hcas_of.get(host, ()) if w.hca]
        hcas = self.host_hcas.get(host)
        if not wanted or (hcas is not None and not hcas.problem):
            return None
        by_pci = any(":" in name for name in wanted)
        if not by_pci and names_a_device(hca):
            return None
        reasons = [hcas.problem] if hcas is not None else []
        if by_pci:
            reasons.append("the spec names its rails by PCI address, which node descriptions do not carry")
        if not names_a_device(hca):
            reasons.append("its node descriptions name no RDMA device (OFED's '<host> HCA-<n>', or the host alone)")
        return "; ".join(reasons)


class _Comparison:
    """One run of the comparison: indexes built once, findings collected in order."""

    def __init__(
        self, fabric: Fabric, expected: ExpectedFabric, host_pattern: HostPattern, host_hcas: Mapping[str, HostHcas]
    ) -> None:
        self.fabric = fabric
        self.expected = expected
        self.names = switch_names(fabric)
        self.hosts = _index_hosts(fabric, host_pattern)
        self.resolve = _HostResolver([*expected.hosts, *expected.other_hosts])
        self.matcher = _Matcher(expected, host_hcas)
        self.findings: list[CablingFinding] = []
        # Planned host -> its HCAs on the fabric that match none of its rails, and why.
        self.unmapped: dict[str, list[tuple[_Attachment, str]]] = defaultdict(list)
        # Planned HCA -> where it was found (several entries for a dual-port HCA).
        self.placed: dict[ExpectedHca, list[_Attachment]] = defaultdict(list)
        self.match: dict[str, str] = {}
        self.leaf_of_switch: dict[str, str] = {}

    def run(self) -> CablingReport:
        self._place_hcas()
        self._match_leaves()
        self._check_placement()
        self._check_missing()
        leaves = self._check_uplinks()
        self._check_links()
        order = {"error": 0, "warning": 1}
        findings = sorted(
            self.findings,
            key=lambda f: (order[f.level], f.code, f.host or "", f.hca or "", f.switch or "", f.port or 0),
        )
        return CablingReport(
            findings=tuple(findings),
            leaves=leaves,
            leaf_match=dict(self.match),
            hosts_expected=len(self.expected.hosts),
            hosts_found=len({h.host for h in self.placed}),
            hcas_expected=len(self.expected.hcas),
            hcas_found=len(self.placed),
            leaves_expected=len(self.expected.leaves),
            hcas_unmapped=sum(len(atts) for atts in self.unmapped.values()),
        )

    # --- naming helpers -------------------------------------------------------------

    def _switch(self, guid: str) -> str:
        return self.names.get(guid, guid)

    def _leaf_role(self, leaf_name: str) -> str:
        leaf = self.expected.leaf_by_name[leaf_name]
        if leaf.rail is not None:
            return f"rail {leaf.rail} of {leaf.group} ({leaf.name})"
        return f"rack {leaf.group} ({leaf.name})"

    def _add(self, code: str, message: str, expected: str, found: str, **where: Any) -> None:
        self.findings.append(CablingFinding(code, CODES[code][1], message, expected, found, **where))

    # --- host HCAs ------------------------------------------------------------------

    def _place_hcas(self) -> None:
        unknown: dict[str, list[_Attachment]] = defaultdict(list)
        for att in self.hosts.attached:
            host = self.resolve(att.host)
            want = self.matcher.want(host, att.hca, self._guids(att)) if host else None
            why = self.matcher.unmapped(host, att.hca) if host and want is None else None
            if why:
                self.unmapped[host or att.host].append((att, why))
            elif want is None:
                unknown[host or att.host].append(att)
            else:
                self.placed[want].append(att)
        for host, atts in sorted(unknown.items()):
            self._unknown(host, atts)
        for host, items in sorted(self.unmapped.items()):
            self._unmapped(host, items)
        if self.hosts.nameless:
            self._add(
                UNKNOWN_HOST,
                f"{len(self.hosts.nameless)} CA(s) have no host name in their node description, so they "
                "cannot be matched to the plan. Set node descriptions with rdma-ndd or pass --host-pattern.",
                "host CAs described as '<host> <hca>'",
                ", ".join(self.hosts.nameless[:5]) + (" ..." if len(self.hosts.nameless) > 5 else ""),
            )

    def _guids(self, att: _Attachment) -> tuple[str | None, ...]:
        return _ca_guids(self.fabric, att.ca_guid, att.ca_port)

    def _unmapped(self, host: str, items: list[tuple[_Attachment, str]]) -> None:
        rails = [w.hca or "any" for w in self.expected.hcas_of[host]]
        whys = list(dict.fromkeys(why for _, why in items))
        found = ", ".join(
            f"{a.hca or '(no HCA name)'} ({a.ca_guid}) on {self._switch(a.switch_guid)} port {a.switch_port}"
            for a, _ in items
        )
        where: dict[str, Any] = {"host": host}
        if len(items) == 1:
            ((att, _),) = items
            where.update(hca=att.hca, switch=self._switch(att.switch_guid), switch_guid=att.switch_guid)
            where["port"] = att.switch_port
        self._add(
            UNMAPPED_HCA,
            f"{len(items)} HCA(s) of {host} on the fabric could not be matched to its rails: {'; '.join(whys)}. "
            f"Its cabling is not checked; give the nodes' rail maps (clusterctl fabric check --from-nodes reads "
            f"each node's /etc/clusterctl/rdma-rails.conf and its RDMA devices' GUIDs; --node-rails DIR reads "
            f"saved copies).",
            f"the rails of {host} ({', '.join(rails)}) recognised by device name or GUID",
            found,
            **where,
        )

    def _unknown(self, host: str, atts: list[_Attachment]) -> None:
        ports = ", ".join(f"{a.hca} on {self._switch(a.switch_guid)} port {a.switch_port}" for a in atts)
        where: dict[str, Any] = {"host": host}
        if len(atts) == 1:
            where.update(hca=atts[0].hca, switch=self._switch(atts[0].switch_guid), switch_guid=atts[0].switch_guid)
            where["port"] = atts[0].switch_port
        if host in self.expected.hcas_of:
            rails = ", ".join(h.hca or "any" for h in self.expected.hcas_of[host])
            message = (
                f"{host} has HCA(s) on the compute fabric that the plan does not cable to it (its fabric "
                f"HCAs are {rails}); move the cable to the fabric it belongs to, or add the HCA to the "
                "hardware profile's rails."
            )
            expected = f"only {rails} on this fabric"
        elif host in self.expected.other_hosts:
            message = (
                f"{host} is in the plan but not on the compute fabric by design; if it should be, "
                "give it a compute role, otherwise unplug it or ignore this warning."
            )
            expected = "not on the compute fabric"
        else:
            message = (
                f"{host} is not in the plan; storage servers and management hosts on the same fabric are "
                "expected to show up here, anything else is a cable in the wrong switch."
            )
            expected = "no such host in the plan"
        self._add(UNKNOWN_HOST, message, expected, ports, **where)

    # --- leaves ---------------------------------------------------------------------

    def _match_leaves(self) -> None:
        """Give each planned leaf the switch carrying most of its HCAs, one switch per leaf."""
        votes: Counter[tuple[str, str]] = Counter()
        for want, atts in self.placed.items():
            for att in atts:
                votes[(want.leaf, att.switch_guid)] += 1
        for (leaf, guid), _ in sorted(votes.items(), key=lambda item: (-item[1], item[0])):
            if leaf in self.match or guid in self.leaf_of_switch:
                continue
            self.match[leaf] = guid
            self.leaf_of_switch[guid] = leaf

    def _check_placement(self) -> None:
        rail_optimized = self.expected.layout == "rail-optimized"
        for want, atts in sorted(self.placed.items(), key=lambda item: (item[0].host, item[0].hca or "")):
            for att in atts:
                if rail_optimized:
                    self._check_rail(want, att)
                else:
                    self._check_rack(want, att)

    def _where(self, att: _Attachment, want: ExpectedHca) -> dict[str, Any]:
        return {
            "host": want.host,
            "hca": _hca_label(want, att.hca),
            "switch": self._switch(att.switch_guid),
            "switch_guid": att.switch_guid,
            "port": att.switch_port,
        }

    def _check_rail(self, want: ExpectedHca, att: _Attachment) -> None:
        leaf_guid = self.match.get(want.leaf)
        if leaf_guid == att.switch_guid:
            return
        role = f"rail {want.rail} of {want.group}"
        if leaf_guid is None:
            expected = f"the leaf of {role} ({want.leaf}); no switch carries that rail"
        else:
            expected = f"switch {self._switch(leaf_guid)} ({leaf_guid}), the leaf of {role} ({want.leaf})"
        found = self._found_on(att)
        self._add(
            MISCABLED_RAIL,
            f"Rail {want.rail} HCA {_hca_label(want, att.hca)} of {want.host} is not on the leaf shared by {role}; "
            f"move its cable to {self._switch(leaf_guid) if leaf_guid else 'that leaf'}.",
            expected,
            found,
            **self._where(att, want),
        )

    def _found_on(self, att: _Attachment) -> str:
        text = f"switch {self._switch(att.switch_guid)} ({att.switch_guid}) port {att.switch_port}"
        planned = self.leaf_of_switch.get(att.switch_guid)
        if planned:
            text += f", the leaf of {self._leaf_role(planned)}"
        else:
            text += ", a switch the plan has no leaf for"
        return text

    def _check_rack(self, want: ExpectedHca, att: _Attachment) -> None:
        allowed = {self.match[name] for name in self.expected.groups[want.group] if name in self.match}
        if att.switch_guid in allowed:
            return
        rack_leaves = ", ".join(
            f"{self._switch(self.match[n])} ({n})" if n in self.match else f"{n} (not found)"
            for n in self.expected.groups[want.group]
        )
        others = sorted(
            {
                a.switch_guid
                for h in self.expected.hcas_of[want.host]
                for a in self.placed.get(h, [])
                if a.switch_guid != att.switch_guid
            }
        )
        if others:
            message = (
                f"{want.host} is on two leaves: {want.hca or att.hca} is on {self._switch(att.switch_guid)}, "
                f"its other HCAs on {', '.join(self._switch(g) for g in others)}; all of a node's HCAs belong "
                f"on the leaves of rack {want.group}. Move this cable."
            )
        else:
            message = (
                f"{want.host} is cabled to {self._switch(att.switch_guid)}, not to the leaves of its rack "
                f"{want.group}; move its cables or fix its rack in machines.csv."
            )
        self._add(
            TWO_LEAVES,
            message,
            f"a leaf of rack {want.group}: {rack_leaves}",
            self._found_on(att),
            **self._where(att, want),
        )

    # --- missing HCAs and down ports ------------------------------------------------

    def _check_missing(self) -> None:
        for host in self.expected.hosts:
            wanted = self.expected.hcas_of[host]
            missing = [h for h in wanted if h not in self.placed]
            # HCAs that matched no rail are reported as unmapped; calling the rails missing would guess.
            if not missing or host in self.unmapped:
                continue
            down = [h for h in missing if self._unlinked(h)]
            for want in down:
                self._down_hca(want)
            absent = [h for h in missing if h not in down]
            if not absent:
                continue
            seen = sorted({a.hca for a in self.hosts.attached if self.resolve(a.host) == host})
            if len(absent) == len(wanted) and not down:
                self._add(
                    MISSING_NODE,
                    f"{host} is not on the fabric: none of its {len(wanted)} HCA(s) was discovered. Check that "
                    "it is powered on and cabled, and that its node description names it.",
                    f"{len(wanted)} HCA(s) ({', '.join(h.hca or 'any' for h in wanted)}) on "
                    + ", ".join(sorted({self._expected_leaf(h) for h in wanted})),
                    "no CA whose description names " + host,
                    host=host,
                )
                continue
            for want in absent:
                leaf_guid = self.match.get(want.leaf)
                where: dict[str, Any] = {"host": host, "hca": want.hca}
                if leaf_guid:
                    where.update(switch=self._switch(leaf_guid), switch_guid=leaf_guid)
                self._add(
                    MISSING_NODE,
                    f"HCA {want.hca} of {host} is not on the fabric; check its cable and that the HCA is up.",
                    f"{want.label} on {self._expected_leaf(want)}",
                    f"{host} has {', '.join(seen) if seen else 'no HCA'} on the fabric",
                    **where,
                )

    def _expected_leaf(self, want: ExpectedHca) -> str:
        guid = self.match.get(want.leaf)
        return f"{self._switch(guid)} ({want.leaf})" if guid else want.leaf

    def _unlinked(self, want: ExpectedHca) -> list[tuple[str, int, str | None]]:
        def same(hca: str, guid: str, number: int) -> bool:
            guids = _ca_guids(self.fabric, guid, number)
            return want.hca is None or self.matcher.planned_name(want.host, hca, guids) == want.hca

        return [
            (guid, number, state)
            for (host, hca), ports in sorted(self.hosts.unlinked.items())
            if self.resolve(host) == want.host
            for guid, number, state in ports
            if same(hca, guid, number)
        ]

    def _down_hca(self, want: ExpectedHca) -> None:
        guid, port, state = self._unlinked(want)[0]
        self._add(
            DOWN_PORT,
            f"Port {port} of {want.label} is discovered but not linked to a switch; reseat or replace "
            "the cable or transceiver.",
            f"port linked to {self._expected_leaf(want)}",
            f"CA {guid} port {port} {state or 'not linked'}",
            host=want.host,
            hca=want.hca,
        )

    # --- uplinks --------------------------------------------------------------------

    def _check_uplinks(self) -> tuple[LeafReport, ...]:
        switches = {s.guid for s in self.fabric.switches()}
        host_cas = {c.guid for c in self.fabric.cas()}
        ups: dict[str, list[tuple[int, str, int]]] = defaultdict(list)
        downs: Counter[str] = Counter()
        for link in self.fabric.links:
            if link.is_self_loop:
                continue
            for (end, port), (far, far_port) in (link.ends(), link.ends()[::-1]):
                if end in switches and far in switches:
                    ups[end].append((port, far, far_port))
                elif end in switches and far in host_cas:
                    downs[end] += 1
        planned_down = {leaf.name: len(leaf.hcas) for leaf in self.expected.leaves}
        reports = []
        for guid in sorted(downs, key=lambda g: (self._switch(g), g)):
            planned = self.leaf_of_switch.get(guid)
            reports.append(
                LeafReport(
                    self._switch(guid),
                    guid,
                    planned,
                    downs[guid],
                    len(ups[guid]),
                    planned_down[planned] if planned else None,
                    self.expected.uplinks_per_leaf if planned else None,
                )
            )
        matched = [r for r in reports if r.planned]
        usual_ports, usual_per_peer = _usual_uplinks([ups[r.guid] for r in matched])
        for report in matched:
            self._uplink_finding(report, ups[report.guid], usual_ports, usual_per_peer)
            self._down_switch_ports(report)
        return tuple(reports)

    def _uplink_finding(
        self,
        report: LeafReport,
        ups: list[tuple[int, str, int]],
        usual_ports: set[int],
        usual_per_peer: dict[str, int],
    ) -> None:
        designed = self.expected.uplinks_per_leaf
        leaf = f"Leaf {report.switch}, planned as {self._leaf_role(report.planned or '')},"
        if report.up == designed:
            return
        per_peer = Counter(far for _, far, _ in ups)
        if report.up < designed:
            short = {p: n - per_peer[p] for p, n in usual_per_peer.items() if per_peer[p] < n}
            used = {
                port.number
                for port in (self.fabric.node(report.guid).ports)
                if port.connected and port.remote != report.guid
            }
            empty = sorted(usual_ports - used)
            detail = "; ".join(
                f"{n} fewer to {self._switch(p)} ({per_peer[p]} instead of {usual_per_peer[p]})"
                for p, n in sorted(short.items(), key=lambda item: self._switch(item[0]))
            )
            where: dict[str, Any] = {"switch": report.switch, "switch_guid": report.guid}
            if len(empty) == 1:
                where["port"] = empty[0]
            if len(short) == 1:
                (peer,) = short
                where.update(peer=self._switch(peer), peer_guid=peer)
            found = f"{report.up} uplinks for {report.down} host links: {report.ratio}"
            if detail:
                found += f" ({detail})"
            if empty:
                found += f"; port(s) {compress_ports(empty)} empty where the other leaves have uplinks"
            self._add(
                MISSING_UPLINKS,
                f"{leaf} has {designed - report.up} "
                f"uplink(s) fewer than designed, so it runs at {report.ratio} instead of "
                f"{self.expected.oversubscription:g}:1; cable the missing uplink(s).",
                f"{designed} uplinks ({self.expected.oversubscription:g}:1)",
                found,
                **where,
            )
            return
        extra = {p: per_peer[p] - usual_per_peer.get(p, 0) for p in per_peer if per_peer[p] > usual_per_peer.get(p, 0)}
        detail = "; ".join(
            f"{n} more to {self._switch(p)}" for p, n in sorted(extra.items(), key=lambda item: self._switch(item[0]))
        )
        self._add(
            EXTRA_UPLINKS,
            f"{leaf} has {report.up - designed} uplink(s) "
            "more than designed; a cable meant for another leaf or a host may be in this switch.",
            f"{designed} uplinks ({self.expected.oversubscription:g}:1)",
            f"{report.up} uplinks for {report.down} host links: {report.ratio}" + (f" ({detail})" if detail else ""),
            switch=report.switch,
            switch_guid=report.guid,
        )

    def _down_switch_ports(self, report: LeafReport) -> None:
        # Unused switch ports sit in Down/Polling too, so a Down port only proves a fault when
        # the leaf has no more Down ports than it lacks planned cables.
        node = self.fabric.node(report.guid)
        down = [p for p in node.ports if not p.connected and (p.state or "").lower() in _DOWN_STATES]
        wanted = (report.planned_down or 0) + (report.planned_up or 0)
        shortfall = wanted - report.down - report.up
        if not down or len(down) > shortfall:
            return
        for port in down:
            self._add(
                DOWN_PORT,
                f"Port {port.number} of leaf {report.switch} is {port.state}; the plan uses every port of this "
                "leaf, so a cable here is unplugged or failed.",
                "port Active",
                f"port {port.state}",
                switch=report.switch,
                switch_guid=report.guid,
                port=port.number,
            )

    # --- link rates and states ------------------------------------------------------

    def _link_ends(self, link: Link) -> dict[str, Any]:
        """Finding location for a link: host/HCA and switch end, or both switch ends (leaf first)."""
        by_ca = {(a.ca_guid, a.ca_port): a for a in self.hosts.attached}
        for end in link.ends():
            att = by_ca.get(end)
            if att is not None:
                host = self.resolve(att.host) or att.host
                return {
                    "host": host,
                    "hca": att.hca,
                    "switch": self._switch(att.switch_guid),
                    "switch_guid": att.switch_guid,
                    "port": att.switch_port,
                }
        (a, a_port), (b, b_port) = link.ends()
        if b in self.leaf_of_switch and a not in self.leaf_of_switch:
            (a, a_port), (b, b_port) = (b, b_port), (a, a_port)
        return {
            "switch": self._switch(a),
            "switch_guid": a,
            "port": a_port,
            "peer": self._switch(b),
            "peer_guid": b,
            "peer_port": b_port,
        }

    def _check_links(self) -> None:
        switches = {s.guid for s in self.fabric.switches()}
        planned_cas = {a.ca_guid for atts in self.placed.values() for a in atts}
        # Links to hosts outside the plan (storage, UFM) may run slower by design; only the
        # designed fabric is held to fabric.speed_gbps.
        candidates = [
            link
            for link in self.fabric.links
            if not link.is_self_loop and all(end in switches or end in planned_cas for end, _ in link.ends())
        ]
        for link in degraded_links(self.fabric, self.expected.speed_gbps, links=candidates):
            nominal = link.nominal_gbps
            found = link.rate_label + (f" ({nominal:g} Gb/s)" if nominal is not None else " (rate unknown)")
            if link.note:
                found += f"; {link.note}"
            where = self._link_ends(link)
            self._add(
                DEGRADED_LINK,
                "The link trained below the designed rate; reseat or replace the cable or transceiver "
                "(a width below 4x points to a bad lane).",
                self.expected.rate_label,
                found,
                **where,
            )
        for link in candidates:
            state = (link.state or "").strip()
            if state and state.lower() not in _ACTIVE_STATES:
                self._add(
                    DOWN_PORT,
                    f"The link is {state}, not Active, so it passes no traffic; check that a subnet manager "
                    "runs and has swept the fabric.",
                    "Active",
                    state,
                    **self._link_ends(link),
                )


def _hca_label(want: ExpectedHca, found: str) -> str:
    """The HCA as the plan names it, with the fabric's name in front where they differ (``ibp24s0 (0000:18:00.0)``)."""
    if want.hca is None or not found or found == want.hca:
        return want.hca or found
    return f"{found} ({want.hca})"


def _usual_uplinks(ups_per_leaf: list[list[tuple[int, str, int]]]) -> tuple[set[int], dict[str, int]]:
    """The uplink ports and per-spine cable counts most leaves share.

    Returns:
        Ports used as uplinks on more than half of the leaves, and for each spine the most
        common number of cables a leaf has to it (over the leaves cabled to it by majority).
    """
    if not ups_per_leaf:
        return set(), {}
    half = len(ups_per_leaf) / 2
    port_count: Counter[int] = Counter(port for ups in ups_per_leaf for port in {p for p, _, _ in ups})
    usual_ports = {port for port, n in port_count.items() if n > half}
    per_peer: dict[str, Counter[int]] = defaultdict(Counter)
    peers = {far for ups in ups_per_leaf for _, far, _ in ups}
    for ups in ups_per_leaf:
        cables = Counter(far for _, far, _ in ups)
        for peer in peers:
            per_peer[peer][cables.get(peer, 0)] += 1
    usual: dict[str, int] = {}
    for peer, tally in per_peer.items():
        # The most common count; on a tie the larger, so a leaf short of cables is the odd one out.
        value = min(tally, key=lambda n: (-tally[n], -n))
        if value:
            usual[peer] = value
    return usual_ports, usual


def compress_ports(ports: Iterable[int]) -> str:
    """``[33, 34, 35, 40]`` -> ``33-35,40``."""
    ordered = sorted(set(ports))
    runs: list[str] = []
    start = prev = None
    for port in [*ordered, None]:
        if port is not None and prev is not None and port == prev + 1:
            prev = port
            continue
        if start is not None:
            runs.append(f"{start}-{prev}" if prev != start else str(start))
        start = prev = port
    return ",".join(runs)
