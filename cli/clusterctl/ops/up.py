"""``up`` as a function: render, provision, configure, readiness, each a phase of its own.

Commands wire it to the terminal; tests and benchmarks call it directly.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path

from clusterctl.catalog.compat import SLURM_RECONFIGURE_NODES, at_least
from clusterctl.image.lock import LockedImage
from clusterctl.image.stage import baked_hosts, write_stage_inventory
from clusterctl.ops import converged
from clusterctl.ops.readiness import Readiness, check_cluster
from clusterctl.ops.retire import DEFAULT_DRAIN_TIMEOUT_S, RetireError, drain_and_wait, leaving
from clusterctl.ops.upgrade import REBOOT_FOR, VERSIONS_KEY, Roll, changed_versions, rolling_nodes, rolls
from clusterctl.pipeline import Validated, render
from clusterctl.plan import Plan
from clusterctl.plan.models import PlanNode
from clusterctl.plan.service import applied, read_swaps, spec_roles
from clusterctl.run.ansible import ConfigureResult, forget_facts, merged, run_playbook
from clusterctl.run.burst_bundle import burst_extravars
from clusterctl.run.events import EventBus
from clusterctl.run.executor import Executor, executor_for
from clusterctl.run.failure_cause import with_causes
from clusterctl.run.providers import ProvisionedHost, for_kind
from clusterctl.run.sshkeys import ensure_heal_key
from clusterctl.run.state import SWAPS_KEY, StateDir
from clusterctl.slurm.reasons import REMOVE

# Secrets and their sizes: munge wants 1024 random bytes (mungekey's default).
MUNGE_KEY = ("munge.key", 1024, True, 0o400)
DBD_PASSWORD = ("slurmdbd_password", 24, False, 0o600)


@dataclass
class UpResult:
    """What ``up`` did."""

    build_dir: Path
    hosts: list[ProvisionedHost] = field(default_factory=list)
    configure: ConfigureResult | None = None
    readiness: Readiness | None = None
    timings: dict[str, float] = field(default_factory=dict)
    error: str = ""
    # Nodes made from their profile's locked image: they ran the configure stage only.
    baked: list[str] = field(default_factory=list)
    # Why the configure stage was skipped (every node as the last converge left it); empty when it ran.
    converge_skipped: str = ""

    @property
    def ok(self) -> bool:
        """Everything succeeded."""
        return (
            not self.error
            and self.configure is not None
            and self.configure.succeeded
            and self.readiness is not None
            and self.readiness.ok
        )


def secrets_extravars(state: StateDir) -> dict[str, str]:
    """Paths (never contents) of the cluster's secrets, generated once, for the roles."""
    munge = state.secret_file(MUNGE_KEY[0], MUNGE_KEY[1], binary=MUNGE_KEY[2], mode=MUNGE_KEY[3])
    dbd = state.secret_file(DBD_PASSWORD[0], DBD_PASSWORD[1], binary=DBD_PASSWORD[2], mode=DBD_PASSWORD[3])
    return {
        "munge_key_file": str(munge.resolve()),
        "slurm_dbd_password_file": str(dbd.resolve()),
        "slurm_scripts_heal_key_file": str(ensure_heal_key(state.path).resolve()),
    }


def slurm_change_action(plan: Plan, state: StateDir) -> dict[str, str]:
    """The slurm role's ``slurm_config_change_action`` when nodes joined or left and Slurm needs restarts for it."""
    if state.read().get("slurm_nodes_changed") and not at_least(
        plan.cluster.versions["slurm"], SLURM_RECONFIGURE_NODES
    ):
        return {"slurm_config_change_action": "restart"}
    return {}


def _timed(timings: dict[str, float], name: str, started: float) -> None:
    timings[name] = round(time.monotonic() - started, 1)


@dataclass(frozen=True)
class UpOptions:
    """How ``up`` runs (the command's options).

    Attributes:
        out_dir: The build directory (default ``build/<cluster>``).
        yes: Do not ask before cloud changes.
        images: Hardware profile -> its locked image (clusterctl.lock, checked by the caller). New
            nodes of those profiles are made from it and, like every node already made from it,
            run the configure stage only; the others run both stages.
        converge: Run the configure stage even when nothing it reads changed (ops/converged.py).
        drain_timeout: Seconds to wait for the jobs on leaving nodes and upgrade batches.
        stream_ansible: Ansible's output to stdout too, not only the build directory's log.
        max_unavailable: Nodes per rolling-upgrade batch (ops/upgrade.py).
    """

    out_dir: Path | None = None
    yes: bool = False
    images: Mapping[str, LockedImage] | None = None
    converge: bool = False
    drain_timeout: float = DEFAULT_DRAIN_TIMEOUT_S
    stream_ansible: bool = False
    max_unavailable: int | None = None


