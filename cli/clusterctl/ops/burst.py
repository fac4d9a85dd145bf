"""Elastic nodes: what ``ResumeProgram``/``SuspendProgram`` do when slurmctld calls them.

``resume`` provisions exactly the named burst nodes through their group's provider,
configures only them with the same roles (a local burst node configures itself from the bundle
``up`` published for it on this controller: its agent, given at provisioning, pulls it and
reports to Slurm; the others are pushed from here), tells Slurm their address and returns;
``suspend`` removes them. Both are idempotent. A failure leaves the node DOWN with a reason
saying what happened; the next resume retries from scratch.
"""

from __future__ import annotations

import contextlib
import fcntl
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from clusterctl.bounded import BoundsError, json_document
from clusterctl.hostlist import HostlistError, expand
from clusterctl.ops import pull
from clusterctl.plan import Plan, PlanNode
from clusterctl.render.bundle import SERVER_ROOT
from clusterctl.render.health import HEAL_KEY_PATH
from clusterctl.render.pulling import pulls
from clusterctl.run.ansible import forget_facts, run_playbook
from clusterctl.run.events import EventBus
from clusterctl.run.providers.base import ProviderError
from clusterctl.run.state import open_lock
from clusterctl.slurm import commands
from clusterctl.slurm.nodes import SlurmNode, by_name, parse_nodes
from clusterctl.slurm.reasons import BURST, reason
from clusterctl.slurm.records import RecordError


class BurstError(Exception):
    """A burst request that cannot be carried out (unknown or non-burst nodes)."""


@dataclass
class BurstOutcome:
    """What a resume or suspend did, per node."""

    done: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Every node succeeded."""
        return not self.failed


def load_plan(build_dir: Path) -> Plan:
    """The plan the build directory was rendered from."""
    return Plan.model_validate_json((build_dir / "plan.json").read_text())


def burst_nodes(plan: Plan, hostlist: str) -> list[PlanNode]:
    """The plan's burst nodes named by ``hostlist``; refuses names that are not burst nodes."""
    try:
        names = expand(hostlist)
    except HostlistError as exc:
        raise BurstError(f"cannot read the node list: {exc}") from None
    by_name = {n.hostname: n for n in plan.nodes}
    unknown = [n for n in names if n not in by_name]
    static = [n for n in names if n in by_name and not by_name[n].burst]
    if unknown or static:
        raise BurstError(
            "not burst nodes of cluster "
            f"{plan.cluster.name}: {', '.join(unknown + static)} (burst nodes: "
            f"{', '.join(n.hostname for n in plan.nodes if n.burst) or 'none'})"
        )
    return [by_name[n] for n in names]


def mark_down(hostname: str, why: str) -> None:
    """Leave the node DOWN with a reason saying what happened."""
    commands.run_here(commands.down(hostname, reason(BURST, why, 200)))


def abandon_power_up(hostname: str, why: str) -> None:
    """A resume that failed: DOWN with the reason, and no longer powering up.

    Why the power-down: slurmctld keeps a node POWERING_UP until ResumeTimeout even when it is set
    DOWN, so a later `scontrol update state=resume` would leave jobs waiting out the timeout. Forced
    down, the node ends DOWN and powered down (down~); resumed by an operator, the next job that
    needs it calls the ResumeProgram again. (Only here: a failed suspend doing this would loop.)
    """
    mark_down(hostname, why)
    commands.run_here(commands.power_down_force(hostname, reason(BURST, why, 200)))


@contextlib.contextmanager
def node_locks(state_dir: Path, nodes: list[PlanNode]) -> Iterator[None]:
    """One lock per node, so a resume and a suspend of the same node never overlap."""
    locks = []
    (state_dir / "locks").mkdir(parents=True, exist_ok=True)
    try:
        for node in sorted(nodes, key=lambda n: n.hostname):
            handle = open_lock(state_dir / "locks" / f"{node.hostname}.lock")
            fcntl.flock(handle, fcntl.LOCK_EX)
            locks.append(handle)
        yield
    finally:
        for handle in locks:
            handle.close()


def _provider_resume(
    plan: Plan, nodes: list[PlanNode], build_dir: Path, state_dir: Path, events: EventBus, munge_key_file: Path
) -> None:
    kinds = {n.group: _group_provider(plan, n.group) for n in nodes}
    for kind in set(kinds.values()):
        group_nodes = [n for n in nodes if kinds[n.group] == kind]
        if kind == "local":
            from clusterctl.run.providers.local import LocalProvider, network_name, node_image, pull_bootstrap

            # The node gets its agent and this controller's munge key through docker, then pulls its bundle.
            setup = pull_bootstrap(plan, build_dir, state_dir, munge_key=munge_key_file.read_bytes)
            LocalProvider().start_nodes(
                plan, group_nodes, network_name(plan), node_image(plan), events, state_dir=state_dir, bootstrap=setup
            )
        else:
            from clusterctl.run.burst_cloud import resume_cloud

            resume_cloud(plan, kind, group_nodes, build_dir, state_dir, events)


