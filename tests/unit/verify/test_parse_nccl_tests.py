"""parse_nccl_tests on every real nccl-tests output in the shared fixtures, and on edge cases."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from clusterctl.verify.parsers.nccl_tests import parse_nccl_tests
from clusterctl.verify.result import ParseError

# Every nccl-tests text fixture, with the collective the parser should report on its own.
# The all_gather runs print no program name, and all_gather/alltoall share their columns.
EXPECTED_COLLECTIVE = {
    "nccl_allgather_2x_a3mega_gke_ctk.txt": None,
    "nccl_allgather_2x_a3ultra_gke_ctk.txt": None,
    "nccl_allreduce_1x8H100_nvls_nccltests290.txt": "all_reduce",
    "nccl_allreduce_2x8H100_ndr_degraded_nccltests290.txt": "all_reduce",
    "nccl_allreduce_2x8H100_ndr_ring_nccltests290.txt": "all_reduce",
    "nccl_allreduce_2x_p4de_awsome.txt": "all_reduce",
    "nccl_allreduce_2x_p5_awsome.txt": "all_reduce",
    "nccl_allreduce_2x_p5_eks_mpijob_excerpt.txt": "all_reduce",
}


LEGACY_OUTPUT = """\
# nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#
# Using devices
#   Rank  0 Pid  23638 on ip-10-0-26-117 device  0 [0x00] Tesla V100-SXM2-32GB
#   Rank  1 Pid  23638 on ip-10-0-26-117 device  1 [0x00] Tesla V100-SXM2-32GB
#
#                                                     out-of-place                       in-place
#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2   float     sum    59.98    0.00    0.00  2e-07    56.81    0.00    0.00  1e-07
   134217728      33554432   float     sum   1500.0   89.48  156.59  0e+00   1499.0   89.54  156.69  0e+00
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 78.32
"""


def _read(fixtures_dir: Path, name: str) -> str:
    return (fixtures_dir / "nccl" / name).read_text()


def test_every_nccl_fixture_is_covered(fixtures_dir: Path) -> None:
    assert {p.name for p in (fixtures_dir / "nccl").glob("*.txt")} == set(EXPECTED_COLLECTIVE)


@pytest.mark.parametrize("name", sorted(EXPECTED_COLLECTIVE))
def test_every_fixture_parses(fixtures_dir: Path, name: str) -> None:
    result = parse_nccl_tests(_read(fixtures_dir, name))

    assert result.rows
    assert result.collective == EXPECTED_COLLECTIVE[name]
    sizes = [r.size_bytes for r in result.rows]
    assert sizes == sorted(sizes)
    assert all(r.in_place.busbw_gbps >= 0 and r.out_of_place is not None for r in result.rows)


def test_single_node_nvls_run(fixtures_dir: Path) -> None:
    result = parse_nccl_tests(_read(fixtures_dir, "nccl_allreduce_1x8H100_nvls_nccltests290.txt"))

    assert (result.n_threads, result.n_gpus) == (1, 8)
    assert (result.min_bytes, result.max_bytes) == (134217728, 4294967296)
    assert (result.warmup_iters, result.iters, result.validation, result.graph) == (5, 2, True, 0)
    assert result.n_ranks == 8
    assert result.hosts == ("node005",)
    assert result.gpu_names == ("NVIDIA H100 80GB HBM3",)
    assert [r.device for r in result.ranks] == list(range(8))
    assert result.ranks[3].bus_id == "0xc0"
    assert len(result.rows) == 6
    largest = result.largest_row
    assert largest.size_bytes == 4294967296
    assert largest.count == 1073741824
    assert (largest.dtype, largest.redop, largest.root) == ("float", "sum", -1)
    assert largest.out_of_place is not None
    assert largest.out_of_place.busbw_gbps == 473.60
    assert largest.out_of_place.time_us == 15870
    assert largest.in_place.busbw_gbps == 476.53
    assert result.busbw_at_largest_gbps == 476.53
    assert largest.wrong == 0
    assert result.avg_busbw_gbps == 439.369
    assert result.out_of_bounds == 0
    assert result.collective_source == "columns"


def test_two_node_srun_prefixed_run_with_data_check_off(fixtures_dir: Path) -> None:
    result = parse_nccl_tests(_read(fixtures_dir, "nccl_allreduce_2x8H100_ndr_degraded_nccltests290.txt"))

    assert result.n_ranks == 16
    assert result.hosts == ("node005", "node007")
    assert [r.rank for r in result.ranks] == list(range(16))
    assert result.ranks[8].pid == 541703
    assert result.n_gpus == 1
    assert result.validation is False
    assert len(result.rows) == 11
    assert all(r.wrong is None for r in result.rows)  # "#wrong" is N/A
    assert result.largest_row.size_bytes == 8589934592
    assert result.busbw_at_largest_gbps == 155.57  # out of place 155.57, in place 155.56
    assert result.max_busbw_gbps == 167.87  # in place at 256 MiB
    assert result.avg_busbw_gbps == 142.735


def test_ring_run_without_config_line(fixtures_dir: Path) -> None:
    result = parse_nccl_tests(_read(fixtures_dir, "nccl_allreduce_2x8H100_ndr_ring_nccltests290.txt"))

    assert result.n_gpus is None
    assert result.n_ranks == 16
    assert result.busbw_at_largest_gbps == 89.90
    assert result.max_busbw_gbps == 102.27
    assert result.avg_busbw_gbps == 85.5294


def test_aws_excerpts(fixtures_dir: Path) -> None:
    p5 = parse_nccl_tests(_read(fixtures_dir, "nccl_allreduce_2x_p5_awsome.txt"))
    p4de = parse_nccl_tests(_read(fixtures_dir, "nccl_allreduce_2x_p4de_awsome.txt"))

    assert p5.ranks == ()
    assert p5.avg_busbw_gbps is None
    assert len(p5.rows) == 32
    assert p5.rows[0].size_bytes == 8
    assert p5.largest_row.size_bytes == 17179869184
    assert p5.largest_row.out_of_place is not None
    assert p5.largest_row.out_of_place.busbw_gbps == 487.09
    assert p5.largest_row.in_place.busbw_gbps == 487.26
    assert p4de.largest_row.size_bytes == 1073741824
    assert p4de.busbw_at_largest_gbps == 76.86


def test_mpirun_prefix_and_elision(fixtures_dir: Path) -> None:
    result = parse_nccl_tests(_read(fixtures_dir, "nccl_allreduce_2x_p5_eks_mpijob_excerpt.txt"))

    assert [r.size_bytes for r in result.rows] == [
        0,
        67108864,
        134217728,
        268435456,
        536870912,
        1073741824,
        2147483648,
    ]
    assert result.busbw_at_largest_gbps == 437.89
    assert result.avg_busbw_gbps == 52.9753
    assert result.out_of_bounds == 0


def test_all_gather_redop_none(fixtures_dir: Path) -> None:
    mega = parse_nccl_tests(_read(fixtures_dir, "nccl_allgather_2x_a3mega_gke_ctk.txt"))
    ultra = parse_nccl_tests(_read(fixtures_dir, "nccl_allgather_2x_a3ultra_gke_ctk.txt"))

    assert {(r.redop, r.root) for r in mega.rows} == {("none", -1)}
    assert len(mega.rows) == 31
    assert sum(r.size_bytes == 0 for r in mega.rows) == 5
    assert mega.busbw_at_largest_gbps == 188.90
    assert mega.avg_busbw_gbps == 53.8932
    assert len(ultra.rows) == 24
    assert ultra.busbw_at_largest_gbps == 335.67
    assert ultra.avg_busbw_gbps == 120.248
    assert mega.collective is None
    assert mega.collective_source == "unknown"


def test_collective_from_caller_and_from_command_line(fixtures_dir: Path) -> None:
    text = _read(fixtures_dir, "nccl_allgather_2x_a3mega_gke_ctk.txt")

    given = parse_nccl_tests(text, collective="all_gather")
    command = parse_nccl_tests("$ mpirun -np 16 /opt/nccl-tests/build/all_gather_perf -b 0 -e 8G\n" + text)
    banner = parse_nccl_tests("# Collective test starting: alltoall_perf\n" + text, collective="all_gather")

    assert (given.collective, given.collective_source) == ("all_gather", "caller")
    assert (command.collective, command.collective_source) == ("all_gather", "command line")
    assert (banner.collective, banner.collective_source) == ("alltoall", "command line")


def _row(size: int, count: int, redop: str, root: int) -> str:
    timings = "   7000.0  153.39  143.80      0   7000.0  153.39  143.80      0"
    return f"{size:12d}  {count:12d}     float  {redop:>6}  {root:6d}{timings}"


@pytest.mark.parametrize(
    ("row", "collective"),
    [
        # 16 ranks: a per-rank count makes size = count x 4 bytes x 16.
        (_row(1073741824, 16777216, "sum", -1), "reduce_scatter"),
        (_row(1073741824, 268435456, "sum", 0), "reduce"),
        (_row(1073741824, 268435456, "none", 0), "broadcast"),
        (_row(1073741824, 268435456, "none", -1), "sendrecv"),
        (_row(1073741824, 16777216, "none", 0), None),  # gather or scatter
    ],
)
def test_collective_from_columns(row: str, collective: str | None) -> None:
    assert parse_nccl_tests(row + "\n").collective == collective


def test_legacy_layout_without_root_and_with_error_column() -> None:
    # The nccl-tests layout before the root and #wrong columns (written in that format).
    text = LEGACY_OUTPUT

    result = parse_nccl_tests(text)

    assert result.ranks[1].group is None
    assert result.ranks[1].gpu_name == "Tesla V100-SXM2-32GB"
    assert [r.root for r in result.rows] == [None, None]
    assert result.rows[0].in_place.wrong is None
    assert result.rows[0].in_place.max_error == 1e-07
    assert result.busbw_at_largest_gbps == 156.69
    assert result.collective == "all_reduce"


def test_per_iteration_columns_and_timestamp() -> None:
    header = (
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong    i_min    i_max"
        "    i_p99    i_cv%     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%  timestamp"
    )
    row = (
        "  1073741824     268435456     float     sum      -1   4038.8  265.85  465.25       0   4000.1   4100.2"
        "   4090.0     0.50   4043.6  265.54  464.70       0   4001.0   4101.0   4095.0     0.40 2026-11-30 03:46:58"
    )

    result = parse_nccl_tests(header + "\n" + row + "\n")

    assert result.rows[0].out_of_place is not None
    assert result.rows[0].out_of_place.busbw_gbps == 465.25
    assert result.rows[0].in_place.busbw_gbps == 464.70


def test_only_first_task_is_read_when_every_task_prints(fixtures_dir: Path) -> None:
    text = _read(fixtures_dir, "nccl_allreduce_2x_p4de_awsome.txt")
    other_task = "\n".join(line.replace("0: ", "1: ", 1) for line in text.splitlines())

    result = parse_nccl_tests(text + "\n" + other_task)

    assert len(result.rows) == len(parse_nccl_tests(text).rows) == 28


def test_ansi_escapes_carriage_returns_and_nccl_log_lines(fixtures_dir: Path) -> None:
    text = _read(fixtures_dir, "nccl_allreduce_1x8H100_nvls_nccltests290.txt")
    noisy_lines = []
    for line in text.splitlines():
        noisy_lines.append("\x1b[0m" + line + "\x1b[0m\r")
        noisy_lines.append("node005:295203:295203 [0] NCCL INFO comm 0x55d0 rank 0 nRanks 8 - Init COMPLETE\r")

    noisy = parse_nccl_tests("\n".join(noisy_lines))

    assert noisy.rows == tuple(replace(r, line_no=r.line_no * 2 - 1) for r in parse_nccl_tests(text).rows)
    assert noisy.avg_busbw_gbps == 439.369


def test_wrong_elements_are_counted(fixtures_dir: Path) -> None:
    text = _read(fixtures_dir, "nccl_allreduce_1x8H100_nvls_nccltests290.txt")
    bad = text.replace("473.60      0    15773", "473.60     12    15773")

    result = parse_nccl_tests(bad)

    assert result.largest_row.wrong == 12
    assert result.rows[0].wrong == 0


def test_malformed_row_reports_its_line(fixtures_dir: Path) -> None:
    text = _read(fixtures_dir, "nccl_allreduce_2x8H100_ndr_degraded_nccltests290.txt")
    lines = text.splitlines()
    index = next(i for i, line in enumerate(lines) if "8589934592" in line and "155.57" in line)
    lines[index] = lines[index].replace("155.57", "15x.57")

    with pytest.raises(ParseError) as caught:
        parse_nccl_tests("\n".join(lines))

    assert caught.value.line_no == index + 1
    assert caught.value.line == lines[index]
    assert "busbw '15x.57' is not a number" in str(caught.value)


def test_truncated_row_reports_its_line(fixtures_dir: Path) -> None:
    text = _read(fixtures_dir, "nccl_allreduce_2x_p5_awsome.txt")
    lines = text.splitlines()
    lines[10] = lines[10].rsplit(maxsplit=3)[0]  # a job killed mid-line

    with pytest.raises(ParseError) as caught:
        parse_nccl_tests("\n".join(lines))

    assert caught.value.line_no == 11
    assert "expected 13 columns" in caught.value.message


def test_second_table_is_refused(fixtures_dir: Path) -> None:
    text = _read(fixtures_dir, "nccl_allreduce_1x8H100_nvls_nccltests290.txt")
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if "size" in line and "count" in line)
    second_header = len(lines) + header + 1

    with pytest.raises(ParseError) as caught:
        parse_nccl_tests(text + text)

    assert caught.value.line_no == second_header
    assert "second result table" in caught.value.message


def test_text_without_rows() -> None:
    with pytest.raises(ParseError) as caught:
        parse_nccl_tests("srun: error: node005: task 0: Exited with exit code 1\n\n")

    assert caught.value.line_no == 2
    assert caught.value.line == ""
