"""Nodes leaving the cluster: drained in Slurm, their jobs waited for, then removed.

A node recorded in the state directory that the spec no longer has leaves on the next ``up``:
it is drained with the reason ``clusterctl:remove`` (no new job starts there), and ``up`` waits
for the jobs still running on it, at most ``--drain-timeout`` seconds. Only then does the
provider remove the machine (cloud and bare-metal stacks drop it when they next apply) and the
configure stage write slurm.conf without it. When the jobs outlast the timeout, nothing is
removed and ``up`` says so; the node stays drained and the next ``up`` waits again.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Mapping, Sequence

from clusterctl.drain_reasons import REMOVE, UPGRADE
from clusterctl.plan import Plan
from clusterctl.run.events import EventBus
from clusterctl.run.jobs import Executor, run_many
from clusterctl.run.running_jobs import ask_jobs
from clusterctl.verify.base import last_line, launcher_host

REASON = REMOVE
UPGRADE_REASON = UPGRADE
"""The drain reason of a rolling upgrade (run/upgrade.py)."""
DEFAULT_DRAIN_TIMEOUT_S = 3600.0
POLL_S = 5.0
SCONTROL_TIMEOUT_S = 60.0
PHASE = "provision"


class RetireError(Exception):
    """A leaving node could not be drained, or its jobs outlasted the drain timeout; nothing was removed."""


def leaving(plan: Plan, recorded: Mapping[str, str]) -> list[str]:
    """Nodes ``up`` made before (state.json's ``nodes``) that the plan no longer has."""
    planned = {n.hostname for n in plan.nodes}
    return sorted(h for h in recorded if h not in planned)


def drain_command(host: str, reason: str = REASON) -> str:
    """``scontrol update`` draining ``host`` with ``reason`` (by default clusterctl's removal reason)."""
    return f"scontrol update nodename={shlex.quote(host)} state=drain reason={shlex.quote(reason)}"


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
    launcher = launcher_host(plan)
    answers = run_many(executor, [(launcher, drain_command(h), SCONTROL_TIMEOUT_S) for h in hosts])
    for host, (rc, out, err) in zip(hosts, answers, strict=True):
        if rc != 0 and "Invalid node name" not in err + out:
            raise RetireError(f"could not drain {host} before removing it: {last_line(err) or last_line(out)}")
        events.host(PHASE, host, "changed" if rc == 0 else "ok", f"drained ({REASON})" if rc == 0 else "not in Slurm")
    deadline = clock() + timeout_s
    told = ""
    while True:
        jobs = ask_jobs(executor, launcher, hosts)
        if jobs.unknown:
            raise RetireError(f"cannot tell which jobs run on {', '.join(hosts)}: {jobs.unknown}")
        if not jobs.running:
            return
        if clock() >= deadline:
            raise RetireError(
                f"{len(jobs.running)} job(s) still run on {', '.join(hosts)} after {timeout_s:.0f} s: "
                f"{jobs.describe()}. Nothing was removed; the nodes stay drained ({REASON}), so no new job "
                "starts there. Run `clusterctl up` again when the jobs ended, with a longer --drain-timeout, "
                "or cancel them (scancel)."
            )
        if told != jobs.describe():
            told = jobs.describe()
            events.info(f"waiting for the jobs on the leaving nodes to end: {told}", phase=PHASE)
        sleep(POLL_S)
