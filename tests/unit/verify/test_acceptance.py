"""acceptance_for: per-GPU-model defaults from the plan, overridden by the spec's acceptance section."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import EXAMPLES
from tests.specs import mutated

from clusterctl.pipeline import load_and_validate
from clusterctl.spec.models import Acceptance
from clusterctl.verify.acceptance import acceptance_for, gpu_hardware, platform_of, thresholds_by_hardware


def test_defaults_come_from_the_plan() -> None:
    plan = load_and_validate(EXAMPLES / "onprem-h100-256.yaml").plan

    t = acceptance_for(plan, None, "dgx-h100")

    assert (t.gpu_model, t.nccl_intra_busbw_gbps, t.nccl_inter_busbw_gbps) == ("H100-SXM-80GB", 430.0, 338.4)
    assert (t.dcgm_diag_level, t.ib_rate_gbps, t.nvlinks_expected_up) == (2, 400, 18)
    assert gpu_hardware(plan) == ["dgx-h100"]


def test_spec_values_override_and_say_so(tmp_path: Path) -> None:
    def override(data: dict) -> None:
        data["acceptance"] = {"nccl_inter_busbw_gbps": 360, "dcgm_diag_level": 3, "nccl_min_bytes": 8 << 30}

    validated = load_and_validate(mutated(tmp_path, override))

    t = acceptance_for(validated.plan, validated.loaded.spec.acceptance, "dgx-h100")

    assert (t.nccl_intra_busbw_gbps, t.nccl_inter_busbw_gbps) == (430.0, 360.0)
    assert (t.dcgm_diag_level, t.nccl_min_size_bytes) == (3, 8 << 30)
    assert "nccl_inter_busbw_gbps=360: spec acceptance.nccl_inter_busbw_gbps" in t.basis
    assert "dcgm_diag_level=3: spec acceptance.dcgm_diag_level" in t.basis
    assert "nccl_min_size_bytes=8589934592: spec acceptance.nccl_min_bytes" in t.basis
    # One basis line per value: the overridden defaults' lines are gone.
    assert sum(line.startswith("nccl_inter_busbw_gbps=") for line in t.basis) == 1
    assert sum(line.startswith("dcgm_diag_level=") for line in t.basis) == 1


def test_empty_acceptance_is_the_defaults() -> None:
    plan = load_and_validate(EXAMPLES / "onprem-h100-256.yaml").plan

    assert acceptance_for(plan, Acceptance(), "dgx-h100") == acceptance_for(plan, None, "dgx-h100")


def test_cloud_instance_type_comes_from_the_plan() -> None:
    validated = load_and_validate(EXAMPLES / "aws-p5.yaml")
    plan = validated.plan

    t = acceptance_for(plan, validated.loaded.spec.acceptance, "p5")

    assert platform_of(plan, "p5") == "p5.48xlarge"
    assert t.nccl_inter_busbw_gbps == 250.0
    assert t.ib_rate_gbps is None  # EFA has no InfiniBand ports
    assert thresholds_by_hardware(plan, None) == {"p5": acceptance_for(plan, None, "p5")}


def test_a_profile_without_gpus_has_no_thresholds() -> None:
    plan = load_and_validate(EXAMPLES / "onprem-h100-256.yaml").plan

    with pytest.raises(ValueError, match=r"cpu-1u.*no GPU nodes.*dgx-h100"):
        acceptance_for(plan, None, "cpu-1u")
