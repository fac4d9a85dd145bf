"""Findings: what validation says about a spec, with where it applies and what to do."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

Path = tuple[str | int, ...]


class Level(enum.IntEnum):
    """How serious a finding is; ordered so ``>=`` compares severity."""

    INFO = 10
    WARNING = 20
    ERROR = 30

    def __str__(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class Finding:
    """One thing validation has to say, located in the spec.

    Attributes:
        code: stable identifier (``CC-E0xx`` for schema errors, rule codes such as ``NET001``).
        level: error, warning or info.
        path: field path in the document, e.g. ``("nodes", 2, "hardware")``.
        message: a full sentence saying what is wrong.
        hint: what to change, when it is not obvious from the message.
        rule: the name of the rule that produced it (for ``--skip-rule``).
        file: the file the finding is located in (the spec, or a file it references).
        line: 1-based line, 0 when unknown.
        column: 1-based column, 0 when unknown.
    """

    code: str
    level: Level
    path: Path
    message: str
    hint: str = ""
    rule: str = ""
    file: str = ""
    line: int = 0
    column: int = 0
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

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
        """``file:line:col`` (or as much of it as is known)."""
        if self.line:
            return f"{self.file}:{self.line}:{self.column}"
        return self.file

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form for ``--output json``."""
        return {
            "code": self.code,
            "level": str(self.level),
            "rule": self.rule,
            "path": self.dotted_path,
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "message": self.message,
            "hint": self.hint,
        }


class SpecError(Exception):
    """The spec is invalid; carries every finding so all can be reported at once."""

    def __init__(self, findings: list[Finding]) -> None:
        self.findings = findings
        first = findings[0] if findings else None
        summary = f"{first.location}: {first.message}" if first else "invalid spec"
        super().__init__(f"{len(findings)} problem(s) in the spec; first: {summary}")
