"""The jobs Slurm is running now: what ``down`` refuses to destroy without ``--force``."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from clusterctl.plan import Plan
from clusterctl.run.executor import executor_for
from clusterctl.run.jobs import Executor
from clusterctl.run.sshopts import SshAccessError
from clusterctl.verify.base import last_line, launcher_host

# Running, completing (epilogs), configuring (nodes booting for it) and suspended jobs all hold nodes.
JOBS_COMMAND = "squeue -h -t RUNNING,COMPLETING,CONFIGURING,SUSPENDED -o '%i|%N'"
JOBS_TIMEOUT_S = 30.0
# Only a job id and a node list are kept: names and users are whatever users typed, never echoed.
_ROW = re.compile(r"\A(?P<id>[0-9]{1,12}(?:_[0-9]{1,12})?(?:\+[0-9]{1,6})?)\|(?P<nodes>[A-Za-z0-9\[\],.\-]{0,400})\Z")


@dataclass(frozen=True)
class Jobs:
    """Running jobs as ``(id, nodes)``, or why Slurm could not be asked (``unknown``)."""

    running: tuple[tuple[str, str], ...] = ()
    unknown: str = ""

    def describe(self, most: int = 5) -> str:
        """``12 (gpu[001-002]), 13 (gpu003)`` and how many more."""
        shown = [f"{job} ({nodes or 'no nodes yet'})" for job, nodes in self.running[:most]]
        more = len(self.running) - most
        return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def parse_jobs(text: str) -> tuple[tuple[str, str], ...]:
    """``squeue -o '%i|%N'`` rows; a row of another shape is skipped."""
    rows = (_ROW.match(line.strip()) for line in text.splitlines() if line.strip())
    return tuple((m["id"], m["nodes"]) for m in rows if m)


def jobs_command(nodes: Sequence[str] = ()) -> str:
    """``squeue`` for the jobs holding nodes: all of them, or those on ``nodes``."""
    return JOBS_COMMAND + (f" -w {shlex.quote(','.join(nodes))}" if nodes else "")


def ask_jobs(executor: Executor, launcher: str, nodes: Sequence[str] = ()) -> Jobs:
    """The jobs holding nodes (or ``nodes``), as ``squeue`` on ``launcher`` lists them."""
    rc, out, err = executor.run(launcher, jobs_command(nodes), JOBS_TIMEOUT_S)
    if rc != 0:
        return Jobs(unknown=f"squeue on {launcher} failed: {last_line(err) or last_line(out) or f'exit {rc}'}")
    return Jobs(running=parse_jobs(out))


def running_jobs(plan: Plan, state_dir: Path) -> Jobs:
    """Ask Slurm on the login node (else the controller) which jobs hold nodes now."""
    try:
        return ask_jobs(executor_for(plan, state_dir), launcher_host(plan))
    except (ValueError, SshAccessError) as exc:
        return Jobs(unknown=str(exc))
