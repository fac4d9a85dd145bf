"""``clusterctl status SPEC``: machines, Slurm state, versions, and drift from the spec."""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.markup import escape
from rich.table import Table

from clusterctl.app import App
from clusterctl.commands.common import (
    handle_internal_errors,
    output_option,
    spec_argument,
    state_dir_option,
    validated_or_exit,
)
from clusterctl.commands.image import lock_option
from clusterctl.image.drift import DPKG_QUERY, PackageListError, compare_packages, parse_packages
from clusterctl.image.lock import LockedImage, LockError, expected_packages, lock_path, read_lock
from clusterctl.plan import Plan
from clusterctl.plan.models import PlanNode
from clusterctl.render import render_files
from clusterctl.report import document
from clusterctl.run.executor import Executor, executor_for, run_many
from clusterctl.run.providers import ProviderError, for_kind
from clusterctl.run.readiness import slurm_node_states
from clusterctl.run.state import StateDir, StateDirError

# The cluster was never brought up (or was taken down): LSB's status code for "not running".
EXIT_NOT_UP = 3

# sinfo's %t names of the states scontrol's are read into (run/readiness.py).
_COMPACT = {"drained": "drain", "draining": "drng", "mixed": "mix", "allocated": "alloc", "completing": "comp"}


def power_state(raw: str, machine: str) -> str:
    """Burst node power state from Slurm's state suffixes (~ powered down, # powering up, % powering down)."""
    if raw.endswith("~"):
        return "powered down"
    if raw.endswith("#"):
        return "powering up"
    if raw.endswith("%"):
        return "powering down"
    return "up" if machine == "running" else "powered down"


def package_drift(
    plan: Plan, remote: Executor, machines: Mapping[str, str], images: Mapping[str, LockedImage]
) -> dict[str, dict[str, Any]]:
    """Each existing node's packages against its profile's locked image: one dpkg-query per node, all at once.

    Returns hostname -> ``PackageDrift.to_dict()`` plus ``summary``, or ``{"error": ...}`` when the
    node's list could not be read. Nodes whose profile has no locked image are left out.
    """
    nodes = [
        n
        for n in plan.nodes
        if n.hardware in images
        and (machines.get(n.hostname) == "running" if plan.cluster.provider == "local" or n.burst else True)
    ]
    out: dict[str, dict[str, Any]] = {}
    answers = run_many(remote, [(n.hostname, DPKG_QUERY, 60.0) for n in nodes])
    for node, (rc, text, err) in zip(nodes, answers, strict=True):
        if rc != 0:
            why = (err.strip().splitlines() or [f"exit {rc}"])[-1]
            out[node.hostname] = {"error": f"dpkg-query failed: {why}"}
            continue
        try:
            installed = parse_packages(text)
        except PackageListError as exc:
            out[node.hostname] = {"error": str(exc)}
            continue
        drift = compare_packages(images[node.hardware].packages, installed)
        out[node.hostname] = {**drift.to_dict(), "summary": drift.summary()}
    return out


