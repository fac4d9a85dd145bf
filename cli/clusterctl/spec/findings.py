"""Findings: what clusterctl has to say about a spec, a cluster, a fabric or a file, and where.

One `Finding` type and one `Level` serve every producer: the spec loader and rules (located in
the spec by field path and ``file:line:col``), ``verify`` and ``check-output`` (a check's verdict
on a node, with the figures it rests on in ``data``), ``fabric check`` (a cable or port) and
``fabric lint`` (a line of ``topology.conf``). The reporter (`clusterctl.report`) shows them on a
terminal, as JSON (``docs/schemas/report.schema.json``) and in HTML.

Why here: the spec is the first producer and imports nothing else of clusterctl's, so every
later stage can use this module without importing upward.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

Path = tuple[str | int, ...]


class Level(enum.IntEnum):
    """How serious a finding is; ordered so ``>=`` compares severity.

    For a check's verdict (verify, check-output): a pass is ``INFO``, a check that could not
    judge (skipped, with the reason as its message) is ``WARNING``, a failure is ``ERROR``.
    """

    INFO = 10
    WARNING = 20
    ERROR = 30

    def __str__(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class Finding:
    """One thing clusterctl has to say, with where it applies and what to do.

    Attributes:
        code: stable identifier: ``SPEC-*`` for schema errors, rule codes such as ``NET001``,
            ``FAB-C001`` (cabling), ``FAB-L001`` (topology.conf lint), check results such as
            ``gpu.inventory`` or ``nccl.all_reduce``.
        level: error, warning or info.
        message: a full sentence saying what is wrong (or, for a passed check, what was found).
        hint: what to change, when it is not obvious from the message.
        rule: the name of what produced it, as the options that select it take it: a spec rule
            (``--skip-rule``), a verify check (``--only``/``--skip``: ``gpu``, ``nccl``), a cabling
            finding's kind (``miscabled-rail``).
        path: field path in the spec, e.g. ``("nodes", 2, "hardware")``; empty elsewhere.
        file: the file the finding is located in (the spec, a file it references, a topology.conf).
        line: 1-based line, 0 when unknown.
        column: 1-based column, 0 when unknown.
        node: the node or hostlist a finding on a running cluster is about; a cluster-wide check
            names what it checked instead (a partition, a storage tier).
        cable: the cable or port of a fabric finding (``gpu005 mlx5_3 -> leaf2 (0x...) port 5``).
        data: structured facts behind the finding (a check's ``figures``, the nodes it covers,
            a cable's ends, the expected and found values); JSON-ready values only.
        quote_source: whether a terminal may print the source line under the message; files from
            outside the spec (machines.csv) are never quoted beyond what the message says.
    """

    code: str
    level: Level
    message: str
    hint: str = ""
    rule: str = ""
    path: Path = ()
    file: str = ""
    line: int = 0
    column: int = 0
    node: str = ""
    cable: str = ""
    data: Mapping[str, Any] = field(default_factory=dict, compare=False)
    quote_source: bool = field(default=True, compare=False, repr=False)

    @property
    def dotted_path(self) -> str:
        """The field path as ``nodes[2].hardware``."""
        out = ""
        for part in self.path:
            if isinstance(part, int):
                out += f"[{part}]"
            else:
                out += f".{part}" if out else str(part)
        return out or "(document)"

    @property
    def location(self) -> str:
        """``file:line:col`` (or as much of it as is known); the node or cable off the spec."""
        if self.line:
            return f"{self.file}:{self.line}:{self.column}" if self.column else f"{self.file}:{self.line}"
        return self.file or self.node or self.cable

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``docs/schemas/report.schema.json``, ``$defs/finding``): every key, always."""
        return {
            "code": self.code,
            "level": str(self.level),
            "rule": self.rule,
            "path": self.dotted_path if self.path else "",
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "node": self.node,
            "cable": self.cable,
            "message": self.message,
            "hint": self.hint,
            "data": dict(self.data),
        }


def count_levels(findings: list[Finding]) -> dict[str, int]:
    """``{"error": n, "warning": n, "info": n}``: every level, most serious first."""
    return {str(level): sum(1 for f in findings if f.level is level) for level in sorted(Level, reverse=True)}


class SpecError(Exception):
    """The spec is invalid; carries every finding so all can be reported at once."""

    def __init__(self, findings: list[Finding], not_run: str = "") -> None:
        self.findings = findings
        # What was not checked because of these findings (later stages), as a sentence; "" when
        # every stage ran.
        self.not_run = not_run
        first = findings[0] if findings else None
        summary = f"{first.location}: {first.message}" if first else "invalid spec"
        super().__init__(f"{len(findings)} problem(s) in the spec; first: {summary}")
