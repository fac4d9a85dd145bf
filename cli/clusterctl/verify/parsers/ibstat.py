"""Parse ``ibstat`` (infiniband-diags): one block per channel adapter, one sub-block per port.

Format (infiniband-diags ``ibstat.c``, ``ca_dump``/``port_dump``)::

    CA 'mlx5_0'
            CA type: MT4129
            Number of ports: 1
            Firmware version: 28.39.1002
            ...
            Port 1:
                    State: Active
                    Physical state: LinkUp
                    Rate: 400
                    ...
                    Link layer: InfiniBand

``Rate`` is in Gb/s: an integer, ``2.5`` for SDR x1, or ``40 (FDR10)``. ``State`` is one
of Down, Initializing, Armed, Active; ``Physical state`` one of Sleep, Polling, Disabled,
PortConfigurationTraining, LinkUp, LinkErrorRecovery, PhyTest. Indentation is not relied
on: copies pasted into documents often lose it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from clusterctl.bounded import guarded, integer, real
from clusterctl.verify.parsers._text import numbered_lines, split_launcher_prefix
from clusterctl.verify.result import ParseError, unreadable

_CA_RE = re.compile(r"^CA '(?P<name>[^']+)'$")
_PORT_RE = re.compile(r"^Port (?P<number>\d+):$")
_FIELD_RE = re.compile(r"^(?P<key>[A-Za-z][A-Za-z ]*?):\s*(?P<value>.*)$")
_RATE_RE = re.compile(r"^(?P<rate>\d+(?:\.\d+)?)(?:\s*\((?P<note>[^)]*)\))?$")
# ibstat's fatal messages (stderr, often captured together with stdout).
_FAILURE_RE = re.compile(r"^(ibpanic|ibwarn|ibstat):", re.IGNORECASE)


@dataclass(frozen=True)
class IbPort:
    """One ``Port N:`` block. ``rate_gbps`` is None only when the Rate line is absent."""

    number: int
    state: str
    physical_state: str
    rate_gbps: float | None
    link_layer: str | None
    base_lid: int | None
    sm_lid: int | None
    port_guid: str | None
    line_no: int
    rate_note: str | None = None
    fields: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class IbCa:
    """One ``CA 'name'`` block with its ports."""

    name: str
    ca_type: str | None
    number_of_ports: int | None
    firmware_version: str | None
    node_guid: str | None
    ports: tuple[IbPort, ...]
    line_no: int
    fields: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class IbStat:
    """Every CA in an ``ibstat`` output, in the order printed."""

    cas: tuple[IbCa, ...]

    def ca(self, name: str) -> IbCa | None:
        """The CA called ``name`` (``mlx5_0``), or None."""
        return next((ca for ca in self.cas if ca.name == name), None)


def _int_or_none(value: str | None) -> int | None:
    return integer(value) if value is not None and value.isdigit() else None


def _port(number: int, fields: dict[str, str], line_no: int, lines: dict[str, tuple[int, str]]) -> IbPort:
    rate: float | None = None
    note: str | None = None
    if "Rate" in fields:
        match = _RATE_RE.match(fields["Rate"])
        if match is None:
            bad_no, bad_line = lines["Rate"]
            raise ParseError(f"rate {fields['Rate']!r} is not a number of Gb/s", bad_no, bad_line)
        rate, note = real(match["rate"]), match["note"]
    for key in ("State", "Physical state"):
        if key not in fields:
            raise ParseError(f"port {number} has no {key} line", line_no, f"Port {number}:")
    return IbPort(
        number=number,
        state=fields["State"],
        physical_state=fields["Physical state"],
        rate_gbps=rate,
        rate_note=note,
        link_layer=fields.get("Link layer"),
        base_lid=_int_or_none(fields.get("Base lid")),
        sm_lid=_int_or_none(fields.get("SM lid")),
        port_guid=fields.get("Port GUID"),
        line_no=line_no,
        fields=dict(fields),
    )


@guarded(unreadable)
def parse_ibstat(text: str) -> IbStat:
    """Parse the output of ``ibstat`` (all CAs, or one CA given by name).

    Args:
        text: The captured output.

    Returns:
        The CAs with their ports.

    Raises:
        ParseError: ibstat reported a failure, a line is neither a CA, a port nor a
            ``key: value`` field, a port lacks its State lines, or no CA is found.
    """
    lines = numbered_lines(text)
    cas: list[IbCa] = []
    ca: tuple[str, int, dict[str, str]] | None = None
    ports: list[IbPort] = []
    port: tuple[int, int, dict[str, str], dict[str, tuple[int, str]]] | None = None

    def close_port() -> None:
        nonlocal port
        if port is not None:
            ports.append(_port(port[0], port[2], port[1], port[3]))
            port = None

    def close_ca() -> None:
        nonlocal ca, ports
        close_port()
        if ca is not None:
            name, line_no, fields = ca
            cas.append(
                IbCa(
                    name=name,
                    ca_type=fields.get("CA type") or None,
                    number_of_ports=_int_or_none(fields.get("Number of ports")),
                    firmware_version=fields.get("Firmware version") or None,
                    node_guid=fields.get("Node GUID"),
                    ports=tuple(ports),
                    line_no=line_no,
                    fields=fields,
                )
            )
        ca, ports = None, []

    for line_no, raw, cleaned in lines:
        unstripped = split_launcher_prefix(cleaned)[1]
        line = unstripped.strip()
        if not line:
            continue
        if _FAILURE_RE.match(line):
            raise ParseError(f"ibstat failed: {line}", line_no, raw)
        if match := _CA_RE.match(line):
            close_ca()
            ca = (match["name"], line_no, {})
        elif match := _PORT_RE.match(line):
            if ca is None:
                raise ParseError("port block before any CA 'name' line", line_no, raw)
            close_port()
            port = (integer(match["number"]), line_no, {}, {})
        elif match := _FIELD_RE.match(line):
            if port is not None:
                port[2][match["key"]] = match["value"].strip()
                port[3][match["key"]] = (line_no, raw)
            elif ca is not None:
                ca[2][match["key"]] = match["value"].strip()
            else:
                continue  # a shell prompt or other text before the first CA
        elif ca is not None and unstripped[:1].isspace():
            # Indented lines belong to a CA block; unindented ones (a shell prompt after
            # the output) are not ibstat's.
            raise ParseError("line is not a CA, port or 'key: value' field", line_no, raw)
    close_ca()
    if not cas:
        raise ParseError("no CA 'name' block found in ibstat output", len(lines), "")
    return IbStat(cas=tuple(cas))