def collect_status(
    plan: Plan, state: StateDir, images: Mapping[str, LockedImage] | None = None, lock_file: str = ""
) -> dict[str, Any]:
    """Everything ``status`` reports, as data (``images``: the lock's, for the packages column)."""
    unread = ""
    try:
        machines = for_kind(plan.cluster.provider).status(plan, state.path)
    except ProviderError as exc:  # said once (`machines_error`), not in every node's row
        machines = dict.fromkeys((n.hostname for n in plan.nodes if not n.burst), "unknown")
        unread = str(exc)
    remote = executor_for(plan, state.path)
    controller = plan.slurm.controllers[0]
    slurm: dict[str, str] = {}
    reasons: dict[str, str] = {}
    versions: dict[str, str] = {}
    drift: list[str] = []
    if machines.get(controller) == "running" or plan.cluster.provider != "local":
        _, out, _ = remote.run(controller, "sinfo -h -N -o '%N|%t|%E'", 30)
        for line in out.splitlines():
            parts = line.split("|")
            if len(parts) == 3:
                slurm[parts[0]] = parts[1]
                if parts[2] not in ("none", ""):
                    reasons[parts[0]] = parts[2]
        if any(n.hostname not in slurm for n in plan.nodes if n.role == "compute" and not n.burst):
            # sinfo lists only nodes in a partition: free spares and replaced nodes come from scontrol.
            for host, (node_state, _gres, reason) in slurm_node_states(remote, controller).items():
                if host not in slurm:
                    slurm[host] = _COMPACT.get(node_state, node_state)
                    if reason:
                        reasons[host] = reason
        ver = remote.run(controller, "sinfo --version", 30)[1].strip()
        if ver:
            versions["slurm"] = ver.removeprefix("slurm ").removeprefix("slurm-wlm ")
        rendered = next(f.text for f in render_files(plan) if f.path == "slurm/slurm.conf")
        live = remote.run(controller, "sha256sum /etc/slurm/slurm.conf", 30)[1].split()
        if live and live[0] != hashlib.sha256(rendered.encode()).hexdigest():
            drift.append(f"{controller}: /etc/slurm/slurm.conf differs from the render (run `clusterctl up`)")
    planned = {n.hostname for n in plan.nodes}
    for host, machine in sorted(machines.items()):
        node = next((n for n in plan.nodes if n.hostname == host), None)
        if node is None:
            drift.append(f"{host}: exists ({machine}) but is not in the spec")
        elif not node.burst and not unread and machine not in ("running", "installed", "provisioned"):
            drift.append(f"{host}: {machine}, the spec wants it running")
    for host in sorted(set(slurm) - planned):
        drift.append(f"{host}: known to Slurm but not in the spec")
    if versions.get("slurm") and not versions["slurm"].startswith(plan.cluster.versions["slurm"]):
        drift.append(f"Slurm {versions['slurm']} runs, the spec pins {plan.cluster.versions['slurm']}")
    packages = package_drift(plan, remote, machines, images or {})
    for host, found in sorted(packages.items()):
        if found.get("error"):
            drift.append(f"{host}: its packages could not be read: {found['error']}")
        elif found["drifted"]:
            drift.append(f"{host}: packages differ from {lock_file or 'the lock'}: {found['summary']}")
    nodes = []
    for node in plan.nodes:
        raw = slurm.get(node.hostname, "-")
        entry: dict[str, Any] = {
            "hostname": node.hostname,
            "role": node.role,
            "machine": machines.get(node.hostname, "missing"),
            "slurm": raw,
            "reason": reasons.get(node.hostname, ""),
            "gpus": f"{node.gpus} emulated" if node.emulated else str(node.gpus),
        }
        if node.burst:
            entry["power"] = power_state(raw, entry["machine"])
        if service := spare_service(node):
            entry["spare"] = service
        if node.hostname in packages:
            entry["packages"] = packages[node.hostname]
        nodes.append(entry)
    return {
        "cluster": plan.cluster.name,
        "provider": plan.cluster.provider,
        "state": state.read().get("status", "not created"),
        "versions": versions | {"spec": dict(plan.cluster.versions)},
        "nodes": nodes,
        "drift": drift,
        "emulated_gpus": plan.cluster.emulated_gpus,
        "machines_error": unread,
    }


def spare_service(node: PlanNode) -> str:
    """What a node is to the hot spares: a free spare, a spare in use (and whose place) or a replaced node."""
    if node.spare:
        return "free spare"
    if node.replaces:
        return f"spare, replaces {node.replaces}"
    if node.replaced_by:
        return f"replaced by {node.replaced_by}"
    return ""


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
        return escape(f"unread: {found['error']}")
    if found["drifted"]:
        return escape(f"drift: {found['summary']}")
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
    table = Table(title=f"Cluster {plan.cluster.name} ({plan.cluster.provider}): {data['state']}")
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
            escape(node["reason"]),
        ]
        if spares:
            row.append(node.get("spare", ""))
        if images:
            row.append(_packages_cell(node))
        table.add_row(*row)
    app.out.print(table)
    versions = data["versions"]
    app.out.print(
        f"Slurm running: {versions.get('slurm', 'unknown')}; pinned: "
        f"{', '.join(f'{k} {v}' for k, v in sorted(plan.cluster.versions.items()))}",
        markup=False,
    )
    if spares:
        app.out.print(spares, markup=False)
    if plan.cluster.emulated_gpus:
        app.out.print("GPUs are emulated on this cluster (local provider): GPU roles are skipped.", markup=False)
    for line in data["drift"]:
        app.out.print(f"[yellow]drift:[/yellow] {line}")
    if not data["drift"]:
        app.out.print("No drift from the spec.")
