"""Verdicts over real outputs: the acceptance cases named in the verify issue, and the edges."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from clusterctl.verify.fabric import judge_ibstat, judge_topo
from clusterctl.verify.gpu import FABRIC_MANAGER_HINT, judge_dcgm
from clusterctl.verify.nccl import judge_nccl
from clusterctl.verify.parsers.dcgmi_diag import DcgmDiag, DiagStatus, parse_dcgmi_diag
from clusterctl.verify.parsers.fio import parse_fio_json
from clusterctl.verify.parsers.ibstat import parse_ibstat
from clusterctl.verify.parsers.nccl_tests import NcclTestsResult, parse_nccl_tests
from clusterctl.verify.parsers.nvidia_smi_topo import NvidiaSmiTopo, parse_nvidia_smi_topo
from clusterctl.verify.result import Verdict, figures_of
from clusterctl.verify.storage import judge_fio
from clusterctl.verify.thresholds import defaults_for

DATA = Path(__file__).parent / "data"
NDR_8_RAILS = defaults_for("H100-SXM-80GB", gpus_per_node=8, nics_per_node=8, fabric_speed_gbps=400)
P5 = defaults_for("H100-SXM-80GB", gpus_per_node=8, nics_per_node=32, fabric_speed_gbps=100, platform="p5.48xlarge")
RAILS = [f"mlx5_{i}" for i in range(8)]


def _nccl(fixtures_dir: Path, name: str) -> NcclTestsResult:
    return parse_nccl_tests((fixtures_dir / "nccl" / name).read_text())


def _dcgm(fixtures_dir: Path, name: str) -> DcgmDiag:
    return parse_dcgmi_diag((fixtures_dir / "dcgm" / name).read_text())


def _topo(fixtures_dir: Path, name: str) -> NvidiaSmiTopo:
    return parse_nvidia_smi_topo((fixtures_dir / "nvidia-smi" / name).read_text())


# --- nccl-tests -------------------------------------------------------------------------


def test_degraded_two_node_ndr_run_fails_the_8_nic_mark(fixtures_dir: Path) -> None:
    result = _nccl(fixtures_dir, "nccl_allreduce_2x8H100_ndr_degraded_nccltests290.txt")
    mark = NDR_8_RAILS.nccl_busbw_gbps(len(result.hosts))
    assert mark is not None

    check = judge_nccl(result, mark)

    assert Verdict.of(check) is Verdict.FAIL
    assert check.code == "nccl.all_reduce"
    assert check.node == "node[005,007]"
    assert figures_of(check)["busbw_gbps"] == 155.57
    assert figures_of(check)["size_bytes"] == 8589934592
    assert figures_of(check)["basis"] == "busbw at the largest size (8 GiB)"
    assert figures_of(check)["wrong"] == "N/A"
    assert figures_of(check)["avg_busbw_gbps"] == 142.735
    assert "155.57 GB/s" in check.message
    assert "338.4 GB/s" in check.message
    assert "NCCL_IB_HCA" in check.hint


def test_ring_run_fails_too(fixtures_dir: Path) -> None:
    result = _nccl(fixtures_dir, "nccl_allreduce_2x8H100_ndr_ring_nccltests290.txt")

    check = judge_nccl(result, NDR_8_RAILS.nccl_inter_busbw_gbps or 0)

    assert Verdict.of(check) is Verdict.FAIL
    assert figures_of(check)["busbw_gbps"] == 89.90


@pytest.mark.parametrize(
    ("name", "busbw"),
    [("nccl_allreduce_2x_p5_awsome.txt", 487.26), ("nccl_allreduce_2x_p5_eks_mpijob_excerpt.txt", 437.89)],
)
def test_healthy_p5_runs_pass_the_p5_mark(fixtures_dir: Path, name: str, busbw: float) -> None:
    result = _nccl(fixtures_dir, name)
    assert P5.nccl_inter_busbw_gbps == 250.0

    check = judge_nccl(result, P5.nccl_inter_busbw_gbps, P5.nccl_min_size_bytes, target="p5-[1-2]")

    assert Verdict.of(check) is Verdict.PASS
    assert figures_of(check)["busbw_gbps"] == busbw
    assert check.node == "p5-[1-2]"
    assert check.hint == ""


def test_p4de_run_passes_the_p4d_mark(fixtures_dir: Path) -> None:
    result = _nccl(fixtures_dir, "nccl_allreduce_2x_p4de_awsome.txt")
    mark = defaults_for("A100-SXM-80GB", 8, 4, 100, platform="p4de.24xlarge").nccl_inter_busbw_gbps
    assert mark == 26.0

    check = judge_nccl(result, mark)

    assert Verdict.of(check) is Verdict.PASS
    assert figures_of(check)["busbw_gbps"] == 76.86


def test_single_node_nvls_run_passes_the_intra_node_mark(fixtures_dir: Path) -> None:
    result = _nccl(fixtures_dir, "nccl_allreduce_1x8H100_nvls_nccltests290.txt")
    mark = NDR_8_RAILS.nccl_busbw_gbps(len(result.hosts))
    assert mark == 430.0

    check = judge_nccl(result, mark)

    assert Verdict.of(check) is Verdict.PASS
    assert check.node == "node005"
    assert figures_of(check)["busbw_gbps"] == 476.53
    assert figures_of(check)["size_bytes"] == 4294967296
    assert figures_of(check)["ranks"] == 8
    assert figures_of(check)["wrong"] == 0


def test_basis_largest_size_or_max(fixtures_dir: Path) -> None:
    result = _nccl(fixtures_dir, "nccl_allreduce_2x8H100_ndr_degraded_nccltests290.txt")

    largest = judge_nccl(result, 160.0, min_size_bytes=128 << 20)
    best = judge_nccl(result, 160.0, min_size_bytes=128 << 20, basis="max")

    assert (Verdict.of(largest), figures_of(largest)["busbw_gbps"]) == (Verdict.FAIL, 155.57)
    assert (Verdict.of(best), figures_of(best)["busbw_gbps"]) == (Verdict.PASS, 167.87)
    assert figures_of(best)["basis"] == "max busbw at sizes >= 128 MiB"
    assert figures_of(best)["size_bytes"] == 268435456
    with pytest.raises(ValueError, match="basis"):
        judge_nccl(result, 1.0, basis="mean")


def test_wrong_elements_fail_even_at_full_speed(fixtures_dir: Path) -> None:
    text = (fixtures_dir / "nccl" / "nccl_allreduce_1x8H100_nvls_nccltests290.txt").read_text()
    result = parse_nccl_tests(text.replace("473.60      0    15773", "473.60     12    15773"))

    check = judge_nccl(result, 430.0)

    assert Verdict.of(check) is Verdict.FAIL
    assert figures_of(check)["wrong"] == 12
    assert "1 result row has wrong elements, first at 4 GiB" in check.message


def test_run_too_small_to_judge_is_skipped(fixtures_dir: Path) -> None:
    result = _nccl(fixtures_dir, "nccl_allgather_2x_a3mega_gke_ctk.txt")
    small = replace(result, rows=tuple(r for r in result.rows if r.size_bytes <= 128 << 20))

    check = judge_nccl(small, 150.0)

    assert Verdict.of(check) is Verdict.SKIPPED
    assert check.code == "nccl.unknown"
    assert figures_of(check)["largest_size_bytes"] == 134217728
    assert "-e" in check.hint


def test_no_mark_is_skipped_but_still_checks_wrong_elements(fixtures_dir: Path) -> None:
    pcie = defaults_for("H100-PCIE-80GB", 8, 0, 400)
    result = _nccl(fixtures_dir, "nccl_allreduce_1x8H100_nvls_nccltests290.txt")
    text = (fixtures_dir / "nccl" / "nccl_allreduce_1x8H100_nvls_nccltests290.txt").read_text()
    corrupted = parse_nccl_tests(text.replace("473.60      0    15773", "473.60     12    15773"))

    check = judge_nccl(result, pcie.nccl_busbw_gbps(1))

    assert Verdict.of(check) is Verdict.SKIPPED
    assert "threshold_gbps" not in figures_of(check)
    assert figures_of(check)["busbw_gbps"] == 476.53
    assert Verdict.of(judge_nccl(corrupted, None)) is Verdict.FAIL


# --- dcgmi diag -------------------------------------------------------------------------


def test_h100_fail_without_fabric_manager(fixtures_dir: Path) -> None:
    diag = _dcgm(fixtures_dir, "dcgmi_diag_r3_8xH100_fail_no_fabricmanager.txt")

    check = judge_dcgm(diag, min_level=2, target="node005")

    assert Verdict.of(check) is Verdict.FAIL
    assert check.hint == FABRIC_MANAGER_HINT
    assert figures_of(check)["failed_tests"] == "GPU Memory"
    assert figures_of(check)["skipped_tests"] == "PCIe, Memory Bandwidth, EUD Test"
    assert (figures_of(check)["tests"], figures_of(check)["tests_failed"], figures_of(check)["tests_skipped"]) == (
        13,
        1,
        3,
    )
    assert figures_of(check)["dcgm_version"] == "3.3.8"
    assert figures_of(check)["gpus"] == 8
    assert "GPU Memory (all GPUs)" in check.message
    assert "system not yet initialized" in check.message


@pytest.mark.parametrize(
    ("name", "level", "tests"),
    [("dcgmi_diag_r3_8xH200_pass_ramble.txt", "unknown", 16), ("dcgmi_diag_r2_p4de_8xA100_pass_awsome.txt", 2, 11)],
)
def test_passing_runs(fixtures_dir: Path, name: str, level: int | str, tests: int) -> None:
    check = judge_dcgm(_dcgm(fixtures_dir, name), min_level=2)

    assert Verdict.of(check) is Verdict.PASS
    assert figures_of(check)["level"] == level
    assert figures_of(check)["tests"] == tests
    assert check.hint == ""


def test_level_below_acceptance_fails(fixtures_dir: Path) -> None:
    diag = _dcgm(fixtures_dir, "dcgmi_diag_r2_p4de_8xA100_pass_awsome.txt")

    check = judge_dcgm(diag, min_level=3)

    assert Verdict.of(check) is Verdict.FAIL
    assert "level 2" in check.message
    assert "-r 3" in check.hint


def test_dcgmi_error_fails() -> None:
    diag = parse_dcgmi_diag("Error: Unable to complete diagnostic for group 2. Return: (-21) Host engine connection.\n")

    check = judge_dcgm(diag)

    assert Verdict.of(check) is Verdict.FAIL
    assert "did not complete" in check.message
    assert "nv-hostengine" in check.hint


def test_all_skipped_is_skipped(fixtures_dir: Path) -> None:
    diag = _dcgm(fixtures_dir, "dcgmi_diag_r2_p4de_8xA100_pass_awsome.txt")
    skipped = replace(diag, tests=tuple(replace(t, status=DiagStatus.SKIP) for t in diag.tests))

    assert Verdict.of(judge_dcgm(skipped)) is Verdict.SKIPPED


# --- nvidia-smi topo -m -----------------------------------------------------------------


def test_h100_rails_at_pix_pass(fixtures_dir: Path) -> None:
    check = judge_topo(_topo(fixtures_dir, "nvsmi_topo_m_8xH100_8nic_sglang30401.txt"), RAILS)

    assert Verdict.of(check) is Verdict.PASS
    assert figures_of(check)["GPU3"] == "mlx5_3 PIX"


def test_swapped_rails_name_each_gpu_and_distance(fixtures_dir: Path) -> None:
    topo = _topo(fixtures_dir, "nvsmi_topo_m_8xH100_8nic_sglang30401.txt")
    swapped = ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_5", "mlx5_4", "mlx5_6", "mlx5_7"]

    check = judge_topo(topo, swapped)

    assert Verdict.of(check) is Verdict.FAIL
    assert "GPU4 reaches mlx5_5 at NODE" in check.message
    assert "GPU5 reaches mlx5_4 at NODE" in check.message
    assert "GPU0" not in check.message
    assert "GPU4: mlx5_4" in check.hint


def test_a100_pairs_pass_and_storage_nic_as_rail_fails(fixtures_dir: Path) -> None:
    topo = _topo(fixtures_dir, "nvsmi_topo_m_8xA100_10nic_epyc_nps4.txt")

    paired = judge_topo(topo, RAILS)
    storage = judge_topo(topo, ["NIC8", *RAILS[1:]])
    missing = judge_topo(topo, [*RAILS, "mlx5_8"])

    assert Verdict.of(paired) is Verdict.PASS
    assert figures_of(paired)["GPU7"] == "mlx5_7 PXB"
    assert Verdict.of(storage) is Verdict.FAIL
    assert "GPU0 reaches NIC8 at SYS" in storage.message
    assert "GPU8 is not in the matrix" in missing.message


def test_no_rails_is_skipped(fixtures_dir: Path) -> None:
    topo = _topo(fixtures_dir, "nvsmi_capture_h100_80gb_hbm3_590_nvidia_gpu_exporter.txt")

    assert Verdict.of(judge_topo(topo, [])) is Verdict.SKIPPED
    assert judge_topo(topo, ["mlx5_0"]).message.startswith("mlx5_0 (rail of GPU0) is not in the matrix")


# --- ibstat -----------------------------------------------------------------------------


def _port_block(name: str, state: str, phys: str, rate: str) -> str:
    return (
        f"CA '{name}'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tPort 1:\n"
        f"\t\tState: {state}\n\t\tPhysical state: {phys}\n\t\tRate: {rate}\n\t\tLink layer: InfiniBand\n"
    )


def test_ibstat_rails() -> None:
    healthy = "".join(_port_block(rail, "Active", "LinkUp", "400") for rail in RAILS)
    broken = healthy.replace(
        _port_block("mlx5_3", "Active", "LinkUp", "400"), _port_block("mlx5_3", "Down", "Polling", "10")
    ).replace(_port_block("mlx5_5", "Active", "LinkUp", "400"), _port_block("mlx5_5", "Active", "LinkUp", "200"))
    storage = _port_block("mlx5_8", "Active", "LinkUp", "200")

    ok = judge_ibstat(parse_ibstat(healthy + storage), 400, RAILS)
    bad = judge_ibstat(parse_ibstat(broken + storage), 400, RAILS)
    everything = judge_ibstat(parse_ibstat(healthy + storage), 400)
    absent = judge_ibstat(parse_ibstat(healthy), 400, ["mlx5_9"])

    assert Verdict.of(ok) is Verdict.PASS
    assert (figures_of(ok)["ports"], figures_of(ok)["ports_active"]) == (8, 8)
    assert Verdict.of(bad) is Verdict.FAIL
    assert bad.message == "mlx5_3/1 is Down (Polling); mlx5_5/1 runs at 200 Gb/s, expected 400."
    assert "mlxlink" in bad.hint
    assert "subnet manager" in bad.hint
    assert figures_of(bad)["mlx5_5/1"] == "Active LinkUp 200"
    assert Verdict.of(everything) is Verdict.FAIL  # the 200G storage NIC counts when no rails are given
    assert absent.message == "mlx5_9 is not in the ibstat output."
    assert Verdict.of(judge_ibstat(parse_ibstat(healthy), 400, [])) is Verdict.SKIPPED
    states_only = judge_ibstat(parse_ibstat(broken), None, RAILS)
    assert states_only.message == "mlx5_3/1 is Down (Polling)."


# --- fio --------------------------------------------------------------------------------


def test_fio_marks() -> None:
    result = parse_fio_json((DATA / "fio_seq_write_read.json").read_text())

    met = judge_fio(result, read_bw_bytes=900e6, write_bw_bytes=400e6, target="/scratch")
    missed = judge_fio(result, read_bw_bytes=2e9)
    unmarked = judge_fio(result)

    assert Verdict.of(met) is Verdict.PASS
    assert figures_of(met)["read_bw_bytes"] == 1016800969
    assert met.node == "/scratch"
    assert Verdict.of(missed) is Verdict.FAIL
    assert missed.message == "Read 969.7 MiB/s is below the 1907.3 MiB/s mark."
    assert Verdict.of(unmarked) is Verdict.PASS
    assert "no bandwidth mark" in unmarked.message


def test_fio_job_error_fails() -> None:
    result = parse_fio_json((DATA / "fio_write_dev_full_enospc.json").read_text())

    check = judge_fio(result)

    assert Verdict.of(check) is Verdict.FAIL
    assert figures_of(check)["failed_jobs"] == 1
    assert "job write-to-dev-full ended with errno 28" in check.message.lower()
