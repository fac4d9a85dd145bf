"""Parse ``ibnetdiscover`` (plain and ``-p``) and ``iblinkinfo`` text into a `Fabric`.

Output is taken as captured from real clusters: blank lines may be missing or
present, stderr lines (``ibwarn``, umad errors) and shell prompts may be mixed in,
descriptions may carry padding spaces or lack quotes, speeds may be unknown
(``4x???``). Such lines are skipped or reconciled and recorded in ``Fabric.notes``;
a line that belongs to none of the formats raises `FabricParseError`.

Formats follow infiniband-diags (linux-rdma/rdma-core ``infiniband-diags/ibnetdiscover.c``
and ``iblinkinfo.c``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from clusterctl.bounded import guarded, integer
from clusterctl.fabric.model import (
    UNKNOWN_SPEED_MARKERS,
    Fabric,
    Link,
    Node,
    NodeKind,
    Port,
    lanes_from_width,
    make_link,
    normalize_guid,
    speed_from_text,
)

FORMAT_PLAIN = "ibnetdiscover"
FORMAT_PORTS = "ibnetdiscover-p"
FORMAT_LINKINFO = "iblinkinfo"


class FabricParseError(ValueError):
    """Input that is not ``ibnetdiscover``, ``ibnetdiscover -p`` or ``iblinkinfo`` output.

    Attributes:
        line_no: 1-based line number (0 when the input as a whole is at fault).
        line: The offending line.
        message: What is wrong, as a full sentence.
    """

    def __init__(self, line_no: int, line: str, message: str) -> None:
        super().__init__(f"line {line_no}: {message} Line: {line.strip()!r}")
        self.line_no = line_no
        self.line = line
        self.message = message


def _unreadable(message: str) -> FabricParseError:
    """The error for input out of bounds (``clusterctl.bounded.guarded``): the input as a whole."""
    return FabricParseError(0, "", message)


# --- noise shared by all formats -------------------------------------------------------

_NOISE_RE = re.compile(
    r"^(?:ibwarn|ibpanic|iberror|ibdebug)\b"  # libibmad/ibdiag stderr
    r"|^\S+\.c:\d+;"  # "src/query_smp.c:195; umad (DR path ...) bad status 110"
    r"|^\S+:\s*(?:ibwarn|iberror|ibpanic)\b"  # "ibnetdiscover: iberror: ..."
    r"|^[\w.-]+@[\w.-]+:[^#$]*[#$](?:\s|$)"  # "root@host:/dir# iblinkinfo"
    r"|^\[[\w.-]+@[\w.-]+[^\]]*\][#$](?:\s|$)",  # "[root@host ~]# ibnetdiscover"
    re.IGNORECASE,
)
_AGGREGATION_RE = re.compile(r"aggregation\s+node", re.IGNORECASE)
_HEX = r"[0-9a-fA-F]+"


def _is_noise(line: str) -> bool:
    return bool(_NOISE_RE.search(line))


def _ca_kind(description: str) -> NodeKind:
    # SHARP Aggregation Nodes are CAs inside Quantum switches, never hosts.
    return "aggregation" if _AGGREGATION_RE.search(description) else "ca"


# --- building a fabric from many partial reports ---------------------------------------


@dataclass
class _NodeDraft:
    kind: NodeKind
    description: str = ""
    lid: int | None = None
    port_count: int | None = None
    declared: bool = False


@dataclass
class _PortDraft:
    guid: str | None = None
    lid: int | None = None
    state: str | None = None


def _seen_port(kind: NodeKind, guid: str | None, lid: int | None, state: str | None = None) -> _PortDraft:
    """A port as one report shows it; the LID printed beside a switch port is the switch's, not the port's."""
    return _PortDraft(guid, lid if kind != "switch" else None, state)


@dataclass
class _Builder:
    source: str
    nodes: dict[str, _NodeDraft] = field(default_factory=dict)
    ports: dict[tuple[str, int], _PortDraft] = field(default_factory=dict)
    links: dict[tuple[tuple[str, int], tuple[str, int]], Link] = field(default_factory=dict)
    ends: dict[tuple[str, int], tuple[tuple[str, int], tuple[str, int]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def node(
        self,
        guid: str,
        kind: NodeKind,
        description: str | None = None,
        *,
        lid: int | None = None,
        port_count: int | None = None,
        declared: bool = False,
    ) -> None:
        """Record a node; a declaration (its own header) overrides what remote ends said."""
        draft = self.nodes.get(guid)
        if draft is None:
            draft = self.nodes[guid] = _NodeDraft(kind)
        if declared or not draft.declared:
            draft.kind = kind
            if description is not None and (declared or not draft.description):
                draft.description = description.strip()
        draft.declared = draft.declared or declared
        if lid is not None and draft.lid is None:
            draft.lid = lid
        if port_count is not None:
            draft.port_count = port_count

    def port(self, guid: str, number: int, seen: _PortDraft | None = None) -> None:
        """Record a port; what an earlier report said of it wins over ``seen``."""
        draft = self.ports.setdefault((guid, number), _PortDraft())
        if seen is not None:
            draft.guid = draft.guid or seen.guid
            draft.lid = draft.lid if draft.lid is not None else seen.lid
            draft.state = draft.state or seen.state

    def link(self, new: Link, line_no: int) -> None:
        """Record a link once, whichever end reported it, and reconcile disagreements."""
        key = new.ends()
        for end in key:
            other = self.ends.get(end)
            if other is not None and other != key:
                self.notes.append(
                    f"line {line_no}: port {end[1]} of {end[0]} is reported cabled to both "
                    f"{_end_text(other, end)} and {_end_text(key, end)}; kept the first."
                )
                return
        old = self.links.get(key)
        if old is None:
            self.links[key] = new
            for end in key:
                self.ends[end] = key
            return
        kept = old
        if (old.width, old.speed) != (new.width, new.speed):
            kept = _slower(old, new)
            self.notes.append(
                f"line {line_no}: the two ends of {key[0][0]}[{key[0][1]}] <-> {key[1][0]}[{key[1][1]}] "
                f"report {old.rate_label} and {new.rate_label}; kept {kept.rate_label}."
            )
        self.links[key] = Link(
            kept.a,
            kept.a_port,
            kept.b,
            kept.b_port,
            kept.width,
            kept.speed,
            kept.state or old.state or new.state,
            kept.note or old.note or new.note,
        )

    def build(self) -> Fabric:
        port_map: dict[str, dict[int, Port]] = {guid: {} for guid in self.nodes}
        remotes: dict[tuple[str, int], tuple[str, int]] = {}
        for link in self.links.values():
            remotes[(link.a, link.a_port)] = (link.b, link.b_port)
            remotes[(link.b, link.b_port)] = (link.a, link.a_port)
        for guid, number in set(self.ports) | set(remotes):
            port_draft = self.ports.get((guid, number), _PortDraft())
            remote = remotes.get((guid, number))
            port_map.setdefault(guid, {})[number] = Port(
                number,
                port_draft.guid,
                port_draft.lid,
                remote[0] if remote else None,
                remote[1] if remote else None,
                port_draft.state,
            )
        nodes: dict[str, Node] = {}
        for guid, draft in sorted(self.nodes.items()):
            ports = tuple(port_map[guid][n] for n in sorted(port_map[guid]))
            # A CA has no node LID of its own; report its lowest-numbered port's.
            lid = draft.lid if draft.lid is not None else next((p.lid for p in ports if p.lid), None)
            nodes[guid] = Node(draft.kind, guid, draft.description, ports, lid, draft.port_count)
        links = tuple(sorted(self.links.values(), key=lambda k: (k.a, k.a_port, k.b, k.b_port)))
        return Fabric(nodes, links, tuple(self.notes), self.source)


def _end_text(key: tuple[tuple[str, int], tuple[str, int]], end: tuple[str, int]) -> str:
    far = key[1] if key[0] == end else key[0]
    return f"{far[0]}[{far[1]}]"


def _slower(first: Link, second: Link) -> Link:
    # A known rate beats an unknown one; otherwise keep the slower so a degraded link is not hidden.
    if first.nominal_gbps is None:
        return second if second.nominal_gbps is not None else first
    if second.nominal_gbps is None:
        return first
    return second if second.nominal_gbps < first.nominal_gbps else first


def _rate(width: str | None, speed: str | None, builder: _Builder, line_no: int) -> tuple[str | None, str | None]:
    """Normalise a width and speed pair; remember unrecognised speed text in the notes."""
    norm_width = f"{lanes_from_width(width)}x" if lanes_from_width(width) else None
    known = speed_from_text(speed or "")
    if known is None and speed and speed.strip().upper() not in UNKNOWN_SPEED_MARKERS:
        builder.notes.append(f"line {line_no}: unrecognised link speed {speed!r}; recorded as unknown.")
    return norm_width, known.name if known else None


# --- format detection ------------------------------------------------------------------

_PLAIN_ATTR_RE = re.compile(r"^(?P<key>[a-z]\w*)=(?P<value>\S*)\s*$")
_PLAIN_HEADER_RE = re.compile(
    r'^(?P<type>Switch|Ca|Rt)\s+(?P<nports>\d+)\s+"(?P<id>[^"]*)"\s*(?:#\s*(?P<comment>.*))?$'
)
_PLAIN_PORT_RE = re.compile(
    r"^\[(?P<port>\d+)\](?:\[ext[^\]]*\])?(?:\((?P<pguid>" + _HEX + r")\))?\s*"
    r'"(?P<rid>[^"]*)"\[(?P<rport>\d+)\](?:\[ext[^\]]*\])?(?:\((?P<rpguid>' + _HEX + r")\))?\s*"
    r"(?:#\s*(?P<comment>.*))?$"
)
_PLAIN_CHASSIS_RE = re.compile(r"^(?:Non-Chassis Nodes|Chassis\b.*)$", re.IGNORECASE)
_PORTS_RE = re.compile(
    r"^(?P<nt>SW|CA|RT)\s+(?P<lid>\d+)\s+(?P<port>\d+)\s+0x(?P<guid>" + _HEX + r")\s+"
    r"(?P<width>\d+x|\?+)\s+(?P<speed>\S+)\s*(?P<rest>.*)$"
)
_PORTS_REMOTE_RE = re.compile(
    r"^-\s+(?P<nt>SW|CA|RT)\s+(?P<lid>\d+)\s+(?P<port>\d+)\s+0x(?P<guid>" + _HEX + r")\s+"
    r"\(\s*'(?P<desc>.*)'\s+-\s+'(?P<rdesc>.*)'\s*\)\s*$"
)
_LIST_RE = re.compile(
    r"^(?P<kind>Switch|Ca|Router|Rt)\s*:\s*0x(?P<guid>" + _HEX + r")\s+ports\s+(?P<nports>\d+)\s+"
    r'"(?P<desc>[^"]*)"(?P<rest>.*)$'
)
_SECTION_RE = re.compile(r"^(?P<kind>Switch|CA|Router):?\s+(?:0x(?P<guid>" + _HEX + r")\s+)?(?P<desc>.*):\s*$")
_LINKINFO_PORT_RE = re.compile(
    r'^(?:0x(?P<nguid>[0-9a-fA-F]+)\s+"(?P<ndesc>[^"]*)"\s+)?(?:0x(?P<pguid>' + _HEX + r")\s+)?"
    r"(?P<lid>\d+)\s+(?P<port>\d+)\[[^\]]*\]\s*==\((?P<link>[^)]*)\)==>\s*(?P<remote>.*)$"
)
_LINKINFO_REMOTE_RE = re.compile(
    r"^(?:0x(?P<guid>" + _HEX + r")\s+)?(?P<lid>\d+)\s+(?P<port>\d+)\[[^\]]*\]\s*"
    r'"(?P<desc>[^"]*)"\s*(?:\((?P<note>[^)]*)\))?\s*$'
)
_LINKINFO_UNCONNECTED_RE = re.compile(r'^(?:\[[^\]]*\])?\s*"[^"]*"\s*(?:\([^)]*\))?\s*$')


# InfiniBand node descriptions are at most 64 bytes: no line of these tools comes near this.
MAX_LINE = 4096


def _significant_lines(text: str) -> list[tuple[int, str]]:
    """Return ``(line_no, stripped line)`` for non-blank, non-comment lines.

    Raises:
        FabricParseError: A line far longer than any these tools print.
    """
    out = []
    for line_no, raw in enumerate(text.splitlines(), start=1):
        if len(raw) > MAX_LINE:
            raise FabricParseError(line_no, raw[:200], f"A line of {len(raw)} characters is not a fabric tool's.")
        line = raw.strip()
        if line and not line.startswith("#"):
            out.append((line_no, line))
    return out


def detect_format(text: str) -> str:
    """Tell which tool printed ``text``.

    Returns:
        ``"ibnetdiscover"``, ``"ibnetdiscover-p"`` or ``"iblinkinfo"``.

    Raises:
        FabricParseError: When no line looks like any of them.
    """
    for line_no, line in _significant_lines(text):
        if _PORTS_RE.match(line):
            return FORMAT_PORTS
        if (
            _PLAIN_HEADER_RE.match(line)
            or _PLAIN_PORT_RE.match(line)
            or _PLAIN_ATTR_RE.match(line)
            or _PLAIN_CHASSIS_RE.match(line)
        ):
            return FORMAT_PLAIN
        if _LIST_RE.match(line) or _LINKINFO_PORT_RE.match(line) or _SECTION_RE.match(line):
            return FORMAT_LINKINFO
        if not _is_noise(line):
            raise FabricParseError(line_no, line, "This is not ibnetdiscover, ibnetdiscover -p or iblinkinfo output.")
    raise FabricParseError(0, "", "The input holds no ibnetdiscover or iblinkinfo lines.")


@guarded(_unreadable, keep=(FabricParseError,))
def parse_fabric(text: str) -> Fabric:
    """Parse the output of any supported tool, detected from its lines.

    Raises:
        FabricParseError: On input that is not one of the supported formats.
    """
    if detect_format(text) == FORMAT_LINKINFO:
        return parse_iblinkinfo(text)
    return parse_ibnetdiscover(text)


# --- ibnetdiscover (plain) ---------------------------------------------------------------


@guarded(_unreadable, keep=(FabricParseError,))
def parse_ibnetdiscover(text: str) -> Fabric:
    """Parse ``ibnetdiscover`` output, plain or ports report (``-p``), detected automatically.

    Raises:
        FabricParseError: On input that is neither; on ``iblinkinfo`` output the message
            points to `parse_iblinkinfo`.
    """
    fmt = detect_format(text)
    if fmt == FORMAT_PORTS:
        return _parse_ports_report(text)
    if fmt == FORMAT_LINKINFO:
        line_no, line = _significant_lines(text)[0]
        raise FabricParseError(line_no, line, "This is iblinkinfo output; use parse_iblinkinfo.")
    return _parse_plain(text)


_KIND_BY_ID_PREFIX: dict[str, NodeKind] = {"S": "switch", "H": "ca", "R": "router"}
_KIND_BY_HEADER: dict[str, NodeKind] = {"Switch": "switch", "Ca": "ca", "Rt": "router"}
_ID_RE = re.compile(r"^(?P<prefix>[SHR])-(?P<hex>" + _HEX + r")$")
_LID_RE = re.compile(r"\blid\s+(?P<lid>\d+)")
_PLAIN_REMOTE_TAIL_RE = re.compile(
    r"^\s*(?:lid\s+(?P<lid>\d+)\s+)?(?P<width>\d+x|\?\?)(?P<speed>\S*)(?P<extra>.*)$", re.IGNORECASE
)


def _parse_plain(text: str) -> Fabric:
    builder = _Builder(FORMAT_PLAIN)
    current: str | None = None
    current_kind: NodeKind | None = None
    attr_guid: str | None = None
    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#") or _PLAIN_CHASSIS_RE.match(line):
            continue
        if attr := _PLAIN_ATTR_RE.match(line):
            if attr["key"] in {"switchguid", "caguid", "routerguid", "rtguid"}:
                attr_guid = _guid_or_error(attr["value"].split("(")[0], line_no, raw)
            continue
        if header := _PLAIN_HEADER_RE.match(line):
            current_kind = _KIND_BY_HEADER[header["type"]]
            current = _plain_node_guid(header["id"], attr_guid, line_no, raw)
            description, rest = _split_quoted(header["comment"] or "")
            if current_kind == "ca":
                current_kind = _ca_kind(description)
            lid = _LID_RE.search(rest)
            builder.node(
                current,
                current_kind,
                description,
                lid=integer(lid["lid"]) if lid else None,
                port_count=integer(header["nports"]),
                declared=True,
            )
            attr_guid = None
            continue
        if port := _PLAIN_PORT_RE.match(line):
            if current is None or current_kind is None:
                raise FabricParseError(line_no, raw, "A port line comes before any Switch or Ca line.")
            _plain_port(builder, current, current_kind, port, line_no, raw)
            continue
        if _is_noise(line):
            builder.notes.append(f"line {line_no}: skipped tool message {line!r}.")
            continue
        raise FabricParseError(line_no, raw, "This line is not part of ibnetdiscover output.")
    return builder.build()


def _plain_port(
    builder: _Builder, current: str, current_kind: NodeKind, port: re.Match[str], line_no: int, raw: str
) -> None:
    rid = _ID_RE.match(port["rid"])
    if not rid:
        raise FabricParseError(line_no, raw, f"The remote node id {port['rid']!r} is not S-, H- or R-<guid>.")
    remote = normalize_guid(rid["hex"])
    comment = port["comment"] or ""
    local_part, _, _ = comment.partition('"')
    remote_desc, tail = _split_quoted(comment)
    tail_match = _PLAIN_REMOTE_TAIL_RE.match(tail)
    if not tail_match:
        raise FabricParseError(line_no, raw, "The port line has no link width and speed (like 4xEDR).")
    remote_kind = _KIND_BY_ID_PREFIX[rid["prefix"]]
    if remote_kind == "ca":
        remote_kind = _ca_kind(remote_desc)
    remote_lid = integer(tail_match["lid"]) if tail_match["lid"] else None
    builder.node(remote, remote_kind, remote_desc, lid=remote_lid if remote_kind == "switch" else None)
    local_lid = _LID_RE.search(local_part)
    number, remote_port = integer(port["port"]), integer(port["rport"])
    local_guid = normalize_guid(port["pguid"]) if port["pguid"] else None
    builder.port(
        current, number, _seen_port(current_kind, local_guid, integer(local_lid["lid"]) if local_lid else None)
    )
    remote_guid = normalize_guid(port["rpguid"]) if port["rpguid"] else None
    builder.port(remote, remote_port, _seen_port(remote_kind, remote_guid, remote_lid))
    width, speed = _rate(tail_match["width"], tail_match["speed"], builder, line_no)
    builder.link(make_link((current, number), (remote, remote_port), width, speed), line_no)


def _plain_node_guid(node_id: str, attr_guid: str | None, line_no: int, raw: str) -> str:
    match = _ID_RE.match(node_id)
    if match:
        return normalize_guid(match["hex"])
    if attr_guid:
        return attr_guid
    raise FabricParseError(line_no, raw, f"Cannot tell the GUID of node {node_id!r}.")


def _guid_or_error(text: str, line_no: int, raw: str) -> str:
    try:
        return normalize_guid(text)
    except ValueError as err:
        raise FabricParseError(line_no, raw, str(err)) from err


def _split_quoted(text: str) -> tuple[str, str]:
    """Return the first double-quoted string in ``text`` and what follows it."""
    match = re.search(r'"(?P<inner>[^"]*)"(?P<rest>.*)$', text)
    if not match:
        return "", text
    return match["inner"].strip(), match["rest"]


# --- ibnetdiscover -p (ports report) -----------------------------------------------------

_KIND_BY_NT: dict[str, NodeKind] = {"SW": "switch", "CA": "ca", "RT": "router"}


def _ports_kind(nt: str, description: str) -> NodeKind:
    kind = _KIND_BY_NT[nt]
    return _ca_kind(description) if kind == "ca" else kind


def _parse_ports_report(text: str) -> Fabric:
    # -p prints port GUIDs only; a switch's ports all share its port-0 GUID, which is
    # also its node GUID, while each CA port becomes a node keyed by its port GUID.
    builder = _Builder(FORMAT_PORTS)
    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _PORTS_RE.match(line)
        if not match:
            if _is_noise(line):
                builder.notes.append(f"line {line_no}: skipped tool message {line!r}.")
                continue
            raise FabricParseError(line_no, raw, "This line is not part of ibnetdiscover -p output.")
        rest = match["rest"].strip()
        remote = _PORTS_REMOTE_RE.match(rest)
        local_desc = remote["desc"] if remote else _unquote(rest)
        guid = normalize_guid(match["guid"])
        kind = _ports_kind(match["nt"], local_desc)
        lid, number = integer(match["lid"]), integer(match["port"])
        builder.node(guid, kind, local_desc, lid=lid, declared=True)
        builder.port(guid, number, _seen_port(kind, guid if kind != "switch" else None, lid))
        if remote is None:
            if rest.startswith("-"):
                raise FabricParseError(line_no, raw, "The remote end of this port is not readable.")
            continue
        rguid = normalize_guid(remote["guid"])
        rkind = _ports_kind(remote["nt"], remote["rdesc"])
        rlid, rport = integer(remote["lid"]), integer(remote["port"])
        builder.node(rguid, rkind, remote["rdesc"], lid=rlid)
        builder.port(rguid, rport, _seen_port(rkind, rguid if rkind != "switch" else None, rlid))
        width, speed = _rate(match["width"], match["speed"], builder, line_no)
        builder.link(make_link((guid, number), (rguid, rport), width, speed), line_no)
    return builder.build()


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return text[1:-1].strip()
    return text


# --- iblinkinfo ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _LinkinfoPort:
    line_no: int
    kind: NodeKind
    node_guid: str | None
    node_desc: str
    port_guid: str | None
    lid: int
    port: int
    width: str | None
    speed: str | None
    state: str | None
    remote: re.Match[str] | None


@dataclass(frozen=True)
class _Listed:
    kind: NodeKind
    guid: str
    description: str
    port_count: int
    lid: int | None


@guarded(_unreadable, keep=(FabricParseError,))
def parse_iblinkinfo(text: str) -> Fabric:
    """Parse ``iblinkinfo`` output (full, ``-S <guid>`` or line mode ``-l``).

    ``ibswitches`` / ``ibhosts`` / ``ibrouters`` lines in the same text are used to
    learn node GUIDs and kinds, since plain ``iblinkinfo`` names remote ends only by
    LID and description. A remote end that stays unresolved gets the id
    ``lid:<n>`` and a kind guessed from its port number (ports above 2 are switch
    ports), noted in ``Fabric.notes``.

    Raises:
        FabricParseError: On lines that belong to none of these tools.
    """
    builder = _Builder(FORMAT_LINKINFO)
    listed: list[_Listed] = []
    ports: list[_LinkinfoPort] = []
    section: tuple[NodeKind, str | None, str] | None = None
    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if item := _LIST_RE.match(line):
            kind = _KIND_BY_LIST[item["kind"]]
            description = item["desc"].strip()
            lid = _LID_RE.search(item["rest"])
            listed.append(
                _Listed(
                    _ca_kind(description) if kind == "ca" else kind,
                    normalize_guid(item["guid"]),
                    description,
                    integer(item["nports"]),
                    integer(lid["lid"]) if lid else None,
                )
            )
            continue
        if port := _LINKINFO_PORT_RE.match(line):
            ports.append(_linkinfo_port(port, section, line_no, raw))
            continue
        if header := _SECTION_RE.match(line):
            kind = _KIND_BY_SECTION[header["kind"]]
            description = header["desc"].strip()
            if kind == "ca":
                kind = _ca_kind(description)
            section = (kind, normalize_guid(header["guid"]) if header["guid"] else None, description)
            continue
        if _is_noise(line):
            builder.notes.append(f"line {line_no}: skipped tool message {line!r}.")
            continue
        raise FabricParseError(line_no, raw, "This line is not part of iblinkinfo output.")
    _resolve_linkinfo(builder, listed, ports)
    return builder.build()


_KIND_BY_LIST: dict[str, NodeKind] = {"Switch": "switch", "Ca": "ca", "Router": "router", "Rt": "router"}
_KIND_BY_SECTION: dict[str, NodeKind] = {"Switch": "switch", "CA": "ca", "Router": "router"}


def _linkinfo_port(
    port: re.Match[str], section: tuple[NodeKind, str | None, str] | None, line_no: int, raw: str
) -> _LinkinfoPort:
    if port["nguid"]:
        # Line mode (-l) names the local node on every line; its kind shows in the port GUID column.
        kind: NodeKind = "switch" if not port["pguid"] else _ca_kind(port["ndesc"])
        node_guid: str | None = normalize_guid(port["nguid"])
        node_desc = port["ndesc"].strip()
    elif section is not None:
        kind, node_guid, node_desc = section
    else:
        raise FabricParseError(line_no, raw, "A port line comes before any Switch: or CA: line.")
    width, speed, state = _linkinfo_rate(port["link"])
    remote_text = port["remote"].strip()
    remote = _LINKINFO_REMOTE_RE.match(remote_text)
    if remote is None and not _LINKINFO_UNCONNECTED_RE.match(remote_text):
        raise FabricParseError(line_no, raw, "The remote end of this port is not readable.")
    return _LinkinfoPort(
        line_no,
        kind,
        node_guid,
        node_desc,
        normalize_guid(port["pguid"]) if port["pguid"] else None,
        integer(port["lid"]),
        integer(port["port"]),
        width,
        speed,
        state,
        remote,
    )


def _linkinfo_rate(text: str) -> tuple[str | None, str | None, str | None]:
    """Split ``' 4X      25.78125 Gbps Active/  LinkUp'`` into width, speed text and state."""
    logical, _, _ = text.partition("/")
    tokens = logical.split()
    if not tokens:
        return None, None, None
    state = tokens[-1]
    tokens = tokens[:-1]
    width = tokens.pop(0) if tokens and lanes_from_width(tokens[0]) else None
    speed = " ".join(tokens) or None
    return width, speed, state


def _resolve_linkinfo(builder: _Builder, listed: list[_Listed], ports: list[_LinkinfoPort]) -> None:
    """Give every reported port and remote end a node GUID, then record nodes and links."""
    for item in listed:
        builder.node(item.guid, item.kind, item.description, lid=item.lid, port_count=item.port_count, declared=True)
    by_desc: dict[str, set[str]] = {}
    for item in listed:
        by_desc.setdefault(item.description, set()).add(item.guid)
    by_lid: dict[int, str] = {item.lid: item.guid for item in listed if item.lid is not None}

    def unique(description: str) -> str | None:
        guids = by_desc.get(description.strip(), set())
        return next(iter(guids)) if len(guids) == 1 else None

    local_guids: list[str] = []
    for rec in ports:
        guid = rec.node_guid or unique(rec.node_desc) or rec.port_guid
        if guid is None:
            guid = f"lid:{rec.lid}"
            builder.notes.append(
                f"line {rec.line_no}: no GUID known for {rec.node_desc!r}; using the synthetic id {guid}."
            )
        local_guids.append(guid)
        by_lid.setdefault(rec.lid, guid)
        by_desc.setdefault(rec.node_desc, set()).add(guid)
        builder.node(guid, rec.kind, rec.node_desc, lid=rec.lid, declared=True)

    for rec, guid in zip(ports, local_guids, strict=True):
        builder.port(guid, rec.port, _seen_port(rec.kind, rec.port_guid, rec.lid, rec.state))
        if rec.remote is None:
            continue
        rdesc = rec.remote["desc"].strip()
        rlid, rport = integer(rec.remote["lid"]), integer(rec.remote["port"])
        rguid = normalize_guid(rec.remote["guid"]) if rec.remote["guid"] else by_lid.get(rlid) or unique(rdesc)
        if rguid is None:
            rguid = f"lid:{rlid}"
            guessed: NodeKind = "switch" if rport > 2 else _ca_kind(rdesc)
            builder.node(rguid, guessed, rdesc, lid=rlid)
            builder.notes.append(
                f"line {rec.line_no}: remote {rdesc!r} (lid {rlid}) has no unique GUID in the input; "
                f"using the synthetic id {rguid} and guessing its kind: {guessed}."
            )
            by_lid[rlid] = rguid
        elif rguid not in builder.nodes:
            builder.node(rguid, "switch" if rport > 2 else _ca_kind(rdesc), rdesc, lid=rlid)
        builder.port(rguid, rport)
        width, speed = _rate(rec.width, rec.speed, builder, rec.line_no)
        note = (rec.remote["note"] or "").strip() or None
        builder.link(make_link((guid, rec.port), (rguid, rport), width, speed, rec.state, note), rec.line_no)
