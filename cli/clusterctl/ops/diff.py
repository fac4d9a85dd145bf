"""What the next ``clusterctl up`` would do to a running cluster, without doing it.

The running cluster is what the last ``up`` applied: the build directory it recorded in the state
directory (every rendered file, and ``plan.json``, the plan it applied) and the machines the
provider reports now. The spec is validated, planned and rendered in memory, then compared:

* nodes to create (in the plan, no machine) and to remove (in the applied plan, not in the new);
* every rendered file that would change, with what applying it does to the cluster (a Slurm
  reconfigure, a daemon restart, a remount) and whether nodes must drain for it;
* pinned versions that change since the last converge, and the batches the rolling upgrade they
  make goes through (each batch drains in turn).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterctl.catalog.compat import SLURM_RECONFIGURE_NODES, at_least
from clusterctl.ops.upgrade import REBOOT_FOR
from clusterctl.plan.models import Plan
from clusterctl.render.tree import RenderedFile
from clusterctl.slurm.reasons import UPGRADE

# What writing a rendered file does to a live cluster, by the file's place in the build directory
# (first match wins). drain: nodes drain before it is applied.
EFFECTS: tuple[tuple[str, str, bool], ...] = (
    ("slurm/gres.conf", "slurmd restarted on the compute nodes (running jobs keep running)", False),
    ("slurm/", "Slurm reconfigured (scontrol reconfigure; running jobs keep running)", False),
    ("storage/", "mounts changed: the nodes that mount them drain first, then remount", True),
    ("nccl/", "written on the GPU nodes; jobs started after it read it", False),
    ("health/", "the node health check replaced (slurmd runs the new one at its next interval)", False),
    ("monitoring/", "the monitoring configuration replaced and its services reloaded", False),
    ("ansible/", "the configuration run's inventory and variables", False),
    ("hosts", "/etc/hosts rewritten on every node", False),
)
OTHER_EFFECT = ("written on the nodes that use it", False)
# Nodes joining or leaving before Slurm 23.11: a reconfigure cannot change the node list.
RESTART_EFFECT = "slurmctld and slurmd restarted: nodes join or leave (running jobs keep running)"


@dataclass(frozen=True)
class Change:
    """One thing ``up`` would change.

    Attributes:
        kind: ``node-create``, ``node-remove``, ``version``, ``roll-batch`` or ``file``.
        subject: The node, the versions key (``*``: a roll under way), ``batch N`` or the build directory path.
        action: What ``up`` does about it, in words.
        drain: Nodes drain for it (a version bump, a changed mount, a removed node).
        detail: Old and new values where there are some.
    """

    kind: str
    subject: str
    action: str
    drain: bool = False
    detail: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "kind": self.kind,
            "subject": self.subject,
            "action": self.action,
            "drain": self.drain,
            "detail": dict(self.detail),
        }


def effect_of(path: str) -> tuple[str, bool]:
    """What writing the rendered file at ``path`` does to a live cluster, and whether nodes drain."""
    for prefix, action, drain in EFFECTS:
        if path == prefix or (prefix.endswith("/") and path.startswith(prefix)):
            return action, drain
    return OTHER_EFFECT


def applied_plan(build_dir: Path) -> Plan | None:
    """The plan the last ``up`` applied (``plan.json`` in its build directory), None when there is none."""
    path = build_dir / "plan.json"
    if not path.is_file():
        return None
    try:
        return Plan.model_validate_json(path.read_text())
    except ValueError:
        return None


def applied_files(build_dir: Path, files: Sequence[RenderedFile]) -> dict[str, bytes | None]:
    """The applied content of each of ``files`` (None where the build directory lacks it)."""
    out: dict[str, bytes | None] = {}
    for file in files:
        path = build_dir / file.path
        out[file.path] = path.read_bytes() if path.is_file() and not path.is_symlink() else None
    return out


# Rendered files that no node reads: the plan record itself.
NOT_ON_NODES = frozenset({"plan.json", "DO_NOT_EDIT"})


def changes(
    new: Plan,
    files: Sequence[RenderedFile],
    applied: Plan | None,
    applied_content: Mapping[str, bytes | None],
    machines: Mapping[str, str],
    *,
    recorded_versions: Mapping[str, str] | None = None,
    roll: Sequence[Sequence[str]] = (),
) -> list[Change]:
    """Everything ``up`` would change: nodes, then versions and the roll's batches, then files (in render order).

    Args:
        new: The plan of the spec as it is now.
        files: Its rendered files.
        applied: The plan the last ``up`` applied (None: never applied, or its build dir is gone).
        applied_content: The applied content of each rendered path (None: not there).
        machines: The provider's machine state per node (``running``, ``stopped``, ``missing``).
        recorded_versions: The pins the last converge applied, as the state records them (None: no record;
            then the applied plan's pins are compared, and nothing rolls).
        roll: The batches of the rolling upgrade ``up`` would make (run/upgrade.planned_batches).
    """
    out: list[Change] = []
    for node in new.nodes:
        if not node.burst and machines.get(node.hostname, "missing") == "missing":
            out.append(Change("node-create", node.hostname, f"create {node.hostname} and configure it", False))
    if applied is not None:
        kept = {n.hostname for n in new.nodes}
        for node in applied.nodes:
            if node.hostname not in kept and not node.burst:
                out.append(
                    Change(
                        "node-remove",
                        node.hostname,
                        f"drain {node.hostname}, wait for its jobs, then remove it",
                        True,
                    )
                )
    out += _version_changes(new, applied, recorded_versions, roll)
    membership = any(c.kind in ("node-create", "node-remove") for c in out)
    restarts = membership and not at_least(new.cluster.versions.get("slurm", ""), SLURM_RECONFIGURE_NODES)
    if applied is None and not any(applied_content.values()):
        count = sum(1 for f in files if f.path not in NOT_ON_NODES)
        out.append(Change("file", "*", f"every generated file written ({count}): no earlier up recorded"))
        return out
    for file in files:
        before = applied_content.get(file.path)
        if file.path in NOT_ON_NODES or (before is not None and before == file.text.encode()):
            continue
        action, drain = effect_of(file.path)
        if restarts and file.path.startswith("slurm/"):
            action = RESTART_EFFECT
        out.append(Change("file", file.path, action if before is not None else f"new file: {action}", drain))
    return out


def _version_changes(
    new: Plan, applied: Plan | None, recorded: Mapping[str, str] | None, roll: Sequence[Sequence[str]]
) -> list[Change]:
    """The pins that change, then one change per batch of the roll they make."""
    if recorded is not None:
        old = recorded
    elif applied is not None:
        old = applied.cluster.versions
    else:
        return []
    now = new.cluster.versions
    changed = sorted(key for key in set(old) | set(now) if old.get(key) != now.get(key))
    rolled = sum(len(batch) for batch in roll)
    if roll:
        how = (
            "controllers, login nodes and free spares first, then the compute nodes in service roll in "
            f"{len(roll)} batch(es) of at most {max(len(b) for b in roll)} ({rolled} node(s); --max-unavailable)"
        )
    else:
        how = "converged on every node at once: no compute node in service to roll"
        if recorded is None:
            how = "converged on every node at once: the state records no earlier pins, so nothing rolls"
    out = [Change("version", key, how, bool(roll), {"applied": old.get(key), "spec": now.get(key)}) for key in changed]
    if roll and not changed:
        out.append(Change("version", "*", f"the interrupted rolling upgrade goes on: {how}", True))
    emulated = {n.hostname for n in new.nodes if n.emulated}
    reboots = bool(REBOOT_FOR & set(changed))
    for i, batch in enumerate(roll, 1):
        rebooted = [h for h in batch if reboots and h not in emulated]
        steps = ["converge"] + ([f"reboot {', '.join(rebooted)} through Slurm"] if rebooted else [])
        out.append(
            Change(
                "roll-batch",
                f"batch {i}",
                f"drain {', '.join(batch)} ({UPGRADE}), wait for their jobs, {', '.join(steps)}, "
                "run the health check, resume the nodes that pass",
                True,
                {"nodes": list(batch)},
            )
        )
    return out


def describe(found: Sequence[Change]) -> list[str]:
    """One line per change, for the terminal."""
    lines = []
    for change in found:
        mark = " [drain]" if change.drain else ""
        detail = ""
        if change.kind == "version":
            detail = f" {change.detail.get('applied')} -> {change.detail.get('spec')}"
        lines.append(f"{change.kind:<12} {change.subject}{detail}: {change.action}{mark}")
    return lines


def as_json(found: Sequence[Change], applied_from: Path | None) -> str:
    """The JSON document ``diff --output json`` prints."""
    return json.dumps(
        {
            "changes": [c.to_dict() for c in found],
            "applied_build_dir": str(applied_from) if applied_from else None,
            "drain": sorted(
                {c.subject for c in found if c.drain and c.kind.startswith("node")}
                | {h for c in found if c.kind == "roll-batch" for h in c.detail.get("nodes", [])}
            ),
        },
        indent=2,
    )
