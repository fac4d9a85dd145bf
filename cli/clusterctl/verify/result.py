"""A check's verdict as a `Finding`, and how a parser says it could not read its input.

A check result is the package's one `Finding`: ``code`` names the judgement
(``nccl.all_reduce``, ``dcgm.diag``), ``node`` what was checked (a host, a hostlist, a
partition), ``level`` the verdict (`Verdict.level`) and ``data["figures"]`` the values read
from the output that the verdict rests on. A check run on a cluster adds where it ran
(`with_run`): ``rule`` is the check (what ``--only``/``--skip`` take), ``data["nodes"]`` the
nodes the result covers and ``data["blame"]`` those a failure counts against.

Pure (no pydantic, no plan): the GPU-machine script in ``tests/gpu/`` imports it as is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

from clusterctl.spec.findings import Finding, Level

Figures = dict[str, float | int | str]


class Verdict(StrEnum):
    """The outcome of one acceptance check, carried by its finding's level."""

    PASS = "pass"
    FAIL = "fail"
    SKIPPED = "skipped"

    @property
    def level(self) -> Level:
        """The finding level of this verdict: pass is info, skipped a warning, fail an error."""
        return _LEVEL[self]

    @classmethod
    def of(cls, finding: Finding) -> Verdict:
        """The verdict a check's finding carries."""
        return _VERDICT[finding.level]


_LEVEL = {Verdict.PASS: Level.INFO, Verdict.SKIPPED: Level.WARNING, Verdict.FAIL: Level.ERROR}
_VERDICT = {level: verdict for verdict, level in _LEVEL.items()}


def check_finding(
    check: str, target: str, verdict: Verdict, figures: Mapping[str, float | int | str], message: str, hint: str = ""
) -> Finding:
    """One verdict over one parsed output.

    Args:
        check: The judgement, e.g. ``nccl.all_reduce`` or ``dcgm.diag``.
        target: What was checked: a host, a hostlist, or empty when the output does not say.
        verdict: Pass, fail or skipped (the output did not allow a judgement).
        figures: The values read from the output that the verdict rests on (busbw, rates, ...).
        message: One sentence saying why the check passed or failed.
        hint: What to look at next when it failed; empty otherwise.
    """
    return Finding(
        code=check, level=verdict.level, message=message, hint=hint, node=target, data={"figures": dict(figures)}
    )


def passed(check: str, target: str, message: str, figures: Mapping[str, float | int | str] | None = None) -> Finding:
    """A pass."""
    return check_finding(check, target, Verdict.PASS, figures or {}, message)


def failed(check: str, target: str, message: str, hint: str = "", **figures: float | int | str) -> Finding:
    """A failure with the figures it rests on."""
    return check_finding(check, target, Verdict.FAIL, figures, message, hint)


def skipped(
    check: str, target: str, reason: str, hint: str = "", figures: Mapping[str, float | int | str] | None = None
) -> Finding:
    """A skipped result whose message is the reason (``skipped: emulated GPUs``, or why it cannot judge)."""
    return check_finding(check, target, Verdict.SKIPPED, figures or {}, reason, hint)


def figures_of(finding: Finding) -> Figures:
    """The figures a check's verdict rests on (empty for other findings)."""
    figures = finding.data.get("figures", {})
    return dict(figures) if isinstance(figures, Mapping) else {}


def with_figures(finding: Finding, **figures: float | int | str) -> Finding:
    """``finding`` with figures added (or replaced)."""
    return dataclasses.replace(finding, data={**finding.data, "figures": {**figures_of(finding), **figures}})


def with_verdict(finding: Finding, verdict: Verdict, message: str, hint: str | None = None) -> Finding:
    """``finding`` with another verdict and message (and hint, when given)."""
    return dataclasses.replace(
        finding, level=verdict.level, message=message, hint=finding.hint if hint is None else hint
    )


def with_run(
    finding: Finding,
    check: str,
    hosts: Sequence[str] = (),
    blame: Sequence[str] = (),
    **context: Any,
) -> Finding:
    """A check's result as run on a cluster: which check, the nodes it covers, whom it blames.

    Args:
        finding: The verdict.
        check: The check that produced it (``gpu``, ``nccl``): the finding's ``rule``.
        hosts: The nodes the result covers (empty for a cluster-wide result).
        blame: The nodes a failure counts against (drain candidates); empty when the failure
            cannot be pinned on a node (a spine, the storage servers).
        **context: What the report shows beside it: ``command``, and the NCCL run's ``phase``,
            ``groups`` and ``wave`` or the storage ``tier`` and ``mount``.
    """
    data = {**finding.data, "nodes": list(hosts), "blame": list(blame), **context}
    return dataclasses.replace(finding, rule=check, data=data)


def hosts_of(finding: Finding) -> tuple[str, ...]:
    """The nodes a check's result covers."""
    return tuple(finding.data.get("nodes", ()))


def blame_of(finding: Finding) -> tuple[str, ...]:
    """The nodes a failed check's result counts against."""
    return tuple(finding.data.get("blame", ()))


def sentence(parts: Sequence[str]) -> str:
    """Clauses as one sentence ending in a period; an opening plain lower-case word is capitalised.

    Why not always: an opening device or tool name (``mlx5_3``, ``all_reduce``) keeps its spelling.
    """
    text = "; ".join(parts)
    first = text.split(" ", 1)[0]
    if first.isalpha() and first.islower():
        text = text[:1].upper() + text[1:]
    return text if text.endswith(".") else text + "."


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


def unreadable(message: str) -> ParseError:
    """The parse error for output out of bounds (``clusterctl.bounded.guarded``): the input as a whole."""
    return ParseError(message, 0, "")
