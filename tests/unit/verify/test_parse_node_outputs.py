"""Parsers of the per-node outputs verify reads: nvidia-smi --query-gpu, scontrol, chronyc."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.verify_testkit import chronyc, scontrol_node, scontrol_partition

from clusterctl.verify.parsers.chronyc import parse_chronyc_tracking
from clusterctl.verify.parsers.gpu_query import name_matches_model, parse_gpu_query
from clusterctl.verify.parsers.scontrol import parse_scontrol_nodes, parse_scontrol_partitions
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


# --- scontrol ---------------------------------------------------------------------------------


def test_scontrol_nodes_states_gres_and_reasons() -> None:
    text = (
        scontrol_node("gpu001")
        + scontrol_node("gpu002", state="IDLE*")
        + scontrol_node("gpu003", state="IDLE+DRAIN", reason="clusterctl-verify: ib.ports: mlx5_3/1 is Down (Polling)")
        + scontrol_node("gpu004", state="DOWN+NOT_RESPONDING", reason="Not responding")
        + scontrol_node("gpu005", state="MIXED", gres="gpu:h100:8(S:0-1)")
        + scontrol_node("gpu006", state="IDLE+CLOUD+POWERED_DOWN", gres="gpu:h100:4,nic:2")
    )

    nodes = {n.name: n for n in parse_scontrol_nodes(text)}

    assert (nodes["gpu001"].state, nodes["gpu001"].flags) == ("IDLE", ())
    assert nodes["gpu001"].gres_count() == 8
    assert nodes["gpu001"].gres_types() == ("h100",)
    assert nodes["gpu001"].fields["OS"] == "Linux 6.1.0-18-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1"
    assert nodes["gpu001"].partitions == ("train",)
    assert nodes["gpu002"].not_responding
    assert nodes["gpu002"].state == "IDLE"
    assert nodes["gpu003"].drained
    assert nodes["gpu003"].reason == "clusterctl-verify: ib.ports: mlx5_3/1 is Down (Polling)"
    assert (nodes["gpu004"].state, nodes["gpu004"].not_responding) == ("DOWN", True)
    assert nodes["gpu005"].gres_count() == 8
    assert nodes["gpu006"].flags == ("CLOUD", "POWERED_DOWN")
    assert nodes["gpu006"].gres_count("gpu") == 4
    assert nodes["gpu006"].gres_count("nic") == 2


def test_scontrol_nodes_without_gres() -> None:
    (node,) = parse_scontrol_nodes(scontrol_node("cpu001", gres="(null)"))

    assert node.gres == ()
    assert node.gres_count() == 0


def test_scontrol_controller_unreachable() -> None:
    text = "slurm_load_node error: Unable to contact slurm controller (connect failure)\n"

    with pytest.raises(ParseError) as err:
        parse_scontrol_nodes(text)

    assert (err.value.line_no, err.value.line) == (1, text.rstrip("\n"))


def test_scontrol_bad_gres() -> None:
    with pytest.raises(ParseError, match="Gres entry"):
        parse_scontrol_nodes(scontrol_node("gpu001", gres="gpu:h100:eight"))


def test_scontrol_partitions() -> None:
    text = scontrol_partition("train", "gpu[001-030]") + scontrol_partition("debug", "gpu[001-030]", state="DOWN")

    parts = {p.name: p for p in parse_scontrol_partitions(text)}

    assert parts["train"].nodes == "gpu[001-030]"
    assert (parts["train"].state, parts["debug"].state) == ("UP", "DOWN")
    with pytest.raises(ParseError, match="PartitionName"):
        parse_scontrol_partitions("garbage\n")


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
