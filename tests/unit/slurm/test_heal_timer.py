"""The controller's heal timer: clusterctl.slurm as the render ships it, run the way the service runs it.

tests/shipped_slurm.py runs the rendered module on the standard library alone against stub
scontrol and ssh (the real ones run in the end-to-end test on the local cluster). What hostile
Slurm data cannot make it do is in tests/security/test_slurm_data.py.
"""

from __future__ import annotations

import json
import os
import subprocess
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest

from clusterctl.ops.heal import drained, scope
from clusterctl.pipeline import load_and_validate
from clusterctl.plan import Plan
from clusterctl.render.inventory import group_vars
from clusterctl.slurm import NODE_MODULES
from clusterctl.slurm.heal import TIMER, Verdict, decide
from clusterctl.slurm.nodes import parse_nodes
from clusterctl.slurm.reasons import UPGRADE
from clusterctl.spec import SpecError
from tests.shipped_slurm import ADDRESS, LOCAL, heal_round, health_files, node_line, ship, slurm_tool, ssh_lines, stubs
from tests.specs import example_data, write_spec

NODES = "\n".join(
    [
        node_line("gpu001", "IDLE+DRAIN", "clusterctl-verify: nccl: 310 GB/s below 360"),
        node_line("gpu002", "IDLE+DRAIN", "bad fan, ticket 4711"),
        node_line("gpu003", "MIXED+DRAIN", "clusterctl-health: gpus: 7 of 8 GPU devices in /dev"),
        node_line("gpu004", "IDLE+DRAIN", "clusterctl:remove (not in the spec any more)"),
        node_line("gpu005", "IDLE+DRAIN", f"{UPGRADE} nvidia_driver 570 -> 575"),
        node_line("gpu006", "IDLE+DRAIN", "clusterctl:replaced by gpu009", partitions=""),
        node_line("gpu007", "IDLE+DRAIN+POWERED_DOWN", "clusterctl-burst: resume failed"),
        node_line("gpu008", "ALLOCATED"),
    ]
)


def _plan(tmp_path: Path, **slurm: Any) -> Plan:
    data = example_data("local.yaml")
    data["slurm"].update(slurm)
    return load_and_validate(write_spec(tmp_path, data)).plan


def test_the_timer_and_heal_share_one_decision() -> None:
    decisions = {node.name: decide(node).value for node in parse_nodes(NODES)}

    assert decisions == {
        "gpu001": "check",
        "gpu002": "foreign",
        "gpu003": "check",
        "gpu004": "leaving",
        "gpu005": "upgrading",
        "gpu006": "replaced",
        "gpu007": "cloud",
        "gpu008": "in-service",
    }
    # `clusterctl heal` on the plan's nodes (gpu001-gpu004), nothing being upgraded: the same checks.
    context = scope(LOCAL, upgrading=())
    heal_checks = {n.name for n in drained(parse_nodes(NODES), LOCAL) if decide(n, context) is Verdict.CHECK}
    assert heal_checks == {"gpu001", "gpu003"}


def test_a_node_in_no_partition_is_left_to_heal_on_the_control_machine() -> None:
    [spare] = parse_nodes(node_line("gpu009", "IDLE+DRAIN", "clusterctl-verify: x", partitions="(null)"))

    assert decide(spare, TIMER) is Verdict.OUT_OF_SERVICE
    assert decide(spare, scope(LOCAL, ())) is Verdict.CHECK


@pytest.fixture
def shipped(tmp_path: Path) -> Path:
    """The rendered health/ files of the local example: the module and the timer's config."""
    return ship(tmp_path)


def test_only_healthy_nodes_clusterctl_drained_are_resumed(shipped: Path, tmp_path: Path) -> None:
    env = stubs(tmp_path, NODES, {ADDRESS["gpu001"]: 0, ADDRESS["gpu003"]: 1})
    done = heal_round(shipped, env)

    assert done.returncode == 0, done.stderr
    assert (tmp_path / "updates.log").read_text() == "update nodename=gpu001 state=resume\n"
    lines = ssh_lines(tmp_path)
    assert sorted(line.split()[-2] for line in lines) == sorted([ADDRESS["gpu001"], ADDRESS["gpu003"]])
    for line in lines:
        assert f"-i {shipped / 'key'} -l root" in line
        # The host key pinned under the node's name, nothing trusted on first use; options end before the address.
        assert "-o StrictHostKeyChecking=yes" in line
        assert "-o GlobalKnownHostsFile=/dev/null" in line
        assert "-o ProxyCommand=none" in line
        assert line.split()[-3] == "--"
    assert "gpu001: resumed: its health check passed" in done.stdout
    assert "gpu003: stays drained: its health check failed" in done.stdout
    assert "gpu002: left drained: its reason is not clusterctl's (bad fan, ticket 4711)" in done.stdout