@dataclass
class UpRun:
    """One ``up`` under way: what every phase reads and what it leaves for the next."""

    validated: Validated
    state: StateDir
    events: EventBus
    options: UpOptions
    result: UpResult
    recorded: dict[str, str] = field(default_factory=dict)
    inputs: str = ""
    configured: list[str] = field(default_factory=list)
    provider: object | None = None

    @property
    def plan(self) -> Plan:
        """The plan being applied."""
        return self.validated.plan

    def executor(self) -> Executor:
        """Commands on the cluster's nodes."""
        return executor_for(self.plan, self.state.path)

    def fail(self, phase: str, error: str) -> bool:
        """End the run at ``phase`` with ``error``."""
        self.events.phase_done(phase, "failed", error)
        self.result.error = error
        return False


Phase = Callable[[UpRun], bool]


def up(
    validated: Validated,
    state: StateDir,
    events: EventBus,
    *,
    out_dir: Path | None = None,
    yes: bool = False,
    images: Mapping[str, LockedImage] | None = None,
    converge: bool = False,
    drain_timeout: float = DEFAULT_DRAIN_TIMEOUT_S,
    stream_ansible: bool = False,
    max_unavailable: int | None = None,
) -> UpResult:
    """Bring the cluster to the plan: render, provision, configure, readiness. The caller holds the state lock.

    Each phase returns whether the next may run; a phase that stops says why in ``UpResult.error``.
    Nodes the plan no longer has are drained and their jobs waited for before they are removed
    (ops/retire.py); when the pinned versions changed since the last converge, the compute nodes in
    service roll in batches (ops/upgrade.py). Options: :class:`UpOptions`.
    """
    options = UpOptions(out_dir, yes, images, converge, drain_timeout, stream_ansible, max_unavailable)
    plan = validated.plan
    if plan.baremetal is not None and images:
        # Machines of a profile with a locked bare-metal archive boot it: their PXE entries are rendered for it.
        from clusterctl.image.baremetal import with_archives
        from clusterctl.render.tree import render_files

        plan = with_archives(plan, images)
        validated = replace(validated, plan=plan, files=render_files(plan))
    run = UpRun(validated, state, events, options, UpResult(build_dir=Path()))
    started = time.monotonic()
    phases: tuple[tuple[str, Phase], ...] = (
        ("render", render_phase),
        ("provision", provision_phase),
        ("configure", configure_phase),
        ("readiness", readiness_phase),
    )
    for name, phase in phases:
        t0 = time.monotonic()
        go_on = phase(run)
        _timed(run.result.timings, name, t0)
        if not go_on:
            return run.result
    run.result.timings["total"] = round(time.monotonic() - started, 1)
    return run.result


def render_phase(run: UpRun) -> bool:
    """Write the build directory."""
    run.events.phase("render")
    build_dir, changed = render(run.validated, run.options.out_dir)
    run.events.phase_done("render", message=f"{build_dir} ({len(changed)} file(s) changed)")
    run.result.build_dir = build_dir
    return True


