"""GPUs: the inventory (count, model, driver) from ``nvidia-smi --query-gpu`` and DCGM diagnostics
(``dcgmi diag -r N`` at the acceptance level), each with its command, parser and judgement.

The judges are pure (no plan, no pydantic) so the GPU-machine script in ``tests/gpu/`` uses them as is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from clusterctl.spec.findings import Finding
from clusterctl.verify.base import NodeCheck, VerifyContext
from clusterctl.verify.parsers.dcgmi_diag import DcgmDiag, DcgmTest, DiagStatus, parse_dcgmi_diag
from clusterctl.verify.parsers.gpu_query import QUERY_COMMAND, GpuQuery, name_matches_model, parse_gpu_query
from clusterctl.verify.result import failed, passed, sentence, skipped

if TYPE_CHECKING:
    from clusterctl.plan.models import PlanNode
    from clusterctl.verify.thresholds import AcceptanceThresholds

FABRIC_MANAGER_HINT = "check nvidia-fabricmanager (fabric manager not running or wrong version)"
# cuInit returning CUDA_ERROR_SYSTEM_NOT_READY is how an NVSwitch system without a running
# (or version-matched) fabric manager shows up in DCGM (nccl-tests issue #264).
_FABRIC_MANAGER_SIGNS = ("cuinit", "system not yet initialized", "fabric manager", "fabricmanager")
# dcgmi diag run time by level (techref §6: seconds, ~2 min, ~15 min, longer), with margin.
_DCGM_TIMEOUT_S = {1: 180.0, 2: 900.0, 3: 2700.0, 4: 7200.0}


def judge_gpu_inventory(
    query: GpuQuery, *, expected_gpus: int, gpu_model: str, driver_pin: str, target: str = ""
) -> Finding:
    """Judge the GPU inventory of one node.

    Args:
        query: The parsed ``nvidia-smi --query-gpu=name,driver_version`` output.
        expected_gpus: GPUs the plan gives the node.
        gpu_model: The plan's model (``H100-SXM-80GB``).
        driver_pin: The spec's ``versions.nvidia_driver``; an exact match is required.
        target: The host.

    Returns:
        Fail naming every difference; pass otherwise.
    """
    figures: dict[str, float | int | str] = {
        "gpus": len(query.gpus),
        "expected_gpus": expected_gpus,
        "names": ", ".join(query.names),
        "driver": ", ".join(query.driver_versions),
        "driver_pin": driver_pin,
    }
    problems: list[str] = []
    hints: list[str] = []
    if len(query.gpus) != expected_gpus:
        problems.append(f"{len(query.gpus)} GPUs found, the plan has {expected_gpus}")
        hints.append("a missing GPU has fallen off the bus: check dmesg for Xid 79 and reseat or RMA it")
    wrong = [name for name in query.names if not name_matches_model(name, gpu_model)]
    if wrong:
        problems.append(f"{', '.join(wrong)} is not {gpu_model}")
        hints.append("fix the hardware profile's gpus.model in the spec or the node's hardware")
    drivers = [d for d in query.driver_versions if d != driver_pin]
    if drivers:
        problems.append(f"driver {', '.join(drivers)} is loaded, the pin is {driver_pin}")
        hints.append("rerun clusterctl up to install the pinned driver, then reboot the node")
    if problems:
        return failed("gpu.inventory", target, sentence(problems), sentence(hints), **figures)
    return passed("gpu.inventory", target, f"{len(query.gpus)} x {query.names[0]} with driver {driver_pin}.", figures)


def _scope(test: DcgmTest, status: DiagStatus) -> str:
    if test.gpu_status:
        gpus = test.gpus_with(status)
        return "GPU " + ", ".join(str(g) for g in gpus) if gpus else "some GPUs"
    return "all GPUs" if test.section != "Deployment" else "the node"


def judge_dcgm(diag: DcgmDiag, *, min_level: int | None = None, target: str = "") -> Finding:
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
    failing = diag.with_status(DiagStatus.FAIL)
    skips = diag.with_status(DiagStatus.SKIP)
    warned = diag.with_status(DiagStatus.WARN)
    figures: dict[str, float | int | str] = {
        "level": diag.level if diag.level is not None else "unknown",
        "tests": len(diag.tests),
        "tests_passed": len(diag.with_status(DiagStatus.PASS)),
        "tests_failed": len(failing),
        "tests_warned": len(warned),
        "tests_skipped": len(skips),
    }
    if diag.dcgm_version:
        figures["dcgm_version"] = diag.dcgm_version
    if diag.driver_version:
        figures["driver_version"] = diag.driver_version
    if diag.gpu_device_ids:
        figures["gpus"] = len(diag.gpu_device_ids)
    if failing:
        figures["failed_tests"] = ", ".join(t.name for t in failing)
    if skips:
        figures["skipped_tests"] = ", ".join(t.name for t in skips)

    if diag.error is not None:
        fm = any(sign in diag.error.lower() for sign in _FABRIC_MANAGER_SIGNS)
        return failed(
            "dcgm.diag",
            target,
            f"dcgmi diag did not complete: {diag.error}",
            FABRIC_MANAGER_HINT if fm else "Check that nv-hostengine runs (the nvidia-dcgm service).",
            **figures,
        )

    problems: list[str] = []
    hint = ""
    if failing:
        parts = [f"{t.name} ({_scope(t, DiagStatus.FAIL)})" for t in failing]
        problems.append(f"{len(failing)} of {len(diag.tests)} tests failed: {', '.join(parts)}")
        first = next((m for t in failing for m in t.messages if m.kind in ("Warning", "Error")), None)
        if first is not None:
            problems.append(f"first warning: {first.text}")
        texts = [t.name.lower() + " " + " ".join(m.text.lower() for m in t.messages) for t in failing]
        if any(sign in text for text in texts for sign in _FABRIC_MANAGER_SIGNS):
            hint = FABRIC_MANAGER_HINT
        else:
            hint = "Read the Warning rows of the failing tests; dcgmi diag -v prints more detail."
    if min_level is not None and diag.level is not None and diag.level < min_level:
        problems.append(f"the run was level {diag.level}, acceptance needs level {min_level}")
        hint = hint or f"Rerun with dcgmi diag -r {min_level}."

    if problems:
        return failed("dcgm.diag", target, sentence(problems), hint, **figures)
    if diag.tests and len(skips) == len(diag.tests):
        return skipped(
            "dcgm.diag",
            target,
            f"All {len(diag.tests)} tests were skipped.",
            "Run dcgmi diag as root on a node whose GPUs are not in use.",
            figures,
        )
    extra = ""
    if skips:
        extra += f"; {len(skips)} skipped ({', '.join(t.name for t in skips)})"
    if warned:
        extra += f"; {len(warned)} warned ({', '.join(t.name for t in warned)})"
    ok = len(diag.tests) - len(skips) - len(warned)
    return passed("dcgm.diag", target, f"{ok} of {len(diag.tests)} tests passed{extra}.", figures)


def dcgm_command(level: int, thresholds: AcceptanceThresholds | None) -> str:
    """The ``dcgmi diag`` command line for a level and a node type."""
    command = f"dcgmi diag -r {level}"
    if level >= 2 and thresholds is not None and thresholds.nvlinks_expected_up:
        # Without it the PCIe test does not notice a node that lost NVLinks (techref §6).
        command += f" -p pcie.gpu_nvlinks_expected_up={thresholds.nvlinks_expected_up}"
    return command


# --- the checks -----------------------------------------------------------------------------


class GpuInventoryCheck(NodeCheck):
    """GPU count, model and driver version from ``nvidia-smi --query-gpu``."""

    name = "gpu"
    title = "GPU inventory"
    result_name = "gpu.inventory"
    tool = "nvidia-smi"
    install_hint = "Install the NVIDIA driver (the nvidia_driver role) and load its modules."

    def command(self, ctx: VerifyContext, node: PlanNode) -> str:
        """``nvidia-smi --query-gpu=name,driver_version --format=csv,noheader``."""
        return QUERY_COMMAND

    def judge(self, ctx: VerifyContext, node: PlanNode, output: str) -> Finding:
        """Count equals the node's GPUs, every name is the plan's model, the driver is the pin."""
        return judge_gpu_inventory(
            parse_gpu_query(output),
            expected_gpus=node.gpus,
            gpu_model=node.gpu_model or "",
            driver_pin=ctx.plan.cluster.versions.get("nvidia_driver", ""),
            target=node.hostname,
        )


class DcgmCheck(NodeCheck):
    """``dcgmi diag -r N`` at the acceptance level."""

    name = "dcgm"
    title = "DCGM diagnostics"
    result_name = "dcgm.diag"
    tool = "dcgmi"
    install_hint = "Install datacenter-gpu-manager and start nvidia-dcgm (nv-hostengine)."

    def _level(self, ctx: VerifyContext, node: PlanNode) -> int:
        thresholds = ctx.thresholds_for(node)
        return thresholds.dcgm_diag_level if thresholds is not None else 1

    def command(self, ctx: VerifyContext, node: PlanNode) -> str:
        """``dcgmi diag -r N`` (with the NVLink count the PCIe test expects, from level 2)."""
        return dcgm_command(self._level(ctx, node), ctx.thresholds_for(node))

    def timeout(self, ctx: VerifyContext) -> float:
        """Long enough for the deepest level any node runs."""
        levels = [t.dcgm_diag_level for t in ctx.thresholds.values()] or [1]
        return _DCGM_TIMEOUT_S.get(max(levels), _DCGM_TIMEOUT_S[4])

    def judge(self, ctx: VerifyContext, node: PlanNode, output: str) -> Finding:
        """Every test passed or skipped, at the acceptance level."""
        level = self._level(ctx, node)
        # The parser reads the level from the command line, which the output alone lacks.
        diag = parse_dcgmi_diag(f"$ {self.command(ctx, node)}\n{output}")
        return judge_dcgm(diag, min_level=level, target=node.hostname)
