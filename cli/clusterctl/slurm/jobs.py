"""The jobs that hold nodes, as ``squeue -o '%i|%N'`` lists them.

Only a job id and a node list are kept: names and users are whatever users typed, never echoed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .records import split_records

# Jobs holding nodes at once on the largest cluster, many small jobs per node.
MAX_JOBS = 1_000_000
_ROW = re.compile(r"(?P<id>[0-9]{1,12}(?:_[0-9]{1,12})?(?:\+[0-9]{1,6})?)\|(?P<nodes>[A-Za-z0-9\[\],.\-]{0,400})")


@dataclass(frozen=True)
class Jobs:
    """Jobs holding nodes as ``(id, nodes)``, or why Slurm could not be asked (``unknown``)."""

    running: tuple[tuple[str, str], ...] = ()
    unknown: str = ""

    def describe(self, most: int = 5) -> str:
        """``12 (gpu[001-002]), 13 (gpu003)`` and how many more."""
        shown = [f"{job} ({nodes or 'no nodes yet'})" for job, nodes in self.running[:most]]
        more = len(self.running) - most
        return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def parse_jobs(text: str) -> tuple[tuple[str, str], ...]:
    """``squeue -o '%i|%N'`` rows; a row of another shape is skipped.

    Raises:
        RecordError: The output is larger than any squeue listing.
    """
    rows = (_ROW.fullmatch(line) for _, line in split_records(text, MAX_JOBS))
    return tuple((m["id"], m["nodes"]) for m in rows if m)
