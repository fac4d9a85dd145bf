"""defaults_for: acceptance marks per GPU model, fabric and platform."""

from __future__ import annotations

import pytest

from clusterctl.verify.thresholds import GIB, defaults_for, per_nic_gbps


def test_h100_ndr_8_rails() -> None:
    t = defaults_for("H100-SXM-80GB", gpus_per_node=8, nics_per_node=8, fabric_speed_gbps=400)

    assert t.nccl_intra_busbw_gbps == 430.0
    assert t.nccl_inter_busbw_gbps == pytest.approx(0.9 * 8 * 47)  # about 340 GB/s
    assert t.nccl_min_size_bytes == GIB
    assert (t.dcgm_diag_level, t.nvlinks_expected_up, t.ib_rate_gbps) == (2, 18, 400)
    assert t.nccl_busbw_gbps(1) == 430.0
    assert t.nccl_busbw_gbps(2) == t.nccl_inter_busbw_gbps
    assert any("nccl-tests #290" in line for line in t.basis)


@pytest.mark.parametrize(
    ("model", "intra", "nvlinks"),
    [
        ("H200-SXM-141GB", 430.0, 18),
        ("A100-SXM-80GB", 228.0, 12),
        ("B200-SXM-180GB", 750.0, 18),
        ("h100-sxm-80gb", 430.0, 18),
    ],
)
def test_intra_node_marks_per_model(model: str, intra: float, nvlinks: int) -> None:
    t = defaults_for(model, 8, 8, 400)

    assert t.nccl_intra_busbw_gbps == intra
    assert t.nvlinks_expected_up == nvlinks


def test_hdr_and_other_speeds() -> None:
    hdr = defaults_for("A100-SXM-80GB", 8, 8, 200)
    xdr = defaults_for("B200-SXM-180GB", 8, 8, 800)

    assert hdr.nccl_inter_busbw_gbps == pytest.approx(0.9 * 8 * 24)  # about 170 GB/s
    assert hdr.ib_rate_gbps == 200
    assert per_nic_gbps(800)[0] == pytest.approx(800 / 8 * 0.94)
    assert xdr.nccl_inter_busbw_gbps == pytest.approx(round(0.9 * 8 * 94.0, 1))
    assert any(line.startswith("nccl_inter_busbw_gbps") and "derived" in line for line in xdr.basis)


@pytest.mark.parametrize(
    ("platform", "inter"),
    [("p5.48xlarge", 250.0), ("aws-p5", 250.0), ("p4d.24xlarge", 26.0), ("P4DE.24XLARGE", 26.0)],
)
def test_aws_platform_marks(platform: str, inter: float) -> None:
    t = defaults_for("H100-SXM-80GB", 8, 32, 100, platform=platform)

    assert t.nccl_inter_busbw_gbps == inter
    assert t.ib_rate_gbps is None  # EFA is not checked with ibstat
    assert t.nccl_intra_busbw_gbps == 430.0


def test_unknown_platform_uses_the_fabric_rule() -> None:
    t = defaults_for("H100-SXM-80GB", 8, 8, 400, platform="on-prem")

    assert t.nccl_inter_busbw_gbps == pytest.approx(338.4)


def test_shapes_without_a_reference() -> None:
    pcie = defaults_for("H100-PCIE-80GB", 8, 0, 400)
    four = defaults_for("H100-SXM-80GB", 4, 4, 400)

    assert (pcie.nccl_intra_busbw_gbps, pcie.nvlinks_expected_up) == (None, None)
    assert (pcie.nccl_inter_busbw_gbps, pcie.ib_rate_gbps) == (None, None)
    assert four.nccl_intra_busbw_gbps is None
    assert four.nccl_inter_busbw_gbps == pytest.approx(0.9 * 4 * 47)


@pytest.mark.parametrize(("model", "fragment"), [("V100-SXM-32GB", "no acceptance defaults"), ("H100", "FAMILY-FORM")])
def test_bad_models(model: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        defaults_for(model, 8, 8, 400)
