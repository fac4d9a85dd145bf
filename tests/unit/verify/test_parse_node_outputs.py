"""Parsers of the per-node outputs verify reads: nvidia-smi --query-gpu, scontrol, chronyc."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.verify_testkit import chronyc

from clusterctl.verify.parsers.chronyc import parse_chronyc_tracking
from clusterctl.verify.parsers.gpu_query import name_matches_model, parse_gpu_query
from clusterctl.verify.result import ParseError

# --- nvidia-smi --query-gpu ---------------------------------------------------------------------


def _query_columns_from_capture(fixtures_dir: Path) -> str:
    """name,driver_version rows cut from the real ``--query-gpu=... --format=csv`` capture."""
    lines = (fixtures_dir / "nvidia-smi" / "nvsmi_capture_h100_80gb_hbm3_590_nvidia_gpu_exporter.txt").read_text()
    rows = lines.splitlines()
    start = next(i for i, line in enumerate(rows) if line.startswith("# idle :: query-gpu"))
    header = [c.strip() for c in rows[start + 3].split(",")]
    values = [c.strip() for c in rows[start + 4].split(", ")]
    record = dict(zip(header, values, strict=False))
    return f"{record['name']}, {record['driver_version']}\n"


def test_gpu_query_on_the_real_capture(fixtures_dir: Path) -> None:
    query = parse_gpu_query(_query_columns_from_capture(fixtures_dir))

    assert [(g.name, g.driver_version) for g in query.gpus] == [("NVIDIA H100 80GB HBM3", "590.48.01")]


def test_gpu_query_eight_gpus() -> None:
    text = "".join("NVIDIA H100 80GB HBM3, 570.133.20\n" for _ in range(8))

    query = parse_gpu_query(text)

    assert len(query.gpus) == 8
    assert query.names == ("NVIDIA H100 80GB HBM3",)
    assert query.driver_versions == ("570.133.20",)
    assert query.gpus[7].index == 7


def test_gpu_query_driver_not_loaded() -> None:
    text = (
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running.\n"
    )

    with pytest.raises(ParseError) as err:
        parse_gpu_query(text)

    assert err.value.line_no == 1
    assert err.value.line.startswith("NVIDIA-SMI has failed")
    with pytest.raises(ParseError, match="no GPUs"):
        parse_gpu_query("\n")


@pytest.mark.parametrize(
    ("name", "model", "fits"),
    [
        ("NVIDIA H100 80GB HBM3", "H100-SXM-80GB", True),
        ("NVIDIA H100 80GB HBM3", "H100-PCIE-80GB", False),
        ("NVIDIA H100 PCIe", "H100-PCIE-80GB", True),
        ("NVIDIA H100 PCIe", "H100-SXM-80GB", False),
        ("NVIDIA A100-SXM4-80GB", "A100-SXM-80GB", True),
        ("NVIDIA A100-SXM4-40GB", "A100-SXM-80GB", False),
        ("NVIDIA H200", "H200-SXM-141GB", True),
        ("NVIDIA B200", "B200-SXM-180GB", True),
        ("NVIDIA H200", "H100-SXM-80GB", False),
        ("NVIDIA L40S", "L40S-48GB", True),
    ],
)
def test_name_matches_model(name: str, model: str, fits: bool) -> None:
    assert name_matches_model(name, model) is fits


# --- chronyc ----------------------------------------------------------------------------------


def test_chronyc_synchronised() -> None:
    tracking = parse_chronyc_tracking(chronyc(0.000012))

    assert tracking.synchronised
    assert tracking.offset_s == pytest.approx(0.000012)
    assert tracking.stratum == 3
    assert tracking.reference == "C0A80001 (192.168.0.1)"


def test_chronyc_slow_clock_and_unsynchronised() -> None:
    slow = parse_chronyc_tracking(chronyc(-0.25))
    lost = parse_chronyc_tracking(chronyc(0.0, leap="Not synchronised", reference="00000000 ()"))

    assert slow.offset_s == pytest.approx(-0.25)
    assert not lost.synchronised


def test_chronyc_daemon_not_running() -> None:
    with pytest.raises(ParseError) as err:
        parse_chronyc_tracking("506 Cannot talk to daemon\n")

    assert err.value.line_no == 1
    with pytest.raises(ParseError, match="System time"):
        parse_chronyc_tracking(chronyc().replace("seconds fast of NTP time", "sec fast"))
