"""``up`` as a function: render, provision, configure, readiness, each a phase of its own.

Commands wire it to the terminal; tests and benchmarks call it directly.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path

from clusterctl.catalog.compat import SLURM_RECONFIGURE_NODES, at_least
from clusterctl.image.lock import LockedImage
from clusterctl.image.stage import baked_hosts, write_stage_inventory
from clusterctl.ops import converged, pull
from clusterctl.ops.pull import PullError
from clusterctl.ops.readiness import Readiness, check_cluster
from clusterctl.ops.retire import DEFAULT_DRAIN_TIMEOUT_S, RetireError, drain_and_wait, leaving
from clusterctl.ops.upgrade import (
    REBOOT_FOR,
    VERSIONS_KEY,
    Roll,
    changed_versions,
    progress_done,
    rolling_nodes,
    rolls,
)
from clusterctl.pipeline import Validated, render
from clusterctl.plan import Plan
from clusterctl.plan.models import PlanNode
from clusterctl.plan.service import applied, read_swaps, spec_roles
from clusterctl.remote import Sender
from clusterctl.render import bundle
from clusterctl.render.bundle import Layer
from clusterctl.render.pulling import pull_nodes
from clusterctl.run.ansible import AnsibleSetupError, ConfigureResult, forget_facts, merged, run_playbook
from clusterctl.run.burst_bundle import burst_extravars
from clusterctl.run.engine import engine_layer
from clusterctl.run.events import EventBus
from clusterctl.run.executor import Executor, executor_for
from clusterctl.run.failure_cause import with_causes
from clusterctl.run.providers import ProvisionedHost, for_kind
from clusterctl.run.sshkeys import ensure_heal_key, ensure_host_keys
from clusterctl.run.state import SWAPS_KEY, StateDir
from clusterctl.slurm.client import Slurm, SlurmError
from clusterctl.slurm.nodes import SlurmNode
from clusterctl.slurm.reasons import REMOVE

# Secrets and their sizes (the munge key's are run.state's MUNGE_KEY).
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
    munge = state.munge_key()
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
        apply_timeout: Seconds every pulling node has, all together, to report its bundle applied.
    """

    out_dir: Path | None = None
    yes: bool = False
    images: Mapping[str, LockedImage] | None = None
    converge: bool = False
    drain_timeout: float = DEFAULT_DRAIN_TIMEOUT_S
    stream_ansible: bool = False
    max_unavailable: int | None = None
    apply_timeout: float = pull.DEFAULT_APPLY_TIMEOUT_S


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
    # The nodes the control machine configures (pushed), and those that configure themselves (pulled).
    configured: list[str] = field(default_factory=list)
    pulled: list[str] = field(default_factory=list)
    # The slurm role's slurm_config_change_action when this run must restart the daemons ("" otherwise).
    slurm_action: str = ""
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
    apply_timeout: float = pull.DEFAULT_APPLY_TIMEOUT_S,
) -> UpResult:
    """Bring the cluster to the plan: render, provision, configure, readiness. The caller holds the state lock.

    Each phase returns whether the next may run; a phase that stops says why in ``UpResult.error``.
    Nodes the plan no longer has are drained and their jobs waited for before they are removed
    (ops/retire.py); when the pinned versions changed since the last converge, the compute nodes in
    service roll in batches (ops/upgrade.py). Options: :class:`UpOptions`.
    """
    options = UpOptions(out_dir, yes, images, converge, drain_timeout, stream_ansible, max_unavailable, apply_timeout)
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
    """Run the configure stage (or check that nothing changed), rolling upgraded pins through the nodes.

    The controllers and login nodes (and compute nodes of providers that do not deliver the agent)
    are pushed with Ansible first; then every pulling node is told its bundle and ``up`` waits for
    their reports (ops/pull.py).
    """
    plan, state, events, result = run.plan, run.state, run.events, run.result
    events.phase("configure")
    inputs_vars = (
        secrets_extravars(state)
        | burst_extravars(plan, result.build_dir, state.path)
        | heal_known_hosts_vars(plan, state)
    )
    # A one-off instruction for this run, not an input of the converged state: left out of the fingerprint
    # (else the run after the one that joined the nodes would not match), and it always runs the roles.
    action = slurm_change_action(plan, state)
    run.slurm_action = action.get("slurm_config_change_action", "")
    extravars = inputs_vars | action
    # Burst nodes exist only while Slurm has them powered up; `clusterctl burst resume` configures them
    # (with the configuration current at that moment), so `up` leaves the burst group alone.
    # A node a spare replaced is out of service (often unreachable) until `clusterctl node return`.
    out = [n.hostname for n in plan.nodes if n.replaced_by]
    provisioned = [h.hostname for h in result.hosts if h.hostname not in out]
    pulling = {n.hostname for n in pull_nodes(plan)}
    run.pulled = [h for h in provisioned if h in pulling]
    excluded = [
        *(["!burst"] if any(n.burst for n in plan.nodes) else []),
        *(f"!{h}" for h in out),
        *(f"!{h}" for h in run.pulled),
    ]
    limit = ["all", *excluded] if excluded else None
    run.configured = [h for h in provisioned if h not in pulling]
    run.inputs = converged.fingerprint(result.build_dir, inputs_vars, limit)
    executor = run.executor()
    before = state.read()
    rolling = rolling_nodes(plan, list(run.recorded)) if rolls(before, plan) else []
    unchanged = (
        None
        if run.options.converge or action or rolling
        else converged.check(before.get(converged.STATE_KEY), run.inputs, run.configured, executor)
    )
    pushed = unchanged is None or not unchanged.unchanged
    if unchanged is not None and not pushed:
        events.info(f"pushed nodes: {unchanged.reason}", phase="configure")
    elif unchanged is not None:
        events.info(f"configure stage runs: {unchanged.reason}", phase="configure")
    if pushed:
        state.update(**{converged.STATE_KEY: None})

    def push(hosts: list[str] | None) -> ConfigureResult:
        return run_playbook(
            result.build_dir,
            state.path,
            events,
            extravars=extravars,
            limit=limit if hosts is None else hosts,
            stream=run.options.stream_ansible,
        )

    puller = _Puller(run, executor)
    try:
        cfg, stopped = _configure(
            plan,
            state,
            executor,
            events,
            push if pushed else None,
            puller.converge,
            limit,
            rolling,
            run.pulled,
            run.options.max_unavailable,
            run.options.drain_timeout,
            rebooting=_rebooting(run.provider, plan, result.build_dir, state, events),
            restore=_restore(run.provider, plan, result.build_dir, state, events),
        )
    except PullError as exc:
        return run.fail("configure", str(exc))
    result.configure = cfg
    if not pushed and cfg.succeeded and cfg.changed_total == 0:
        result.converge_skipped = (
            f"all {len(run.configured) + len(run.pulled)} nodes as the last converge left them "
            f"({len(run.configured)} checked by clusterctl, {len(run.pulled)} by their agents)"
        )
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
    done = f"{cfg.changed_total} changed task(s)" + (f"; rolling upgrade stopped: {stopped}" if stopped else "")
    if result.converge_skipped:
        done = f"nothing changed: {result.converge_skipped}"
    events.phase_done("configure", "ok" if cfg.succeeded and not stopped else "failed", done, changed=cfg.changed_total)
    if stopped or not cfg.succeeded:
        cfg.failures = with_causes(cfg.failures, executor)
        hosts = ", ".join(sorted({f.host for f in cfg.failures})) or "unknown host"
        result.error = f"the rolling upgrade stopped: {stopped}" if stopped else f"configuration failed on {hosts}"
        return False
    return True


