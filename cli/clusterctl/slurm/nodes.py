"""Slurm's nodes and partitions, read from ``scontrol show node -o`` and ``scontrol show partition -o``.

The node state is a base state with ``+FLAG`` suffixes (``IDLE+DRAIN``, ``DOWN+CLOUD``); Slurm
22.05 marks a node that stopped answering with a trailing ``*`` (``IDLE*``), later releases with
``+NOT_RESPONDING``. Both are read into ``flags``. Powered-down cloud nodes carry ``~``, ``#``
or ``%`` in sinfo only; scontrol spells them as flags (``POWERED_DOWN``, ``POWERING_UP``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from .names import is_node_name
from .records import NODE_KEYS, PARTITION_KEYS, RecordError, records

# "gpu:h100:8", "gpu:8", "gpu:h100:8(S:0-1)", "gpu:h100:8(IDX:0-7)"; counts of at most 9 digits.
_GRES_RE = re.compile(r"(?P<name>[^:(),]{1,64})(?::(?P<type>[^:(),]{1,64}))?:(?P<count>\d{1,9})(?:\([^()]{0,256}\))?")
MAX_GRES = 64
_STATE_PART_RE = re.compile(r"[A-Za-z_]{1,32}\*?")


@dataclass(frozen=True)
class Gres:
    """One generic resource of a node (``gpu:h100:8``)."""

    name: str
    type: str | None
    count: int


@dataclass(frozen=True)
class SlurmNode:
    """One node as slurmctld sees it.

    ``ambiguous`` is set when the record names a key twice (free text forged a field): nothing
    may act on such a node.
    """

    name: str
    state: str
    flags: tuple[str, ...]
    gres: tuple[Gres, ...]
    reason: str
    partitions: tuple[str, ...]
    line_no: int
    address: str = ""
    ambiguous: bool = False
    fields: dict[str, str] = field(default_factory=dict)

    @property
    def not_responding(self) -> bool:
        """slurmctld has not heard from slurmd within SlurmdTimeout."""
        return "NOT_RESPONDING" in self.flags

    @property
    def drained(self) -> bool:
        """Draining or drained (no new jobs)."""
        return "DRAIN" in self.flags

    @property
    def cloud(self) -> bool:
        """A power-saving (burst) node, or one Slurm has powered down."""
        return "CLOUD" in self.flags or any(f.startswith("POWER") for f in self.flags)

    def gres_count(self, name: str = "gpu") -> int:
        """Total count of the GRES called ``name``."""
        return sum(g.count for g in self.gres if g.name == name)

    def gres_types(self, name: str = "gpu") -> tuple[str, ...]:
        """Types of the GRES called ``name`` (untyped ones are left out)."""
        return tuple(g.type for g in self.gres if g.name == name and g.type)

    def compact_state(self) -> str:
        """The state as sinfo names it: ``idle``, ``mixed``, ``drained`` (idle or down and drained), ``draining``."""
        state = self.state.lower()
        if self.drained:
            return "drained" if state in ("idle", "down") else "draining"
        return state

    def gres_text(self) -> str:
        """``gpu:h100:8`` (comma-separated), as planned GRES are written."""
        return ",".join(":".join(str(p) for p in (g.name, g.type, g.count) if p is not None) for g in self.gres)


@dataclass(frozen=True)
class SlurmPartition:
    """One partition and its nodes (a hostlist expression)."""

    name: str
    nodes: str
    state: str
    line_no: int
    fields: dict[str, str] = field(default_factory=dict)


def parse_state(text: str) -> tuple[str, tuple[str, ...]]:
    """``IDLE+DRAIN*`` -> ``("IDLE", ("DRAIN", "NOT_RESPONDING"))``; anything unreadable is UNKNOWN."""
    parts = [p for p in text.split("+") if p]
    if not parts or not all(_STATE_PART_RE.fullmatch(p) for p in parts):
        return "UNKNOWN", ()
    flags: list[str] = []
    base = parts[0]
    if base.endswith("*"):
        base = base[:-1]
        flags.append("NOT_RESPONDING")
    for flag in parts[1:]:
        if flag.endswith("*"):
            flags += [flag[:-1], "NOT_RESPONDING"]
        else:
            flags.append(flag)
    return base.upper(), tuple(dict.fromkeys(f.upper() for f in flags))


def parse_gres(text: str, line_no: int = 0) -> tuple[Gres, ...]:
    """``gpu:h100:8(S:0-1),nic:2`` -> its resources.

    Raises:
        RecordError: An entry is not ``name[:type]:count[(...)]``.
    """
    if text in ("", "(null)", "N/A"):
        return ()
    parts: list[str] = []
    depth, start = 0, 0
    for index, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    if len(parts) > MAX_GRES:
        raise RecordError(f"more than {MAX_GRES} Gres entries", line_no)
    out: list[Gres] = []
    for part in parts:
        match = _GRES_RE.fullmatch(part.strip())
        if match is None:
            raise RecordError(f"unreadable Gres entry {part[:80]!r}", line_no)
        out.append(Gres(name=match["name"], type=match["type"], count=int(match["count"])))
    return tuple(out)


def parse_nodes(text: str) -> tuple[SlurmNode, ...]:
    """Parse ``scontrol show node -o``.

    A name listed twice makes both records ambiguous (a forged record is never trusted over the
    real one).

    Raises:
        RecordError: A line is not a node record, or there is none (scontrol's
            ``slurm_load_node error: Unable to contact slurm controller`` lands here).
    """
    nodes: list[SlurmNode] = []
    for record in records(text, "NodeName", NODE_KEYS):
        values = record.fields
        state, flags = parse_state(values.get("State", ""))
        partitions = tuple(p for p in values.get("Partitions", "").split(",") if p and p != "(null)")
        nodes.append(
            SlurmNode(
                name=values["NodeName"],
                state=state,
                flags=flags,
                gres=parse_gres(values.get("Gres", ""), record.line_no),
                reason=values.get("Reason", ""),
                partitions=partitions,
                line_no=record.line_no,
                address=values.get("NodeAddr", ""),
                # A name that is not one cannot be a node of any plan: nothing acts on it.
                ambiguous=record.ambiguous or not is_node_name(values["NodeName"]),
                fields=values,
            )
        )
    seen: dict[str, int] = {}
    for node in nodes:
        seen[node.name] = seen.get(node.name, 0) + 1
    twice = {name for name, count in seen.items() if count > 1}
    if twice:
        nodes = [replace(n, ambiguous=True) if n.name in twice else n for n in nodes]
    return tuple(nodes)


def parse_partitions(text: str) -> tuple[SlurmPartition, ...]:
    """Parse ``scontrol show partition -o``.

    Raises:
        RecordError: A line is not a ``PartitionName=`` record, or there is none.
    """
    return tuple(
        SlurmPartition(
            name=r.fields["PartitionName"],
            nodes=r.fields.get("Nodes", ""),
            state=r.fields.get("State", ""),
            line_no=r.line_no,
            fields=r.fields,
        )
        for r in records(text, "PartitionName", PARTITION_KEYS)
    )


def by_name(nodes: tuple[SlurmNode, ...]) -> dict[str, SlurmNode]:
    """Nodes by name (an ambiguous name keeps its first record, marked ambiguous)."""
    out: dict[str, SlurmNode] = {}
    for node in nodes:
        out.setdefault(node.name, node)
    return out
