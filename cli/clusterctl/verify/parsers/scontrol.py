"""Parse ``scontrol show node -o`` and ``scontrol show partition -o``: one record per line.

Each record is ``Key=Value`` pairs separated by spaces (``slurm_sprint_node_table`` with
``one_liner``). Values may themselves hold spaces (``OS=Linux 6.1.0 #1 SMP ...``), so a
field runs until the next `` Key=``. ``Reason=`` is printed last and is free text, so it
takes the rest of the line, less the ``[user@time]`` Slurm appends.

The node state is a base state with ``+FLAG`` suffixes (``IDLE+DRAIN``, ``DOWN+CLOUD``);
Slurm 22.05 marks a node that stopped answering with a trailing ``*`` (``IDLE*``), later
releases with ``+NOT_RESPONDING``. Both are read into ``flags``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from clusterctl.verify.parsers._text import numbered_lines
from clusterctl.verify.result import ParseError

NODES_COMMAND = "scontrol show node -o"
PARTITIONS_COMMAND = "scontrol show partition -o"

_KEY_RE = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_/:.]*)=")
_REASON_USER_RE = re.compile(r"\s\[[^\]@]*@[^\]]*\]\s*$")
# "gpu:h100:8", "gpu:8", "gpu:h100:8(S:0-1)", "gpu:h100:8(IDX:0-7)"
_GRES_RE = re.compile(r"^(?P<name>[^:(]+)(?::(?P<type>[^:(]+))?:(?P<count>\d+)(?:\(.*\))?$")


@dataclass(frozen=True)
class Gres:
    """One generic resource of a node (``gpu:h100:8``)."""

    name: str
    type: str | None
    count: int


@dataclass(frozen=True)
class SlurmNode:
    """One node as slurmctld sees it."""

    name: str
    state: str
    flags: tuple[str, ...]
    gres: tuple[Gres, ...]
    reason: str
    partitions: tuple[str, ...]
    line_no: int
    fields: dict[str, str] = field(default_factory=dict)

    @property
    def not_responding(self) -> bool:
        """slurmctld has not heard from slurmd within SlurmdTimeout."""
        return "NOT_RESPONDING" in self.flags

    @property
    def drained(self) -> bool:
        """Draining or drained (no new jobs)."""
        return "DRAIN" in self.flags

    def gres_count(self, name: str = "gpu") -> int:
        """Total count of the GRES called ``name``."""
        return sum(g.count for g in self.gres if g.name == name)

    def gres_types(self, name: str = "gpu") -> tuple[str, ...]:
        """Types of the GRES called ``name`` (untyped ones are left out)."""
        return tuple(g.type for g in self.gres if g.name == name and g.type)


@dataclass(frozen=True)
class SlurmPartition:
    """One partition and its nodes (a hostlist expression)."""

    name: str
    nodes: str
    state: str
    line_no: int
    fields: dict[str, str] = field(default_factory=dict)


def _fields(line: str) -> dict[str, str]:
    reason = ""
    cut = line.find(" Reason=")
    if line.startswith("Reason="):
        cut = 0
    if cut >= 0:
        reason = line[cut:].strip()[len("Reason=") :]
        reason = _REASON_USER_RE.sub("", reason)
        line = line[:cut]
    keys = list(_KEY_RE.finditer(line))
    values: dict[str, str] = {}
    for index, match in enumerate(keys):
        end = keys[index + 1].start() if index + 1 < len(keys) else len(line)
        values[match[1]] = line[match.end() : end].strip()
    if cut >= 0:
        values["Reason"] = reason
    return values


def _state(text: str) -> tuple[str, tuple[str, ...]]:
    parts = [p for p in text.split("+") if p]
    if not parts:
        return "UNKNOWN", ()
    base, flags = parts[0], parts[1:]
    if base.endswith("*"):
        base = base.rstrip("*")
        flags.append("NOT_RESPONDING")
    # Some releases print a suffix character on flags too ("IDLE+DRAIN*"); strip it the same way.
    cleaned: list[str] = []
    for flag in flags:
        if flag.endswith("*"):
            cleaned.append(flag.rstrip("*"))
            cleaned.append("NOT_RESPONDING")
        else:
            cleaned.append(flag)
    return base.upper(), tuple(dict.fromkeys(f.upper() for f in cleaned))


def _gres(text: str, line_no: int, raw: str) -> tuple[Gres, ...]:
    if text in ("", "(null)", "N/A"):
        return ()
    out: list[Gres] = []
    # Split on commas outside parentheses: "gpu:h100:8(S:0-1),nic:2".
    depth, current, parts = 0, "", []
    for char in text:
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    for part in parts:
        match = _GRES_RE.match(part.strip())
        if match is None:
            raise ParseError(f"unreadable Gres entry {part!r}", line_no, raw)
        out.append(Gres(name=match["name"], type=match["type"], count=int(match["count"])))
    return tuple(out)


def _records(text: str, key: str, what: str) -> list[tuple[int, str, dict[str, str]]]:
    """The ``key=...`` records of a ``scontrol show ... -o`` output: line number, line, fields.

    Raises:
        ParseError: A line is not such a record, or there is none.
    """
    lines = numbered_lines(text)
    records: list[tuple[int, str, dict[str, str]]] = []
    for line_no, raw, cleaned in lines:
        line = cleaned.strip()
        if not line:
            continue
        if not line.startswith(f"{key}="):
            raise ParseError(f"expected a {key}= record (is slurmctld reachable?)", line_no, raw)
        records.append((line_no, raw, _fields(line)))
    if not records:
        raise ParseError(f"scontrol listed no {what}", len(lines), "")
    return records


def parse_scontrol_nodes(text: str) -> tuple[SlurmNode, ...]:
    """Parse ``scontrol show node -o``.

    Args:
        text: The output; one ``NodeName=...`` line per node.

    Returns:
        Every node, in the order printed.

    Raises:
        ParseError: A line is not a node record, or there is none (scontrol's
            ``slurm_load_node error: Unable to contact slurm controller`` lands here).
    """
    nodes: list[SlurmNode] = []
    for line_no, raw, values in _records(text, "NodeName", "nodes"):
        state, flags = _state(values.get("State", ""))
        partitions = tuple(p for p in values.get("Partitions", "").split(",") if p)
        nodes.append(
            SlurmNode(
                name=values["NodeName"],
                state=state,
                flags=flags,
                gres=_gres(values.get("Gres", ""), line_no, raw),
                reason=values.get("Reason", ""),
                partitions=partitions,
                line_no=line_no,
                fields=values,
            )
        )
    return tuple(nodes)


def parse_scontrol_partitions(text: str) -> tuple[SlurmPartition, ...]:
    """Parse ``scontrol show partition -o``.

    Raises:
        ParseError: A line is not a ``PartitionName=`` record, or there is none.
    """
    return tuple(
        SlurmPartition(
            name=values["PartitionName"],
            nodes=values.get("Nodes", ""),
            state=values.get("State", ""),
            line_no=line_no,
            fields=values,
        )
        for line_no, _, values in _records(text, "PartitionName", "partitions")
    )
