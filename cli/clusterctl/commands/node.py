"""``clusterctl node replace|return SPEC NODE``: put a hot spare in a failed node's place, and take it back."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from clusterctl.app import App
from clusterctl.commands.common import (
    handle_internal_errors,
    output_option,
    spec_argument,
    state_dir_option,
    validated_or_exit,
)
from clusterctl.commands.image import lock_option
from clusterctl.commands.up import up_cmd
from clusterctl.ops.spares import mark_returned, replace, resume_spare
from clusterctl.plan.service import Swap, SwapError
from clusterctl.report import command_name, document
from clusterctl.run.executor import executor_for
from clusterctl.run.state import LockedError, StateDir, StateDirError

F = TypeVar("F", bound=Callable[..., Any])
node_argument = click.argument("node", metavar="NODE")


@click.group("node")
def node_group() -> None:
    """Hot spares: replace a failed node with a spare; return a repaired one as a spare."""


def _state(app: App, plan_name: str, state_dir: Path) -> StateDir:
    state = StateDir(state_dir, plan_name)
    if not state.exists():
        app.abort(f"cluster {plan_name} has no state in {state_dir}: bring it up first (`clusterctl up`).", 1)
    return state


def _apply(ctx: click.Context, app: App, spec: str, swap: Swap, **options: object) -> None:
    """Run ``up`` with the recorded swap; if it fails, say that the swap is recorded and how to finish.

    With ``--output json`` the swap's envelope comes last, after the events and envelope of ``up``.
    """
    command = command_name(ctx)
    done = {"spare": swap.spare, "failed": swap.failed}
    try:
        ctx.invoke(up_cmd, spec=spec, **options)
    except SystemExit as exc:
        if exc.code:
            message = (
                f"{swap.spare} / {swap.failed}: the swap is recorded but `up` did not finish; fix the cause and "
                f"run `clusterctl up {spec}` again."
            )
            if app.json:
                app.print_json(document(command, [], ok=False, stopped="error", error=message, **done), line=True)
            app.display_error(message)
        raise
    if app.json:
        app.print_json(document(command, [], ok=True, **done), line=True)


def up_options(func: F) -> F:
    """The options handed on to the ``up`` that applies the swap."""
    for option in reversed(
        (
            click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), help="Build directory."),
            state_dir_option,
            click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation (cloud previews)."),
            lock_option,
            output_option,
        )
    ):
        func = option(func)
    return func


@node_group.command("replace")
@spec_argument
@node_argument
@up_options
@click.pass_context
@handle_internal_errors
def replace_cmd(
    ctx: click.Context,
    spec: str,
    node: str,
    out_dir: Path | None,
    state_dir: Path,
    yes: bool,
    lock_file: Path | None,
    output: str,
) -> None:
    """Take the failed NODE out of its partitions and put a free spare in its place.

    NODE is drained (a drain already on it, and its reason, are kept). The spare is an idle one of
    the same hardware profile, on NODE's leaf switches or scalable unit where one is free; `up` then
    puts it in NODE's partitions (Slurm is reconfigured, running jobs keep running) and leaves NODE
    alone until `clusterctl node return`.

    Exit status: 0 the spare is in service, 1 refused (nothing changed) or the `up` that applies
    the swap failed (the swap is recorded: `up` again finishes it), 2 bad usage, 70 internal error.
    """
    app: App = ctx.obj
    app.output = output
    plan = validated_or_exit(app, spec, (), False, state_dir).plan
    state = _state(app, plan.cluster.name, state_dir)
    try:
        with state.lock("node replace"):
            swap = replace(plan, state, executor_for(plan, state.path), node)
    except (SwapError, LockedError, StateDirError) as exc:
        app.abort(f"{exc} Nothing was changed.", 1)
    app.display_success(f"{swap.spare} takes {swap.failed}'s place; {swap.failed} stays drained")
    _apply(ctx, app, spec, swap, out_dir=out_dir, state_dir=state_dir, yes=yes, lock_file=lock_file, output=output)


@node_group.command("return")
@spec_argument
@node_argument
@up_options
@click.pass_context
@handle_internal_errors
def return_cmd(
    ctx: click.Context,
    spec: str,
    node: str,
    out_dir: Path | None,
    state_dir: Path,
    yes: bool,
    lock_file: Path | None,
    output: str,
) -> None:
    """Health-check the repaired NODE a spare replaced and make it a free spare again.

    Only when NODE's health check passes: it is resumed, idle and in no partition, and `up`
    configures it again, ready for the next `node replace`. The spare that took its place stays in
    service.

    Exit status: 0 the node is a free spare again, 1 refused (its health check failed, nothing
    changed) or the `up` after it failed, 2 bad usage, 70 internal error.
    """
    app: App = ctx.obj
    app.output = output
    plan = validated_or_exit(app, spec, (), False, state_dir).plan
    state = _state(app, plan.cluster.name, state_dir)
    executor = executor_for(plan, state.path)
    try:
        with state.lock("node return"):
            swap = mark_returned(plan, state, executor, node)
    except (SwapError, LockedError, StateDirError) as exc:
        app.abort(f"{exc} Nothing was changed.", 1)
    # In no partition, so no job lands there before `up` has configured it again.
    try:
        resume_spare(plan, executor, node)
    except SwapError as exc:
        app.display_warning(
            f"{exc} Resume it by hand once Slurm accepts it (scontrol update nodename={node} state=resume)."
        )
    app.display_success(f"{node} passed its health check; it is a free spare again")
    _apply(ctx, app, spec, swap, out_dir=out_dir, state_dir=state_dir, yes=yes, lock_file=lock_file, output=output)