def provision_phase(run: UpRun) -> bool:
    """Drain and remove the nodes the plan dropped, make the machines, record them."""
    plan, state, events, result = run.plan, run.state, run.events, run.result
    events.phase("provision")
    locked = dict(run.options.images or {})
    provider = for_kind(plan.cluster.provider, locked) if locked else for_kind(plan.cluster.provider)
    run.provider = provider
    run.recorded = state.read().get("nodes") or {}
    gone = leaving(plan, run.recorded)
    if gone:
        events.info(
            f"{', '.join(gone)} leave the cluster: drained ({REMOVE}), removed once no job runs there "
            f"(at most {run.options.drain_timeout:.0f} s)",
            phase="provision",
        )
        try:
            drain_and_wait(plan, run.executor(), gone, run.options.drain_timeout, events)
        except RetireError as exc:
            return run.fail("provision", str(exc))
    state.update(
        provider=plan.cluster.provider,
        spec=plan.cluster.spec_file,
        build_dir=str(result.build_dir),
        status="provisioning",
    )
    result.hosts = provider.provision(plan, result.build_dir, state.path, yes=run.options.yes, events=events)
    if gone:
        provider.retire(plan, gone, events)
        forget_facts(state.path, gone)
    result.baked = baked_hosts(plan, result.hosts, locked)
    write_stage_inventory(result.build_dir, plan, result.baked)
    if result.baked:
        events.info(
            f"{len(result.baked)} node(s) made from their profile's locked image run the configure stage only",
            phase="provision",
        )
    if plan.burst_cloud:
        # Each cloud burst group's base (security group/firewall/NSG, launch templates) is made
        # here with the operator's credentials; the controller's can only launch and delete.
        from clusterctl.run.burst_cloud import prepare_cloud_groups
        from clusterctl.run.providers.cloud import default_confirm

        prepare_cloud_groups(plan, result.build_dir, state.path, events, yes=run.options.yes, confirm=default_confirm)
    if set(run.recorded) != {h.hostname for h in result.hosts}:
        # Kept until a configure run succeeds: a run that failed half-way must still restart the daemons.
        state.update(slurm_nodes_changed=True)
    state.update(nodes={h.hostname: h.container or h.address for h in result.hosts}, status="provisioned")
    _forget_dropped_swaps(plan, state)
    events.phase_done("provision", message=f"{len(result.hosts)} node(s)")
    return True


def configure_phase(run: UpRun) -> bool:
    """Run the configure stage (or check that nothing changed), rolling upgraded pins through the nodes."""
    plan, state, events, result = run.plan, run.state, run.events, run.result
    events.phase("configure")
    inputs_vars = secrets_extravars(state) | burst_extravars(plan, result.build_dir, state.path)
    # A one-off instruction for this run, not an input of the converged state: left out of the fingerprint
    # (else the run after the one that joined the nodes would not match), and it always runs the roles.
    action = slurm_change_action(plan, state)
    extravars = inputs_vars | action
    # Burst nodes exist only while Slurm has them powered up; `clusterctl burst resume` configures them
    # (with the configuration current at that moment), so `up` leaves the burst group alone.
    # A node a spare replaced is out of service (often unreachable) until `clusterctl node return`.
    out = [n.hostname for n in plan.nodes if n.replaced_by]
    excluded = [*(["!burst"] if any(n.burst for n in plan.nodes) else []), *(f"!{h}" for h in out)]
    limit = ["all", *excluded] if excluded else None
    run.configured = [h.hostname for h in result.hosts if h.hostname not in out]
    run.inputs = converged.fingerprint(result.build_dir, inputs_vars, limit)
    executor = run.executor()
    before = state.read()
    rolling = rolling_nodes(plan, list(run.recorded)) if rolls(before, plan) else []
    unchanged = (
        None
        if run.options.converge or action or rolling
        else converged.check(before.get(converged.STATE_KEY), run.inputs, run.configured, executor)
    )
    if unchanged is not None and unchanged.unchanged:
        result.configure = ConfigureResult(status="skipped", rc=0)
        result.converge_skipped = unchanged.reason
        if not before.get(VERSIONS_KEY):
            # The rendered files hold the pins, so nodes that match the last converge run these versions.
            state.update(**{VERSIONS_KEY: dict(plan.cluster.versions)})
        events.phase_done("configure", "ok", f"skipped: {unchanged.reason} (`up --converge` runs the roles anyway)")
        return True
    if unchanged is not None:
        events.info(f"configure stage runs: {unchanged.reason}", phase="configure")
    state.update(**{converged.STATE_KEY: None})

    def converge_hosts(hosts: list[str] | None) -> ConfigureResult:
        return run_playbook(
            result.build_dir,
            state.path,
            events,
            extravars=extravars,
            limit=limit if hosts is None else hosts,
            stream=run.options.stream_ansible,
        )

    cfg, stopped = _configure(
        plan,
        state,
        executor,
        events,
        converge_hosts,
        limit,
        rolling,
        run.options.max_unavailable,
        run.options.drain_timeout,
        rebooting=_rebooting(run.provider, plan, result.build_dir, state, events),
    )
    result.configure = cfg
    if cfg.succeeded and not stopped:
        state.update(slurm_nodes_changed=False, **{VERSIONS_KEY: dict(plan.cluster.versions)})
    state.update(
        status="upgrade-stopped" if stopped else ("configured" if cfg.succeeded else "configure-failed"),
        last_configure={
            "rc": cfg.rc,
            "changed": cfg.changed_total,
            "failed_hosts": sorted({f.host for f in cfg.failures}),
            "seconds": round(cfg.seconds, 1),
        },
    )
    events.phase_done(
        "configure",
        "ok" if cfg.succeeded and not stopped else "failed",
        f"{cfg.changed_total} changed task(s)" + (f"; rolling upgrade stopped: {stopped}" if stopped else ""),
        changed=cfg.changed_total,
    )
    if stopped or not cfg.succeeded:
        cfg.failures = with_causes(cfg.failures, executor)
        hosts = ", ".join(sorted({f.host for f in cfg.failures})) or "unknown host"
        result.error = f"the rolling upgrade stopped: {stopped}" if stopped else f"configuration failed on {hosts}"
        return False
    return True