def heal_known_hosts_vars(plan: Plan, state: StateDir) -> dict[str, str]:
    """The heal timer's known_hosts, written once from the host keys clusterctl generated for the compute nodes.

    One file for the controller (slurm_scripts' ``known_hosts`` entry point copies it), never a
    key read from each node.
    """
    if plan.slurm.heal_interval_s is None:
        return {}
    compute = [n.hostname for n in plan.nodes if n.role == "compute" and not n.burst]
    keys = ensure_host_keys(state.path, compute)
    text = "".join(f"{host} {' '.join(keys[host].public.split()[:2])}\n" for host in compute)
    path = state.path / "heal_known_hosts"
    if not path.is_file() or path.read_text() != text:
        temporary = path.with_name(".heal_known_hosts.tmp")
        temporary.write_text(text)
        temporary.replace(path)
    return {"slurm_scripts_heal_known_hosts_file": str(path.resolve())}


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
    push: Callable[[list[str] | None], ConfigureResult] | None,
    pull: Callable[[set[str]], ConfigureResult],
    limit: list[str] | None,
    rolling: list[PlanNode],
    pulled: Sequence[str],
    max_unavailable: int | None,
    drain_timeout: float,
    rebooting: Callable[[list[str]], AbstractContextManager[list[str]]] | None = None,
    restore: Callable[[list[str]], None] | None = None,
) -> tuple[ConfigureResult, str]:
    """The configure stage: the pushed nodes, then the pulling ones; with ``rolling`` nodes, those in batches.

    ``push(hosts)`` runs the playbook (``None``: over ``limit``); it is None when the pushed nodes are
    as the last converge left them. ``pull(hold)`` tells every pulling node its bundle, those in
    ``hold`` the one they were last told, and waits for their reports. Returns the runs' result
    (merged) and why the roll stopped ("" when it did not).

    Raises:
        PullError: The bundles could not be published.
    """
    runs: list[ConfigureResult] = []
    if not rolling:
        if push is not None:
            runs.append(push(None))
            if not runs[-1].succeeded:
                return runs[-1], ""
        runs.append(pull(set()))
        return merged(runs), ""
    changed = changed_versions(state.read().get(VERSIONS_KEY), plan.cluster.versions)
    pins = ", ".join(f"{name} {was or '-'} -> {now or '-'}" for name, (was, now) in changed.items())
    events.info(
        f"pinned versions changed ({pins or 'an interrupted upgrade'}): {len(rolling)} compute node(s) roll in batches",
        phase="configure",
    )
    rolling_names = {n.hostname for n in rolling}
    pushed_rolling = sorted(rolling_names - set(pulled))
    if push is not None:
        runs.append(push([*(limit or ["all"]), *(f"!{h}" for h in pushed_rolling)]))
        if not runs[-1].succeeded:
            return runs[-1], ""
    done = set(progress_done(state.read(), plan))
    runs.append(pull(rolling_names - done))
    if not runs[-1].succeeded:
        return merged(runs), ""

    def converge_batch(hosts: list[str]) -> ConfigureResult:
        done.update(hosts)
        batch: list[ConfigureResult] = []
        pushed_hosts = [h for h in hosts if h not in pulled]
        if pushed_hosts and push is not None:
            batch.append(push(pushed_hosts))
        if any(h in pulled for h in hosts):
            batch.append(pull(rolling_names - done))
        runs.extend(batch)
        return merged(batch) if batch else ConfigureResult(status="successful", rc=0)

    roll = Roll(
        plan,
        state,
        executor,
        events,
        converge_batch,
        reboot=bool(REBOOT_FOR & set(changed)),
        drain_timeout=drain_timeout,
        rebooting=rebooting,
        restore=restore,
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


def _restore(
    provider: object, plan: Plan, build_dir: Path, state: StateDir, events: EventBus
) -> Callable[[list[str]], None] | None:
    """The provider's setup of nodes that rebooted from RAM (a pulling node's agent), bound to this run."""
    method = getattr(provider, "bootstrap", None)
    if method is None:
        return None
    return lambda hosts: method(plan, build_dir, state.path, hosts, events)


class _Puller:
    """Publishes the pulling nodes' pointers and waits for their reports, for one ``up``."""

    def __init__(self, run: UpRun, executor: Executor) -> None:
        self.run = run
        self.executor = executor
        self.engine: Layer | None = None

    def _layer(self, digest: str) -> bytes:
        if self.engine is not None and digest == self.engine.digest:
            return self.engine.data
        return (self.run.result.build_dir / bundle.LAYERS_DIR / f"{digest}.tar.gz").read_bytes()

    def converge(self, hold: set[str]) -> ConfigureResult:
        """Tell every pulling node its bundle (``hold``: at the one it was last told) and wait for them."""
        run = self.run
        plan, state, events = run.plan, run.state, run.events
        nodes = pull_nodes(plan)
        if not nodes:
            return ConfigureResult(status="successful", rc=0)
        if not isinstance(self.executor, Sender):
            raise PullError("the controller cannot be given the bundles: its executor takes no input")
        if self.engine is None:
            try:
                self.engine = engine_layer()
            except AnsibleSetupError as exc:
                raise PullError(str(exc)) from None
        saved = state.read()
        previous = saved.get(pull.STATE_KEY) or {}
        generation = pull.next_generation(int(previous.get("generation") or 0))
        stages = {h: "configure" for h in run.result.baked}
        held = pull.held_layers(previous, hold)
        items = pull.assignments(plan, run.result.build_dir, self.engine.digest, stages, held)
        munge = state.munge_key().read_bytes()
        controller = plan.slurm.controllers[0]
        facts = heal_public_key(state)
        if run.slurm_action:
            # Nodes joined or left and this Slurm needs every slurmd restarted: the pulling nodes do it too.
            facts["clusterctl_slurm_config_change_action"] = run.slurm_action
        try:
            summary = pull.publish(
                self.executor,
                controller,
                plan,
                munge,
                generation,
                items,
                self._layer,
                force=run.options.converge,
                extra_facts=facts,
            )
        except OSError as exc:
            raise PullError(f"a layer of the build directory cannot be read: {exc}") from None
        state.update(**{pull.STATE_KEY: pull.record(generation, items)})
        sent = int(summary.get("layers") or 0)
        events.info(
            f"bundles published on {controller}: {len(items)} pointer(s), {sent} new layer(s); "
            f"waiting for {len(run.pulled)} node(s)",
            phase="configure",
        )
        slurm = Slurm(self.executor, controller, timeout_s=30)

        def read() -> dict[str, SlurmNode]:
            try:
                return {n.name: n for n in slurm.nodes()}
            except SlurmError:
                return {}

        machines: Callable[[Sequence[str]], Mapping[str, str]] | None = None
        if plan.cluster.provider == "local":
            provider = for_kind(plan.cluster.provider)

            def machines(waiting: Sequence[str]) -> Mapping[str, str]:
                return provider.status(plan, state.path)

        elif plan.cluster.provider == "baremetal":
            from clusterctl.run.providers.baremetal import power_states

            def machines(waiting: Sequence[str]) -> Mapping[str, str]:
                return power_states(plan, waiting)

        waited = pull.wait(read, run.pulled, generation, events, timeout=run.options.apply_timeout, machines=machines)
        return ConfigureResult(
            status="successful" if waited.succeeded else "failed",
            rc=0 if waited.succeeded else 2,
            changed={h: r.changed for h, r in waited.reports.items() if r.state == "ok"},
            ok={h: 1 for h, r in waited.reports.items() if r.state == "ok"},
            failures=waited.failures,
            seconds=waited.seconds,
        )


def heal_public_key(state: StateDir) -> dict[str, str]:
    """The heal key's public half, for the compute nodes' authorized_keys (the private half stays on the controller)."""
    path = ensure_heal_key(state.path).with_suffix(".pub")
    return {"clusterctl_heal_public_key": path.read_text().strip()}


def _forget_dropped_swaps(plan: Plan, state: StateDir) -> None:
    """Drop the recorded swaps this spec no longer allows (a node removed, spares changed).

    Else a spec that later has those nodes and spares again would apply a stale swap to new machines.
    """
    swaps = read_swaps(state.read().get(SWAPS_KEY))
    kept = applied(spec_roles(plan), swaps)
    if kept != swaps:
        state.update(**{SWAPS_KEY: [s.to_dict() for s in kept]})
