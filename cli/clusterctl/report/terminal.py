"""Findings on a terminal: level, code and place, the message, the source line with a caret, the hint.

Rich prints the markup as styles on a terminal and as plain text elsewhere, so one function
serves both; every value is escaped (a ``[`` in a message is text, not markup) and stripped of
control sequences (a spec key or a node's output cannot drive the terminal).
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.markup import escape

from clusterctl.plain import plain
from clusterctl.spec.findings import Finding, Level

LEVEL_STYLE = {Level.ERROR: "bold red", Level.WARNING: "yellow", Level.INFO: "cyan"}


def print_excerpt(console: Console, line_no: int, text: str, column: int = 0, style: str = "bold red") -> None:
    """``   12 | the line`` and, when a column is known, a caret under it."""
    gutter = f"{line_no:>5} | "
    console.print(f"[dim]{gutter}[/dim]{safe(text.rstrip())}")
    if column > 0:
        console.print(" " * (len(gutter) + column - 1) + f"[{style}]^[/{style}]")


def safe(text: str) -> str:
    """``text`` for Rich markup: control sequences removed, ``[`` escaped."""
    return escape(plain(text))


def _read_lines(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().splitlines()
    except OSError:
        return []


def show_findings(console: Console, findings: Iterable[Finding], min_level: Level = Level.INFO) -> None:
    """Print findings with the offending source line and a caret under the column."""
    sources: dict[str, list[str]] = {}
    for finding in findings:
        if finding.level < min_level:
            continue
        style = LEVEL_STYLE[finding.level]
        where = finding.location or "(spec)"
        console.print(
            f"[{style}]{finding.level}[/{style}][dim]\\[{safe(finding.code)}][/dim] {safe(where)}"
            f" [bold]{safe(finding.dotted_path)}[/bold]"
        )
        console.print(f"  {safe(finding.message)}")
        if finding.file and finding.line and finding.quote_source:
            if finding.file not in sources:
                sources[finding.file] = _read_lines(finding.file)
            lines = sources[finding.file]
            if 0 < finding.line <= len(lines):
                print_excerpt(console, finding.line, lines[finding.line - 1], max(finding.column, 1), style)
        if finding.hint:
            console.print(f"  [dim]hint:[/dim] {safe(finding.hint)}")


def summarize(findings: Iterable[Finding]) -> str:
    """``2 errors, 1 warning`` (``no findings`` when there are none)."""
    items = list(findings)
    counts = {level: sum(1 for f in items if f.level is level) for level in Level}
    parts = [
        f"{counts[level]} {level!s}{'s' if counts[level] != 1 else ''}"
        for level in (Level.ERROR, Level.WARNING, Level.INFO)
        if counts[level]
    ]
    return ", ".join(parts) or "no findings"