def readiness_phase(run: UpRun) -> bool:
    """Check the cluster is ready; record the converged state when it is."""
    plan, state, events, result = run.plan, run.state, run.events, run.result
    events.phase("readiness")
    executor = run.executor()
    result.readiness = check_cluster(plan, executor, events)
    events.phase_done("readiness", "ok" if result.readiness.ok else "failed")
    if not result.readiness.ok:
        record = None  # the next `up` converges again
    elif result.converge_skipped:
        record = state.read().get(converged.STATE_KEY)
    else:
        record = converged.record(run.inputs, converged.node_digests(executor, run.configured))
    state.update(status="up" if result.readiness.ok else "not-ready", **{converged.STATE_KEY: record})
    if not result.readiness.ok:
        result.error = "the cluster is configured but not ready"
    return result.readiness.ok


def _configure(
    plan: Plan,
    state: StateDir,
    executor: Executor,
    events: EventBus,
    converge_hosts: Callable[[list[str] | None], ConfigureResult],
    limit: list[str] | None,
    rolling: list[PlanNode],
    max_unavailable: int | None,
    drain_timeout: float,
    rebooting: Callable[[list[str]], AbstractContextManager[list[str]]] | None = None,
) -> tuple[ConfigureResult, str]:
    """Run the configure stage: at once, or, with ``rolling`` nodes, the others first and then a rolling upgrade.

    Returns the runs' result (merged) and why the roll stopped ("" when it did not).
    """
    if not rolling:
        return converge_hosts(None), ""
    changed = changed_versions(state.read().get(VERSIONS_KEY), plan.cluster.versions)
    pins = ", ".join(f"{name} {was or '-'} -> {now or '-'}" for name, (was, now) in changed.items())
    events.info(
        f"pinned versions changed ({pins or 'an interrupted upgrade'}): {len(rolling)} compute node(s) roll in batches",
        phase="configure",
    )
    first = converge_hosts([*(limit or ["all"]), *(f"!{n.hostname}" for n in rolling)])
    if not first.succeeded:
        return first, ""
    runs = [first]

    def converge_batch(hosts: list[str]) -> ConfigureResult:
        runs.append(converge_hosts(hosts))
        return runs[-1]

    roll = Roll(
        plan,
        state,
        executor,
        events,
        converge_batch,
        reboot=bool(REBOOT_FOR & set(changed)),
        drain_timeout=drain_timeout,
        rebooting=rebooting,
    )
    rolled = roll.run(rolling, max_unavailable)
    return merged(runs), rolled.stopped


def _rebooting(
    provider: object, plan: Plan, build_dir: Path, state: StateDir, events: EventBus
) -> Callable[[list[str]], AbstractContextManager[list[str]]] | None:
    """The provider's context around a reboot (run/providers/baremetal.py has one), bound to this run."""
    method = getattr(provider, "rebooting", None)
    if method is None:
        return None
    return lambda hosts: method(plan, build_dir, state.path, hosts, events)


def _forget_dropped_swaps(plan: Plan, state: StateDir) -> None:
    """Drop the recorded swaps this spec no longer allows (a node removed, spares changed).

    Else a spec that later has those nodes and spares again would apply a stale swap to new machines.
    """
    swaps = read_swaps(state.read().get(SWAPS_KEY))
    kept = applied(spec_roles(plan), swaps)
    if kept != swaps:
        state.update(**{SWAPS_KEY: [s.to_dict() for s in kept]})