def test_a_node_not_in_the_plan_is_never_checked(shipped: Path, tmp_path: Path) -> None:
    env = stubs(tmp_path, node_line("evil001", "IDLE+DRAIN", "clusterctl-verify: x", addr="10.9.9.9"), {"10.9.9.9": 0})
    done = heal_round(shipped, env)

    assert done.returncode == 0, done.stderr
    assert ssh_lines(tmp_path) == []
    assert not (tmp_path / "updates.log").exists()
    assert "evil001: stays drained: its health check failed (not a node of this cluster's plan)" in done.stdout


def test_an_unreachable_node_stays_drained(shipped: Path, tmp_path: Path) -> None:
    env = stubs(tmp_path, node_line("gpu001", "IDLE+DRAIN", "clusterctl-verify: x"), {ADDRESS["gpu001"]: 255})
    done = heal_round(shipped, env)

    assert done.returncode == 0
    assert not (tmp_path / "updates.log").exists()
    assert "gpu001: stays drained: its health check failed (unreachable over SSH" in done.stdout


def test_slurm_unreachable_is_a_failed_round_without_a_traceback(shipped: Path, tmp_path: Path) -> None:
    env = stubs(tmp_path, "slurm_load_node error: Unable to contact slurm controller\n", {}, scontrol_rc=1)
    done = heal_round(shipped, env)

    assert done.returncode == 1
    assert "clusterctl-heal: scontrol show node failed: slurm_load_node error" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_shipped_module_is_clusterctls_own() -> None:
    rendered = health_files()
    package = files("clusterctl.slurm")
    for name in NODE_MODULES:
        text = rendered[f"health/lib/clusterctl/slurm/{name}"]
        assert text.endswith(package.joinpath(name).read_text().rstrip("\n") + "\n"), name
    # Every shipped module runs on the standard library alone (no import of the rest of clusterctl).
    for name in NODE_MODULES:
        source = package.joinpath(name).read_text()
        assert "from clusterctl" not in source, name
        assert "import clusterctl" not in source, name


def test_the_timer_config_holds_the_plans_addresses(shipped: Path) -> None:
    config = json.loads((shipped / "heal.json").read_text())

    compute = {n.hostname: n.address for n in LOCAL.nodes if n.role == "compute"}
    assert config["addresses"] == compute
    assert "generated by clusterctl" in config["_comment"]


def test_the_timer_period_is_the_specs_heal_every(tmp_path: Path) -> None:
    timer = health_files(_plan(tmp_path, heal_every="30m"))["health/clusterctl-heal.timer"]

    assert "OnUnitInactiveSec=1800\n" in timer
    assert "OnActiveSec=1800\n" in timer
    assert group_vars(_plan(tmp_path, heal_every="30m"))["clusterctl_slurm_heal_timer"] is True


@pytest.mark.parametrize("slurm", [{"heal_every": None}, {"health_check": False}])
def test_no_timer_without_heal_every_or_the_health_check(tmp_path: Path, slurm: dict[str, Any]) -> None:
    plan = _plan(tmp_path, **slurm)

    heal = {"health/heal.json", "health/clusterctl-heal.service", "health/clusterctl-heal.timer"}
    assert heal <= set(health_files())
    assert not heal & set(health_files(plan))
    assert group_vars(plan)["clusterctl_slurm_heal_timer"] is False


def test_a_period_under_a_minute_is_refused_with_its_location(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"spec\.yaml:\d+:\d+: .*heal_every is 30s; write at least 1m"):
        _plan(tmp_path, heal_every="30s")


def test_the_environment_does_not_redirect_the_shipped_command() -> None:
    launcher = health_files()["health/clusterctl-slurm"]

    assert launcher.startswith("#!/usr/bin/python3 -I\n")
    assert os.sep + "usr/local/lib/clusterctl/python" in launcher


def test_the_node_scripts_drain_through_the_module_with_checked_names(tmp_path: Path) -> None:
    tool = slurm_tool(tmp_path)
    env = stubs(tmp_path, node_line("gpu001", "IDLE"), {})
    drained = subprocess.run(
        [str(tool), "drain", "gpu001", "clusterctl-health: gpus: 7 of 8\nState=IDLE"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    refused = subprocess.run(
        [str(tool), "drain", "-oProxyCommand=x", "why"], env=env, capture_output=True, text=True, check=False
    )

    assert drained.returncode == 0, drained.stderr
    assert (tmp_path / "updates.log").read_text() == (
        "update nodename=gpu001 state=drain reason=clusterctl-health: gpus: 7 of 8 State:IDLE\n"
    )
    assert refused.returncode == 2
    assert "is not a node name" in refused.stderr
