"""Verdicts: parsed tool outputs against thresholds, one `CheckResult` per judgement.

Pure functions; the thresholds come from the caller (usually `thresholds.defaults_for`
merged with the spec). Each result carries the figures it was decided on.
"""

from __future__ import annotations

import os

from clusterctl.hostlist import compress
from clusterctl.verify.parsers.dcgmi_diag import DcgmDiag, DcgmTest, DiagStatus
from clusterctl.verify.parsers.fio import FioResult
from clusterctl.verify.parsers.ibstat import IbStat
from clusterctl.verify.parsers.nccl_tests import NcclTestsResult
from clusterctl.verify.parsers.nvidia_smi_topo import NEAR, NvidiaSmiTopo, nics_near_gpus
from clusterctl.verify.result import CheckResult, Verdict
from clusterctl.verify.thresholds import GIB

FABRIC_MANAGER_HINT = "check nvidia-fabricmanager (fabric manager not running or wrong version)"
# cuInit returning CUDA_ERROR_SYSTEM_NOT_READY is how an NVSwitch system without a running
# (or version-matched) fabric manager shows up in DCGM (nccl-tests issue #264).
_FABRIC_MANAGER_SIGNS = ("cuinit", "system not yet initialized", "fabric manager", "fabricmanager")


def _size(n_bytes: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n_bytes >= scale:
            value = n_bytes / scale
            return f"{value:g} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n_bytes} B"


def _sentence(parts: list[str]) -> str:
    """Join clauses into one sentence ending in a period; an opening plain word is capitalised.

    Why: an opening device or tool name (``mlx5_3``, ``all_reduce``) keeps its spelling.
    """
    text = "; ".join(parts)
    first = text.split(" ", 1)[0]
    if first.isalpha() and first.islower():
        text = text[:1].upper() + text[1:]
    return text if text.endswith(".") else text + "."


def _mib_s(bw_bytes: float) -> str:
    return f"{bw_bytes / (1 << 20):.1f} MiB/s"


def judge_nccl(
    result: NcclTestsResult,
    min_busbw_gbps: float | None,
    min_size_bytes: int = GIB,
    *,
    basis: str = "largest_size",
    target: str | None = None,
) -> CheckResult:
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
        return CheckResult(
            check=check,
            target=target,
            verdict=Verdict.SKIPPED,
            figures=figures,
            message=(
                f"The largest message ({_size(largest)}) is below the {_size(min_size_bytes)} needed "
                "to judge bus bandwidth."
            ),
            hint=f"Rerun with a larger -e (8G is usual) to measure messages of {_size(min_size_bytes)} and more.",
        )

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
        return CheckResult(
            check=check,
            target=target,
            verdict=Verdict.FAIL,
            figures=figures,
            message=_sentence(problems),
            hint=_sentence(hints),
        )
    if min_busbw_gbps is None:
        return CheckResult(
            check=check,
            target=target,
            verdict=Verdict.SKIPPED,
            figures=figures,
            message=f"The {collective} busbw is {busbw:g} GB/s at {at}; there is no mark to judge it.",
            hint="Set a busbw threshold for this node type in the spec.",
        )
    return CheckResult(
        check=check,
        target=target,
        verdict=Verdict.PASS,
        figures=figures,
        message=f"The {collective} busbw {busbw:g} GB/s at {at} meets the {min_busbw_gbps:g} GB/s mark.",
    )


def _scope(test: DcgmTest, status: DiagStatus) -> str:
    if test.gpu_status:
        gpus = test.gpus_with(status)
        return "GPU " + ", ".join(str(g) for g in gpus) if gpus else "some GPUs"
    return "all GPUs" if test.section != "Deployment" else "the node"


def judge_dcgm(diag: DcgmDiag, *, min_level: int | None = None, target: str = "") -> CheckResult:
    """Judge a ``dcgmi diag`` run: every test passed, or only skipped.

    Args:
        diag: The parsed run.
        min_level: Fail when the run's level (read from its command line) is below this;
            not checked when the output does not show the level.
        target: The host the run was on.

    Returns:
        Fail when a test failed or dcgmi could not complete; the fabric-manager hint when a
        failure comes from ``cuInit`` ("system not yet initialized"). Skipped when every
        test skipped. Warnings do not fail the check (dcgmi itself exits 0 on them).
    """
    failed = diag.with_status(DiagStatus.FAIL)
    skipped = diag.with_status(DiagStatus.SKIP)
    warned = diag.with_status(DiagStatus.WARN)
    figures: dict[str, float | int | str] = {
        "level": diag.level if diag.level is not None else "unknown",
        "tests": len(diag.tests),
        "tests_passed": len(diag.with_status(DiagStatus.PASS)),
        "tests_failed": len(failed),
        "tests_warned": len(warned),
        "tests_skipped": len(skipped),
    }
    if diag.dcgm_version:
        figures["dcgm_version"] = diag.dcgm_version
    if diag.driver_version:
        figures["driver_version"] = diag.driver_version
    if diag.gpu_device_ids:
        figures["gpus"] = len(diag.gpu_device_ids)
    if failed:
        figures["failed_tests"] = ", ".join(t.name for t in failed)
    if skipped:
        figures["skipped_tests"] = ", ".join(t.name for t in skipped)

    if diag.error is not None:
        fm = any(sign in diag.error.lower() for sign in _FABRIC_MANAGER_SIGNS)
        return CheckResult(
            check="dcgm.diag",
            target=target,
            verdict=Verdict.FAIL,
            figures=figures,
            message=f"dcgmi diag did not complete: {diag.error}",
            hint=FABRIC_MANAGER_HINT if fm else "Check that nv-hostengine runs (the nvidia-dcgm service).",
        )

    problems: list[str] = []
    hint = ""
    if failed:
        parts = [f"{t.name} ({_scope(t, DiagStatus.FAIL)})" for t in failed]
        problems.append(f"{len(failed)} of {len(diag.tests)} tests failed: {', '.join(parts)}")
        first = next((m for t in failed for m in t.messages if m.kind in ("Warning", "Error")), None)
        if first is not None:
            problems.append(f"first warning: {first.text}")
        texts = [t.name.lower() + " " + " ".join(m.text.lower() for m in t.messages) for t in failed]
        if any(sign in text for text in texts for sign in _FABRIC_MANAGER_SIGNS):
            hint = FABRIC_MANAGER_HINT
        else:
            hint = "Read the Warning rows of the failing tests; dcgmi diag -v prints more detail."
    if min_level is not None and diag.level is not None and diag.level < min_level:
        problems.append(f"the run was level {diag.level}, acceptance needs level {min_level}")
        hint = hint or f"Rerun with dcgmi diag -r {min_level}."

    if problems:
        return CheckResult(
            check="dcgm.diag",
            target=target,
            verdict=Verdict.FAIL,
            figures=figures,
            message=_sentence(problems),
            hint=hint,
        )
    if diag.tests and len(skipped) == len(diag.tests):
        return CheckResult(
            check="dcgm.diag",
            target=target,
            verdict=Verdict.SKIPPED,
            figures=figures,
            message=f"All {len(diag.tests)} tests were skipped.",
            hint="Run dcgmi diag as root on a node whose GPUs are not in use.",
        )
    extra = ""
    if skipped:
        extra += f"; {len(skipped)} skipped ({', '.join(t.name for t in skipped)})"
    if warned:
        extra += f"; {len(warned)} warned ({', '.join(t.name for t in warned)})"
    passed = len(diag.tests) - len(skipped) - len(warned)
    return CheckResult(
        check="dcgm.diag",
        target=target,
        verdict=Verdict.PASS,
        figures=figures,
        message=f"{passed} of {len(diag.tests)} tests passed{extra}.",
    )


def judge_topo(topo: NvidiaSmiTopo, expected_rails: list[str], *, target: str = "") -> CheckResult:
    """Judge GPU-NIC locality: GPU i must reach ``expected_rails[i]`` at PIX or PXB.

    Args:
        topo: The parsed ``nvidia-smi topo -m`` matrix.
        expected_rails: The rail NIC of each GPU in GPU order, as RDMA names
            (``mlx5_0``) or matrix columns (``NIC0``).
        target: The host the matrix was taken on.

    Returns:
        Fail naming every GPU whose rail NIC is farther (with the distance found) or
        missing; skipped when no rails are given.
    """
    figures: dict[str, float | int | str] = {"gpus": len(topo.gpus), "nics": len(topo.nics)}
    if not expected_rails:
        return CheckResult(
            check="topo.gpu_nic",
            target=target,
            verdict=Verdict.SKIPPED,
            figures=figures,
            message="No rails were given, so GPU-NIC locality was not checked.",
        )
    figures["rails"] = len(expected_rails)
    problems: list[str] = []
    for index, rail in enumerate(expected_rails):
        gpu = f"GPU{index}"
        column = topo.nic_column(rail)
        if gpu not in topo.gpus:
            problems.append(f"{gpu} is not in the matrix")
            figures[gpu] = "absent"
        elif column is None:
            problems.append(f"{rail} (rail of {gpu}) is not in the matrix")
            figures[gpu] = f"{rail} absent"
        else:
            link = topo.link(gpu, column)
            figures[gpu] = f"{topo.nic_name(column)} {link}"
            if link not in NEAR:
                problems.append(f"{gpu} reaches {rail} at {link}")
    if problems:
        near = nics_near_gpus(topo)
        pairing = ", ".join(f"{gpu}: {'/'.join(nics) or 'none'}" for gpu, nics in near.items())
        return CheckResult(
            check="topo.gpu_nic",
            target=target,
            verdict=Verdict.FAIL,
            figures=figures,
            message=_sentence(problems)[:-1] + f" (needs {' or '.join(NEAR)}).",
            hint=f"The NICs at PIX/PXB of each GPU are {pairing}; fix the rail order in the spec or the NIC slots.",
        )
    return CheckResult(
        check="topo.gpu_nic",
        target=target,
        verdict=Verdict.PASS,
        figures=figures,
        message=f"Each of {len(expected_rails)} GPUs reaches its rail NIC at {' or '.join(NEAR)}.",
    )


def judge_ibstat(
    ibstat: IbStat,
    expected_rate_gbps: float | None,
    hcas: list[str] | None = None,
    *,
    target: str = "",
) -> CheckResult:
    """Judge InfiniBand/RoCE ports: Active, LinkUp, and at the fabric's rate.

    Args:
        ibstat: The parsed ``ibstat`` output.
        expected_rate_gbps: The rate every checked port must run at (400 for NDR); None
            checks the port states only.
        hcas: The CAs to check (the rails); every CA in the output when None.
        target: The host the output was taken on.

    Returns:
        Fail naming each missing CA and each port that is not Active/LinkUp or runs at
        another rate; skipped when there is nothing to check.
    """
    names = [ca.name for ca in ibstat.cas] if hcas is None else list(hcas)
    problems: list[str] = []
    hints: list[str] = []
    ports = active = 0
    figures: dict[str, float | int | str] = {}
    if expected_rate_gbps is not None:
        figures["expected_rate_gbps"] = expected_rate_gbps
    for name in names:
        ca = ibstat.ca(name)
        if ca is None:
            problems.append(f"{name} is not in the ibstat output")
            figures[name] = "absent"
            continue
        for port in ca.ports:
            ports += 1
            key = f"{name}/{port.number}"
            rate = f"{port.rate_gbps:g}" if port.rate_gbps is not None else "?"
            figures[key] = f"{port.state} {port.physical_state} {rate}"
            if port.state != "Active" or port.physical_state != "LinkUp":
                problems.append(f"{key} is {port.state} ({port.physical_state})")
                hints.append(
                    "check the cable and the switch port (Polling: no peer seen; Disabled: shut down) and, "
                    "for Initializing, that a subnet manager runs"
                )
                continue
            active += 1
            if expected_rate_gbps is None:
                continue
            if port.rate_gbps is None or abs(port.rate_gbps - expected_rate_gbps) > 0.01:
                problems.append(f"{key} runs at {rate} Gb/s, expected {expected_rate_gbps:g}")
                hints.append("a lower rate points at a cable, transceiver or port speed setting; check with mlxlink")
    figures.update(cas=len(names), ports=ports, ports_active=active)
    if problems:
        return CheckResult(
            check="ib.ports",
            target=target,
            verdict=Verdict.FAIL,
            figures=figures,
            message=_sentence(problems),
            hint=_sentence(list(dict.fromkeys(hints))) if hints else "Check the rail names in the spec.",
        )
    if ports == 0:
        return CheckResult(
            check="ib.ports",
            target=target,
            verdict=Verdict.SKIPPED,
            figures=figures,
            message="No InfiniBand port to check.",
        )
    return CheckResult(
        check="ib.ports",
        target=target,
        verdict=Verdict.PASS,
        figures=figures,
        message=f"All {ports} ports are Active, LinkUp"
        + (f" at {expected_rate_gbps:g} Gb/s." if expected_rate_gbps is not None else "."),
    )


def judge_fio(
    fio: FioResult,
    read_bw_bytes: float | None = None,
    write_bw_bytes: float | None = None,
    *,
    target: str = "",
) -> CheckResult:
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
        return CheckResult(
            check="storage.fio",
            target=target,
            verdict=Verdict.FAIL,
            figures=figures,
            message=_sentence(problems),
            hint="Check the mount (mount options, client tuning) and the storage servers' health.",
        )
    measured_text = f"read {_mib_s(fio.read_bw_bytes)}, write {_mib_s(fio.write_bw_bytes)}"
    if read_bw_bytes is None and write_bw_bytes is None:
        message = f"No job errors ({measured_text}); no bandwidth mark was given."
    else:
        message = f"No job errors and bandwidth meets the marks ({measured_text})."
    return CheckResult(check="storage.fio", target=target, verdict=Verdict.PASS, figures=figures, message=message)
