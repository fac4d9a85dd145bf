"""Sizing: power per rack, GPU totals and what the training run the spec describes needs.

The figures ``clusterctl plan`` reports; every assumption made for want of a spec value is
listed with the power figures.
"""

from __future__ import annotations

import math

from clusterctl.catalog.gpus import GPU_MODELS
from clusterctl.plan.models import FabricPlan, GpuPlan, PlanNode, PowerPlan, WorkloadPlan
from clusterctl.spec.models import Spec

# Per-switch power with optics for a 64-port NDR switch (QM9700 class); assumption.
ASSUMED_SWITCH_W = 1500
# Bytes per parameter: mixed-precision Adam model state (ZeRO paper) and a resumable checkpoint.
STATE_BYTES_PER_PARAM = 16
CHECKPOINT_BYTES_PER_PARAM = 14


def checkpoint_bytes(spec: Spec) -> float | None:
    """Size of one checkpoint of the spec's workload in bytes (None without a workload)."""
    return CHECKPOINT_BYTES_PER_PARAM * spec.workload.model_params_b * 1e9 if spec.workload else None


def resolve_power(nodes: list[PlanNode], fabric: FabricPlan, assumptions: list[str]) -> PowerPlan:
    """IT power per rack and in all (burst nodes excluded), the fabric's switches included."""
    racks: dict[str, float] = {}
    for node in nodes:
        if node.burst:
            continue
        racks[node.rack] = racks.get(node.rack, 0.0) + node.power_w / 1000
    switches = fabric.leaf_switches + fabric.spine_switches + fabric.core_switches
    switches_kw = switches * ASSUMED_SWITCH_W / 1000
    notes = list(assumptions)
    if switches:
        notes.append(f"fabric switches: {ASSUMED_SWITCH_W} W each with optics (assumed)")
    return PowerPlan(
        it_kw=round(sum(racks.values()) + switches_kw, 1),
        max_rack_kw=round(max(racks.values(), default=0.0), 1),
        racks={k: round(v, 1) for k, v in sorted(racks.items())},
        switches_kw=round(switches_kw, 1),
        assumptions=notes,
    )


def resolve_gpus(nodes: list[PlanNode]) -> GpuPlan:
    """GPUs of the fixed nodes by model, their HBM and the active ones' peak BF16 (dense)."""
    by_model: dict[str, int] = {}
    total = active = 0
    hbm = peak = 0.0
    for node in nodes:
        if not node.gpus or node.burst or node.gpu_model is None:
            continue
        model = GPU_MODELS[node.gpu_model]
        by_model[model.name] = by_model.get(model.name, 0) + node.gpus
        total += node.gpus
        hbm += node.gpus * model.hbm_gib
        if node.in_service:
            active += node.gpus
            peak += node.gpus * model.bf16_dense_tflops / 1000
    return GpuPlan(total=total, active=active, hbm_gib=hbm, by_model=by_model, peak_bf16_pflops=round(peak, 2))


def resolve_workload(spec: Spec, nodes: list[PlanNode], gpus: GpuPlan) -> WorkloadPlan | None:
    """What the spec's training run needs: FLOPs, model state, days at the target MFU, checkpoint size."""
    work = spec.workload
    if work is None:
        return None
    params = work.model_params_b * 1e9
    flops = 6 * params * work.train_tokens_t * 1e12
    state = STATE_BYTES_PER_PARAM * params
    hbm_values = [GPU_MODELS[n.gpu_model].hbm_gib for n in nodes if n.gpu_model and not n.burst]
    smallest_hbm = min(hbm_values) if hbm_values else 0
    days = None
    if gpus.peak_bf16_pflops:
        days = round(flops / (gpus.peak_bf16_pflops * 1e15 * work.target_mfu) / 86400, 1)
    return WorkloadPlan(
        model_params_b=work.model_params_b,
        train_tokens_t=work.train_tokens_t,
        target_mfu=work.target_mfu,
        training_flops=flops,
        model_state_tib=round(state / 2**40, 3),
        min_gpus_for_state=math.ceil(state / (smallest_hbm * 2**30)) if smallest_hbm else 0,
        train_days=days,
        checkpoint_tib=round(CHECKPOINT_BYTES_PER_PARAM * params / 2**40, 3),
        checkpoint_every_min=work.checkpoint_every_min,
    )
