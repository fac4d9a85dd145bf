"""``clusterctl status SPEC``: machines, Slurm state, versions, and drift from the spec."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.table import Table
from rich.text import Text

from clusterctl.app import App
from clusterctl.commands.common import (
    handle_internal_errors,
    output_option,
    spec_argument,
    state_dir_option,
    validated_or_exit,
)
from clusterctl.commands.image import lock_option
from clusterctl.image.lock import LockError, expected_packages, lock_path, read_lock
from clusterctl.ops.status import collect_status
from clusterctl.plain import one_line
from clusterctl.plan import Plan
from clusterctl.report import document
from clusterctl.run.providers import ProviderError
from clusterctl.run.state import StateDir, StateDirError

# The cluster was never brought up (or was taken down): LSB's status code for "not running".
EXIT_NOT_UP = 3


def cell(value: object) -> Text:
    """A table cell: text from Slurm, the nodes or the lock, never markup nor a control sequence."""
    return Text(one_line(str(value)))


def _spares_line(plan: Plan) -> str | None:
    free = [n.hostname for n in plan.nodes if n.spare]
    used = [f"{n.hostname} for {n.replaces}" for n in plan.nodes if n.replaces]
    if not free and not used:
        return None
    return f"Spares: {len(free)} free ({', '.join(free) or 'none'}); {len(used)} in use ({', '.join(used) or 'none'})."


def _packages_cell(node: dict[str, Any]) -> str:
    found = node.get("packages")
    if found is None:
        return ""
    if found.get("error"):
        return f"unread: {found['error']}"
    if found["drifted"]:
        return f"drift: {found['summary']}"
    return "ok" + (f" (+{len(found['extra'])} not in the image)" if found["extra"] else "")


def _not_up(app: App, spec: str, plan: Plan, state: StateDir) -> NoReturn:
    """A cluster with no state was never brought up (or was taken down): say so, ask nothing of any machine."""
    if app.json:
        app.print_json(
            document("status", [], ok=False, cluster=plan.cluster.name, provider=plan.cluster.provider, state="not up")
        )
    else:
        app.out.print(
            f"Cluster {plan.cluster.name} ({plan.cluster.provider}) is not up: nothing is recorded in {state.path}.\n"
            f"`clusterctl up {shlex.quote(spec)}` brings it up.",
            markup=False,
        )
    raise SystemExit(EXIT_NOT_UP)


@click.command("status")
@spec_argument
@state_dir_option
@lock_option
@output_option
@click.pass_obj
@handle_internal_errors
def status_cmd(app: App, spec: str, state_dir: Path, lock_file: Path | None, output: str) -> None:
    """Show each node's machine and Slurm state, versions, and drift between SPEC and what runs.

    With a clusterctl.lock beside SPEC, each node's installed packages are compared with its
    profile's locked image (the packages column: a changed or removed package is drift; packages
    the image has not are counted, not drift).

    \b
    Exit status: 0 the status was shown (drift included), 1 an error (invalid spec, machines or
    state unreadable), 2 bad usage, 3 the cluster is not up (nothing recorded: never brought up,
    or taken down), 70 internal error.
    """
    app.output = output
    plan = validated_or_exit(app, spec, (), False, state_dir).plan
    state = StateDir(state_dir, plan.cluster.name)
    if not state.exists():
        _not_up(app, spec, plan, state)
    path = lock_path(spec, lock_file)
    try:
        lock = read_lock(path)
    except LockError as exc:
        app.display_warning(f"{exc} Packages are not compared.")
        lock = None
    if lock is not None and lock.cluster != plan.cluster.name:
        app.display_warning(f"{path} is the lock of cluster {lock.cluster}; packages are not compared (--lock).")
    images = expected_packages(lock, plan.cluster.name)
    try:
        data = collect_status(plan, state, images, str(path))
    except (ProviderError, StateDirError) as exc:
        app.abort(str(exc), 1)
    if app.json:
        app.print_json(document("status", [], ok=True, **data))
        return
    if data["machines_error"]:
        app.display_warning(data["machines_error"])
    elif data["slurm_error"]:
        app.display_warning(f"Slurm's view is not shown: {data['slurm_error']}")
    table = Table(title=cell(f"Cluster {plan.cluster.name} ({plan.cluster.provider}): {data['state']}"))
    columns = ["node", "role", "machine", "slurm", "power", "GPUs", "reason"]
    spares = _spares_line(plan)
    if spares:
        columns.append("spare")
    if images:
        columns.append("packages")
    for col in columns:
        table.add_column(col)
    for node in data["nodes"]:
        row = [
            node["hostname"],
            node["role"],
            node["machine"],
            node["slurm"],
            node.get("power", ""),
            node["gpus"],
            node["reason"],
        ]
        if spares:
            row.append(node.get("spare", ""))
        if images:
            row.append(_packages_cell(node))
        table.add_row(*(cell(value) for value in row))
    app.out.print(table)
    versions = data["versions"]
    app.out.print(
        cell(
            f"Slurm running: {versions.get('slurm', 'unknown')}; pinned: "
            f"{', '.join(f'{k} {v}' for k, v in sorted(plan.cluster.versions.items()))}"
        )
    )
    if spares:
        app.out.print(spares, markup=False)
    if plan.cluster.emulated_gpus:
        app.out.print("GPUs are emulated on this cluster (local provider): GPU roles are skipped.", markup=False)
    for line in data["drift"]:
        app.out.print(Text.assemble(("drift:", "yellow"), " ", cell(line)))
    if not data["drift"]:
        app.out.print("No drift from the spec.")
