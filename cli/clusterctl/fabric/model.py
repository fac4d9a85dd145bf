"""The discovered InfiniBand fabric: nodes, ports, links and link speeds.

Every object is a frozen dataclass so a parsed fabric can be shared, compared and
cached. Node and link identities are GUID strings normalised to ``0x`` plus 16
lowercase hex digits; a parser that cannot learn a GUID (``iblinkinfo`` without
``ibhosts``) uses a synthetic ``lid:<n>`` id and says so in ``Fabric.notes``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal, NamedTuple

NodeKind = Literal["switch", "ca", "router", "aggregation"]


@dataclass(frozen=True)
class LinkSpeed:
    """One InfiniBand lane speed.

    Attributes:
        name: The IBTA name (``"EDR"``).
        lane_gbps: Signalling rate of one lane, as ``iblinkinfo`` prints it (25.78125).
        nominal_lane_gbps: Marketing rate of one lane, so that 4 lanes give the familiar
            figure (4x EDR = 100, 4x HDR = 200, 4x NDR = 400). Specs state these.
    """

    name: str
    lane_gbps: float
    nominal_lane_gbps: float


# Lane rates from the IBTA spec as printed by infiniband-diags (ibdiag_common / iblinkinfo).
# FDR10 is Mellanox's 64b/66b variant of QDR: 10.3125 Gbaud, sold as 40 Gb/s at 4x.
SPEED_TABLE: tuple[LinkSpeed, ...] = (
    LinkSpeed("SDR", 2.5, 2.5),
    LinkSpeed("DDR", 5.0, 5.0),
    LinkSpeed("QDR", 10.0, 10.0),
    LinkSpeed("FDR10", 10.3125, 10.0),
    LinkSpeed("FDR", 14.0625, 14.0),
    LinkSpeed("EDR", 25.78125, 25.0),
    LinkSpeed("HDR", 53.125, 50.0),
    LinkSpeed("NDR", 106.25, 100.0),
    LinkSpeed("XDR", 212.5, 200.0),
)
SPEEDS: Mapping[str, LinkSpeed] = {s.name: s for s in SPEED_TABLE}

UNKNOWN_SPEED_MARKERS = frozenset({"", "?", "??", "???", "UNDEFINED", "UNKNOWN", "N/A"})
_WIDTH_RE = re.compile(r"^(?P<lanes>\d+)[xX]$")
_HEX_GUID_RE = re.compile(r"^(?:0x)?(?P<hex>[0-9a-fA-F]{1,16})$")


def normalize_guid(text: str) -> str:
    """Return a GUID as ``0x`` plus 16 lowercase hex digits.

    ``ibnetdiscover`` prints port GUIDs without leading zeros (``8f10403960985``),
    ``ibswitches`` with them (``0x08c0eb0300add04e``); both must compare equal.

    Raises:
        ValueError: When ``text`` is not a hexadecimal GUID.
    """
    match = _HEX_GUID_RE.match(text.strip())
    if not match:
        raise ValueError(f"{text!r} is not a hexadecimal GUID.")
    return f"0x{int(match['hex'], 16):016x}"


def speed_from_text(text: str) -> LinkSpeed | None:
    """Look up a lane speed by name or by number.

    Accepts names in any case (``EDR``, ``fdr10``) and numbers with or without a unit
    (``25.78125 Gbps`` as ``iblinkinfo`` prints the signalling rate, ``25.0 Gbps`` as
    ``ibv_devinfo`` prints the nominal rate).

    Returns:
        The speed, or ``None`` for unknown markers (``???``, ``undefined``) and anything
        unrecognised.
    """
    token = re.sub(r"\s*(?:gbps|gb/s)\s*$", "", text.strip(), flags=re.IGNORECASE).upper()
    if token in UNKNOWN_SPEED_MARKERS:
        return None
    if token in SPEEDS:
        return SPEEDS[token]
    try:
        value = float(token)
    except ValueError:
        return None
    # Signalling rates first: 10.0 is both QDR's signal rate and FDR10's nominal rate.
    for speed in SPEED_TABLE:
        if abs(speed.lane_gbps - value) < 1e-6:
            return speed
    for speed in SPEED_TABLE:
        if abs(speed.nominal_lane_gbps - value) < 1e-6:
            return speed
    return None


def lanes_from_width(width: str | None) -> int | None:
    """Return the lane count of a width such as ``4x`` or ``12X``; ``None`` when unknown."""
    if width is None:
        return None
    match = _WIDTH_RE.match(width.strip())
    return int(match["lanes"]) if match else None


def split_description(description: str, host_pattern: str | re.Pattern[str] | None = None) -> tuple[str, str] | None:
    """Split a CA node description into ``(host, hca_name)``.

    The default follows ``rdma-ndd`` (``"%h %d"``, e.g. ``node018 mlx5_0``) and older
    OFED (``node018 HCA-1``): the first token is the host, the second the HCA. Vendor
    default descriptions (``MT23108 InfiniHost Mellanox Technologies``) have more than
    two tokens and name no host, so they give ``None``.

    Args:
        description: The node description.
        host_pattern: A regex with a named group ``host`` (and optionally ``hca``),
            searched in the description. Without ``hca`` the second token is used.

    Returns:
        ``(host, hca_name)``; ``hca_name`` is ``""`` when the description names none.
        ``None`` when no host can be read.

    Raises:
        ValueError: When ``host_pattern`` has no ``host`` group.
    """
    desc = description.strip()
    tokens = desc.split()
    if host_pattern is None:
        if not tokens or len(tokens) > 2:
            return None
        return tokens[0], tokens[1] if len(tokens) > 1 else ""
    pattern = re.compile(host_pattern) if isinstance(host_pattern, str) else host_pattern
    if "host" not in pattern.groupindex:
        raise ValueError(
            f"host_pattern {pattern.pattern!r} has no named group 'host'; write it like "
            r"'^(?P<host>\S+)'."
        )
    match = pattern.search(desc)
    if not match or not match["host"]:
        return None
    if "hca" in pattern.groupindex:
        return match["host"], match["hca"] or ""
    return match["host"], tokens[1] if len(tokens) > 1 else ""


@dataclass(frozen=True)
class Port:
    """One physical port of a node.

    Attributes:
        number: The port number (1-based; switch management port 0 is not listed).
        guid: The port GUID when the input gives it (CA ports), else ``None``.
        lid: The LID the input reports for this port, if any.
        remote: GUID of the node at the other end, ``None`` when unconnected.
        remote_port: Port number at the other end, ``None`` when unconnected.
        state: The logical port state when the input shows it (``iblinkinfo``:
            ``Active``, ``Init``, ``Down``), else ``None``.
    """

    number: int
    guid: str | None = None
    lid: int | None = None
    remote: str | None = None
    remote_port: int | None = None
    state: str | None = None

    @property
    def connected(self) -> bool:
        """Whether a cable to another port was discovered."""
        return self.remote is not None


@dataclass(frozen=True)
class Node:
    """A switch, channel adapter, router or SHARP aggregation node.

    Attributes:
        kind: ``switch``, ``ca``, ``router`` or ``aggregation`` (the SHARP Aggregation
            Node: a CA inside a Quantum switch, never a host).
        guid: The node GUID (for ``ibnetdiscover -p`` CAs: the port GUID, the only one printed).
        description: The node description, stripped of padding spaces.
        ports: Known ports, sorted by number.
        lid: The node's LID (switch port 0, or the first CA port), if reported.
        port_count: The number of ports the node declares, if reported.
    """

    kind: NodeKind
    guid: str
    description: str
    ports: tuple[Port, ...] = ()
    lid: int | None = None
    port_count: int | None = None

    def port(self, number: int) -> Port | None:
        """Return port ``number`` or ``None`` when it is not known."""
        return next((p for p in self.ports if p.number == number), None)

    @property
    def is_host_ca(self) -> bool:
        """Whether this is a CA that belongs to a host (not an aggregation node)."""
        return self.kind == "ca"


@dataclass(frozen=True)
class Link:
    """One cable between two ports, stored once in canonical order ``(a, a_port) < (b, b_port)``.

    Attributes:
        a: GUID of one end.
        a_port: Port number at ``a``.
        b: GUID of the other end (equal to ``a`` for a loopback cable on one switch).
        b_port: Port number at ``b``.
        width: Active width such as ``4x``; ``None`` when the tool printed ``??``.
        speed: Active speed name such as ``EDR``; ``None`` when unknown (``???``).
        state: Port state when the input reports it (``Active``, ``Init``), else ``None``.
        note: A tool annotation worth keeping (``Could be 53.125 Gbps``), else ``None``.
    """

    a: str
    a_port: int
    b: str
    b_port: int
    width: str | None
    speed: str | None
    state: str | None = None
    note: str | None = None

    @property
    def lanes(self) -> int | None:
        """The lane count (4 for ``4x``), ``None`` when unknown."""
        return lanes_from_width(self.width)

    @property
    def link_speed(self) -> LinkSpeed | None:
        """The speed table entry, ``None`` when unknown."""
        return SPEEDS.get(self.speed) if self.speed else None

    @property
    def lane_gbps(self) -> float | None:
        """Signalling rate of one lane in Gb/s (EDR: 25.78125)."""
        speed = self.link_speed
        return speed.lane_gbps if speed else None

    @property
    def total_gbps(self) -> float | None:
        """Signalling rate of the whole link: lanes x lane rate (4x EDR: 103.125)."""
        lanes, speed = self.lanes, self.link_speed
        return lanes * speed.lane_gbps if lanes and speed else None

    @property
    def nominal_gbps(self) -> float | None:
        """Nominal rate of the link: lanes x nominal lane rate (4x EDR: 100, 4x NDR: 400).

        This is the figure to compare with a spec's ``speed_gbps``.
        """
        lanes, speed = self.lanes, self.link_speed
        return lanes * speed.nominal_lane_gbps if lanes and speed else None

    @property
    def rate_label(self) -> str:
        """The rate as ``ibnetdiscover`` writes it: ``4xEDR``, ``4x???``."""
        return f"{self.width or '??'}{self.speed or '???'}"

    @property
    def is_self_loop(self) -> bool:
        """Whether both ends are on the same node (a loopback cable between two switch ports)."""
        return self.a == self.b

    def ends(self) -> tuple[tuple[str, int], tuple[str, int]]:
        """Return both ends as ``((guid, port), (guid, port))``."""
        return (self.a, self.a_port), (self.b, self.b_port)

    def other_end(self, guid: str, port: int | None = None) -> tuple[str, int]:
        """Return the end that is not ``(guid, port)``.

        Raises:
            ValueError: When the link does not touch ``guid`` (at ``port``).
        """
        if self.a == guid and (port is None or port == self.a_port):
            return self.b, self.b_port
        if self.b == guid and (port is None or port == self.b_port):
            return self.a, self.a_port
        raise ValueError(f"Link {self} does not end at {guid} port {port}.")


def make_link(
    end1: tuple[str, int],
    end2: tuple[str, int],
    width: str | None,
    speed: str | None,
    state: str | None = None,
    note: str | None = None,
) -> Link:
    """Build a link with its ends in canonical order, whichever side reported it."""
    (a, a_port), (b, b_port) = sorted((end1, end2))
    return Link(a, a_port, b, b_port, width, speed, state, note)


class HcaAttachment(NamedTuple):
    """Where one host HCA port is cabled: the switch, its port, and the link."""

    switch_guid: str
    switch_port: int
    link: Link


@dataclass(frozen=True)
class Fabric:
    """A discovered fabric.

    Attributes:
        nodes: Nodes by GUID.
        links: Every cable once, sorted.
        notes: What the parser skipped or reconciled (stderr noise, links reported
            differently by their two ends, synthetic ids), for the user to see.
        source: The input format: ``ibnetdiscover``, ``ibnetdiscover-p`` or ``iblinkinfo``.
    """

    nodes: Mapping[str, Node] = field(hash=False)
    links: tuple[Link, ...]
    notes: tuple[str, ...] = ()
    source: str = ""

    @cached_property
    def _links_by_node(self) -> dict[str, list[Link]]:
        index: dict[str, list[Link]] = defaultdict(list)
        for link in self.links:
            index[link.a].append(link)
            if link.b != link.a:
                index[link.b].append(link)
        return dict(index)

    def node(self, guid: str) -> Node:
        """Return the node with this GUID.

        Raises:
            KeyError: When there is none.
        """
        return self.nodes[guid]

    def switches(self) -> list[Node]:
        """Return the switches, sorted by GUID."""
        return [n for _, n in sorted(self.nodes.items()) if n.kind == "switch"]

    def cas(self, *, include_aggregation: bool = False) -> list[Node]:
        """Return the channel adapters, sorted by GUID.

        Args:
            include_aggregation: Also return SHARP aggregation nodes.
        """
        kinds = {"ca", "aggregation"} if include_aggregation else {"ca"}
        return [n for _, n in sorted(self.nodes.items()) if n.kind in kinds]

    def links_of(self, guid: str) -> list[Link]:
        """Return the links that touch a node, in canonical order."""
        return list(self._links_by_node.get(guid, ()))

    def switch_links(self, guid: str) -> list[tuple[int, str, int, Link]]:
        """Return ``(port, switch_guid, switch_port, link)`` for each port of a node cabled to a switch."""
        out: list[tuple[int, str, int, Link]] = []
        for link in self.links_of(guid):
            for end, port in link.ends():
                if end != guid:
                    continue
                far, far_port = link.other_end(guid, port)
                far_node = self.nodes.get(far)
                if far_node is not None and far_node.kind == "switch":
                    out.append((port, far, far_port, link))
        return out

    def link_at(self, guid: str, port: int) -> Link | None:
        """Return the link plugged into a port, or ``None``."""
        for link in self._links_by_node.get(guid, ()):
            if (guid, port) in link.ends():
                return link
        return None

    def neighbours(self, guid: str) -> list[str]:
        """Return the GUIDs of the nodes cabled to a node, sorted, without the node itself."""
        found = {end for link in self.links_of(guid) for end, _ in link.ends()}
        found.discard(guid)
        return sorted(found)

    def hca_attachments(
        self, host_pattern: str | re.Pattern[str] | None = None
    ) -> dict[tuple[str, str], HcaAttachment]:
        """Map each host HCA port to the switch port it is cabled to.

        This is what a rail check needs: rail ``i`` of every node of a scalable unit on
        one leaf, a different leaf per rail.

        Args:
            host_pattern: See `split_description`.

        Returns:
            ``{(host, hca_name): (switch_guid, switch_port, link)}``, for CAs whose
            description names a host. When one ``(host, hca_name)`` has several cabled
            ports (a dual-port HCA, or two CAs with the same description) each key gets
            ``/p<port>`` appended, and ``@<guid>`` too if that is still ambiguous.
        """
        found: dict[tuple[str, str], list[tuple[str, int, HcaAttachment]]] = defaultdict(list)
        for ca in self.cas():
            names = split_description(ca.description, host_pattern)
            if names is None:
                continue
            for port, far, far_port, link in self.switch_links(ca.guid):
                found[names].append((ca.guid, port, HcaAttachment(far, far_port, link)))
        result: dict[tuple[str, str], HcaAttachment] = {}
        for (host, hca), entries in sorted(found.items()):
            if len(entries) == 1:
                result[(host, hca)] = entries[0][2]
                continue
            ports = [port for _, port, _ in entries]
            for guid, port, attachment in sorted(entries, key=lambda e: (e[0], e[1])):
                suffix = f"/p{port}" if ports.count(port) == 1 else f"@{guid}/p{port}"
                result[(host, f"{hca}{suffix}")] = attachment
        return result

    def describe(self, guid: str) -> str:
        """Return ``'<description>' (<guid>)`` for messages; the GUID alone if unknown."""
        node = self.nodes.get(guid)
        return f"'{node.description}' ({guid})" if node and node.description else guid


def degraded_links(fabric: Fabric, expected_gbps: float, *, links: Iterable[Link] | None = None) -> list[Link]:
    """Return the links whose nominal rate is below ``expected_gbps`` or unknown.

    Args:
        fabric: The discovered fabric.
        expected_gbps: The nominal rate every link should run at (EDR 100, HDR 200,
            NDR 400), as in a spec's ``speed_gbps``.
        links: Only check these (for example switch-to-switch links when hosts run
            at a lower rate); default all links of ``fabric``.

    Returns:
        The degraded links, in canonical order.
    """
    candidates = fabric.links if links is None else tuple(links)
    return sorted(
        (link for link in candidates if link.nominal_gbps is None or link.nominal_gbps < expected_gbps - 1e-9),
        key=lambda link: (link.a, link.a_port, link.b, link.b_port),
    )
