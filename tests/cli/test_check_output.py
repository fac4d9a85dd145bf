"""``clusterctl check-output``: saved outputs judged against the spec's or the default thresholds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from clusterctl.commands import cli
from tests.conftest import EXAMPLES
from tests.verify_testkit import RAILS, ibstat

DEGRADED = "nccl/nccl_allreduce_2x8H100_ndr_degraded_nccltests290.txt"
P5 = "nccl/nccl_allreduce_2x_p5_awsome.txt"
AWS_P5 = EXAMPLES / "aws-p5.yaml"
ONPREM = EXAMPLES / "onprem-h100-256.yaml"
FIO = Path(__file__).resolve().parents[1] / "unit" / "verify" / "data"


def _run(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, ["check-output", *map(str, args)], catch_exceptions=False)


def _json(*args: str | Path) -> tuple[int, dict]:
    result = _run(*args, "--output", "json")
    return result.exit_code, json.loads(result.stdout)


def test_degraded_ndr_run_fails_the_default_mark(fixtures_dir: Path) -> None:
    result = _run("nccl-tests", fixtures_dir / DEGRADED)

    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0] == f"nccl-tests {fixtures_dir / DEGRADED} (node[005,007]): FAIL"
    assert lines[1] == "  The all_reduce busbw 155.57 GB/s at 8 GiB is below the 338.4 GB/s mark."
    assert "  busbw_gbps: 155.57" in lines
    assert "  avg_busbw_gbps: 142.735" in lines
    assert "thresholds: defaults for 8x H100-SXM-80GB, 8 rails at 400 Gb/s (no --spec)" in lines
    assert "  GPU model: H100-SXM-80GB (read from the output)" in lines
    assert "  nodes: 2 (the rank lines)" in lines


def test_degraded_ndr_run_fails_the_onprem_spec(fixtures_dir: Path) -> None:
    code, data = _json("nccl-tests", fixtures_dir / DEGRADED, "--spec", ONPREM)

    assert code == 1
    assert data["verdict"] == "fail"
    assert data["findings"][0]["data"]["figures"]["threshold_gbps"] == 338.4
    assert data["thresholds"]["source"] == (f"spec {ONPREM}, hardware dgx-h100 (8x H100-SXM-80GB, 8 rails at 400 Gb/s)")


def test_healthy_p5_run_passes_with_the_p5_spec(fixtures_dir: Path) -> None:
    if not AWS_P5.exists():
        pytest.skip("examples/aws-p5.yaml is not in this checkout")
    code, data = _json("nccl-tests", fixtures_dir / P5, "--spec", AWS_P5, "--nodes", "2")

    assert code == 0
    assert data["verdict"] == "pass"
    assert data["findings"][0]["data"]["figures"]["busbw_gbps"] == 487.26
    assert data["findings"][0]["data"]["figures"]["threshold_gbps"] == 250.0
    assert data["thresholds"]["source"] == f"spec {AWS_P5}, hardware p5 (8x H100-SXM-80GB on p5.48xlarge)"
    assert "nodes: 2 (--nodes)" in data["notes"]


@pytest.mark.parametrize(
    "flags",
    [("--platform", "p5.48xlarge", "--nodes", "2"), ("--min-busbw", "250", "--nodes", "2")],
)
def test_healthy_p5_run_passes_explicit_thresholds(fixtures_dir: Path, flags: tuple[str, ...]) -> None:
    code, data = _json("nccl-tests", fixtures_dir / P5, *flags)

    assert code == 0
    assert data["findings"][0]["data"]["figures"]["threshold_gbps"] == 250.0


def test_output_without_ranks_and_without_nodes_is_judged_as_one_node(fixtures_dir: Path) -> None:
    code, data = _json("nccl-tests", fixtures_dir / P5)

    # 487 GB/s also clears the 430 GB/s single-node mark; the note says what was assumed.
    assert code == 0
    assert data["findings"][0]["data"]["figures"]["threshold_gbps"] == 430.0
    assert "no rank lines in the output and no --nodes" in " ".join(data["notes"])


def test_garbage_exits_2_with_the_line(tmp_path: Path, fixtures_dir: Path) -> None:
    text = (fixtures_dir / DEGRADED).read_text().splitlines()
    text[29] = text[29].replace("float", "flaot 1.2.3")
    bad = tmp_path / "bad.txt"
    bad.write_text("\n".join(text) + "\n")

    result = _run("nccl-tests", bad)

    assert result.exit_code == 2
    assert f"error: {bad}: line 30: expected 13 columns in a result row, found 14." in result.stderr
    assert f"   30 | {text[29]}" in result.stderr


def test_garbage_without_any_result_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "garbage.txt"
    bad.write_text("this is not\nan nccl-tests output\n")

    code, data = _json("nccl-tests", bad)

    assert code == 2
    assert {k: data[k] for k in ("command", "ok", "kind", "file", "verdict")} == {
        "command": "check-output",
        "ok": False,
        "kind": "nccl-tests",
        "file": str(bad),
        "verdict": "unreadable",
    }
    ((finding),) = data["findings"]
    assert {k: finding[k] for k in ("code", "level", "rule", "file", "line", "message", "data")} == {
        "code": "INPUT-unreadable",
        "level": "error",
        "rule": "nccl-tests",
        "file": str(bad),
        "line": 2,
        "message": "no nccl-tests result rows found",
        "data": {"text": ""},
    }


def test_dcgm_outputs(fixtures_dir: Path) -> None:
    fail_code, fail = _json("dcgmi-diag", fixtures_dir / "dcgm" / "dcgmi_diag_r3_8xH100_fail_no_fabricmanager.txt")
    pass_code, passed = _json("dcgmi-diag", fixtures_dir / "dcgm" / "dcgmi_diag_r2_p4de_8xA100_pass_awsome.txt")
    h200_code, _ = _json("dcgmi-diag", fixtures_dir / "dcgm" / "dcgmi_diag_r3_8xH200_pass_ramble.txt")
    low_code, low = _json(
        "dcgmi-diag", fixtures_dir / "dcgm" / "dcgmi_diag_r2_p4de_8xA100_pass_awsome.txt", "--level", "3"
    )

    assert (fail_code, fail["verdict"]) == (1, "fail")
    assert "nvidia-fabricmanager" in fail["findings"][0]["hint"]
    assert (pass_code, passed["verdict"]) == (0, "pass")
    assert "GPU model: A100-SXM-80GB (read from the output)" in passed["notes"]
    assert h200_code == 0
    assert low_code == 1
    assert "acceptance needs level 3" in low["findings"][0]["message"]
    assert low["thresholds"]["explicit"] == {"--level": "3"}


def test_topo_against_rails(fixtures_dir: Path) -> None:
    topo = fixtures_dir / "nvidia-smi" / "nvsmi_topo_m_8xH100_8nic_sglang30401.txt"

    ok_code, ok = _json("nvidia-smi-topo", topo, "--rails", ",".join(RAILS))
    spec_code, spec = _json("nvidia-smi-topo", topo, "--spec", ONPREM)
    none_code, none = _json("nvidia-smi-topo", topo)

    assert (ok_code, ok["verdict"]) == (0, "pass")
    # The DGX rail order (mlx5_0, mlx5_3, ...) does not match this machine's NICs.
    assert (spec_code, spec["verdict"]) == (1, "fail")
    assert "GPU1 reaches mlx5_3 at NODE" in spec["findings"][0]["message"]
    assert (none_code, none["verdict"]) == (0, "skipped")


def test_ibstat(tmp_path: Path) -> None:
    good = tmp_path / "ibstat.txt"
    good.write_text(ibstat(RAILS))
    hdr = tmp_path / "ibstat-hdr.txt"
    hdr.write_text(ibstat(RAILS, rate="200"))
    down = tmp_path / "ibstat-down.txt"
    down.write_text(ibstat(RAILS, down=("mlx5_3",)))

    assert _json("ibstat", good)[0] == 0
    code, data = _json("ibstat", hdr)
    assert code == 1
    assert "runs at 200 Gb/s, expected 400" in data["findings"][0]["message"]
    assert _json("ibstat", hdr, "--rate", "200")[0] == 0
    code, data = _json("ibstat", down, "--rails", ",".join(RAILS))
    assert code == 1
    assert data["findings"][0]["message"].startswith("mlx5_3/1 is Down (Polling)")


def test_fio() -> None:
    seq = FIO / "fio_seq_write_read.json"

    assert _json("fio", seq)[0] == 0
    code, data = _json("fio", seq, "--read-bw", "10 GB/s")
    assert code == 1
    assert data["findings"][0]["message"] == "Read 969.7 MiB/s is below the 9536.7 MiB/s mark."
    assert _json("fio", FIO / "fio_write_dev_full_enospc.json")[0] == 1


def test_fio_against_a_spec_tier() -> None:
    code, data = _json("fio", FIO / "fio_seq_write_read.json", "--spec", ONPREM, "--mount", "/lustre/datasets")

    # One node cannot read 60 GB/s: the tier's figure is the whole cluster's.
    assert code == 1
    assert data["findings"][0]["data"]["figures"]["read_threshold_bytes"] == 60e9


def test_bad_options_exit_2(fixtures_dir: Path) -> None:
    bw = _run("fio", FIO / "fio_seq_write_read.json", "--read-bw", "fast")
    mount = _run("fio", FIO / "fio_seq_write_read.json", "--mount", "/x")
    kind = _run("nccl", fixtures_dir / DEGRADED)
    hw = _run("nccl-tests", fixtures_dir / DEGRADED, "--spec", ONPREM, "--hardware", "cpu-1u")

    assert bw.exit_code == 2
    assert "'fast' is not a bandwidth" in bw.stderr
    assert mount.exit_code == 2
    assert "--hardware and --mount need --spec." in mount.stderr
    assert kind.exit_code == 2
    assert hw.exit_code == 2
    assert "'cpu-1u' is not a GPU hardware profile of the spec (dgx-h100)." in hw.stderr


def test_help_lists_the_kinds() -> None:
    result = CliRunner().invoke(cli, ["check-output", "--help"], catch_exceptions=False)

    assert result.exit_code == 0
    assert "{nccl-tests|nccl-debug|dcgmi-diag|nvidia-smi-topo|ibstat|fio}" in "".join(result.stdout.split())


# --- nccl-debug: the transport NCCL chose (real logs, tests/unit/verify/data/nccl_debug) ------------

DEBUG = FIO / "nccl_debug"
GCP_A3MEGA = EXAMPLES / "gcp-a3mega.yaml"
AWS_BURST = EXAMPLES / "aws-burst.yaml"


def test_nccl_debug_wrong_provider_fails_the_p5_spec() -> None:
    log = DEBUG / "ofi_provider_tcp_awsofinccl803.log"
    code, data = _json("nccl-debug", log, "--spec", AWS_P5)

    assert code == 1
    assert data["verdict"] == "fail"
    assert data["findings"][0]["code"] == "nccl.transport"
    assert data["findings"][0]["message"] == (
        "6f2d8a82d208 (pid 1287): aws-ofi-nccl selected libfabric provider tcp, not efa "
        "(line 14: 6f2d8a82d208:1287:1328 [0] NCCL INFO NET/OFI Selected Provider is tcp (found 1 nics))."
    )
    assert data["expected"] == {
        "fabric": "efa",
        "transport": "the aws-ofi-nccl plugin (Libfabric) on libfabric's efa provider",
        "source": f"spec {AWS_P5}, GPU node group gpu: fabric efa",
    }


def test_nccl_debug_renamed_libfabric_passes_the_p5_spec() -> None:
    result = _run("nccl-debug", DEBUG / "ofi_libfabric_p5en_nccl1597.log", "--spec", AWS_P5)

    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == f"nccl-debug {DEBUG / 'ofi_libfabric_p5en_nccl1597.log'}: PASS"
    assert "  networks: Libfabric x2" in lines
    assert lines[-1] == (
        "expected: the aws-ofi-nccl plugin (Libfabric) on libfabric's efa provider "
        f"(fabric efa; spec {AWS_P5}, GPU node group gpu: fabric efa)"
    )


def test_nccl_debug_tcpxo_passes_a3mega_and_a_socket_fallback_fails_it() -> None:
    good, good_data = _json("nccl-debug", DEBUG / "fastrak_2node_a3mega.log", "--spec", GCP_A3MEGA)
    bad, bad_data = _json("nccl-debug", DEBUG / "socket_lo_no_ib_nccl352.log", "--spec", GCP_A3MEGA)

    assert (good, good_data["verdict"]) == (0, "pass")
    assert good_data["findings"][0]["data"]["figures"]["networks"] == "FasTrak x16"
    assert (bad, bad_data["verdict"]) == (1, "fail")
    assert bad_data["findings"][0]["message"].startswith(
        "ds-ml-01-0 (pid 17754 and 1 more process): NCCL fell back to sockets"
    )


def _on_hosts(tmp_path: Path, log: str, hosts: dict[str, str]) -> Path:
    """A real log with its hosts renamed to nodes of the spec (nothing else of it changes)."""
    text = (DEBUG / log).read_text()
    for old, new in hosts.items():
        text = text.replace(f"{old}:", f"{new}:")
    path = tmp_path / log
    path.write_text(text)
    return path


def test_nccl_debug_judges_a_log_by_the_fabric_of_its_node_group(tmp_path: Path) -> None:
    # Two EFA instances (NVIDIA/nccl#1597): on aws-burst.yaml's p5 burst group it passes; the
    # same log from the on-prem InfiniBand group fails there. No --hardware, no --fabric.
    efa = {"8h200-2": "gpu-b001", "8h200-3": "gpu-b002"}
    burst, burst_data = _json(
        "nccl-debug", _on_hosts(tmp_path, "ofi_libfabric_p5en_nccl1597.log", efa), "--spec", AWS_BURST
    )
    (tmp_path / "onprem").mkdir()
    onprem = {"8h200-2": "gpu001", "8h200-3": "gpu002"}
    _, onprem_data = _json(
        "nccl-debug", _on_hosts(tmp_path / "onprem", "ofi_libfabric_p5en_nccl1597.log", onprem), "--spec", AWS_BURST
    )

    assert (burst, burst_data["verdict"], burst_data["expected"]["fabric"]) == (0, "pass", "efa")
    assert "node group gpu-b (gpu-b001, gpu-b002): fabric efa" in burst_data["expected"]["source"]
    assert (onprem_data["verdict"], onprem_data["expected"]["fabric"]) == ("fail", "infiniband")


def test_nccl_debug_socket_fallback_on_a_burst_node_fails(tmp_path: Path) -> None:
    # EC2 without EFA (NVIDIA/nccl#226): the burst group's nodes must use the EFA plugin.
    log = DEBUG / "socket_ec2_no_efa_nccl226.log"
    hosts = sorted({line.split(":", 1)[0] for line in log.read_text().splitlines() if " NCCL " in line})
    renamed = _on_hosts(tmp_path, log.name, {h: f"gpu-b{i % 4 + 1:03d}" for i, h in enumerate(hosts)})
    code, data = _json("nccl-debug", renamed, "--spec", AWS_BURST)

    assert (code, data["expected"]["fabric"]) == (1, "efa")


def test_nccl_debug_log_of_unknown_hosts_asks_which_profile() -> None:
    log = DEBUG / "ib_roce_2node_nccltests185.log"
    unknown = _run("nccl-debug", log, "--spec", AWS_BURST)
    _, burst = _json("nccl-debug", log, "--spec", AWS_BURST, "--hardware", "p5")

    assert unknown.exit_code == 2
    assert "GPU groups are on different fabrics (efa, infiniband); give --hardware or --fabric" in unknown.stderr
    assert burst["expected"]["fabric"] == "efa"
    assert "NCCL used network IB, not the aws-ofi-nccl plugin" in burst["findings"][0]["message"]


def test_nccl_debug_without_spec_fails_only_sockets_and_fabric_flag_works() -> None:
    roce = DEBUG / "ib_roce_2node_nccltests185.log"

    assert _run("nccl-debug", roce).exit_code == 0
    assert _run("nccl-debug", roce, "--fabric", "roce").exit_code == 0
    assert _run("nccl-debug", roce, "--fabric", "infiniband").exit_code == 1
    assert _run("nccl-debug", DEBUG / "socket_ib_disabled_nccl1053.log").exit_code == 1


def test_nccl_debug_one_node_is_intra_node_only() -> None:
    code, data = _json("nccl-debug", DEBUG / "socket_ib_disabled_nccl1053.log", "--nodes", "1")

    assert code == 0
    assert data["verdict"] == "skipped"
    assert data["findings"][0]["message"].startswith("Intra-node only")
    assert data["notes"] == ["nodes: 1 (--nodes)"]


def test_nccl_debug_without_debug_lines_exits_2(tmp_path: Path, fixtures_dir: Path) -> None:
    code, data = _json("nccl-debug", fixtures_dir / DEGRADED)

    assert code == 2
    assert data["verdict"] == "unreadable"
    assert (
        data["findings"][0]["message"]
        == "no NCCL debug lines found (run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET)"
    )


def test_fabric_is_only_for_nccl_debug(fixtures_dir: Path) -> None:
    result = _run("nccl-tests", fixtures_dir / DEGRADED, "--fabric", "efa")

    assert result.exit_code == 2
    assert "--fabric is for nccl-debug." in result.stderr
