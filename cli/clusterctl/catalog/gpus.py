"""GPU models the spec accepts.

Sources: techref §5.2 (architectures), §9 (TDP, BF16 dense peak, HBM), NVIDIA datasheets
for H100/H200/B200/A100; NCCL's docs for which baseboards carry NVSwitch.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuModel:
    """One GPU model as the plan and the rules need it."""

    name: str
    arch: str  # "ampere" | "hopper" | "blackwell" | "ada"
    compute_capability: str
    hbm_gib: float
    tdp_w: int
    bf16_dense_tflops: float
    nvswitch: bool  # SXM baseboards (HGX/DGX) have NVSwitch and need fabric manager
    gres_type: str  # Slurm GRES type, lower case as slurmd would detect it
    pci_device_id: str
    # Whole-system power of the 8-GPU server where NVIDIA publishes it (DGX datasheets).
    system_kw_8gpu: float | None = None
    min_cuda: str = "11.0"


GPU_MODELS: dict[str, GpuModel] = {
    m.name: m
    for m in (
        GpuModel("A100-SXM-40GB", "ampere", "8.0", 40, 400, 312, True, "a100", "20b0", 6.5, "11.0"),
        GpuModel("A100-SXM-80GB", "ampere", "8.0", 80, 400, 312, True, "a100", "20b2", 6.5, "11.0"),
        GpuModel("H100-SXM-80GB", "hopper", "9.0", 80, 700, 989, True, "h100", "2330", 10.2, "11.8"),
        GpuModel("H100-PCIE-80GB", "hopper", "9.0", 80, 350, 756, False, "h100", "2331", None, "11.8"),
        GpuModel("H200-SXM-141GB", "hopper", "9.0", 141, 700, 989, True, "h200", "2335", 10.2, "11.8"),
        GpuModel("B200-SXM-180GB", "blackwell", "10.0", 180, 1000, 2250, True, "b200", "2901", 14.3, "12.8"),
        GpuModel("L40S-48GB", "ada", "8.9", 48, 350, 362, False, "l40s", "26b9", None, "11.8"),
    )
}

# Typical non-GPU draw of a GPU server (CPUs, NICs, fans, drives) when no datasheet
# figure exists: assumed, and said so in the plan output.
ASSUMED_GPU_SERVER_OVERHEAD_W = 2500
# CPU-only servers without a power_w in their profile.
ASSUMED_CPU_SERVER_W = 800
