"""The state of one cabling comparison: where the host HCAs are, which planned HCA each is, the
names of the switches, and the findings collected; the codes and how a finding names its cable.

`clusterctl.fabric.compare` runs the comparison; `clusterctl.fabric.placement` (host HCAs on
their leaves) and `clusterctl.fabric.uplinks` (uplinks, down ports, link rates) add the findings.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from clusterctl.fabric.discovered_topology import switch_names
from clusterctl.fabric.expected import ExpectedFabric, ExpectedHca
from clusterctl.fabric.host_hcas import HostHcas, names_a_device
from clusterctl.fabric.model import Fabric, Link, split_description
from clusterctl.spec.findings import Finding, Level

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

# Code -> (kind: the finding's rule, level).
CODES: dict[str, tuple[str, Level]] = {
    MISCABLED_RAIL: ("miscabled-rail", Level.ERROR),
    TWO_LEAVES: ("node-on-two-leaves", Level.ERROR),
    MISSING_NODE: ("missing-node", Level.ERROR),
    UNKNOWN_HOST: ("unknown-host", Level.WARNING),
    MISSING_UPLINKS: ("missing-uplinks", Level.ERROR),
    EXTRA_UPLINKS: ("extra-uplinks", Level.WARNING),
    DEGRADED_LINK: ("degraded-link", Level.ERROR),
    DOWN_PORT: ("down-port", Level.ERROR),
    UNMAPPED_HCA: ("unmapped-hca", Level.ERROR),
}
# The ends of a cable a finding can name, in its data (absent ends are None: JSON null).
CABLE_KEYS = ("host", "hca", "switch", "switch_guid", "port", "peer", "peer_guid", "peer_port")


def cable_text(ends: Mapping[str, Any]) -> str:
    """The cable or port: ``gpu005 mlx5_3 -> su1-rail2 (0x...) port 5``."""
    parts: list[str] = []
    if ends.get("host"):
        parts.append(f"{ends['host']} {ends['hca']}" if ends.get("hca") else str(ends["host"]))
    for name, guid, port in (("switch", "switch_guid", "port"), ("peer", "peer_guid", "peer_port")):
        if ends.get(name):
            switch = f"{ends[name]} ({ends[guid]})" if ends.get(guid) else str(ends[name])
            parts.append(f"{switch} port {ends[port]}" if ends.get(port) is not None else switch)
    return " -> ".join(parts) or "(fabric)"


def cable_finding(code: str, message: str, expected: str, found: str, **where: Any) -> Finding:
    """One difference between the plan and the fabric.

    Args:
        code: ``FAB-C001`` ... ``FAB-C009`` (`CODES` gives its kind, the rule, and its level:
            error when the cluster must not enter a partition like this, else warning).
        message: A full sentence saying what is wrong and what to change.
        expected: What the plan calls for, in a few words.
        found: What the fabric shows, in a few words.
        **where: The cable's ends (`CABLE_KEYS`): the host and HCA concerned, the switch end
            (name, GUID, port), the switch at the far end of a switch-to-switch cable.

    Returns:
        The finding: ``node`` the host, ``cable`` the cable as text, ``data`` the expected and
        found values and every end.
    """
    unknown = sorted(set(where) - set(CABLE_KEYS))
    if unknown:
        raise TypeError(f"not a cable end: {', '.join(unknown)}")
    ends = {key: where.get(key) for key in CABLE_KEYS}
    kind, level = CODES[code]
    return Finding(
        code=code,
        level=level,
        message=message,
        rule=kind,
        node=ends["host"] or "",
        cable=cable_text(ends),
        data={"expected": expected, "found": found, **ends},
    )


# --- where the host HCAs are -----------------------------------------------------------


@dataclass(frozen=True)
class Attachment:
    """A host CA port and the switch port it is cabled to."""

    host: str
    hca: str
    ca_guid: str
    ca_port: int
    switch_guid: str
    switch_port: int
    link: Link


@dataclass
class Hosts:
    """Host CAs of a fabric, by the names their descriptions give."""

    attached: list[Attachment]
    # CAs whose description names a host, with their ports that are not cabled to a switch.
    unlinked: dict[tuple[str, str], list[tuple[str, int, str | None]]]
    nameless: list[str]


def index_hosts(fabric: Fabric, host_pattern: HostPattern) -> Hosts:
    attached: list[Attachment] = []
    unlinked: dict[tuple[str, str], list[tuple[str, int, str | None]]] = defaultdict(list)
    nameless: list[str] = []
    for ca in fabric.cas():
        names = split_description(ca.description, host_pattern)
        if names is None:
            nameless.append(fabric.describe(ca.guid))
            continue
        host, hca = names
        linked: set[int] = set()
        for port, far, far_port, link in fabric.switch_links(ca.guid):
            attached.append(Attachment(host, hca, ca.guid, port, far, far_port, link))
            linked.add(port)
        for ca_port in ca.ports:
            if ca_port.number not in linked and not ca_port.connected:
                unlinked[(host, hca)].append((ca.guid, ca_port.number, ca_port.state))
    return Hosts(attached, dict(unlinked), nameless)


class HostResolver:
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


def planned_lookup(expected: ExpectedFabric) -> dict[tuple[str, str | None], ExpectedHca]:
    return {(h.host, h.hca): h for h in expected.hcas}


def ca_guids(fabric: Fabric, ca_guid: str, port: int) -> tuple[str | None, ...]:
    """The GUIDs a host CA port is known by: the CA's (node GUID, or port GUID for -p input) and its port's."""
    node = fabric.nodes.get(ca_guid)
    found = node.port(port) if node is not None else None
    return (ca_guid, found.guid if found is not None else None)


class Matcher:
    """Which planned HCA a discovered one is: by the plan's name, by the host's rail map, or the placeholder."""

    def __init__(self, expected: ExpectedFabric, host_hcas: Mapping[str, HostHcas]) -> None:
        self.expected = expected
        self.planned = planned_lookup(expected)
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


def hca_label(want: ExpectedHca, found: str) -> str:
    """The HCA as the plan names it, with the fabric's name in front where they differ (``ibp24s0 (0000:18:00.0)``)."""
    if want.hca is None or not found or found == want.hca:
        return want.hca or found
    return f"{found} ({want.hca})"


