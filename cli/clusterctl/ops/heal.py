"""Health-gated return to service: a node clusterctl drained comes back only once it is healthy.

The contract is the drain reason's prefix (``clusterctl.slurm.reasons``): a reason that starts
with ``clusterctl`` marks a drain clusterctl made and may undo; any other is an admin's, and such
a node is never touched. What to do with each node is ``clusterctl.slurm.heal.decide``, the same
function the controller's heal timer runs. A node to check runs its health check (the cluster's
HealthCheckProgram); only when it passes is the node resumed. An unhealthy node stays drained
(the health check puts its own reason on it).
"""

from __future__ import annotations

from collections.abc import Collection

from clusterctl.plan.models import Plan
from clusterctl.remote import Executor, run_many
from clusterctl.render.health import HEALTHCHECK_PATH
from clusterctl.slurm.client import Slurm, SlurmError, why
from clusterctl.slurm.heal import Scope, Verdict, decide
from clusterctl.slurm.nodes import SlurmNode
from clusterctl.slurm.reasons import clean
from clusterctl.spec.findings import Finding, Level

HEALTH_TIMEOUT_S = 120.0


class HealError(Exception):
    """Slurm's node list could not be read; nothing was changed."""


def scope(plan: Plan, upgrading: Collection[str]) -> Scope:
    """What ``clusterctl heal`` knows beyond Slurm: the plan's swaps and the roll under way.

    From the control machine every node is in reach: burst nodes and free spares are checked too.
    """
    return Scope(
        upgrading=frozenset(upgrading),
        replaced=frozenset(n.hostname for n in plan.nodes if n.replaced_by),
        cloud=True,
        out_of_partition=True,
    )


def drained(nodes: Collection[SlurmNode], plan: Plan) -> list[SlurmNode]:
    """The plan's compute nodes Slurm has drained or is draining, in plan order."""
    found = {n.name: n for n in nodes}
    return [
        node
        for planned in plan.nodes
        if planned.role == "compute" and (node := found.get(planned.hostname)) is not None and node.drained
    ]


_LEFT = {
    Verdict.FOREIGN: (
        "heal.foreign",
        "left drained: its reason is not clusterctl's ({reason}).",
        "Resume it by hand when you are done (scontrol update nodename=... state=resume).",
    ),
    Verdict.AMBIGUOUS: (
        "heal.ambiguous",
        "left drained: Slurm's record of it names a field twice (its reason or comment holds one).",
        "Look at `scontrol show node` for it; an admin's text that reads as a Slurm field is never acted on.",
    ),
    Verdict.LEAVING: (
        "heal.leaving",
        "left drained: up is removing it (the spec no longer has it).",
        "Run `clusterctl up` with the spec that removed it to finish, or put it back in the spec.",
    ),
    Verdict.REPLACED: (
        "heal.replaced",
        "left drained: {spare} took its place (clusterctl node replace).",
        "Once it is repaired, `clusterctl node return` health-checks it and makes it a spare.",
    ),
    Verdict.UPGRADING: (
        "heal.upgrading",
        "left drained: a rolling upgrade drained it and has not upgraded it yet.",
        "Run `clusterctl up` again: the upgrade goes on from where it stopped.",
    ),
}


def heal(
    plan: Plan, executor: Executor, launcher: str, *, dry_run: bool = False, upgrading: Collection[str] = ()
) -> list[Finding]:
    """Health-check every node clusterctl drained and resume those that pass; leave the rest.

    Returns:
        One finding per drained node: ``heal.resumed`` (info), ``heal.unhealthy`` (error: still
        drained), ``heal.foreign`` (info: an admin's drain, untouched), ``heal.ambiguous``,
        ``heal.leaving``, ``heal.replaced`` and ``heal.upgrading`` (info: left alone on purpose),
        ``heal.ready`` (info: healthy, not resumed under ``dry_run``).

    Raises:
        HealError: ``scontrol show node`` failed or printed something else.
    """
    slurm = Slurm(executor, launcher)
    context = scope(plan, upgrading)
    findings: list[Finding] = []
    to_check: list[SlurmNode] = []
    for node in _drained(slurm, plan):
        verdict = decide(node, context)
        if verdict is Verdict.CHECK:
            to_check.append(node)
        elif verdict in _LEFT:
            code, says, hint = _LEFT[verdict]
            spare = plan.node(node.name).replaced_by or "a spare"
            findings.append(
                _about(node, code, says.format(reason=clean(node.reason) or "none given", spare=spare), hint)
            )
    checks = run_many(executor, [(n.name, HEALTHCHECK_PATH, HEALTH_TIMEOUT_S) for n in to_check])
    healthy = [n for n, (rc, _o, _e) in zip(to_check, checks, strict=True) if rc == 0]
    for node, (rc, out, err) in zip(to_check, checks, strict=True):
        if rc != 0:
            findings.append(
                _about(
                    node,
                    "heal.unhealthy",
                    f"stays drained: its health check failed ({why(rc, out, err)}).",
                    "Repair the node; the next heal resumes it once its health check passes.",
                )
            )
    if dry_run:
        findings += [
            _about(n, "heal.ready", f"is healthy and would be resumed (drained: {clean(n.reason)}).") for n in healthy
        ]
        return _in_plan_order(findings, plan)
    # The health check resumes a node it drained itself once the node is healthy again, and an admin
    # may have drained one meanwhile: only the nodes still drained for a reason heal may undo get
    # scontrol's resume.
    now = {n.name: n for n in _drained(slurm, plan)} if healthy else {}
    back = [
        n for n in healthy if (current := now.get(n.name)) is not None and decide(current, context) is Verdict.CHECK
    ]
    findings += [
        _about(n, "heal.resumed", f"resumed by its health check, which passed (drained: {clean(n.reason)}).")
        for n in healthy
        if n.name not in now
    ]
    errors = slurm.resume(n.name for n in back)
    for node in back:
        if error := errors[node.name]:
            findings.append(_about(node, "heal.unhealthy", f"is healthy but scontrol did not resume it: {error}."))
        else:
            findings.append(
                _about(node, "heal.resumed", f"resumed: its health check passed (drained: {clean(node.reason)}).")
            )
    return _in_plan_order(findings, plan)


def _about(node: SlurmNode, code: str, says: str, hint: str = "") -> Finding:
    """A finding on drained ``node``: its name, then what ``says``; errors for ``heal.unhealthy``."""
    level = Level.ERROR if code == "heal.unhealthy" else Level.INFO
    return Finding(
        code=code,
        level=level,
        node=node.name,
        message=f"{node.name} {says}",
        hint=hint,
        data={"reason": clean(node.reason, 1000)},
    )


def _drained(slurm: Slurm, plan: Plan) -> list[SlurmNode]:
    try:
        return drained(slurm.nodes(), plan)
    except SlurmError as exc:
        raise HealError(str(exc)) from None


def _in_plan_order(findings: list[Finding], plan: Plan) -> list[Finding]:
    order = {node.hostname: i for i, node in enumerate(plan.nodes)}
    return sorted(findings, key=lambda f: order.get(f.node or "", len(order)))
