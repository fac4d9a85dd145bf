"""tests/gpu/single_node_checks.py on this machine: stub tools replay real outputs, absent tools skip."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT

SCRIPT = REPO_ROOT / "tests" / "gpu" / "single_node_checks.py"


def _stub(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _run(path: str, *args: str) -> tuple[int, dict]:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        env={"PATH": path, "HOME": "/nonexistent"},
        timeout=60,
        check=False,
    )
    return done.returncode, json.loads(done.stdout)


def test_every_check_skips_without_its_tool(tmp_path: Path) -> None:
    code, report = _run(str(tmp_path))

    assert code == 0
    assert [(r["check"], r["verdict"]) for r in report["results"]] == [
        ("gpu.inventory", "skipped"),
        ("topo.gpu_nic", "skipped"),
        ("dcgm.diag", "skipped"),
        ("nccl.all_reduce", "skipped"),
    ]


def test_checks_run_on_replayed_outputs(tmp_path: Path, fixtures_dir: Path) -> None:
    topo = fixtures_dir / "nvidia-smi" / "nvsmi_topo_m_8xH100_8nic_sglang30401.txt"
    _stub(
        tmp_path,
        "nvidia-smi",
        f'if [ "$1" = topo ]; then cat {topo}; exit 0; fi\n'
        + "for i in 0 1 2 3 4 5 6 7; do echo 'NVIDIA H100 80GB HBM3, 570.133.20'; done\n",
    )
    _stub(tmp_path, "dcgmi", f"cat {fixtures_dir / 'dcgm' / 'dcgmi_diag_r3_8xH200_pass_ramble.txt'}\n")
    nccl = tmp_path / "nccl-tests"
    nccl.mkdir()
    _stub(nccl, "all_reduce_perf", f"cat {fixtures_dir / 'nccl' / 'nccl_allreduce_1x8H100_nvls_nccltests290.txt'}\n")
    rails = ",".join(f"mlx5_{i}" for i in range(8))

    code, report = _run(
        f"{tmp_path}:/usr/bin:/bin", "--driver-pin", "570.133.20", "--rails", rails, "--nccl-tests", str(nccl)
    )

    results = {r["check"]: r for r in report["results"]}
    assert code == 0, results
    assert results["gpu.inventory"]["message"] == "8 x NVIDIA H100 80GB HBM3 with driver 570.133.20."
    assert results["topo.gpu_nic"]["verdict"] == "pass"
    assert results["dcgm.diag"]["verdict"] == "pass"
    assert results["nccl.all_reduce"]["verdict"] == "pass"
    assert results["nccl.all_reduce"]["figures"]["threshold_gbps"] == 430.0
    assert results["nccl.all_reduce"]["command"].endswith("all_reduce_perf -b 8M -e 8G -f 2 -g 8 -c 1")


def test_wrong_driver_fails(tmp_path: Path) -> None:
    _stub(tmp_path, "nvidia-smi", "echo 'NVIDIA H100 80GB HBM3, 550.54.15'\n")

    code, report = _run(f"{tmp_path}:/usr/bin:/bin", "--driver-pin", "570.133.20")

    assert code == 1
    assert report["results"][0]["message"] == "Driver 550.54.15 is loaded, the pin is 570.133.20."
