"""``clusterctl verify`` on examples/local.yaml with a fake executor in place of docker exec."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from clusterctl.commands import cli
from clusterctl.pipeline import load_and_validate
from tests.conftest import EXAMPLES
from tests.verify_testkit import ReplayExecutor, Response, scontrol_node, scontrol_partition

LOCAL = EXAMPLES / "local.yaml"
PLAN = load_and_validate(LOCAL).plan


def _local_cluster(dead: str | None = None) -> ReplayExecutor:
    """What the local cluster answers; ``dead`` has its slurmd stopped."""

    def answer(host: str, command: str) -> Response | None:
        if command == "true":
            return 0, "", ""
        if command.startswith("scontrol show node"):
            lines = [
                scontrol_node(n.hostname, state="IDLE*" if n.hostname == dead else "IDLE", partitions="gpu")
                for n in PLAN.nodes
                if n.role == "compute"
            ]
            return 0, "".join(lines), ""
        if command.startswith("scontrol show partition"):
            return 0, scontrol_partition("gpu", "gpu[001-004]"), ""
        if command.startswith("scontrol update"):
            return 0, "", ""
        if command.startswith("systemctl is-active slurmd"):
            return (3, "inactive\n", "") if host == dead else (0, "active\n", "")
        return None

    return ReplayExecutor(answer)


def _verify(monkeypatch: pytest.MonkeyPatch, executor: ReplayExecutor, *args: str) -> Result:
    monkeypatch.setattr("clusterctl.commands.verify.executor_for", lambda plan, state_dir: executor)
    return CliRunner().invoke(cli, ["verify", str(LOCAL), *args], catch_exceptions=False)


def test_healthy_local_cluster_passes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    executor = _local_cluster()

    result = _verify(monkeypatch, executor, "--out", str(tmp_path))

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert (
        "gpu001 pass slurm=pass time=skipped gpu=skipped topo=skipped ib=skipped dcgm=skipped nccl=skipped -- "
        "skipped: container; skipped: emulated GPUs" in lines
    )
    assert "ctl001 skipped time=skipped -- skipped: container" in lines
    assert "local: every check passed or was skipped with a reason." in result.stdout
    assert (tmp_path / "verify" / "report.json").exists()
    assert (tmp_path / "verify" / "report.html").exists()
    assert not executor.commands("scontrol update")
    # Nothing but Slurm runs for real on emulated container nodes.
    assert {cmd.split()[0] for _, cmd in executor.calls} == {"true", "scontrol", "systemctl"}


def test_dead_slurmd_fails_and_is_drained(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    executor = _local_cluster(dead="gpu004")

    result = _verify(monkeypatch, executor, "--out", str(tmp_path), "--output", "json")

    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["failing_nodes"] == ["gpu004"]
    assert data["drains"] == [
        {
            "host": "gpu004",
            "reason": "clusterctl-verify: slurm.node: gpu004 is IDLE+NOT_RESPONDING",
            "done": True,
            "error": "",
        }
    ]
    assert data["report"]["html"] == str(tmp_path / "verify" / "report.html")
    assert executor.commands("scontrol update") == [
        (
            "login001",
            "scontrol update nodename=gpu004 state=drain "
            "'reason=clusterctl-verify: slurm.node: gpu004 is IDLE+NOT_RESPONDING'",
        )
    ]


def test_no_drain_reports_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    executor = _local_cluster(dead="gpu004")

    result = _verify(monkeypatch, executor, "--out", str(tmp_path), "--no-drain")

    assert result.exit_code == 1
    assert not executor.commands("scontrol update")
    assert "not drained (--no-drain): gpu004" in result.stderr
    assert "error: local: 2 checks failed." in result.stderr


def test_only_and_skip(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    executor = _local_cluster()

    result = _verify(
        monkeypatch, executor, "--out", str(tmp_path), "--only", "slurm,time", "--skip", "time", "-o", "json"
    )

    assert result.exit_code == 0
    assert json.loads(result.stdout)["checks"] == ["slurm"]
    bad = _verify(monkeypatch, executor, "--only", "gpus")
    assert bad.exit_code == 2
    assert "Unknown check gpus" in bad.stderr


def test_cluster_not_up(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    executor = ReplayExecutor(lambda host, cmd: (255, "", "Error response from daemon: No such container: x"))

    result = _verify(monkeypatch, executor, "--out", str(tmp_path))

    assert result.exit_code == 1
    assert "login001 is not reachable" in result.stderr
    assert f"is the cluster up? (clusterctl up {LOCAL})" in "".join(result.stderr.split("\n"))
    assert not (tmp_path / "verify").exists()