def _provider_suspend(plan: Plan, nodes: list[PlanNode], build_dir: Path, state_dir: Path, events: EventBus) -> None:
    kinds = {n.group: _group_provider(plan, n.group) for n in nodes}
    for kind in set(kinds.values()):
        group_nodes = [n for n in nodes if kinds[n.group] == kind]
        if kind == "local":
            from clusterctl.run.providers.local import LocalProvider

            LocalProvider().remove_nodes(plan, group_nodes, events)
        else:
            from clusterctl.run.burst_cloud import suspend_cloud

            suspend_cloud(plan, kind, group_nodes, build_dir, state_dir, events)


def _group_provider(plan: Plan, group: str) -> str:
    return next(b.provider for b in plan.slurm.burst if b.group == group)


def _heal_key_vars() -> dict[str, str]:
    """The controller's heal key for the burst nodes' authorized_keys (its public half is all they get)."""
    return {"slurm_scripts_heal_key_file": HEAL_KEY_PATH} if Path(HEAL_KEY_PATH + ".pub").is_file() else {}


def resume(
    plan: Plan, hostlist: str, build_dir: Path, state_dir: Path, events: EventBus, *, munge_key_file: Path
) -> BurstOutcome:
    """Provision, register and configure the burst nodes in ``hostlist``."""
    nodes = burst_nodes(plan, hostlist)
    outcome = BurstOutcome()
    with node_locks(state_dir, nodes):
        started = time.monotonic()
        for node in nodes:
            # Tell slurmctld where the node will be before its slurmd starts and registers.
            commands.run_here(commands.set_address(node.hostname, node.address))
        try:
            _provider_resume(plan, nodes, build_dir, state_dir, events, munge_key_file)
        except (ProviderError, OSError) as exc:
            for node in nodes:
                outcome.failed[node.hostname] = f"provisioning failed: {exc}"
        pushed = [n for n in nodes if not pulls(plan, n)]
        pulled = [n for n in nodes if pulls(plan, n)]
        if not outcome.failed and pushed:
            result = run_playbook(
                build_dir,
                state_dir,
                events,
                extravars={"munge_key_file": str(munge_key_file), **_heal_key_vars()},
                limit=[n.hostname for n in pushed],
                ident=f"burst-{int(time.time())}",
            )
            failed_hosts = {f.host: f"configuration failed in '{f.task}': {f.message}" for f in result.failures}
            if result.rc != 0 and not failed_hosts:
                failed_hosts = {n.hostname: f"configuration failed (ansible rc {result.rc})" for n in pushed}
            outcome.failed.update(failed_hosts)
        if not outcome.failed and pulled:
            outcome.failed.update(_wait_pulled(plan, pulled, events))
        for node in nodes:
            if node.hostname in outcome.failed:
                abandon_power_up(node.hostname, outcome.failed[node.hostname])
            else:
                outcome.done.append(node.hostname)
        events.info(
            f"resume {hostlist}: {len(outcome.done)} up, {len(outcome.failed)} failed in "
            f"{time.monotonic() - started:.0f} s",
            phase="burst",
        )
    return outcome


def _published_generation(node: str, root: Path = Path(SERVER_ROOT)) -> int:
    """The generation of the pointer ``up`` published for ``node`` on this controller (0: none)."""
    try:
        document = json_document((root / "nodes" / f"{node}.json").read_text(encoding="utf-8")[:65536], "pointer")
        generation = document["pointer"]["generation"]
    except (OSError, UnicodeDecodeError, BoundsError, KeyError, TypeError):
        return 0
    return generation if isinstance(generation, int) else 0


def _wait_pulled(plan: Plan, nodes: list[PlanNode], events: EventBus) -> dict[str, str]:
    """Wait until the burst nodes, configuring themselves, report their bundle applied; node -> why it failed."""
    names = [n.hostname for n in nodes]
    generations = {_published_generation(n) for n in names}
    if 0 in generations or len(generations) != 1:
        return dict.fromkeys(names, "no bundle is published for it on this controller: run `clusterctl up`")
    timeout = min(b.resume_timeout_s for b in plan.slurm.burst if b.group in {n.group for n in nodes}) * 0.9

    def read() -> dict[str, SlurmNode]:
        done = commands.run_here(commands.show_nodes())
        try:
            return by_name(parse_nodes(done.stdout)) if done.returncode == 0 else {}
        except RecordError:
            return {}

    waited = pull.wait(read, names, generations.pop(), events, timeout=timeout)
    return {
        f.host: (f"configuration failed in '{f.task}': {f.message}" if f.task else f.message)
        + (f" ({'; '.join(f.cause)})" if f.cause else "")
        for f in waited.failures
    }


def suspend(plan: Plan, hostlist: str, build_dir: Path, state_dir: Path, events: EventBus) -> BurstOutcome:
    """Remove the burst nodes in ``hostlist`` (nothing to do for nodes already gone)."""
    nodes = burst_nodes(plan, hostlist)
    outcome = BurstOutcome()
    with node_locks(state_dir, nodes):
        try:
            _provider_suspend(plan, nodes, build_dir, state_dir, events)
            outcome.done = [n.hostname for n in nodes]
        except (ProviderError, OSError) as exc:
            outcome.failed = {n.hostname: f"release failed: {exc}" for n in nodes}
            for node in nodes:
                mark_down(node.hostname, outcome.failed[node.hostname])
        forget_facts(state_dir, [n.hostname for n in nodes])
    events.info(f"suspend {hostlist}: {len(outcome.done)} released", phase="burst")
    return outcome
