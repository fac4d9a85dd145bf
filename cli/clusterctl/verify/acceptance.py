"""Acceptance thresholds for a planned cluster: per-GPU-model defaults under the spec's overrides.

``thresholds.defaults_for`` knows the published figures per GPU model, NIC count and link
speed; this module feeds it the plan's facts for one hardware profile and lays the spec's
``acceptance`` section over the result, keeping a ``basis`` line per value so every report
can say where a mark came from.
"""

from __future__ import annotations

from dataclasses import replace

from clusterctl.plan.models import Plan, PlanNode
from clusterctl.spec.models import Acceptance
from clusterctl.verify.thresholds import AcceptanceThresholds, defaults_for

# Spec field -> AcceptanceThresholds field (the spec says "bytes", the thresholds "size_bytes").
_OVERRIDES: dict[str, str] = {
    "nccl_intra_busbw_gbps": "nccl_intra_busbw_gbps",
    "nccl_inter_busbw_gbps": "nccl_inter_busbw_gbps",
    "dcgm_diag_level": "dcgm_diag_level",
    "nccl_min_bytes": "nccl_min_size_bytes",
}


def gpu_hardware(plan: Plan) -> list[str]:
    """Hardware profiles of the plan's GPU nodes, in plan order, each once."""
    return list(dict.fromkeys(n.hardware for n in plan.nodes if n.gpus and n.gpu_model))


def _representative(plan: Plan, hardware: str) -> PlanNode:
    for node in plan.nodes:
        if node.hardware == hardware and node.gpus and node.gpu_model:
            return node
    known = ", ".join(gpu_hardware(plan)) or "none"
    raise ValueError(f"Hardware profile {hardware!r} has no GPU nodes in the plan; GPU profiles: {known}.")


def platform_of(plan: Plan, hardware: str) -> str | None:
    """The cloud instance type of a hardware profile (``p5.48xlarge``); None off the clouds.

    Read from the plan's cloud instance groups, the one place the plan carries it.
    """
    if plan.cloud is None:
        return None
    return next((g.instance_type for g in plan.cloud.groups if g.hardware == hardware), None)


def acceptance_for(
    plan: Plan,
    spec_acceptance: Acceptance | None,
    hardware: str,
    *,
    platform: str | None = None,
) -> AcceptanceThresholds:
    """The pass marks for the GPU nodes of one hardware profile.

    Args:
        plan: The resolved cluster; gives the GPU model, GPUs and rails per node and the
            fabric speed.
        spec_acceptance: The spec's ``acceptance`` section; every value set there replaces
            the default. None means defaults only.
        hardware: The hardware profile name (``dgx-h100``).
        platform: The profile's cloud instance type, for platforms with their own
            published figure; read from the plan (``platform_of``) when None.

    Returns:
        The thresholds, with one ``basis`` line per value naming its source.

    Raises:
        ValueError: The profile has no GPU nodes, or its GPU model has no defaults.
    """
    node = _representative(plan, hardware)
    assert node.gpu_model is not None  # _representative only returns GPU nodes
    # Only a fabric that carries GPU traffic counts its rails as NICs for the inter-node mark.
    platform = platform or platform_of(plan, hardware)
    base = defaults_for(node.gpu_model, node.gpus, len(node.rails), plan.fabric.speed_gbps, platform)
    if spec_acceptance is None:
        return base
    basis = list(base.basis)
    for spec_field, field in _OVERRIDES.items():
        value = getattr(spec_acceptance, spec_field)
        if value is not None:
            # The override's line replaces the default's, so basis keeps one line per value.
            basis = [line for line in basis if not line.startswith(f"{field}=")]
            shown = value if isinstance(value, int) else f"{value:g}"
            basis.append(f"{field}={shown}: spec acceptance.{spec_field}")
    acc = spec_acceptance
    return replace(
        base,
        nccl_intra_busbw_gbps=_pick(acc.nccl_intra_busbw_gbps, base.nccl_intra_busbw_gbps),
        nccl_inter_busbw_gbps=_pick(acc.nccl_inter_busbw_gbps, base.nccl_inter_busbw_gbps),
        dcgm_diag_level=acc.dcgm_diag_level if acc.dcgm_diag_level is not None else base.dcgm_diag_level,
        nccl_min_size_bytes=acc.nccl_min_bytes if acc.nccl_min_bytes is not None else base.nccl_min_size_bytes,
        basis=tuple(basis),
    )


def _pick(override: float | None, default: float | None) -> float | None:
    return override if override is not None else default


def thresholds_by_hardware(plan: Plan, spec_acceptance: Acceptance | None) -> dict[str, AcceptanceThresholds]:
    """``acceptance_for`` for every GPU hardware profile of the plan.

    Args:
        plan: The resolved cluster.
        spec_acceptance: The spec's ``acceptance`` section; None for defaults only.

    Returns:
        Thresholds keyed by hardware profile name; empty for a cluster without GPUs.
    """
    return {hw: acceptance_for(plan, spec_acceptance, hw) for hw in gpu_hardware(plan)}
