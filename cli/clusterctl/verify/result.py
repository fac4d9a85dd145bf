"""What a check concludes (`CheckResult`) and how a parser says it could not read its input."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Verdict(StrEnum):
    """The outcome of one acceptance check."""

    PASS = "pass"
    FAIL = "fail"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class CheckResult:
    """One verdict over one parsed output.

    Attributes:
        check: Check name, e.g. ``nccl.all_reduce`` or ``dcgm.diag``.
        target: What was checked: a hostlist, a host, or empty when the output does not say.
        verdict: Pass, fail or skipped (the output did not allow a judgement).
        figures: The values read from the output that the verdict rests on (busbw, rates, ...).
        message: One sentence saying why the check passed or failed.
        hint: What to look at next when it failed; empty otherwise.
    """

    check: str
    target: str
    verdict: Verdict
    figures: dict[str, float | int | str]
    message: str
    hint: str = ""

    @property
    def passed(self) -> bool:
        """True when the verdict is pass."""
        return self.verdict is Verdict.PASS


class ParseError(Exception):
    """A tool output that cannot be parsed.

    Attributes:
        message: What is wrong, as a sentence.
        line_no: 1-based number of the line that broke parsing; for "nothing found"
            errors, the number of lines read (the end of the input).
        line: That line as it appeared in the input (empty at end of input).
    """

    def __init__(self, message: str, line_no: int, line: str) -> None:
        super().__init__(message, line_no, line)
        self.message = message
        self.line_no = line_no
        self.line = line

    def __str__(self) -> str:
        return f"line {self.line_no}: {self.message}"
