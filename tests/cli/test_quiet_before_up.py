"""Before `up`, and with -q, commands say little: a status of a cluster that was never brought up,
the Pulumi CLI missing said once, errors only under -q."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from clusterctl.commands import cli
from clusterctl.commands.status import EXIT_NOT_UP
from clusterctl.run.state import StateDir
from tests.conftest import EXAMPLES

ONPREM = str(EXAMPLES / "onprem-h100-256.yaml")


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("spec", [ONPREM, str(EXAMPLES / "aws-p5.yaml")])
def test_status_of_a_cluster_never_brought_up_says_so_in_a_few_lines(tmp_path: Path, spec: str) -> None:
    code, out, err = invoke("status", spec, "--state-dir", str(tmp_path / "state"))
    assert code == EXIT_NOT_UP == 3
    assert "is not up" in out
    assert len((out + err).splitlines()) <= 3
    assert "Pulumi" not in out + err
    code, out, _ = invoke("status", spec, "--state-dir", str(tmp_path / "state"), "-o", "json")
    data = json.loads(out)
    assert (code, data["command"], data["ok"], data["state"]) == (3, "status", False, "not up")


def test_a_missing_pulumi_cli_is_said_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cluster with state whose stack cannot be read: one message, not one per node (35 here)."""
    StateDir(tmp_path / "state", "atlas").write({"status": "up"})
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    code, out, err = invoke("status", ONPREM, "--state-dir", str(tmp_path / "state"))
    assert code == 0
    assert (out + err).count("Pulumi CLI") == 1
    rows = [line for line in out.splitlines() if line.startswith("│ gpu")]
    assert len(rows) == 32
    assert all(" unknown " in row for row in rows)
    assert "drift:" not in out  # machines that could not be read are not drift


def test_quiet_prints_errors_only(tmp_path: Path) -> None:
    # The example has an info finding (GPU004); -q prints nothing but its result.
    code, out, err = invoke("-q", "validate", ONPREM)
    assert (code, out, err) == (0, "", "")
    code, out, err = invoke("-q", "render", ONPREM, "--out", str(tmp_path / "b"))
    assert (code, out, err) == (0, "", "")
    bad = tmp_path / "bad.yaml"
    bad.write_text(Path(ONPREM).read_text().replace('cuda: "12.8"', "cuda: 12.10"))
    code, out, err = invoke("-q", "validate", str(bad))
    assert code == 1
    assert "error[SPEC-value_error]" in err
    assert "run once" not in err  # the note on what did not run is an info


def test_quiet_progress_shows_failures_only() -> None:
    from rich.console import Console

    from clusterctl.progress import attach
    from clusterctl.run.events import Event, EventBus

    console = Console(record=True, width=200)
    bus = EventBus()
    attach(bus, console, "quiet")
    bus.phase("configure")
    bus.emit(Event("host", phase="configure", host="gpu001", status="ok", task="Install slurmd"))
    bus.emit(Event("message", phase="configure", status="warning", message="a warning"))
    bus.emit(Event("host", phase="configure", host="gpu002", status="failed", task="Start slurmd", message="boom"))
    bus.emit(Event("phase_end", phase="configure", status="ok", message="done"))
    lines = console.export_text().splitlines()
    assert len(lines) == 1
    assert "gpu002: FAILED in task 'Start slurmd': boom" in lines[0]
