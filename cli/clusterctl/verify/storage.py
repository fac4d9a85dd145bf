"""Storage: each tier mounted where the plan says (``findmnt``), and its aggregate fio bandwidth
at the tier's marks; fio runs on every consumer of a tier at once.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
from typing import TYPE_CHECKING

from clusterctl.hostlist import compress, expand
from clusterctl.remote import NOT_FOUND_RC
from clusterctl.spec.findings import Finding
from clusterctl.verify.base import Check, VerifyContext, VerifyOptions, node_result, parse_failure, transport_problem
from clusterctl.verify.parsers.fio import FioJob, FioResult, parse_fio_json
from clusterctl.verify.result import ParseError, failed, passed, sentence, skipped, with_figures, with_run

if TYPE_CHECKING:
    from clusterctl.plan.models import Plan, StoragePlan


def _mib_s(bw_bytes: float) -> str:
    return f"{bw_bytes / (1 << 20):.1f} MiB/s"


def judge_fio(
    fio: FioResult,
    read_bw_bytes: float | None = None,
    write_bw_bytes: float | None = None,
    *,
    target: str = "",
) -> Finding:
    """Judge a fio run: no job errors, and aggregate bandwidth at or above the marks.

    Args:
        fio: The parsed fio JSON.
        read_bw_bytes: Read pass mark in bytes/s; not checked when None.
        write_bw_bytes: Write pass mark in bytes/s; not checked when None.
        target: The host or mount the run was on.

    Returns:
        Fail on any job errno or bandwidth under a mark; pass otherwise (the message says
        when no mark was given).
    """
    figures: dict[str, float | int | str] = {
        "jobs": len(fio.jobs),
        "failed_jobs": len(fio.failed_jobs),
        "read_bw_bytes": fio.read_bw_bytes,
        "write_bw_bytes": fio.write_bw_bytes,
    }
    problems = [f"job {job.name} ended with errno {job.error} ({os.strerror(job.error)})" for job in fio.failed_jobs]
    for direction, measured, mark in (
        ("read", fio.read_bw_bytes, read_bw_bytes),
        ("write", fio.write_bw_bytes, write_bw_bytes),
    ):
        if mark is None:
            continue
        figures[f"{direction}_threshold_bytes"] = mark
        if measured < mark:
            problems.append(f"{direction} {_mib_s(measured)} is below the {_mib_s(mark)} mark")
    if problems:
        return failed(
            "storage.fio",
            target,
            sentence(problems),
            "Check the mount (mount options, client tuning) and the storage servers' health.",
            **figures,
        )
    measured_text = f"read {_mib_s(fio.read_bw_bytes)}, write {_mib_s(fio.write_bw_bytes)}"
    if read_bw_bytes is None and write_bw_bytes is None:
        message = f"No job errors ({measured_text}); no bandwidth mark was given."
    else:
        message = f"No job errors and bandwidth meets the marks ({measured_text})."
    return passed("storage.fio", target, message, figures)


def fio_command(mount: str, host: str, options: VerifyOptions) -> str:
    """Check the mount, then write and read ``fio_size`` per job on it; clean up after.

    The first output line is findmnt's ``FSTYPE SOURCE`` (exit 3 without a mount there);
    fio's JSON follows. Each node writes into its own directory so nodes never share files.
    """
    directory = f"{mount.rstrip('/')}/.clusterctl-verify/{host}"
    fio = [
        "fio",
        "--output-format=json",
        f"--directory={directory}",
        # The read job reads the files the write job wrote, instead of laying out its own.
        "--filename_format=clusterctl.$jobnum.$filenum",
        "--ioengine=libaio",
        f"--direct={int(options.fio_direct)}",
        "--bs=1M",
        "--iodepth=16",
        f"--numjobs={options.fio_numjobs}",
        f"--size={options.fio_size}",
        "--group_reporting",
        "--end_fsync=1",
        "--name=write",
        "--rw=write",
        "--name=read",
        "--stonewall",
        "--rw=read",
    ]
    q = shlex.quote
    return (
        f"findmnt -n -o FSTYPE,SOURCE --mountpoint {q(mount)} || exit 3; "
        f"mkdir -p {q(directory)} && {' '.join(q(a) for a in fio)}; rc=$?; rm -rf {q(directory)}; exit $rc"
    )


def storage_hosts(plan: Plan, tier: StoragePlan) -> list[str]:
    """The nodes that test a tier: its compute nodes (the consumers), else every node mounting it."""
    mounted = set(expand(tier.hosts)) if tier.hosts else set()
    present = [n for n in plan.nodes if n.hostname in mounted and not n.burst]
    compute = [n.hostname for n in present if n.role == "compute"]
    return compute or [n.hostname for n in present]


class StorageCheck(Check):
    """Each tier mounted where the plan says, and its aggregate fio bandwidth at the tier's marks."""

    name = "storage"
    title = "storage"

    def run(self, ctx: VerifyContext) -> list[Finding]:
        """Run fio on every consumer of each tier at once and add up the bandwidth."""
        if not ctx.plan.storage:
            result = skipped("storage.fio", "", "skipped: no storage tiers in the spec")
            return [with_run(result, self.name)]
        outcomes: list[Finding] = []
        for tier in ctx.plan.storage:
            outcomes.extend(self._tier(ctx, tier))
        return outcomes

    def _tier(self, ctx: VerifyContext, tier: StoragePlan) -> list[Finding]:
        hosts = storage_hosts(ctx.plan, tier)
        ctx.progress(f"storage {tier.name} ({tier.mount}): fio on {compress(hosts)}")
        detail = {"tier": tier.name, "mount": tier.mount}
        jobs = [(h, fio_command(tier.mount, h, ctx.options), ctx.options.fio_timeout_s) for h in hosts]
        outcomes: list[Finding] = []
        merged: list[FioJob] = []
        measured: list[str] = []
        for (host, command, _), (rc, out, err) in zip(jobs, ctx.run(jobs), strict=True):
            result, fio = judge_storage_node(tier, host, rc, out, err)
            outcomes.append(node_result(self.name, host, result, **detail, command=command))
            if fio is not None:
                merged.extend(fio.jobs)
                measured.append(host)
        if measured:
            # Jobs keep their group ids, so the sum per group is the tier's aggregate (see FioResult).
            total = judge_fio(
                FioResult(jobs=tuple(merged)),
                tier.read_bytes_per_s,
                tier.write_bytes_per_s,
                target=f"{tier.name} ({tier.mount})",
            )
            total = dataclasses.replace(with_figures(total, nodes=len(measured)), code="storage.aggregate")
            outcomes.append(with_run(total, self.name, measured, **detail))
        return outcomes


