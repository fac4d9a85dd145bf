"""``clusterctl status SPEC``: machines, Slurm state, versions, and drift from the spec."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from clusterctl.app import App
from clusterctl.commands.common import (
    handle_internal_errors,
    output_option,
    spec_argument,
    state_dir_option,
    validated_or_exit,
)
from clusterctl.plan import Plan
from clusterctl.render import render_files
from clusterctl.run.executor import executor_for
from clusterctl.run.providers import ProviderError, for_kind
from clusterctl.run.state import StateDir, StateDirError

_POWER = {"idle~": "powered down", "idle#": "powering up", "idle%": "powering down", "down~": "powered down"}


def power_state(raw: str, machine: str) -> str:
    """Burst node power state from Slurm's state suffixes (~ powered down, # powering up, % powering down)."""
    if raw.endswith("~"):
        return "powered down"
    if raw.endswith("#"):
        return "powering up"
    if raw.endswith("%"):
        return "powering down"
    return "up" if machine == "running" else "powered down"


def collect_status(plan: Plan, state: StateDir) -> dict[str, Any]:
    """Everything ``status`` reports, as data."""
    machines = for_kind(plan.cluster.provider).status(plan, state.path)
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
        elif not node.burst and machine != "running":
            drift.append(f"{host}: {machine}, the spec wants it running")
    for host in sorted(set(slurm) - planned):
        drift.append(f"{host}: known to Slurm but not in the spec")
    if versions.get("slurm") and not versions["slurm"].startswith(plan.cluster.versions["slurm"]):
        drift.append(f"Slurm {versions['slurm']} runs, the spec pins {plan.cluster.versions['slurm']}")
    nodes = []
    for node in plan.nodes:
        raw = slurm.get(node.hostname, "-")
        entry = {
            "hostname": node.hostname,
            "role": node.role,
            "machine": machines.get(node.hostname, "missing"),
            "slurm": raw,
            "reason": reasons.get(node.hostname, ""),
            "gpus": f"{node.gpus} emulated" if node.emulated else str(node.gpus),
        }
        if node.burst:
            entry["power"] = power_state(raw, entry["machine"])
        nodes.append(entry)
    return {
        "cluster": plan.cluster.name,
        "provider": plan.cluster.provider,
        "state": state.read().get("status", "not created"),
        "versions": versions | {"spec": dict(plan.cluster.versions)},
        "nodes": nodes,
        "drift": drift,
        "emulated_gpus": plan.cluster.emulated_gpus,
    }


@click.command("status")
@spec_argument
@state_dir_option
@output_option
@click.pass_obj
@handle_internal_errors
def status_cmd(app: App, spec: str, state_dir: Path, output: str) -> None:
    """Show each node's machine and Slurm state, versions, and drift between SPEC and what runs."""
    app.output = output
    plan = validated_or_exit(app, spec, (), False).plan
    try:
        data = collect_status(plan, StateDir(state_dir, plan.cluster.name))
    except (ProviderError, StateDirError) as exc:
        app.abort(str(exc), 1)
    if app.json:
        app.print_json(data)
        return
    table = Table(title=f"Cluster {plan.cluster.name} ({plan.cluster.provider}): {data['state']}")
    for col in ("node", "role", "machine", "slurm", "power", "GPUs", "reason"):
        table.add_column(col)
    for node in data["nodes"]:
        table.add_row(
            node["hostname"],
            node["role"],
            node["machine"],
            node["slurm"],
            node.get("power", ""),
            node["gpus"],
            node["reason"],
        )
    app.out.print(table)
    versions = data["versions"]
    app.out.print(
        f"Slurm running: {versions.get('slurm', 'unknown')}; pinned: "
        f"{', '.join(f'{k} {v}' for k, v in sorted(plan.cluster.versions.items()))}",
        markup=False,
    )
    if plan.cluster.emulated_gpus:
        app.out.print("GPUs are emulated on this cluster (local provider): GPU roles are skipped.", markup=False)
    for line in data["drift"]:
        app.out.print(f"[yellow]drift:[/yellow] {line}")
    if not data["drift"]:
        app.out.print("No drift from the spec.")
