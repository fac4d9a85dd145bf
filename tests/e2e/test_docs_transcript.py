"""The README's transcript of `clusterctl up examples/local.yaml` and of the first job, against the
real cluster: the lines it shows are the lines `up` prints and the job outputs (the timings and the
elided lines excepted). tests/cli/test_docs_commands.py checks the other documented commands."""

from __future__ import annotations

import re
import shlex

import pytest

from tests.conftest import REPO_ROOT
from tests.e2e.conftest import LocalCluster

pytestmark = [pytest.mark.e2e, pytest.mark.docker]


def _blocks() -> list[list[str]]:
    """The README's fenced code blocks, as lines."""
    blocks: list[list[str]] = []
    current: list[str] | None = None
    for line in (REPO_ROOT / "README.md").read_text().splitlines():
        if line.startswith("```"):
            if current is None:
                current = []
            else:
                blocks.append(current)
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def _transcript(command: str) -> tuple[str, list[str]]:
    """The block that starts with ``$ <command>...``: the command line and the output lines it shows."""
    block = next(b for b in _blocks() if b and b[0].startswith(f"$ {command}"))
    return block[0].removeprefix("$ "), [line for line in block[1:] if line.strip() and line.strip() != "..."]


@pytest.mark.order(10)
def test_the_readme_up_summary_is_what_up_prints(local_cluster: LocalCluster) -> None:
    _, shown = _transcript("clusterctl up examples/local.yaml")
    printed = local_cluster.first_up_output
    # The summary lines (the phase lines carry times and counts of the README's run).
    summary = [line for line in shown if re.match(r"^(Nodes|Partitions|Log in|Emulated GPUs on)\b", line)]
    assert len(summary) == 4
    for line in summary:
        assert line in printed, f"README shows {line!r}; up printed:\n{printed[-3000:]}"
    assert "Cluster local is up (" in printed


@pytest.mark.order(10)
def test_the_readme_first_job_prints_what_it_shows(local_cluster: LocalCluster) -> None:
    command, shown = _transcript("docker exec -it clusterctl-local-login001 srun")
    argv = shlex.split(command)
    assert argv[:4] == ["docker", "exec", "-it", "clusterctl-local-login001"]
    result = local_cluster.exec("login001", shlex.join(argv[4:]), timeout=180)
    assert result.returncode == 0, result.stderr
    assert set(shown) <= set(result.stdout.splitlines()), (shown, result.stdout)
