"""The jobs Slurm is running now: what ``down`` refuses to destroy without ``--force``."""

from __future__ import annotations

from pathlib import Path

from clusterctl.plan import Plan
from clusterctl.run.executor import executor_for
from clusterctl.run.sshopts import SshAccessError
from clusterctl.slurm.client import Slurm
from clusterctl.slurm.jobs import Jobs


def running_jobs(plan: Plan, state_dir: Path) -> Jobs:
    """Ask Slurm on the login node (else the controller) which jobs hold nodes now."""
    try:
        return Slurm(executor_for(plan, state_dir), plan.launcher()).jobs()
    except (ValueError, SshAccessError) as exc:
        return Jobs(unknown=str(exc))
