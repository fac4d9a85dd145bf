"""NCCL: nccl-tests ``all_reduce_perf`` over the fabric-shaped test plan (`clusterctl.verify.testplan`),
wave by wave through srun, each run judged by its bus bandwidth at large messages and its wrong
elements; failed runs blame the nodes they single out.

``judge_nccl`` is pure (no plan, no pydantic) so the GPU-machine script in ``tests/gpu/`` uses it as is.
"""

from __future__ import annotations

import dataclasses

from clusterctl.hostlist import compress
from clusterctl.spec.findings import Finding
from clusterctl.verify.base import EMULATED, Check, VerifyContext, last_line, transport_problem
from clusterctl.verify.parsers.nccl_tests import NcclTestsResult, parse_nccl_tests
from clusterctl.verify.result import (
    ParseError,
    Verdict,
    failed,
    hosts_of,
    passed,
    sentence,
    skipped,
    with_run,
    with_verdict,
)
from clusterctl.verify.testplan import NcclPlan, NcclRun, build_test_plan, srun_command
from clusterctl.verify.thresholds import GIB


def _size(n_bytes: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n_bytes >= scale:
            value = n_bytes / scale
            return f"{value:g} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n_bytes} B"


def judge_nccl(
    result: NcclTestsResult,
    min_busbw_gbps: float | None,
    min_size_bytes: int = GIB,
    *,
    basis: str = "largest_size",
    target: str | None = None,
) -> Finding:
    """Judge an nccl-tests run: bus bandwidth at large messages, and no wrong elements.

    Args:
        result: The parsed run.
        min_busbw_gbps: Pass mark for the bus bandwidth (GB/s); None (no default for this
            node type) only checks wrong elements and reports the figures as skipped.
        min_size_bytes: Only rows at least this large count.
        basis: ``largest_size`` judges the busbw of the largest message at or above
            ``min_size_bytes``; ``max`` judges the best busbw among those rows. The
            figures say which was used.
        target: What was tested; defaults to the hostlist of the ranks' hosts.

    Returns:
        Fail when busbw is below the mark or any row reports wrong elements; skipped when
        no row reaches ``min_size_bytes`` or there is no mark.

    Raises:
        ValueError: ``basis`` is neither ``largest_size`` nor ``max``.
    """
    if basis not in ("largest_size", "max"):
        raise ValueError(f"basis must be 'largest_size' or 'max', not {basis!r}.")
    collective = result.collective or "unknown"
    hosts = result.hosts
    figures: dict[str, float | int | str] = {"collective": collective, "min_size_bytes": min_size_bytes}
    if min_busbw_gbps is not None:
        figures["threshold_gbps"] = min_busbw_gbps
    if result.n_ranks is not None:
        figures["ranks"] = result.n_ranks
    if hosts:
        figures["hosts"] = len(hosts)
    if result.avg_busbw_gbps is not None:
        figures["avg_busbw_gbps"] = result.avg_busbw_gbps
    check = f"nccl.{collective}"
    target = compress(hosts) if target is None else target

    large = result.rows_from(min_size_bytes)
    if not large:
        largest = result.largest_row.size_bytes
        figures["largest_size_bytes"] = largest
        small = f"The largest message ({_size(largest)}) is below the {_size(min_size_bytes)} needed to judge"
        larger = f"Rerun with a larger -e (8G is usual) to measure messages of {_size(min_size_bytes)} and more."
        return skipped(check, target, f"{small} bus bandwidth.", larger, figures)

    if basis == "largest_size":
        row = max(reversed(large), key=lambda r: r.size_bytes)
        figures["basis"] = f"busbw at the largest size ({_size(row.size_bytes)})"
    else:
        row = max(large, key=lambda r: r.busbw_gbps)
        figures["basis"] = f"max busbw at sizes >= {_size(min_size_bytes)}"
    busbw, at = row.busbw_gbps, _size(row.size_bytes)
    figures.update(busbw_gbps=busbw, size_bytes=row.size_bytes, max_busbw_gbps=max(r.busbw_gbps for r in large))

    problems: list[str] = []
    hints: list[str] = []
    wrong_rows = [r for r in result.rows if r.wrong]
    checked = [r for r in result.rows if r.wrong is not None]
    figures["wrong"] = sum(r.wrong or 0 for r in wrong_rows) if checked else "N/A"
    if wrong_rows or (result.out_of_bounds or 0) > 0:
        first = wrong_rows[0] if wrong_rows else None
        where = f", first at {_size(first.size_bytes)} (line {first.line_no})" if first else ""
        count = len(wrong_rows) or result.out_of_bounds or 0
        problems.append(f"{count} result {'row has' if count == 1 else 'rows have'} wrong elements{where}")
        hints.append("wrong elements mean corrupted data: run dcgmi diag -r 3 and check the NCCL version")
    if min_busbw_gbps is not None and busbw < min_busbw_gbps:
        problems.append(f"the {collective} busbw {busbw:g} GB/s at {at} is below the {min_busbw_gbps:g} GB/s mark")
        if len(hosts) > 1:
            hints.append(
                "check the GPU-NIC pairing (nvidia-smi topo -m), NCCL_IB_HCA and the ibstat port rates; "
                "NCCL_DEBUG=INFO shows which NICs and transports NCCL used"
            )
        else:
            hints.append("check NVLink state (nvidia-smi nvlink -s), that nvidia-fabricmanager runs, and dcgmi diag")

    if problems:
        return failed(check, target, sentence(problems), sentence(hints), **figures)
    if min_busbw_gbps is None:
        return skipped(
            check,
            target,
            f"The {collective} busbw is {busbw:g} GB/s at {at}; there is no mark to judge it.",
            "Set a busbw threshold for this node type in the spec.",
            figures,
        )
    return passed(
        check, target, f"The {collective} busbw {busbw:g} GB/s at {at} meets the {min_busbw_gbps:g} GB/s mark.", figures
    )


def nccl_mark(ctx: VerifyContext, run: NcclRun) -> tuple[float | None, int]:
    """The busbw mark and judged message size for a run: the lowest of its nodes' profiles."""
    by_name = {n.hostname: n for n in ctx.plan.nodes}
    marks: list[float] = []
    sizes: list[int] = []
    for host in run.hosts:
        thresholds = ctx.thresholds_for(by_name[host])
        if thresholds is None:
            continue
        mark = thresholds.nccl_busbw_gbps(len(run.hosts))
        if mark is not None:
            marks.append(mark)
        sizes.append(thresholds.nccl_min_size_bytes)
    return (min(marks) if marks else None), (max(sizes) if sizes else 1 << 30)


def judge_nccl_run(ctx: VerifyContext, run: NcclRun, rc: int, out: str, err: str) -> Finding:
    """Judge one srun of all_reduce_perf."""
    target = run.hostlist
    problem = transport_problem("nccl.all_reduce", ctx.launcher, "srun", rc, err)
    if problem is not None:
        return dataclasses.replace(problem, node=target)
    mark, size = nccl_mark(ctx, run)
    try:
        result = judge_nccl(parse_nccl_tests(out, collective="all_reduce"), mark, size, target=target)
    except ParseError as exc:
        why = last_line(err) or exc.message
        return failed(
            "nccl.all_reduce",
            target,
            f"all_reduce_perf produced no results (srun exit {rc}): {why}",
            "Run the srun command from the report by hand on the login node; check the nodes' slurmd logs.",
            rc=rc,
        )
    if rc != 0 and Verdict.of(result) is not Verdict.FAIL:
        return with_verdict(
            result,
            Verdict.FAIL,
            f"srun exited {rc} after the results: {last_line(err) or 'no message'}",
            "A rank failed at the end of the run; see the job's stderr.",
        )
    return result


def nccl_blame(outcomes: list[Finding]) -> dict[str, str]:
    """Nodes the NCCL results point at, with the why.

    A failed single-node run blames its node. A failed two-node run names two suspects;
    a node is blamed when every two-node run it took part in failed: with two or more
    different partners that singles out the bad node, with one partner both are named
    (the report says it cannot tell them apart). Runs over more nodes blame nobody: they
    test the leaves and spines, whose faults draining a node does not fix.
    """
    blamed: dict[str, str] = {}
    pair_runs: dict[str, list[Finding]] = {}
    for outcome in outcomes:
        verdict, hosts = Verdict.of(outcome), hosts_of(outcome)
        if outcome.rule != "nccl" or verdict is Verdict.SKIPPED:
            continue
        if len(hosts) == 1 and verdict is Verdict.FAIL:
            blamed[hosts[0]] = "single-node all_reduce failed"
        elif len(hosts) == 2:
            for host in hosts:
                pair_runs.setdefault(host, []).append(outcome)
    for host, runs in pair_runs.items():
        if host in blamed or any(Verdict.of(r) is not Verdict.FAIL for r in runs):
            continue
        partners = sorted({h for r in runs for h in hosts_of(r) if h != host})
        if len(runs) >= 2:
            blamed[host] = f"every two-node run failed ({len(runs)} runs, partners {compress(partners)})"
        else:
            blamed[host] = f"two-node run with {partners[0]} failed (cannot tell which of the two is at fault)"
    return blamed


class NcclCheck(Check):
    """nccl-tests all_reduce_perf over the fabric-shaped test plan, wave by wave, through srun."""

    name = "nccl"
    title = "NCCL"

    def __init__(self, test_plan: NcclPlan | None = None) -> None:
        """Create the check; the plan is derived from the fabric unless given."""
        self.test_plan = test_plan

    def run(self, ctx: VerifyContext) -> list[Finding]:
        """Run every wave in order; later waves leave out nodes already found bad."""
        test_plan = self.test_plan or build_test_plan(ctx.plan)
        emulated = {n.hostname for n in ctx.plan.nodes if n.emulated}
        outcomes: list[Finding] = []
        excluded: set[str] = set(ctx.failed_nodes)
        phase = None
        for wave in test_plan.waves:
            if wave.phase != phase:
                # Blame only once a phase is complete: the second pairing round is what
                # tells a bad node from its first partner.
                excluded = set(ctx.failed_nodes) | set(nccl_blame(outcomes))
                phase = wave.phase
            todo: list[NcclRun] = []
            for run in wave.runs:
                bad = [h for h in run.hosts if h in excluded]
                if any(h in emulated for h in run.hosts):
                    result = skipped("nccl.all_reduce", run.hostlist, EMULATED)
                    outcomes.append(_run_result(result, run, wave.number))
                    continue
                if bad and run.phase in ("group", "full") and len(run.hosts) - len(bad) >= 2:
                    # A big run with a known-bad node only measures that node; run without it.
                    run = dataclasses.replace(run, hosts=tuple(h for h in run.hosts if h not in excluded))
                elif bad:
                    reason = f"skipped: {compress(bad)} failed an earlier check"
                    result = skipped("nccl.all_reduce", run.hostlist, reason)
                    outcomes.append(_run_result(result, run, wave.number))
                    continue
                todo.append(run)
            if not todo:
                continue
            label = f" ({wave.label})" if wave.label else ""
            ctx.progress(f"NCCL wave {wave.number}, {wave.phase}{label}: {len(todo)} runs")
            commands = [srun_command(run, ctx.options.nccl) for run in todo]
            jobs = [(ctx.launcher, command, ctx.options.nccl_timeout_s) for command in commands]
            for run, command, (rc, out, err) in zip(todo, commands, ctx.run(jobs), strict=True):
                result = judge_nccl_run(ctx, run, rc, out, err)
                outcomes.append(_run_result(result, run, wave.number, command=command))
        blamed = nccl_blame(outcomes)
        return [_with_blame(o, blamed) for o in outcomes]


def _run_result(result: Finding, run: NcclRun, wave: int, **context: str) -> Finding:
    """One run's verdict with its place in the test plan (phase, groups, wave) for the report."""
    return with_run(
        result, NcclCheck.name, run.hosts, (), phase=run.phase, groups=list(run.groups), wave=wave, **context
    )


def _with_blame(outcome: Finding, blamed: dict[str, str]) -> Finding:
    if Verdict.of(outcome) is not Verdict.FAIL:
        return outcome
    hosts = tuple(h for h in hosts_of(outcome) if h in blamed)
    return dataclasses.replace(outcome, data={**outcome.data, "blame": list(hosts)}) if hosts else outcome
