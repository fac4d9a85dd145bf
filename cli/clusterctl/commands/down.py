"""``clusterctl down SPEC``: remove exactly what the cluster created, and its state."""

from __future__ import annotations

from pathlib import Path

import click

from clusterctl.app import App
from clusterctl.commands.common import (
    handle_internal_errors,
    output_option,
    spec_argument,
    state_dir_option,
    validated_or_exit,
)
from clusterctl.ops.down import down
from clusterctl.ops.running_jobs import running_jobs
from clusterctl.plan import Plan
from clusterctl.progress import attach
from clusterctl.report import document
from clusterctl.run.events import EventBus
from clusterctl.run.providers import ProviderError, for_kind
from clusterctl.run.state import LockedError, StateDir, StateDirError


@click.command("down")
@spec_argument
@state_dir_option
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), help="Build directory.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--force", is_flag=True, help="Destroy the cluster even while Slurm runs jobs on it.")
@output_option
@click.pass_obj
@handle_internal_errors
def down_cmd(app: App, spec: str, state_dir: Path, out_dir: Path | None, yes: bool, force: bool, output: str) -> None:
    """Destroy the cluster in SPEC: its nodes, networks, volumes and state. Asks unless --yes.

    Refuses while Slurm runs jobs on it, unless --force.

    Exit status: 0 destroyed (or nothing was there), 1 refused (jobs running, not confirmed) or
    failed (what remains is said; `down` again goes on), 2 bad usage, 70 internal error.
    """
    app.output = output
    plan = validated_or_exit(app, spec, (), False, state_dir).plan
    state = StateDir(state_dir, plan.cluster.name)
    try:
        machines = for_kind(plan.cluster.provider).status(plan, state.path)
    except ProviderError as exc:
        app.abort(str(exc), 1)
    present = sorted(h for h, s in machines.items() if s != "missing")
    if present and not force:
        _refuse_while_jobs_run(app, plan, state)
    if not yes:
        what = f"{len(present)} node(s) ({', '.join(present)})" if present else "no running nodes"
        click.confirm(f"Destroy cluster {plan.cluster.name}: {what}, its network and state?", abort=True, err=True)
    bus = EventBus()
    attach(bus, app.err, "quiet" if app.quiet else "plain")
    try:
        with state.lock("down"):
            down(plan, state, bus, build_dir=out_dir, yes=yes)
    except (LockedError, StateDirError) as exc:
        app.abort(str(exc), 1)
    except ProviderError as exc:
        app.abort(f"{exc}\nSome resources may remain; run `clusterctl down` again.", 1)
    try:
        state.remove()
    except StateDirError as exc:
        app.abort(f"{exc} The cluster's resources are gone; only its state directory is left.", 1)
    if app.json:
        app.print_json(document("down", [], ok=True, cluster=plan.cluster.name, destroyed=present))
        return
    app.display_success(f"cluster {plan.cluster.name} destroyed")


def _refuse_while_jobs_run(app: App, plan: Plan, state: StateDir) -> None:
    jobs = running_jobs(plan, state.path)
    if jobs.running:
        app.abort(
            f"{len(jobs.running)} job(s) running on cluster {plan.cluster.name}: {jobs.describe()}. Nothing was "
            "destroyed. Wait for them or cancel them (scancel), or run `clusterctl down --force` to destroy "
            "the cluster with its jobs.",
            1,
        )
    if jobs.unknown:
        app.display_warning(f"could not ask Slurm for running jobs ({jobs.unknown}); going on.")
