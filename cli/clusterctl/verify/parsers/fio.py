"""Parse fio ``--output-format=json`` (or ``json+``) results.

Per job, fio reports ``read`` and ``write`` blocks with ``bw_bytes`` (bytes/s) and ``bw``
(KiB/s), plus ``error`` (an errno, 0 when the job succeeded). On an I/O error fio writes
its ``fio: pid=..., err=...`` line to stdout ahead of the JSON document, so leading text
is skipped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from clusterctl.bounded import BoundsError, guarded, json_decoder
from clusterctl.verify.result import ParseError, unreadable


@dataclass(frozen=True)
class FioDirection:
    """Read or write figures of one job."""

    io_bytes: int
    bw_bytes: int
    iops: float
    runtime_ms: int


@dataclass(frozen=True)
class FioJob:
    """One job (or one group, with ``group_reporting``)."""

    name: str
    group_id: int
    error: int
    read: FioDirection
    write: FioDirection
    options: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class FioResult:
    """A parsed fio JSON report."""

    jobs: tuple[FioJob, ...]
    fio_version: str | None = None

    def _bw(self, direction: str) -> int:
        # Jobs of one group run together, so their bandwidths add up; stonewalled groups
        # run one after another, so the best group is the figure.
        per_group: dict[int, int] = {}
        for job in self.jobs:
            figures: FioDirection = getattr(job, direction)
            per_group[job.group_id] = per_group.get(job.group_id, 0) + figures.bw_bytes
        return max(per_group.values(), default=0)

    @property
    def read_bw_bytes(self) -> int:
        """Aggregate read bandwidth in bytes/s (the sum over a group, best group)."""
        return self._bw("read")

    @property
    def write_bw_bytes(self) -> int:
        """Aggregate write bandwidth in bytes/s (the sum over a group, best group)."""
        return self._bw("write")

    @property
    def failed_jobs(self) -> tuple[FioJob, ...]:
        """Jobs that ended with a non-zero errno."""
        return tuple(j for j in self.jobs if j.error != 0)


def _direction(block: Any) -> FioDirection:
    if not isinstance(block, dict):
        return FioDirection(io_bytes=0, bw_bytes=0, iops=0.0, runtime_ms=0)
    # bw_bytes appeared in fio 3.x; older reports only have bw in KiB/s.
    bw_bytes = block.get("bw_bytes", int(block.get("bw", 0)) * 1024)
    io_bytes = block.get("io_bytes", int(block.get("io_kbytes", 0)) * 1024)
    return FioDirection(
        io_bytes=int(io_bytes),
        bw_bytes=int(bw_bytes),
        iops=float(block.get("iops", 0.0)),
        runtime_ms=int(block.get("runtime", 0)),
    )


@guarded(unreadable)
def parse_fio_json(text: str) -> FioResult:
    """Parse fio JSON output.

    Args:
        text: What fio wrote with ``--output-format=json``; text before the opening
            ``{`` line (fio's own error lines) and after the document is ignored.

    Returns:
        The jobs with their read and write figures and errors.

    Raises:
        ParseError: No JSON document is found, it is malformed, or it has no jobs.
    """
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("{")), None)
    if start is None:
        raise ParseError("no fio JSON document found (run fio with --output-format=json)", len(lines), "")
    body = "\n".join(lines[start:])
    try:
        document, _ = json_decoder(body, "fio JSON document").raw_decode(body)
    except json.JSONDecodeError as exc:
        line_no = start + exc.lineno
        raise ParseError(f"malformed fio JSON: {exc.msg}", line_no, lines[line_no - 1]) from None
    except BoundsError as exc:
        raise ParseError(f"{exc}", start + 1, lines[start]) from None
    jobs = document.get("jobs") if isinstance(document, dict) else None
    if not isinstance(jobs, list) or not jobs:
        raise ParseError("the fio JSON document has no jobs", start + 1, lines[start])
    parsed: list[FioJob] = []
    for index, job in enumerate(jobs):
        if not isinstance(job, dict) or "jobname" not in job:
            raise ParseError(f"fio job {index} has no jobname", start + 1, lines[start])
        options = job.get("job options", {})
        try:
            parsed.append(
                FioJob(
                    name=str(job["jobname"]),
                    group_id=int(job.get("groupid", 0)),
                    error=int(job.get("error", 0)),
                    read=_direction(job.get("read")),
                    write=_direction(job.get("write")),
                    options={str(k): str(v) for k, v in options.items()} if isinstance(options, dict) else {},
                )
            )
        except (TypeError, ValueError) as exc:
            raise ParseError(
                f"fio job {job['jobname']!r} has a malformed value: {exc}", start + 1, lines[start]
            ) from None
    version = document.get("fio version")
    return FioResult(jobs=tuple(parsed), fio_version=str(version) if version is not None else None)