# --- the comparison's state ------------------------------------------------------------


class Cabling:
    """One run of the comparison: indexes built once, findings collected in order."""

    def __init__(
        self, fabric: Fabric, expected: ExpectedFabric, host_pattern: HostPattern, host_hcas: Mapping[str, HostHcas]
    ) -> None:
        """Index the fabric's host CAs and the plan's HCAs."""
        self.fabric = fabric
        self.expected = expected
        self.names = switch_names(fabric)
        self.hosts = index_hosts(fabric, host_pattern)
        self.resolve = HostResolver([*expected.hosts, *expected.other_hosts])
        self.matcher = Matcher(expected, host_hcas)
        self.findings: list[Finding] = []
        # Planned host -> its HCAs on the fabric that match none of its rails, and why.
        self.unmapped: dict[str, list[tuple[Attachment, str]]] = defaultdict(list)
        # Planned HCA -> where it was found (several entries for a dual-port HCA).
        self.placed: dict[ExpectedHca, list[Attachment]] = defaultdict(list)
        self.match: dict[str, str] = {}
        self.leaf_of_switch: dict[str, str] = {}

    def switch(self, guid: str) -> str:
        """A switch's name (`clusterctl.fabric.discovered_topology.switch_names`), else its GUID."""
        return self.names.get(guid, guid)

    def leaf_role(self, leaf_name: str) -> str:
        """What a planned leaf is for: ``rail 2 of su1 (su1-leaf3)`` or ``rack r01 (leaf-r01)``."""
        leaf = self.expected.leaf_by_name[leaf_name]
        if leaf.rail is not None:
            return f"rail {leaf.rail} of {leaf.group} ({leaf.name})"
        return f"rack {leaf.group} ({leaf.name})"

    def add(self, code: str, message: str, expected: str, found: str, **where: Any) -> None:
        """Record a finding (`cable_finding`)."""
        self.findings.append(cable_finding(code, message, expected, found, **where))

    def guids(self, att: Attachment) -> tuple[str | None, ...]:
        """The GUIDs the attached CA port is known by (`ca_guids`)."""
        return ca_guids(self.fabric, att.ca_guid, att.ca_port)

    def found_on(self, att: Attachment) -> str:
        """Where an HCA is cabled, with what the plan has that switch for."""
        text = f"switch {self.switch(att.switch_guid)} ({att.switch_guid}) port {att.switch_port}"
        planned = self.leaf_of_switch.get(att.switch_guid)
        if planned:
            text += f", the leaf of {self.leaf_role(planned)}"
        else:
            text += ", a switch the plan has no leaf for"
        return text

    def expected_leaf(self, want: ExpectedHca) -> str:
        """The leaf a planned HCA belongs on, by its discovered name where it was matched."""
        guid = self.match.get(want.leaf)
        return f"{self.switch(guid)} ({want.leaf})" if guid else want.leaf

    def where(self, att: Attachment, want: ExpectedHca) -> dict[str, Any]:
        """The cable of a placed HCA, as `cable_finding` takes it."""
        return {
            "host": want.host,
            "hca": hca_label(want, att.hca),
            "switch": self.switch(att.switch_guid),
            "switch_guid": att.switch_guid,
            "port": att.switch_port,
        }
