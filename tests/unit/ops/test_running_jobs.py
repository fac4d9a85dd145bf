"""What `down` asks Slurm before destroying a cluster: the jobs holding nodes, or why it could not tell."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterctl.ops import running_jobs as module
from clusterctl.ops.running_jobs import running_jobs
from clusterctl.pipeline import load_and_validate
from clusterctl.slurm.jobs import Jobs, parse_jobs
from tests.conftest import EXAMPLES
from tests.verify_testkit import JOBS_COMMAND, ReplayExecutor

PLAN = load_and_validate(EXAMPLES / "local.yaml").plan


def test_rows_keep_the_id_and_nodes_and_drop_anything_else() -> None:
    text = "\n".join(
        [
            "12|gpu[001-002]",
            "13_4|gpu003",  # an array task
            "14+1|gpu004",  # a heterogeneous job's component
            "15|",  # configuring: no nodes yet
            "16|gpu001 \x1b[31m; rm -rf /",  # not a node list: never echoed
            "squeue: error: something",
        ]
    )
    assert parse_jobs(text) == (("12", "gpu[001-002]"), ("13_4", "gpu003"), ("14+1", "gpu004"), ("15", ""))


def test_describe_names_a_few_and_counts_the_rest() -> None:
    jobs = Jobs(running=tuple((str(i), f"gpu{i:03d}") for i in range(1, 8)))
    assert jobs.describe(2) == "1 (gpu001), 2 (gpu002) and 5 more"
    assert Jobs(running=(("15", ""),)).describe() == "15 (no nodes yet)"


@pytest.mark.parametrize(
    ("rc", "out", "err", "expected"),
    [
        (0, "12|gpu[001-002]\n", "", Jobs(running=(("12", "gpu[001-002]"),))),
        (0, "", "", Jobs()),
        (1, "", "slurm_load_jobs error: Unable to contact slurm controller (connect failure)", None),
    ],
    ids=["one-job", "idle", "controller-down"],
)
def test_running_jobs_asks_squeue_on_the_login_node(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, rc: int, out: str, err: str, expected: Jobs | None
) -> None:
    asked: list[tuple[str, str]] = []

    def answer(host: str, command: str) -> tuple[int, str, str]:
        asked.append((host, command))
        return rc, out, err

    monkeypatch.setattr(module, "executor_for", lambda plan, state_dir: ReplayExecutor(answer))
    jobs = running_jobs(PLAN, tmp_path)
    assert asked == [("login001", JOBS_COMMAND)]
    if expected is not None:
        assert jobs == expected
    else:
        assert not jobs.running
        assert jobs.unknown == f"squeue on login001 failed: {err}"
