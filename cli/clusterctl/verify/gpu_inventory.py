"""The GPU inventory verdict: count, model and driver of one node's GPUs.

Pure (no plan, no pydantic) so the GPU-machine script in ``tests/gpu/`` can use it as is.
"""

from __future__ import annotations

from clusterctl.verify.parsers.gpu_query import GpuQuery, name_matches_model
from clusterctl.verify.result import CheckResult, Verdict


def _join(parts: list[str]) -> str:
    """Clauses as one sentence; an opening plain lower-case word is capitalised."""
    text = "; ".join(parts)
    text = text if text.endswith(".") else text + "."
    first = text.split(" ", 1)[0]
    return text[:1].upper() + text[1:] if first.isalpha() and first.islower() else text


def judge_gpu_inventory(
    query: GpuQuery, *, expected_gpus: int, gpu_model: str, driver_pin: str, target: str = ""
) -> CheckResult:
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
        return CheckResult("gpu.inventory", target, Verdict.FAIL, figures, _join(problems), _join(hints))
    return CheckResult(
        "gpu.inventory",
        target,
        Verdict.PASS,
        figures,
        f"{len(query.gpus)} x {query.names[0]} with driver {driver_pin}.",
    )
