"""tests/gpu/single_node_checks.py on this machine: stub tools replay real outputs, absent tools skip."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT

SCRIPT = REPO_ROOT / "tests" / "gpu" / "single_node_checks.py"
DEBUG = Path(__file__).parent / "data" / "nccl_debug"


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
        ("nccl.transport", "skipped"),
        ("nccl.transport.container", "skipped"),
    ]
    assert report["results"][4]["message"] == (
        "skipped: no NCCL program here (all_reduce_perf not built, torch with CUDA not installed)"
    )


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
    # A replay of two real recordings: the nccl-tests result table of an 8x H100 node and the
    # NCCL_DEBUG=INFO lines of a one-node run (NVIDIA/nccl#428); the stub notes the debug settings.
    seen = tmp_path / "nccl-debug-env"
    _stub(
        nccl,
        "all_reduce_perf",
        f'echo "$NCCL_DEBUG $NCCL_DEBUG_SUBSYS" > {seen}\n'
        f"cat {fixtures_dir / 'nccl' / 'nccl_allreduce_1x8H100_nvls_nccltests290.txt'}\n"
        f"cat {DEBUG / 'single_node_socket_nccl428.log'}\n",
    )
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
    assert seen.read_text() == "INFO INIT,NET\n"
    # One node: no failure for the socket choice, the verdict says the run stayed on the node.
    assert results["nccl.transport"]["verdict"] == "skipped"
    assert results["nccl.transport"]["message"] == (
        "Intra-node only: the run stayed on one node and used no network (it picked Socket for traffic between nodes)."
    )
    assert results["nccl.transport"]["figures"]["nccl_version"] == "2.8.3"


def test_without_nccl_tests_a_torch_job_gives_the_log(tmp_path: Path) -> None:
    # python3 here stands in for one with torch: it answers the probe, then replays a real
    # one-node log (NVIDIA/nccl#1773) for the job, whose environment it notes.
    seen = tmp_path / "job-env"
    _stub(
        tmp_path,
        "python3",
        'case "$2" in *"import torch; print"*) echo True; exit 0;; esac\n'
        f'echo "$NCCL_DEBUG $NCCL_DEBUG_SUBSYS $3" > {seen}\n'
        f"cat {DEBUG / 'single_node_p2p_nccl1773.log'}\n",
    )

    code, report = _run(f"{tmp_path}:/usr/bin:/bin")

    transport = report["results"][4]
    assert code == 0
    assert transport["verdict"] == "skipped"
    assert transport["message"].startswith("Intra-node only: NCCL connected the GPUs through P2P and used no network")
    assert transport["command"].startswith("python3 -c <torch.distributed all_reduce on every GPU>")
    debug, subsys, port = seen.read_text().split()
    assert (debug, subsys) == ("INFO", "INIT,NET")
    assert 0 < int(port) < 65536


def test_a_run_without_nccl_lines_fails_the_transport_check(tmp_path: Path, fixtures_dir: Path) -> None:
    _stub(tmp_path, "nvidia-smi", "for i in 0 1 2 3 4 5 6 7; do echo 'NVIDIA H100 80GB HBM3, 570.133.20'; done\n")
    nccl = tmp_path / "nccl-tests"
    nccl.mkdir()
    _stub(nccl, "all_reduce_perf", f"cat {fixtures_dir / 'nccl' / 'nccl_allreduce_1x8H100_nvls_nccltests290.txt'}\n")

    code, report = _run(f"{tmp_path}:/usr/bin:/bin", "--nccl-tests", str(nccl))

    transport = {r["check"]: r for r in report["results"]}["nccl.transport"]
    assert code == 1
    assert transport["verdict"] == "fail"
    assert transport["message"].startswith("NCCL printed no debug line: no NCCL debug lines found")


def test_wrong_driver_fails(tmp_path: Path) -> None:
    _stub(tmp_path, "nvidia-smi", "echo 'NVIDIA H100 80GB HBM3, 550.54.15'\n")

    code, report = _run(f"{tmp_path}:/usr/bin:/bin", "--driver-pin", "570.133.20")

    assert code == 1
    assert report["results"][0]["message"] == "Driver 550.54.15 is loaded, the pin is 570.133.20."


def test_the_runner_writes_the_report_where_the_device_tool_collects_it(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = subprocess.run(
        ["bash", str(REPO_ROOT / "tests" / "gpu" / "run.sh")],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "OUT": str(out)},
        timeout=60,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    report = json.loads((out / "single_node_checks.json").read_text())
    assert [r["check"] for r in report["results"]][-2:] == ["nccl.transport", "nccl.transport.container"]


# --- the transport inside a container (pyxis, else enroot) -------------------------------------

SRUN_HELP = "      --container-image=[USER@][REGISTRY#]IMAGE[:TAG]|PATH\n"


def test_the_container_check_skips_without_pyxis_or_enroot(tmp_path: Path) -> None:
    _stub(tmp_path, "srun", 'echo "Usage: srun [OPTIONS(0)...]"\n')  # Slurm without the pyxis plugin

    _, report = _run(f"{tmp_path}:/usr/bin:/bin")

    container = report["results"][5]
    assert (container["check"], container["verdict"]) == ("nccl.transport.container", "skipped")
    assert container["message"] == "skipped: neither srun with pyxis (--container-image) nor enroot here"


def test_the_container_check_runs_the_stock_image_through_pyxis(tmp_path: Path) -> None:
    # srun with pyxis: a real multi-node EFA log (aws/aws-ofi-nccl#715) as what NCCL prints inside.
    args = tmp_path / "srun-args"
    _stub(
        tmp_path,
        "srun",
        f'if [ "$1" = --help ]; then printf %s "{SRUN_HELP}"; exit 0; fi\n'
        f'printf "%s\\n" "$@" > {args}; echo "$NCCL_DEBUG $NCCL_DEBUG_SUBSYS $MASTER_ADDR" >> {args}\n'
        f"cat {DEBUG / 'ofi_cloudwatch_prefix_awsofinccl715.log'}\n",
    )

    code, report = _run(f"{tmp_path}:/usr/bin:/bin", "--fabric", "efa")

    container = report["results"][5]
    assert (code, container["verdict"]) == (0, "pass"), container
    assert container["message"].startswith("In a container of nvcr.io/nvidia/pytorch:24.09-py3: NCCL used")
    sent = args.read_text().splitlines()
    assert "--container-image=nvcr.io#nvidia/pytorch:24.09-py3" in sent
    assert sent[sent.index("-c") - 1] == "python3"
    assert "dist.all_reduce(x)" in args.read_text()
    assert sent[-1] == "INFO INIT,NET 127.0.0.1"


def test_a_socket_fallback_inside_the_container_fails(tmp_path: Path) -> None:
    # enroot without Slurm: import, create, start; the container's NCCL found no IB device (NVIDIA/nccl#952).
    calls = tmp_path / "enroot-calls"
    _stub(
        tmp_path,
        "enroot",
        f'echo "$*" >> {calls}\nif [ "$1" = start ]; then cat {DEBUG / "socket_channels_hpcx_nccl952.log"}; fi\n',
    )

    code, report = _run(
        f"{tmp_path}:/usr/bin:/bin", "--fabric", "infiniband", "--container-image", "ghcr.io/acme/nccl:1"
    )

    container = report["results"][5]
    assert (code, container["verdict"]) == (1, "fail")
    assert container["message"].startswith("In a container of ghcr.io/acme/nccl:1: ")
    assert "NCCL fell back to sockets" in container["message"]
    lines = calls.read_text().splitlines()
    assert lines[0].startswith("import -o ")
    assert lines[0].endswith(" docker://ghcr.io#acme/nccl:1")
    verbs = [line.split()[0] for line in lines if line.startswith(("import -o", "create -n", "start --", "remove -f"))]
    assert verbs == ["import", "create", "start", "remove"]
