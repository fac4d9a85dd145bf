"""Rolling upgrade of the pinned stack: a change to ``versions`` rolls through the compute nodes in batches.

``up`` records the pinned versions of every configure run that succeeded. When the spec pins
others, the nodes that are not in service for jobs (controllers, login nodes, free spares, new
nodes) converge first, then the compute nodes in service go in batches (``--max-unavailable``;
by default one scalable unit, else 10 % of them): each batch is drained with the reason
``clusterctl:upgrade``, its running jobs are waited for (at most ``--drain-timeout``), it
converges, it reboots where the driver changed (``scontrol reboot ASAP nextstate=DOWN``, so the
node comes back out of service), it runs its health check, and only the nodes that pass are
resumed. The first batch that fails stops the roll, its nodes left drained with the reason. The
batches done are kept in the state, so the next ``up`` goes on with the rest.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from clusterctl.ops.spares import health_check, slurm_nodes
from clusterctl.plan.models import Plan, PlanNode
from clusterctl.remote import Executor
from clusterctl.run.ansible import ConfigureResult
from clusterctl.run.events import EventBus
from clusterctl.run.providers.base import ProviderError
from clusterctl.run.state import StateDir
from clusterctl.slurm.client import Slurm
from clusterctl.slurm.reasons import UPGRADE

REASON = UPGRADE
VERSIONS_KEY = "versions"
PROGRESS_KEY = "upgrade"
PHASE = "configure"
POLL_S = 5.0
BOOT_ID_TIMEOUT_S = 60.0
REBOOT_TIMEOUT_S = 1800.0
REBOOT_FOR = frozenset({"nvidia_driver"})
"""Pins whose change needs the node rebooted (the kernel modules of the driver in use)."""


def changed_versions(recorded: Mapping[str, str] | None, planned: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """Pins that differ from the last converge's: name -> (was, is); none without a record."""
    if not recorded:
        return {}
    names = sorted(set(recorded) | set(planned))
    return {n: (recorded.get(n, ""), planned.get(n, "")) for n in names if recorded.get(n) != planned.get(n)}


def rolling_nodes(plan: Plan, existing: Sequence[str]) -> list[PlanNode]:
    """The compute nodes that roll: in service for jobs and made before this ``up``."""
    made = set(existing)
    return [n for n in plan.nodes if n.role == "compute" and n.in_service and not n.burst and n.hostname in made]


def progress_done(saved: Mapping[str, Any], plan: Plan) -> list[str]:
    """The nodes an interrupted roll to ``plan``'s pins already upgraded (``saved``: the state's content)."""
    progress = saved.get(PROGRESS_KEY) or {}
    if progress.get("to") != dict(plan.cluster.versions):
        return []
    return [h for h in progress.get("done", []) if isinstance(h, str)]


def rolls(saved: Mapping[str, Any], plan: Plan) -> bool:
    """The next configure is a rolling upgrade: a pin changed since the last converge, or a roll is under way."""
    return bool(changed_versions(saved.get(VERSIONS_KEY), plan.cluster.versions) or saved.get(PROGRESS_KEY))


def planned_batches(
    plan: Plan, saved: Mapping[str, Any], existing: Sequence[str], max_unavailable: int | None
) -> list[list[str]]:
    """The batches the next ``up`` rolls through (none when it does not roll), as :meth:`Roll.run` makes them."""
    if not rolls(saved, plan):
        return []
    done = set(progress_done(saved, plan))
    return batches([n for n in rolling_nodes(plan, existing) if n.hostname not in done], max_unavailable)


def not_upgraded(plan: Plan, state: StateDir) -> set[str]:
    """The compute nodes a rolling upgrade under way has not upgraded yet (none when no roll is under way)."""
    saved = state.read().get(PROGRESS_KEY)
    if not saved:
        return set()
    done = set(saved.get("done", []))
    return {n.hostname for n in plan.nodes if n.role == "compute" and n.hostname not in done}


