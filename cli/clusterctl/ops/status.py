"""What ``clusterctl status`` reports, as data: machines, Slurm's view of each node, versions, drift.

Everything read from Slurm, the nodes and the lock is data: the command layer escapes it before
it reaches the terminal.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from clusterctl.image.drift import DPKG_QUERY, PackageListError, compare_packages, parse_packages
from clusterctl.image.lock import LockedImage
from clusterctl.plan import Plan
from clusterctl.plan.models import PlanNode
from clusterctl.render import render_files
from clusterctl.run.executor import Executor, executor_for, run_many
from clusterctl.run.providers import ProviderError, for_kind
from clusterctl.run.state import StateDir
from clusterctl.slurm.client import Slurm, SlurmError, why
from clusterctl.slurm.nodes import SlurmNode
from clusterctl.slurm.reasons import clean

# sinfo's %t names of the states scontrol's are read into (SlurmNode.compact_state).
_COMPACT = {"drained": "drain", "draining": "drng", "mixed": "mix", "allocated": "alloc", "completing": "comp"}
# The suffix sinfo puts on a power-saving node's state, from scontrol's flags.
_POWER_SUFFIX = (("POWERED_DOWN", "~"), ("POWERING_UP", "#"), ("POWERING_DOWN", "%"), ("POWER_DOWN", "%"))


def sinfo_state(node: SlurmNode) -> str:
    """The state as ``sinfo -o %t`` prints it (``idle``, ``drain``, ``mix``, ``idle~``), from scontrol's record."""
    state = _COMPACT.get(node.compact_state(), node.compact_state())
    suffix = next((mark for flag, mark in _POWER_SUFFIX if flag in node.flags), "")
    if node.not_responding and not suffix:
        suffix = "*"
    return clean(state, 20) + suffix


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
            out[node.hostname] = {"error": f"dpkg-query failed: {why(rc, text, err)}"}
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
    unread = slurm_error = ""
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
        client = Slurm(remote, controller, timeout_s=30)
        try:
            listed = client.nodes()
        except SlurmError as exc:
            slurm_error = str(exc)
            listed = ()
        for seen in listed:
            slurm[seen.name] = sinfo_state(seen)
            if seen.reason:
                reasons[seen.name] = clean(seen.reason, 300)
        if ver := client.version():
            versions["slurm"] = ver
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
        drift.append(f"{clean(host, 80)}: known to Slurm but not in the spec")
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
        "slurm_error": slurm_error,
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
