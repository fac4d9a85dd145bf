"""Nodes leaving the cluster: drained first, removed only once no job runs on them."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterctl.ops.retire import RetireError, drain_and_wait, leaving
from clusterctl.ops.up import slurm_change_action
from clusterctl.pipeline import load_and_validate
from clusterctl.run.events import Event, EventBus
from clusterctl.run.state import StateDir
from clusterctl.slurm.reasons import REMOVE as REASON
from tests.conftest import EXAMPLES
from tests.verify_testkit import ReplayExecutor, drain_command, jobs_command

PLAN = load_and_validate(EXAMPLES / "local.yaml").plan
GONE = ["gpu005", "gpu006"]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _slurm(polls: list[str], drain: tuple[int, str] = (0, "")) -> tuple[ReplayExecutor, list[str]]:
    asked: list[str] = []

    def answer(host: str, command: str) -> tuple[int, str, str]:
        assert host == "login001", host
        asked.append(command)
        if command.startswith("scontrol update"):
            return drain[0], "", drain[1]
        if command == jobs_command(GONE):
            text = polls.pop(0) if len(polls) > 1 else polls[0]
            return (1, "", "squeue: error: Unable to contact slurm controller") if text == "down" else (0, text, "")
        return 127, "", "unexpected"

    return ReplayExecutor(answer), asked


def _bus() -> tuple[EventBus, list[Event]]:
    bus, seen = EventBus(), []
    bus.subscribe(seen.append)
    return bus, seen


def test_leaving_nodes_are_the_recorded_ones_the_plan_lacks() -> None:
    recorded = {n.hostname: "x" for n in PLAN.nodes} | {"gpu006": "x", "gpu005": "x"}
    assert leaving(PLAN, recorded) == ["gpu005", "gpu006"]
    assert leaving(PLAN, {n.hostname: "x" for n in PLAN.nodes}) == []


def test_drains_then_waits_until_their_jobs_end() -> None:
    node, asked = _slurm(["41|gpu005\n42|gpu006\n", "42|gpu006\n", ""])
    clock, (bus, seen) = Clock(), _bus()
    drain_and_wait(PLAN, node, GONE, 600, bus, clock=clock, sleep=clock.sleep)
    assert asked[:2] == [drain_command("gpu005", REASON), drain_command("gpu006", REASON)]
    assert f"reason={REASON}" in asked[0]
    assert len(clock.slept) == 2
    waits = [e.message for e in seen if e.kind == "message"]
    assert waits == [
        "waiting for the jobs on the leaving nodes to end: 41 (gpu005), 42 (gpu006)",
        "waiting for the jobs on the leaving nodes to end: 42 (gpu006)",
    ]


def test_a_node_slurm_does_not_know_has_nothing_to_wait_for() -> None:
    node, _ = _slurm([""], drain=(1, "slurm_update error: Invalid node name specified"))
    clock, (bus, _seen) = Clock(), _bus()
    drain_and_wait(PLAN, node, GONE, 600, bus, clock=clock, sleep=clock.sleep)
    assert clock.slept == []


@pytest.mark.parametrize(
    ("polls", "drain", "message"),
    [
        (["41|gpu005\n"], (0, ""), "1 job(s) still run on gpu005, gpu006 after 60 s: 41 (gpu005). Nothing was removed"),
        ([""], (1, "slurm_update error: Access/permission denied"), "could not drain gpu005 before removing it"),
        (["down"], (0, ""), "cannot tell which jobs run on gpu005, gpu006: squeue on login001 failed"),
    ],
    ids=["jobs-outlast-the-timeout", "drain-refused", "slurm-unreachable"],
)
def test_nothing_is_removed_when_the_nodes_cannot_be_emptied(
    polls: list[str], drain: tuple[int, str], message: str
) -> None:
    node, _ = _slurm(polls, drain)
    clock, (bus, _seen) = Clock(), _bus()
    with pytest.raises(RetireError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        drain_and_wait(PLAN, node, GONE, 60, bus, clock=clock, sleep=clock.sleep)


@pytest.mark.parametrize(
    ("slurm", "changed", "action"),
    [("22.05", True, {"slurm_config_change_action": "restart"}), ("23.11", True, {}), ("22.05", False, {})],
    ids=["22.05-nodes-changed", "23.11-reconfigure-suffices", "22.05-same-nodes"],
)
def test_slurm_restarts_its_daemons_when_nodes_join_or_leave_before_23_11(
    tmp_path: Path, slurm: str, changed: bool, action: dict[str, str]
) -> None:
    plan = PLAN.model_copy(
        update={"cluster": PLAN.cluster.model_copy(update={"versions": PLAN.cluster.versions | {"slurm": slurm}})}
    )
    state = StateDir(tmp_path, plan.cluster.name)
    state.update(slurm_nodes_changed=changed)
    assert slurm_change_action(plan, state) == action
