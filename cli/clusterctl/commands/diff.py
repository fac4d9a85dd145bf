"""``clusterctl diff SPEC``: what the next ``up`` would change on the running cluster."""

from __future__ import annotations

import json
from pathlib import Path

import click

from clusterctl.app import App
from clusterctl.commands.common import (
    handle_internal_errors,
    max_unavailable_option,
    output_option,
    spec_argument,
    state_dir_option,
    validated_or_exit,
)
from clusterctl.ops.diff import applied_files, applied_plan, as_json, changes, describe
from clusterctl.ops.upgrade import VERSIONS_KEY, planned_batches
from clusterctl.pipeline import default_build_dir
from clusterctl.render import render_files
from clusterctl.report import document
from clusterctl.run.providers import ProviderError, for_kind
from clusterctl.run.state import StateDir, StateDirError

# The -detailed-exitcode convention: 0 nothing would change, 2 something would, 1 an error.
EXIT_CHANGES = 2


@click.command("diff")
@spec_argument
@state_dir_option
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), help="Build directory.")
@max_unavailable_option
@output_option
@click.pass_obj
@handle_internal_errors
def diff_cmd(
    app: App, spec: str, state_dir: Path, out_dir: Path | None, max_unavailable: int | None, output: str
) -> None:
    """Show what `clusterctl up SPEC` would change on the running cluster, changing nothing.

    Nodes to create or remove, every generated file that would change with what applying it
    does (a Slurm reconfigure, a restart, a remount), pinned versions that would roll, and which
    changes drain nodes, with the batches a rolling upgrade would go through (as `up` with the same
    --max-unavailable makes them).

    Exit status: 0 nothing would change, 1 an error (invalid spec, state or machines unreadable),
    2 something would change (or bad usage), 70 internal error.
    """
    app.output = output
    validated = validated_or_exit(app, spec, (), False, state_dir)
    plan = validated.plan
    state = StateDir(state_dir, plan.cluster.name)
    try:
        saved = state.read()
        recorded = saved.get("build_dir")
        machines = for_kind(plan.cluster.provider).status(plan, state.path)
    except (StateDirError, ProviderError) as exc:
        app.abort(str(exc), 1)
    build_dir = out_dir or (Path(recorded) if recorded else default_build_dir(plan))
    files = validated.files or render_files(plan)
    found = changes(
        plan,
        files,
        applied_plan(build_dir),
        applied_files(build_dir, files),
        machines,
        recorded_versions=saved.get(VERSIONS_KEY),
        roll=planned_batches(plan, saved, list(saved.get("nodes") or {}), max_unavailable),
    )
    if app.json:
        details = json.loads(as_json(found, build_dir if recorded or out_dir else None))
        app.print_json(document("diff", [], ok=not found, **details))
    elif not found:
        app.display_success(f"no changes: cluster {plan.cluster.name} is as {spec} says")
    else:
        for line in describe(found):
            app.out.print(line, markup=False)
        drains = sum(1 for c in found if c.drain)
        app.out.print(f"{len(found)} change(s), {drains} of them drain nodes; `clusterctl up {spec}` applies them.")
    if found:
        raise SystemExit(EXIT_CHANGES)