def batches(nodes: Sequence[PlanNode], max_unavailable: int | None) -> list[list[str]]:
    """``nodes`` in batches: ``max_unavailable`` at a time; by default one SU each, else 10 % (at least one)."""
    if max_unavailable is None and nodes and all(n.su is not None for n in nodes):
        by_su: dict[int, list[str]] = {}
        for node in nodes:
            by_su.setdefault(node.su or 0, []).append(node.hostname)
        return [by_su[su] for su in sorted(by_su)]
    size = max_unavailable or max(1, math.ceil(len(nodes) / 10))
    hosts = [n.hostname for n in nodes]
    return [hosts[i : i + size] for i in range(0, len(hosts), size)]


@dataclass
class RollResult:
    """What the roll did: the nodes upgraded, and why it stopped if it did."""

    done: list[str] = field(default_factory=list)
    stopped: str = ""
    failures: list[ConfigureResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every batch upgraded and back in service."""
        return not self.stopped


@dataclass
class Roll:
    """One rolling upgrade of ``plan``'s pins; :meth:`run` does the batches not done yet."""

    plan: Plan
    state: StateDir
    executor: Executor
    events: EventBus
    converge: Callable[[list[str]], ConfigureResult]
    reboot: bool = False
    drain_timeout: float = 3600.0
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    # Around a reboot: the nodes that come back without their configuration (bare metal running from
    # RAM); the context serves what they need to boot (the provider's, e.g. their host keys).
    rebooting: Callable[[list[str]], AbstractContextManager[list[str]]] | None = None
    # Puts back on such nodes what their provider gave them at provisioning (a pulling node's agent).
    restore: Callable[[list[str]], None] | None = None

    @property
    def slurm(self) -> Slurm:
        """Slurm on the plan's launcher."""
        return Slurm(self.executor, self.plan.launcher())

    def _save(self, done: list[str]) -> None:
        self.state.update(**{PROGRESS_KEY: {"to": dict(self.plan.cluster.versions), "done": done}})

    def run(self, nodes: Sequence[PlanNode], max_unavailable: int | None) -> RollResult:
        """Roll through ``nodes`` in batches; stop at the first batch that fails."""
        done = progress_done(self.state.read(), self.plan)
        result = RollResult(done=list(done))
        self._save(result.done)
        todo = [n for n in nodes if n.hostname not in done]
        emulated = {n.hostname for n in nodes if n.emulated}
        for i, batch in enumerate(batches(todo, max_unavailable), 1):
            self.events.info(f"upgrade batch {i}: {', '.join(batch)} (drained: {REASON})", phase=PHASE)
            stopped = self._batch(batch, reboot=[h for h in batch if self.reboot and h not in emulated], result=result)
            if stopped:
                result.stopped = stopped
                return result
            result.done += batch
            self._save(result.done)
        self.state.update(**{PROGRESS_KEY: None})
        return result

    def _batch(self, batch: list[str], *, reboot: list[str], result: RollResult) -> str:
        """Upgrade one batch; the reason the roll stops, or "" when every node is back in service."""
        before = slurm_nodes(self.plan, self.executor)
        # A node someone else drained keeps that drain: it is upgraded, and left drained.
        theirs = {h for h in batch if (n := before.get(h)) and n.drained and not n.reason.startswith(REASON)}
        if errors := [e for e in self.slurm.drain({h: REASON for h in batch if h not in theirs}).values() if e]:
            return f"could not drain {', '.join(batch)}: {errors[0]}"
        waited = self._wait_for_jobs(batch)
        if waited:
            return waited
        converged = self.converge(batch)
        if not converged.succeeded:
            result.failures.append(converged)
            failed = ", ".join(sorted({f.host for f in converged.failures})) or ", ".join(batch)
            return f"the upgrade failed on {failed}; the batch stays drained ({REASON})"
        if reboot:
            rebooted = self._reboot(reboot)
            if rebooted:
                return rebooted
        sick = {}
        for host in batch:
            why = health_check(self.executor, host)
            if why is not None:
                sick[host] = why
        back = [h for h in batch if h not in sick and h not in theirs]
        if errors := [e for e in self.slurm.resume(back).values() if e]:
            return f"upgraded {', '.join(back)} but Slurm did not resume them: {errors[0]}"
        for host in back:
            self.events.host(PHASE, host, "changed", "upgraded and resumed: its health check passed")
        if sick:
            lines = "; ".join(f"{h}: {why}" for h, why in sick.items())
            return f"after the upgrade the health check failed on {lines}; they stay drained ({REASON})"
        return ""

    def _boot_id(self, host: str) -> str:
        rc, out, _ = self.executor.run(host, "cat /proc/sys/kernel/random/boot_id", BOOT_ID_TIMEOUT_S)
        return out.strip() if rc == 0 else ""

    def _reconfigure(self, boots: dict[str, str]) -> str:
        """Wait until each node answers from its new boot, then run the configure stage on them again.

        ``boots``: host -> its boot ID before the reboot (a node answering with it has not rebooted yet).
        """
        deadline = self.clock() + REBOOT_TIMEOUT_S
        waiting = list(boots)
        while waiting:
            waiting = [h for h in waiting if self._boot_id(h) in ("", boots[h])]
            if not waiting:
                break
            if self.clock() >= deadline:
                return f"{', '.join(waiting)} did not answer over SSH within {REBOOT_TIMEOUT_S:.0f} s of the reboot"
            self.sleep(POLL_S)
        hosts = list(boots)
        self.events.info(
            f"{', '.join(hosts)} rebooted from RAM without their configuration: the configure stage runs there again",
            phase=PHASE,
        )
        if self.restore is not None:
            self.restore(hosts)
        done = self.converge(hosts)
        if not done.succeeded:
            return f"configuring {', '.join(hosts)} again after the reboot failed; they stay drained ({REASON})"
        return ""

    def _wait_for_jobs(self, batch: list[str]) -> str:
        deadline = self.clock() + self.drain_timeout
        told = ""
        while True:
            jobs = self.slurm.jobs(batch)
            if jobs.unknown:
                return f"cannot tell which jobs run on {', '.join(batch)}: {jobs.unknown}"
            if not jobs.running:
                return ""
            if self.clock() >= deadline:
                return (
                    f"{len(jobs.running)} job(s) still run on {', '.join(batch)} after {self.drain_timeout:.0f} s: "
                    f"{jobs.describe()}; the batch stays drained ({REASON}). Run `clusterctl up` again when they "
                    "ended (it goes on with this batch), or with a longer --drain-timeout."
                )
            if told != jobs.describe():
                told = jobs.describe()
                self.events.info(f"waiting for the jobs on the batch to end: {told}", phase=PHASE)
            self.sleep(POLL_S)

    def _reboot(self, hosts: list[str]) -> str:
        """Reboot ``hosts`` through Slurm and wait until slurmd is back on each."""
        booted = {h: n.fields.get("BootTime", "") for h, n in slurm_nodes(self.plan, self.executor).items()}
        # nextstate=DOWN: the node comes back out of service; the health check decides its resume.
        try:
            with (self.rebooting or (lambda _hosts: nullcontext([])))(hosts) as fresh:
                boots = {h: self._boot_id(h) for h in fresh}
                if error := self.slurm.reboot(hosts, REASON):
                    return f"Slurm did not reboot {', '.join(hosts)}: {error}"
                if fresh and (why := self._reconfigure(boots)):
                    return why
        except ProviderError as exc:
            return f"rebooting {', '.join(hosts)}: {exc}"
        deadline = self.clock() + REBOOT_TIMEOUT_S
        while True:
            now = slurm_nodes(self.plan, self.executor)
            waiting = [
                h
                for h in hosts
                if (n := now.get(h)) is None or n.not_responding or n.fields.get("BootTime", "") == booted.get(h)
            ]
            if not waiting:
                return ""
            if self.clock() >= deadline:
                return f"{', '.join(waiting)} did not come back within {REBOOT_TIMEOUT_S:.0f} s of the reboot"
            self.sleep(POLL_S)
