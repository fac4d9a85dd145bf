"""Line handling shared by the parsers: terminal escapes and launcher prefixes."""

from __future__ import annotations

import re

# CSI sequences such as the underline nvidia-smi puts around the topo header (ESC[4m ... ESC[0m).
_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
# `srun --label` writes " 0: " (task id, right-aligned); `mpirun --tag-output` writes "[1,0]<stdout>:".
_SRUN_PREFIX_RE = re.compile(r"^\s*(\d+): ?")
_MPIRUN_PREFIX_RE = re.compile(r"^\[\d+,(\d+)\]<(?:stdout|stderr)>: ?")


def clean(line: str) -> str:
    """Drop ANSI escape sequences, carriage returns and the trailing newline from one line."""
    return _ANSI_RE.sub("", line).replace("\r", "").rstrip("\n")


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
    return int(match.group(1)), line[match.end() :]
