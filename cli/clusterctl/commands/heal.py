"""``clusterctl heal SPEC``: resume the nodes clusterctl drained once their health check passes."""

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
from clusterctl.ops.heal import HealError, heal
from clusterctl.ops.upgrade import not_upgraded
from clusterctl.report import STOPPED_INPUT, command_name, document
from clusterctl.run.executor import executor_for
from clusterctl.run.state import LockedError, StateDir, StateDirError
from clusterctl.spec.findings import Level


@click.command("heal")
@spec_argument
@state_dir_option
@click.option("--dry-run", is_flag=True, help="Check the nodes, resume none: say which would be resumed.")
@output_option
@click.pass_obj
@handle_internal_errors
def heal_cmd(app: App, spec: str, state_dir: Path, dry_run: bool, output: str) -> None:
    """Health-check the nodes clusterctl drained and resume those that pass.

    A drain whose reason starts with `clusterctl` (from verify, the node health check or an
    upgrade) is clusterctl's to undo; a node drained with any other reason is left as it is.

    Exit status: 0 every clusterctl-drained node is back (or none was drained), 1 one stays
    unhealthy (or an error), 2 bad usage, 70 internal error.
    """
    app.output = output
    plan = validated_or_exit(app, spec, (), False, state_dir).plan
    state = StateDir(state_dir, plan.cluster.name)
    executor = executor_for(plan, state.path)
    try:
        # Not while `up` runs: it drains the nodes it removes, which heal must not resume under it.
        with state.lock("heal"):
            findings = heal(plan, executor, plan.launcher(), dry_run=dry_run, upgrading=not_upgraded(plan, state))
    except (HealError, LockedError, StateDirError) as exc:
        if app.json:
            app.print_json(document(command_name(), [], ok=False, stopped=STOPPED_INPUT, error=str(exc)))
            raise SystemExit(1) from None
        app.abort(f"{exc} Nothing was changed.", 1)
    ok = not any(f.level is Level.ERROR for f in findings)
    if app.json:
        app.print_json(document(command_name(), findings, ok=ok, dry_run=dry_run))
    else:
        app.show_findings(findings)
        if not findings:
            app.display_success("no node is drained")
        elif ok:
            app.display_success(app.summarize_findings(findings))
    if not ok:
        raise SystemExit(1)
