"""Nodes leaving the cluster: drained in Slurm, their jobs waited for, then removed.

A node recorded in the state directory that the spec no longer has leaves on the next ``up``:
it is drained with the reason ``clusterctl:remove`` (no new job starts there), and ``up`` waits
for the jobs still running on it, at most ``--drain-timeout`` seconds. Only then does the
provider remove the machine (cloud and bare-metal stacks drop it when they next apply) and the
configure stage write slurm.conf without it. When the jobs outlast the timeout, nothing is
removed and ``up`` says so; the node stays drained and the next ``up`` waits again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from clusterctl.plan import Plan
from clusterctl.remote import Executor
from clusterctl.run.events import EventBus
from clusterctl.slurm.client import Slurm
from clusterctl.slurm.reasons import REMOVE

DEFAULT_DRAIN_TIMEOUT_S = 3600.0
POLL_S = 5.0
PHASE = "provision"


class RetireError(Exception):
    """A leaving node could not be drained, or its jobs outlasted the drain timeout; nothing was removed."""


def leaving(plan: Plan, recorded: Mapping[str, str]) -> list[str]:
    """Nodes ``up`` made before (state.json's ``nodes``) that the plan no longer has."""
    planned = {n.hostname for n in plan.nodes}
    return sorted(h for h in recorded if h not in planned)


def drain_and_wait(
    plan: Plan,
    executor: Executor,
    hosts: Sequence[str],
    timeout_s: float,
    events: EventBus,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Drain ``hosts`` and return once no job holds them.

    Raises:
        RetireError: Slurm refused the drain (a node it does not know is fine: nothing runs
            there), could not be asked, or jobs still run after ``timeout_s``.
    """
    slurm = Slurm(executor, plan.launcher())
    errors = slurm.drain({h: REMOVE for h in hosts})
    for host in hosts:
        error = errors[host]
        if error and "Invalid node name" not in error:
            raise RetireError(f"could not drain {host} before removing it: {error}")
        events.host(PHASE, host, "ok" if error else "changed", "not in Slurm" if error else f"drained ({REMOVE})")
    deadline = clock() + timeout_s
    told = ""
    while True:
        jobs = slurm.jobs(hosts)
        if jobs.unknown:
            raise RetireError(f"cannot tell which jobs run on {', '.join(hosts)}: {jobs.unknown}")
        if not jobs.running:
            return
        if clock() >= deadline:
            raise RetireError(
                f"{len(jobs.running)} job(s) still run on {', '.join(hosts)} after {timeout_s:.0f} s: "
                f"{jobs.describe()}. Nothing was removed; the nodes stay drained ({REMOVE}), so no new job "
                "starts there. Run `clusterctl up` again when the jobs ended, with a longer --drain-timeout, "
                "or cancel them (scancel)."
            )
        if told != jobs.describe():
            told = jobs.describe()
            events.info(f"waiting for the jobs on the leaving nodes to end: {told}", phase=PHASE)
        sleep(POLL_S)
