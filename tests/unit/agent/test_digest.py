"""The node's digest under a systemd that is still busy: the real command, a scripted systemctl."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from clusterctl.agent.digest import digest_command

# systemctl as a node shows it: a start job queued for the first `jobs_left` reads of the job list,
# slurmd active only once that job is done, and the health timer's sub-state as the test sets it.
SYSTEMCTL = """#!/bin/bash
state={state}
case "$1" in
  list-jobs)
    left=$(cat "$state/jobs_left")
    if [ "$left" -gt 0 ]; then
      echo "1 slurmd.service start running"
      echo $((left - 1)) >"$state/jobs_left"
    fi ;;
  list-units)
    echo "clusterctl-health.timer loaded active $(cat "$state/timer")"
    [ "$(cat "$state/jobs_left")" -eq 0 ] && echo "slurmd.service loaded active running"
    echo "user@0.service loaded active running" ;;
esac
"""


def _node(tmp_path: Path, jobs_left: int, timer: str) -> dict[str, str]:
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    (state / "jobs_left").write_text(f"{jobs_left}\n")
    (state / "timer").write_text(f"{timer}\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    tool = bin_dir / "systemctl"
    tool.write_text(SYSTEMCTL.format(state=state))
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def _digest(tmp_path: Path, env: dict[str, str]) -> str:
    roots = [str(tmp_path / "etc")]
    done = subprocess.run(
        ["bash", "-c", digest_command(roots)], env=env, capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout.strip()


def test_a_service_still_starting_is_waited_for(tmp_path: Path) -> None:
    """Right after an apply slurmd's restart is still a queued job: the digest is the one it will keep."""
    (tmp_path / "etc").mkdir()
    settled = _digest(tmp_path, _node(tmp_path, 0, "waiting"))
    assert _digest(tmp_path, _node(tmp_path, 2, "waiting")) == settled


def test_a_timer_firing_is_no_change(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    waiting = _digest(tmp_path, _node(tmp_path, 0, "waiting"))
    assert _digest(tmp_path, _node(tmp_path, 0, "running")) == waiting


def test_a_file_changed_by_hand_changes_it(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    env = _node(tmp_path, 0, "waiting")
    before = _digest(tmp_path, env)
    (tmp_path / "etc" / "slurm.conf").write_text("edited\n")
    assert _digest(tmp_path, env) != before
