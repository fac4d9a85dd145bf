"""node replace / node return against what Slurm and the nodes answer (Slurm 22.05's `scontrol show node -o`)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from clusterctl.commands import cli
from clusterctl.ops.heal import heal
from clusterctl.ops.spares import mark_returned, replace, resume_spare
from clusterctl.pipeline import load_and_validate
from clusterctl.plan.service import Swap, SwapError, read_swaps
from clusterctl.render.health import HEALTHCHECK_PATH
from clusterctl.run.state import SWAPS_KEY, StateDir
from clusterctl.slurm.reasons import REPLACED as REPLACED_REASON
from clusterctl.verify.base import launcher_host
from tests.conftest import EXAMPLES
from tests.verify_testkit import NODES_COMMAND, ReplayExecutor, scontrol_node


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    """examples/local.yaml with five GPU nodes, the last two (gpu004, gpu005) spares."""
    data = yaml.safe_load((EXAMPLES / "local.yaml").read_text())
    next(g for g in data["nodes"] if g["group"] == "gpu").update(count=5, spares=2)
    path = tmp_path / "local.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture
def state(tmp_path: Path) -> StateDir:
    state = StateDir(tmp_path / "state", "local")
    state.write({"status": "up"})
    return state


def _plan(spec: Path, state: StateDir):
    return load_and_validate(spec, state_root=state.root).plan


class Slurm:
    """The controller's node table and the nodes' health checks, changed by the commands sent."""

    def __init__(self, launcher: str, nodes: dict[str, tuple[str, str]], sick: set[str] = frozenset()) -> None:
        self.launcher, self.nodes, self.sick = launcher, dict(nodes), set(sick)
        self.executor = ReplayExecutor(self.answer)

    def answer(self, host: str, command: str) -> tuple[int, str, str]:
        if command == NODES_COMMAND and host == self.launcher:
            return 0, "".join(scontrol_node(h, state=s, reason=r) for h, (s, r) in self.nodes.items()), ""
        if command == HEALTHCHECK_PATH:
            return (1, "", "clusterctl-health: gpu: 7 of 8 GPUs present") if host in self.sick else (0, "", "")
        if command.startswith("scontrol update") and host == self.launcher:
            words = dict(w.split("=", 1) for w in command.split()[2:4])
            name, to = words["nodename"], words["state"]
            base = self.nodes[name][0].split("+")[0]
            reason = command.split("reason=", 1)[1].strip("'") if "reason=" in command else ""
            self.nodes[name] = (f"{base}+DRAIN", reason) if to == "drain" else (base, "")
            return 0, "", ""
        return 127, "", "unexpected"


HEALTHY = {f"gpu00{i}": ("IDLE", "") for i in range(1, 6)}


def test_replace_drains_the_failed_node_and_records_the_spare_on_its_leaf(spec: Path, state: StateDir) -> None:
    plan = _plan(spec, state)
    slurm = Slurm(launcher_host(plan), HEALTHY)
    swap = replace(plan, state, slurm.executor, "gpu003")

    assert swap == Swap("gpu003", "gpu004")
    assert slurm.nodes["gpu003"] == ("IDLE+DRAIN", f"{REPLACED_REASON} by gpu004")
    assert read_swaps(state.read()[SWAPS_KEY]) == [swap]
    assert _plan(spec, state).node("gpu004").in_service


def test_replace_keeps_the_drain_and_reason_already_on_the_node(spec: Path, state: StateDir) -> None:
    plan = _plan(spec, state)
    slurm = Slurm(launcher_host(plan), HEALTHY | {"gpu001": ("DOWN+DRAIN", "Xid 79, GPU fell off the bus")})
    replace(plan, state, slurm.executor, "gpu001")

    assert slurm.executor.commands("scontrol update") == []
    assert slurm.nodes["gpu001"] == ("DOWN+DRAIN", "Xid 79, GPU fell off the bus")


def test_replace_skips_a_spare_slurm_does_not_have_idle(spec: Path, state: StateDir) -> None:
    plan = _plan(spec, state)
    slurm = Slurm(launcher_host(plan), HEALTHY | {"gpu004": ("IDLE+DRAIN", "bad fan")})
    assert replace(plan, state, slurm.executor, "gpu003").spare == "gpu005"


def test_replace_changes_nothing_when_no_spare_is_idle(spec: Path, state: StateDir) -> None:
    plan = _plan(spec, state)
    slurm = Slurm(launcher_host(plan), HEALTHY | {"gpu004": ("DOWN", "Not responding"), "gpu005": ("IDLE+DRAIN", "x")})
    with pytest.raises(SwapError, match=r"gpu004: Slurm state DOWN \(Not responding\), not idle"):
        replace(plan, state, slurm.executor, "gpu003")
    assert slurm.executor.commands("scontrol update") == []
    assert SWAPS_KEY not in state.read()


def test_heal_leaves_a_replaced_node_drained(spec: Path, state: StateDir) -> None:
    plan = _plan(spec, state)
    slurm = Slurm(launcher_host(plan), HEALTHY)
    replace(plan, state, slurm.executor, "gpu002")
    plan = _plan(spec, state)

    findings = heal(plan, slurm.executor, launcher_host(plan))

    assert [(f.node, f.code) for f in findings] == [("gpu002", "heal.replaced")]
    assert slurm.nodes["gpu002"][0] == "IDLE+DRAIN"
    assert (("gpu002", HEALTHCHECK_PATH)) not in slurm.executor.calls


def test_return_of_an_unhealthy_node_records_nothing(spec: Path, state: StateDir) -> None:
    plan = _plan(spec, state)
    slurm = Slurm(launcher_host(plan), HEALTHY, sick={"gpu002"})
    replace(plan, state, slurm.executor, "gpu002")
    before = state.read()[SWAPS_KEY]

    with pytest.raises(SwapError, match="7 of 8 GPUs present"):
        mark_returned(_plan(spec, state), state, slurm.executor, "gpu002")
    assert state.read()[SWAPS_KEY] == before


def test_return_of_a_healthy_node_makes_it_a_spare_and_resumes_it(spec: Path, state: StateDir) -> None:
    plan = _plan(spec, state)
    slurm = Slurm(launcher_host(plan), HEALTHY)
    replace(plan, state, slurm.executor, "gpu002")

    assert mark_returned(_plan(spec, state), state, slurm.executor, "gpu002") == Swap("gpu002", "gpu004", True)
    plan = _plan(spec, state)
    assert plan.node("gpu002").spare
    assert plan.node("gpu004").replaces == "gpu002"
    resume_spare(plan, slurm.executor, "gpu002")
    assert slurm.nodes["gpu002"] == ("IDLE", "")
    # Not drained any more: a second resume sends nothing (scontrol would refuse it).
    sent = len(slurm.executor.commands("scontrol update"))
    resume_spare(plan, slurm.executor, "gpu002")
    assert len(slurm.executor.commands("scontrol update")) == sent


def test_only_a_replaced_node_can_be_returned(spec: Path, state: StateDir) -> None:
    plan = _plan(spec, state)
    slurm = Slurm(launcher_host(plan), HEALTHY)
    with pytest.raises(SwapError, match="was not replaced by a spare"):
        mark_returned(plan, state, slurm.executor, "gpu001")
    assert slurm.executor.calls == []


def test_a_node_that_cannot_be_replaced_is_refused_before_slurm_is_asked(spec: Path, state: StateDir) -> None:
    plan = _plan(spec, state)
    slurm = Slurm(launcher_host(plan), HEALTHY)
    with pytest.raises(SwapError, match="gpu004 is a free spare"):
        replace(plan, state, slurm.executor, "gpu004")
    assert slurm.executor.calls == []


def test_node_replace_without_a_cluster_says_to_bring_it_up(spec: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["node", "replace", str(spec), "gpu001", "--state-dir", str(tmp_path / "none")])
    assert result.exit_code == 1
    assert "has no state" in result.output
    assert "clusterctl up" in result.output
    assert "Traceback" not in result.output
