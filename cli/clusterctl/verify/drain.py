"""Drain the nodes verify blames, with a reason Slurm shows and admins can grep for.

The reason is ``clusterctl-verify: <check>: <short why>`` so ``sinfo -R`` tells these
drains from an admin's, and a later verify can say the node was drained by an earlier one.
"""

from __future__ import annotations

import shlex

from clusterctl.plan.models import Plan
from clusterctl.run.jobs import Executor, run_many
from clusterctl.spec.findings import Finding
from clusterctl.verify.base import DRAIN_PREFIX
from clusterctl.verify.report import DrainAction, Report
from clusterctl.verify.result import Verdict, blame_of

# Slurm keeps long reasons, but sinfo -R and scontrol show node lines become unreadable.
MAX_REASON_CHARS = 160


def drain_reason(finding: Finding) -> str:
    """``clusterctl-verify: <check>: <short why>`` for a failed result.

    The why is the result's first sentence without its final period, cut to fit.
    """
    message = finding.message.strip()
    first = message.split(". ", 1)[0].rstrip(".")
    reason = f"{DRAIN_PREFIX} {finding.code}: {first}"
    if len(reason) > MAX_REASON_CHARS:
        reason = reason[: MAX_REASON_CHARS - 3].rstrip() + "..."
    return reason


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


def drain_command(host: str, reason: str) -> str:
    """``scontrol update nodename=HOST state=drain reason="..."``, quoted for the shell."""
    return f"scontrol update nodename={shlex.quote(host)} state=drain reason={shlex.quote(reason)}"


def apply_drains(
    reasons: dict[str, str], executor: Executor, launcher: str, timeout_s: float = 60.0
) -> list[DrainAction]:
    """Drain each node through scontrol on ``launcher``.

    Returns:
        One action per node, with scontrol's message where it refused.
    """
    hosts = list(reasons)
    jobs = [(launcher, drain_command(h, reasons[h]), timeout_s) for h in hosts]
    actions: list[DrainAction] = []
    for host, (rc, out, err) in zip(hosts, run_many(executor, jobs), strict=True):
        error = "" if rc == 0 else ((err or out).strip().splitlines() or [f"exit {rc}"])[-1]
        actions.append(DrainAction(host=host, reason=reasons[host], done=rc == 0, error=error))
    return actions
