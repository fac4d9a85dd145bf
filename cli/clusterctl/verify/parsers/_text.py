"""Line handling shared by the parsers: terminal escapes and launcher prefixes."""

from __future__ import annotations

import re

from clusterctl.bounded import integer
from clusterctl.plain import plain

# `srun --label` writes " 0: " (task id, right-aligned); `mpirun --tag-output` writes "[1,0]<stdout>:".
_SRUN_PREFIX_RE = re.compile(r"^\s*(\d+): ?")
_MPIRUN_PREFIX_RE = re.compile(r"^\[\d+,(\d+)\]<(?:stdout|stderr)>: ?")


def clean(line: str) -> str:
    """One line without control sequences (the underline nvidia-smi puts around the topo header, and any
    OSC or C1 sequence a hostile output carries) or control characters but tabs, carriage returns included."""
    return plain(line).rstrip("\n")


def numbered_lines(text: str) -> list[tuple[int, str, str]]:
    """Split text into ``(line_no, raw_line, cleaned_line)`` with 1-based numbers."""
    return [(i, raw, clean(raw)) for i, raw in enumerate(text.splitlines(), start=1)]


def split_launcher_prefix(line: str) -> tuple[int | None, str]:
    """Split a launcher's per-task label off a line.

    Args:
        line: One cleaned output line.

    Returns:
        ``(task, rest)``: the task or rank number from an ``srun --label`` or
        ``mpirun --tag-output`` prefix (None when the line has no prefix) and the line
        without it.
    """
    match = _MPIRUN_PREFIX_RE.match(line) or _SRUN_PREFIX_RE.match(line)
    if match is None:
        return None, line
    return integer(match.group(1)), line[match.end() :]
