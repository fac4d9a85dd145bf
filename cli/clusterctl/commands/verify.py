"""``clusterctl verify SPEC``: acceptance-test the cluster ``clusterctl up`` brought up."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape

from clusterctl.app import App
from clusterctl.catalog.tools import ALL_REDUCE_PERF
from clusterctl.commands.common import (
    handle_internal_errors,
    output_option,
    spec_argument,
    state_dir_option,
    validated_or_exit,
)
from clusterctl.commands.image import lock_option
from clusterctl.image.lock import LockError, expected_packages, lock_path, read_lock
from clusterctl.pipeline import default_build_dir
from clusterctl.render.builddir import BuildDirError
from clusterctl.run.executor import UNREACHABLE_RC, executor_for
from clusterctl.run.providers import ProviderError
from clusterctl.run.state import StateDir
from clusterctl.verify.acceptance import thresholds_by_hardware
from clusterctl.verify.base import VerifyOptions, launcher_host
from clusterctl.verify.checks import CHECK_NAMES
from clusterctl.verify.report import summary_lines, summary_table, write_report
from clusterctl.verify.result import Verdict
from clusterctl.verify.runner import drain_failures, run_verify, select_checks
from clusterctl.verify.testplan import NcclOptions


def _names(values: tuple[str, ...]) -> list[str]:
    """``--only gpu,nccl --only slurm`` -> ["gpu", "nccl", "slurm"]."""
    return [name.strip() for value in values for name in value.split(",") if name.strip()]


@click.command("verify")
@spec_argument
@click.option(
    "--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), help="Build directory [build/<cluster>]."
)
@click.option("--only", multiple=True, metavar="CHECK", help=f"Run only these checks ({', '.join(CHECK_NAMES)}).")
@click.option("--skip", multiple=True, metavar="CHECK", help="Do not run these checks; repeatable, comma-separated.")
@click.option("--no-drain", is_flag=True, help="Report failing nodes without draining them in Slurm.")
@click.option(
    "--nccl-binary",
    default=ALL_REDUCE_PERF,
    show_default=True,
    help="nccl-tests program on the nodes [where roles/nccl installs it].",
)
@click.option("--fio-size", default="256m", show_default=True, metavar="SIZE", help="fio data per job per node.")
@lock_option
@state_dir_option
@output_option
@click.pass_obj
@handle_internal_errors
def verify_cmd(
    app: App,
    spec: str,
    out_dir: Path | None,
    only: tuple[str, ...],
    skip: tuple[str, ...],
    no_drain: bool,
    nccl_binary: str,
    fio_size: str,
    lock_file: Path | None,
    state_dir: Path,
    output: str,
) -> None:
    """Run the acceptance checks on the cluster of SPEC and drain the nodes that fail.

    Checks: Slurm (nodes up, GRES, partitions), time sync, GPU inventory, GPU-NIC
    locality, InfiniBand ports, DCGM diagnostics, storage (fio), the transport NCCL
    chose between two nodes (no socket fallback), NCCL over a test plan shaped by
    the fabric, and each node's packages against its image in clusterctl.lock (a changed
    or removed package fails). The report goes to <out>/verify/report.{json,html}.
    Exit status: 0 nothing failed, 1 a check failed (or the spec is not valid), 2 bad usage, 70
    internal error.
    """
    app.output = output
    result = validated_or_exit(app, spec, (), False, state_dir)
    plan = result.plan
    try:
        select_checks(_names(only), _names(skip))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--only/--skip") from None
    path = lock_path(spec, lock_file)
    try:
        lock = read_lock(path)
    except LockError as exc:
        app.abort(str(exc))
    if lock is not None and lock.cluster != plan.cluster.name:
        app.display_warning(f"{path} is the lock of cluster {lock.cluster}; packages are not checked (--lock).")
    options = VerifyOptions(
        only=frozenset(_names(only)),
        skip=frozenset(_names(skip)),
        nccl=NcclOptions(binary=nccl_binary),
        fio_size=fio_size,
        locked_images=expected_packages(lock, plan.cluster.name),
    )
    try:
        # Nodes are reached as `up` recorded them: its known_hosts, key and bastion (never trust on first use).
        executor = executor_for(plan, StateDir(state_dir, plan.cluster.name).path)
    except ProviderError as exc:
        app.abort(str(exc))
    launcher = launcher_host(plan)
    # One cheap command first: a cluster that is not up fails here once, not in every check.
    rc, _, err = executor.run(launcher, "true", options.command_timeout_s)
    if rc == UNREACHABLE_RC:
        app.abort(
            f"{launcher} is not reachable ({err.strip() or 'no answer'}); is the cluster up? (clusterctl up {spec})"
        )
    progress = app.display_info if not app.json else (lambda _line: None)
    report = run_verify(
        plan, thresholds_by_hardware(plan, result.loaded.spec.acceptance), executor, options, progress=progress
    )
    if not no_drain:
        report = drain_failures(report, plan, executor, options, launcher=launcher)
    try:
        json_path, html_path = write_report(report, out_dir or default_build_dir(plan))
    except BuildDirError as exc:
        app.abort(f"the report was not written: {exc}")
    if app.json:
        app.print_json({**report.to_dict(), "report": {"json": str(json_path), "html": str(html_path)}})
    else:
        if app.interactive:
            app.out.print(summary_table(report))
        else:
            for line in summary_lines(report):
                app.out.print(escape(line))
        for finding in report.cluster_failures():
            app.display_warning(f"{finding.code} {finding.node}: {finding.message}")
        for drain in report.drains:
            if drain.done:
                app.display_info(f"drained {drain.host}: {drain.reason}")
            else:
                app.display_warning(f"could not drain {drain.host}: {drain.error}")
        if report.failed and no_drain and report.failing_nodes():
            app.display_info(f"not drained (--no-drain): {', '.join(report.failing_nodes())}")
        app.display_info(f"report: {html_path}")
        if not report.failed:
            app.display_success(f"{report.cluster}: every check passed or was skipped with a reason.")
    if report.failed:
        if not app.json:
            app.display_error(f"{report.cluster}: {report.count(Verdict.FAIL)} checks failed.")
        raise SystemExit(1)
