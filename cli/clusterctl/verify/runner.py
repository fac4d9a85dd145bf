"""Run the acceptance checks against a cluster and collect the report.

Order matters: Slurm first (cheap, and a node Slurm cannot reach would hang an srun),
then the per-node checks, storage, and the NCCL test plan last; a node blamed by an
earlier check is left out of later NCCL runs. Draining is a separate step so the CLI can
skip it (``--no-drain``) and tests can look at the report before anything changes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import UTC, datetime

from clusterctl.plan.models import Plan
from clusterctl.remote import Executor
from clusterctl.spec.findings import Finding
from clusterctl.verify.base import VerifyContext, VerifyOptions
from clusterctl.verify.checks import CHECK_NAMES, CHECKS
from clusterctl.verify.drain import apply_drains, drain_reasons
from clusterctl.verify.nccl import NcclCheck
from clusterctl.verify.report import Report
from clusterctl.verify.result import Verdict, blame_of
from clusterctl.verify.testplan import NcclPlan, build_test_plan
from clusterctl.verify.thresholds import AcceptanceThresholds


def select_checks(only: Iterable[str] = (), skip: Iterable[str] = ()) -> list[str]:
    """The checks to run, in run order.

    Args:
        only: Run just these (all when empty).
        skip: Leave these out.

    Raises:
        ValueError: A name is not a check; the message lists the known ones.
    """
    only_set, skip_set = set(only), set(skip)
    unknown = sorted((only_set | skip_set) - set(CHECK_NAMES))
    if unknown:
        raise ValueError(f"Unknown check {', '.join(unknown)}; the checks are {', '.join(CHECK_NAMES)}.")
    return [name for name in CHECK_NAMES if (not only_set or name in only_set) and name not in skip_set]


def run_verify(
    plan: Plan,
    thresholds: dict[str, AcceptanceThresholds],
    executor: Executor,
    options: VerifyOptions | None = None,
    *,
    progress: Callable[[str], None] | None = None,
    test_plan: NcclPlan | None = None,
) -> Report:
    """Run the selected checks and return the report (nothing is drained here).

    Args:
        plan: The resolved cluster.
        thresholds: Acceptance thresholds per GPU hardware profile (``thresholds_by_hardware``).
        executor: Runs commands on the nodes.
        options: What to run and the timeouts; ``options.only``/``skip`` pick checks.
        progress: Called with one line as each check starts.
        test_plan: The NCCL test plan; derived from the plan's fabric when None.

    Returns:
        The report, with every finding.
    """
    opts = options or VerifyOptions()
    names = select_checks(opts.only, opts.skip)
    ctx = VerifyContext(plan=plan, thresholds=thresholds, executor=executor, options=opts)
    if progress is not None:
        ctx.progress = progress
    if "nccl" in names and test_plan is None:
        test_plan = build_test_plan(plan)
    started = datetime.now(UTC)
    clock = time.monotonic()
    findings: list[Finding] = []
    for check_type in CHECKS:
        if check_type.name not in names:
            continue
        check = NcclCheck(test_plan) if check_type is NcclCheck else check_type()
        found = check.run(ctx)
        findings.extend(found)
        ctx.failed_nodes.update(h for f in found if Verdict.of(f) is Verdict.FAIL for h in blame_of(f))
    return Report.for_plan(
        plan,
        started_at=started.isoformat(timespec="seconds"),
        duration_s=time.monotonic() - clock,
        checks=names,
        thresholds=thresholds,
        findings=findings,
        test_plan=test_plan if "nccl" in names else None,
    )


def drain_failures(
    report: Report, plan: Plan, executor: Executor, options: VerifyOptions | None = None, *, launcher: str = ""
) -> Report:
    """Drain every Slurm node the report blames; the report comes back with the drains.

    Args:
        report: A finished report.
        plan: The plan it ran against.
        executor: Runs scontrol.
        options: For the command timeout.
        launcher: Where scontrol runs (default: the login node, else the controller).
    """
    opts = options or VerifyOptions()
    reasons = drain_reasons(report, plan)
    if not reasons:
        return report
    where = launcher or VerifyContext(plan=plan, thresholds={}, executor=executor).launcher
    return replace(report, drains=apply_drains(reasons, executor, where, opts.command_timeout_s))