def judge_storage_node(tier: StoragePlan, host: str, rc: int, out: str, err: str) -> tuple[Finding, FioResult | None]:
    """Judge one node's mount check and fio run on a tier (no bandwidth mark: that is aggregate)."""
    problem = transport_problem("storage.fio", host, "fio", rc, err)
    if problem is not None:
        return problem, None
    first = out.strip().splitlines()[0] if out.strip() else ""
    if rc == 3 and not first:
        return (
            failed(
                "storage.mount",
                host,
                f"{tier.mount} is not mounted on {host}.",
                f"systemctl status {tier.unit_name} on {host}.",
            ),
            None,
        )
    fstype = first.split()[0] if first else ""
    if fstype and not fstype.startswith(tier.fstype):
        return (
            failed(
                "storage.mount",
                host,
                f"{tier.mount} on {host} is {fstype}, not {tier.fstype}.",
                f"Something else is mounted at {tier.mount}; check findmnt {tier.mount}.",
                fstype=fstype,
            ),
            None,
        )
    if rc == NOT_FOUND_RC and "fio" in err:
        result = skipped("storage.fio", host, "skipped: fio is not installed", "Install fio on the nodes.")
        return with_figures(result, fstype=fstype), None
    try:
        fio = parse_fio_json(out)
    except ParseError as exc:
        return parse_failure("storage.fio", host, "fio", exc, rc, err), None
    result = judge_fio(fio, target=host)
    return with_figures(result, fstype=fstype, tier=tier.name), fio
