"""``clusterctl burst resume|suspend HOSTLIST``: what slurmctld's power saving calls on the controller."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import click
from click.decorators import FC

from clusterctl.app import App
from clusterctl.commands.common import handle_internal_errors, output_option
from clusterctl.ops.burst import BurstError, load_plan, resume, suspend
from clusterctl.progress import PlainView
from clusterctl.report import document
from clusterctl.run.events import EventBus
from clusterctl.run.state import StateDirError

DEFAULT_BUILD = Path("/var/lib/clusterctl/build")
DEFAULT_STATE = Path("/var/lib/clusterctl/state")


def _dir_option(flag: str, default: Path, text: str) -> Callable[[FC], FC]:
    return click.option(
        flag, type=click.Path(file_okay=False, path_type=Path), default=default, show_default=True, help=text
    )


build_option = _dir_option("--build-dir", DEFAULT_BUILD, "The rendered build directory installed on the controller.")
state_option = _dir_option("--state-dir", DEFAULT_STATE, "Locks and fact cache of burst operations.")


@click.group("burst")
def burst_group() -> None:
    """Elastic nodes (called by slurmctld's ResumeProgram/SuspendProgram)."""


def _bus(app: App) -> EventBus:
    bus = EventBus()
    bus.subscribe(PlainView(app.err))
    return bus


@burst_group.command("resume")
@click.argument("hostlist")
@build_option
@state_option
@click.option(
    "--munge-key",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("/etc/munge/munge.key"),
    show_default=True,
    help="The cluster's munge key on this machine.",
)
@output_option
@click.pass_obj
@handle_internal_errors
def resume_cmd(app: App, hostlist: str, build_dir: Path, state_dir: Path, munge_key: Path, output: str) -> None:
    """Create, configure and register the burst nodes in HOSTLIST.

    Exit status: 0 every node is up, 1 one failed (left DOWN; Slurm's next resume retries it), 2
    bad usage, 70 internal error.
    """
    app.output = output
    try:
        plan = load_plan(build_dir)
        outcome = resume(plan, hostlist, build_dir, state_dir, _bus(app), munge_key_file=munge_key)
    except (BurstError, StateDirError, FileNotFoundError) as exc:
        app.abort(str(exc), 1)
    if app.json:
        app.print_json(document("burst resume", [], ok=outcome.ok, hostlist=hostlist, failed=dict(outcome.failed)))
    for host, why in sorted(outcome.failed.items()):
        app.display_error(f"{host}: {why} (left DOWN; the next resume retries)")
    sys.exit(0 if outcome.ok else 1)


@burst_group.command("suspend")
@click.argument("hostlist")
@build_option
@state_option
@output_option
@click.pass_obj
@handle_internal_errors
def suspend_cmd(app: App, hostlist: str, build_dir: Path, state_dir: Path, output: str) -> None:
    """Remove the burst nodes in HOSTLIST.

    Exit status: 0 every node is removed, 1 one could not be, 2 bad usage, 70 internal error.
    """
    app.output = output
    try:
        outcome = suspend(load_plan(build_dir), hostlist, build_dir, state_dir, _bus(app))
    except (BurstError, StateDirError, FileNotFoundError) as exc:
        app.abort(str(exc), 1)
    if app.json:
        app.print_json(document("burst suspend", [], ok=outcome.ok, hostlist=hostlist, failed=dict(outcome.failed)))
    for host, why in sorted(outcome.failed.items()):
        app.display_error(f"{host}: {why}")
    sys.exit(0 if outcome.ok else 1)
