"""Drain the nodes verify blames, with a reason Slurm shows and admins can grep for.

The reason is ``clusterctl-verify: <check>: <short why>`` so ``sinfo -R`` tells these
drains from an admin's, and a later verify can say the node was drained by an earlier one.
"""

from __future__ import annotations

from clusterctl.plan.models import Plan
from clusterctl.remote import Executor
from clusterctl.slurm.client import Slurm
from clusterctl.slurm.reasons import VERIFY, reason
from clusterctl.spec.findings import Finding
from clusterctl.verify.report import DrainAction, Report
from clusterctl.verify.result import Verdict, blame_of


def drain_reason(finding: Finding) -> str:
    """``clusterctl-verify: <check>: <short why>`` for a failed result.

    The why is the result's first sentence without its final period, cut to fit.
    """
    message = finding.message.strip()
    first = message.split(". ", 1)[0].rstrip(".")
    return reason(VERIFY, f"{finding.code}: {first}")


def drain_reasons(report: Report, plan: Plan) -> dict[str, str]:
    """The nodes to drain and why: every blamed Slurm node, with its first failure.

    Controllers and login nodes are not Slurm nodes; their failures stay in the report.
    """
    slurm_nodes = {n.hostname for n in plan.nodes if n.role == "compute"}
    reasons: dict[str, str] = {}
    for finding in report.findings:
        if Verdict.of(finding) is not Verdict.FAIL:
            continue
        for host in blame_of(finding):
            if host in slurm_nodes and host not in reasons:
                reasons[host] = drain_reason(finding)
    order = [n.hostname for n in plan.nodes]
    return {h: reasons[h] for h in order if h in reasons}


def apply_drains(
    reasons: dict[str, str], executor: Executor, launcher: str, timeout_s: float = 60.0
) -> list[DrainAction]:
    """Drain each node through scontrol on ``launcher``.

    Returns:
        One action per node, with scontrol's message where it refused.
    """
    errors = Slurm(executor, launcher, timeout_s).drain(reasons)
    return [DrainAction(host=h, reason=reasons[h], done=not errors[h], error=errors[h]) for h in reasons]
