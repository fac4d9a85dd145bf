"""`clusterctl status` shows what Slurm, the nodes and the lock say as text: no Rich markup, no terminal sequence.

The finding: node names, Slurm states, reasons, the Slurm version and lock entries went through
Rich as markup, so `[/]` made status exit 70 and `[link=...]` was rendered as a hyperlink.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from clusterctl.commands import cli
from clusterctl.image.lock import Lock, LockedImage, write_lock
from clusterctl.run.state import StateDir
from tests.conftest import EXAMPLES
from tests.verify_testkit import ReplayExecutor, Response, scontrol_node

HOSTILE = [
    "[/]",
    "[link=https://evil.example/]click[/link]",
    "\x1b]8;;https://evil.example/\x07x\x1b]8;;\x07",
    "[bold red]",
]


class _Machines:
    def status(self, plan: Any, state_dir: Path) -> dict[str, str]:
        return {n.hostname: "running" for n in plan.nodes}


def _cluster(text: str) -> ReplayExecutor:
    def answer(host: str, command: str) -> Response | None:
        if command.startswith("scontrol show node"):
            listing = scontrol_node("gpu001", partitions="gpu", state="IDLE+DRAIN", reason=f"fan {text} broken")
            listing += scontrol_node("gpu002", partitions="gpu")
            return 0, listing, ""
        if command.startswith("sinfo --version"):
            return 0, f"slurm 22.05.8 {text}\n", ""
        if command.startswith("dpkg-query"):
            return 0, f"ii \t{text}\t1.0\nii \thello\t2.10-3\n", ""
        if command.startswith("sha256sum"):
            return 0, f"{text} /etc/slurm/slurm.conf\n", ""
        return 0, "", ""

    return ReplayExecutor(answer)


@pytest.mark.parametrize("text", HOSTILE)
def test_status_prints_hostile_strings_as_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    spec = tmp_path / "local.yaml"
    shutil.copy(EXAMPLES / "local.yaml", spec)
    images = {
        p: LockedImage(p, h * 64, "local", f"sha256:{h * 64}", "debian-12", "amd64", {"hello": "2.10-3"})
        for p, h in (("small", "a"), ("emu-h100", "b"))
    }
    write_lock(spec.parent / "clusterctl.lock", Lock("local", "0.1.0", "", "", images))
    StateDir(tmp_path / "state", "local").write({"status": "up"})
    monkeypatch.setattr("clusterctl.ops.status.for_kind", lambda kind: _Machines())
    monkeypatch.setattr("clusterctl.ops.status.executor_for", lambda plan, state_dir: _cluster(text))

    result = CliRunner(env={"COLUMNS": "400"}).invoke(
        cli, ["status", str(spec), "--state-dir", str(tmp_path / "state")]
    )

    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output
    assert "\x07" not in result.output
    if text.startswith("["):
        # The admin's reason is shown as written.
        assert f"fan {text} broken" in result.output, result.output
    assert "Slurm running: 22.05.8;" in result.output
