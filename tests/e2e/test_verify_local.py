"""`clusterctl verify examples/local.yaml` against the shared local cluster.

Slurm checks run for real and pass; GPU, IB, DCGM and NCCL checks skip ("emulated GPUs"),
time sync skips ("container"). Then a node is made unhealthy (slurmd stopped): verify must
report it at once (well within a minute) and drain it with a ``clusterctl-verify:`` reason,
and the HTML report, opened in headless Chromium, must show every node with its verdict.
The node is restarted and resumed afterwards, so later tests find the cluster whole.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import ARTIFACTS, LocalCluster, run_cli, save_artifact

pytestmark = [pytest.mark.e2e, pytest.mark.docker]

CHROMIUM = "/usr/bin/chromium"
VICTIM = "gpu004"
# Flags for a headless Chromium that touches nothing outside its own temporary profile.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _verify(cluster: LocalCluster, *args: str, timeout: float = 300) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    lock = ("--lock", str(cluster.lock_path)) if cluster.lock_path else ()
    result = run_cli(
        "verify",
        str(cluster.spec_path),
        "--out",
        str(cluster.build_dir),
        "--output",
        "json",
        *lock,
        *args,
        timeout=timeout,
    )
    return result, time.monotonic() - started


# A check's verdict is its finding's level (docs/schemas/report.schema.json).
VERDICT = {"info": "pass", "warning": "skipped", "error": "fail"}


def _results(data: dict[str, Any], name: str) -> dict[str, dict[str, Any]]:
    """The findings of one judgement (``slurm.node``) by node, each with its verdict word."""
    return {f["node"]: {**f, "verdict": VERDICT[f["level"]]} for f in data["findings"] if f["code"] == name}


def _chromium() -> str:
    if Path(CHROMIUM).exists():
        return CHROMIUM
    reason = f"{CHROMIUM} not found (apt-get install -y chromium)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason + " -- it is required under CI")
    pytest.skip(reason)


def _browser(html: Path, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args, html.resolve().as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.order(60)
def test_verify_passes_on_the_healthy_local_cluster(local_cluster: LocalCluster) -> None:
    result, _ = _verify(local_cluster, "--no-drain")
    save_artifact("e2e-verify-healthy.json", result.stdout + result.stderr)

    assert result.returncode == 0, result.stderr[-3000:]
    data = json.loads(result.stdout)
    gpu_nodes = [n.hostname for n in local_cluster.plan.nodes if n.gpus]
    slurm = _results(data, "slurm.node")
    assert {h: slurm[h]["verdict"] for h in gpu_nodes} == dict.fromkeys(gpu_nodes, "pass")
    assert {r["verdict"] for r in _results(data, "slurm.slurmd").values()} == {"pass"}
    assert {r["verdict"] for r in _results(data, "slurm.partition").values()} == {"pass"}
    for name in ("gpu.inventory", "topo.gpu_nic", "ib.ports", "dcgm.diag", "nccl.all_reduce"):
        found = _results(data, name)
        assert found, name
        assert {(r["verdict"], r["message"]) for r in found.values()} == {("skipped", "skipped: emulated GPUs")}
    time_sync = _results(data, "time.sync")
    assert sorted(time_sync) == sorted(n.hostname for n in local_cluster.plan.nodes)
    assert {(r["verdict"], r["message"]) for r in time_sync.values()} == {("skipped", "skipped: container")}
    # Every node was made from its profile's baked image: its packages are the lock's.
    packages = _results(data, "packages.lock")
    assert sorted(packages) == sorted(n.hostname for n in local_cluster.plan.nodes)
    assert {r["verdict"] for r in packages.values()} == {"pass"}, packages
    # Storage runs for real wherever the spec has tiers; none may fail.
    assert all(f["level"] != "error" for f in data["findings"] if f["rule"] == "storage")


@pytest.mark.order(61)
def test_dead_slurmd_is_reported_and_drained(local_cluster: LocalCluster, tmp_path: Path) -> None:
    stopped = local_cluster.exec(VICTIM, "systemctl stop slurmd")
    assert stopped.returncode == 0, stopped.stderr
    try:
        stopped_at = time.monotonic()
        result, _ = _verify(local_cluster, timeout=120)
        reported_after = time.monotonic() - stopped_at
        save_artifact("e2e-verify-dead-slurmd.json", result.stdout + result.stderr)

        assert result.returncode == 1, result.stderr[-3000:]
        # Its time is for people reading the run (speed targets are benchmarks', never a test's).
        save_artifact("e2e-verify-dead-slurmd-seconds.txt", f"{reported_after:.1f}\n")
        data = json.loads(result.stdout)
        assert data["failing_nodes"] == [VICTIM]
        assert _results(data, "slurm.slurmd")[VICTIM]["verdict"] == "fail"
        (drain,) = data["drains"]
        assert drain["host"] == VICTIM
        assert drain["done"], drain
        assert drain["reason"].startswith("clusterctl-verify: slurm.")
        shown = local_cluster.exec("login001", f"scontrol show node {VICTIM}")
        assert "DRAIN" in shown.stdout, shown.stdout
        assert f"Reason={drain['reason']}" in shown.stdout, shown.stdout

        _report_shows_every_node(local_cluster, data, tmp_path)
    finally:
        local_cluster.exec(VICTIM, "systemctl start slurmd")
        _resume(local_cluster)


def _report_shows_every_node(cluster: LocalCluster, data: dict[str, Any], tmp_path: Path) -> None:
    html = Path(data["report"]["html"])
    assert html == cluster.build_dir / "verify" / "report.html"
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "e2e-verify-report.png"
    shot.unlink(missing_ok=True)

    dom = _browser(html, tmp_path / "profile-dom", "--dump-dom")
    picture = _browser(html, tmp_path / "profile-shot", f"--screenshot={shot}", "--window-size=1400,2200")

    assert dom.returncode == 0, dom.stderr[-2000:]
    save_artifact("e2e-verify-report.dom.html", dom.stdout)
    verdicts = {n["hostname"]: n["verdict"] for n in data["nodes"]}
    assert verdicts[VICTIM] == "fail"
    for node in cluster.plan.nodes:
        row = f'data-node="{node.hostname}" data-verdict="{verdicts[node.hostname]}"'
        assert row in dom.stdout, f"{node.hostname} ({verdicts[node.hostname]}) is not in the rendered report"
        assert f'<td class="node">{node.hostname}</td>' in dom.stdout
    assert picture.returncode == 0, picture.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    shutil.copy(html, ARTIFACTS / "e2e-verify-report.html")


def _resume(cluster: LocalCluster, timeout_s: float = 120) -> None:
    """Bring the victim back: slurmd registered again, then the drain lifted."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        cluster.exec("login001", f"scontrol update nodename={VICTIM} state=resume")
        state = cluster.exec("login001", f"sinfo -h -n {VICTIM} -o %t").stdout.strip()
        if state in ("idle", "mix", "alloc"):
            return
        time.sleep(3)
    raise AssertionError(f"{VICTIM} did not come back after the test (sinfo says {state!r})")
