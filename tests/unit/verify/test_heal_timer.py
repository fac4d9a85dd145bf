"""The controller's heal timer (health/clusterctl-heal): the same decisions as `clusterctl heal`.

The rendered script is run by this interpreter against a stub scontrol and a stub ssh on PATH (the
real ones run in the end-to-end test on the local cluster): each test gives scontrol a node list,
ssh an exit code per node, and reads which nodes scontrol was asked to resume.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from tests.conftest import EXAMPLES
from tests.specs import example_data, write_spec

from clusterctl.drain_reasons import OWNED_BY_A_COMMAND
from clusterctl.pipeline import load_and_validate
from clusterctl.plan import Plan
from clusterctl.render import render_files
from clusterctl.render.inventory import group_vars
from clusterctl.run.heal import drained_nodes
from clusterctl.run.retire import UPGRADE_REASON
from clusterctl.spec import SpecError
from clusterctl.verify.parsers.scontrol import parse_scontrol_nodes

LOCAL = load_and_validate(EXAMPLES / "local.yaml").plan
STAMP = "[root@2026-12-03T10:00:00]"


def _node(name: str, state: str, reason: str = "", partitions: str = "gpu") -> str:
    line = (
        f"NodeName={name} Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUTot=1 Gres=gpu:h100:8 NodeAddr={name} "
        f"NodeHostName={name} State={state} Partitions={partitions}"
    )
    return f"{line} Reason={reason} {STAMP}" if reason else line


NODES = "\n".join(
    [
        _node("gpu001", "IDLE+DRAIN", "clusterctl-verify: nccl: 310 GB/s below 360"),
        _node("gpu002", "IDLE+DRAIN", "bad fan, ticket 4711"),
        _node("gpu003", "MIXED+DRAIN", "clusterctl-health: gpus: 7 of 8 GPU devices in /dev"),
        _node("gpu004", "IDLE+DRAIN", "clusterctl:remove (not in the spec any more)"),
        _node("gpu005", "IDLE+DRAIN", f"{UPGRADE_REASON} nvidia_driver 570 -> 575"),
        _node("gpu006", "IDLE+DRAIN", "clusterctl:replaced by gpu009", partitions=""),
        _node("gpu007", "IDLE+DRAIN+POWERED_DOWN", "clusterctl-burst: resume failed"),
        _node("gpu008", "ALLOCATED"),
    ]
)


def _files(plan: Plan) -> dict[str, str]:
    return {f.path: f.text for f in render_files(plan) if f.path.startswith("health/")}


def _plan(tmp_path: Path, **slurm: Any) -> Plan:
    data = example_data("local.yaml")
    data["slurm"].update(slurm)
    return load_and_validate(write_spec(tmp_path, data)).plan


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "clusterctl-heal"
    path.write_text(_files(LOCAL)["health/clusterctl-heal"])
    return path


def _module(script: Path) -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("clusterctl_heal_timer", str(script))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    # dataclasses looks its module up while the class is made.
    sys.modules[loader.name] = module
    try:
        loader.exec_module(module)
    finally:
        del sys.modules[loader.name]
    return module


def test_the_timer_decides_like_heal_for_every_drain_reason(script: Path) -> None:
    timer = _module(script)
    decisions = {node.name: timer.decide(node) for node in timer.parse_nodes(NODES)}

    assert decisions == {
        "gpu001": "check",
        "gpu002": "foreign",
        "gpu003": "check",
        "gpu004": "owned",
        "gpu005": "owned",
        "gpu006": "owned",
        "gpu007": "cloud",
        "gpu008": "in-service",
    }
    # `clusterctl heal` on the plan's nodes (gpu001-gpu004): the same nodes are health-checked.
    drained = drained_nodes(parse_scontrol_nodes(NODES), LOCAL)
    heal_checks = {d.host for d in drained if d.ours and not d.leaving and not d.replaced_by}
    assert heal_checks == {name for name in ("gpu001", "gpu002", "gpu003", "gpu004") if decisions[name] == "check"}
    assert timer.OWNED == OWNED_BY_A_COMMAND


def test_a_node_in_no_partition_is_left_alone(script: Path) -> None:
    timer = _module(script)
    [spare] = timer.parse_nodes(_node("gpu009", "IDLE+DRAIN", "clusterctl-verify: x", partitions="(null)"))

    assert timer.decide(spare) == "out-of-service"


def _stubs(tmp_path: Path, nodes: str, ssh_rc: dict[str, int], scontrol_rc: int = 0) -> dict[str, str]:
    """scontrol and ssh stubs on PATH; scontrol's update calls go to updates.log."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "nodes.txt").write_text(nodes)
    (bin_dir / "scontrol").write_text(
        "#!/bin/sh\n"
        f'[ "$1" = show ] && {{ cat "{tmp_path}/nodes.txt"; exit {scontrol_rc}; }}\n'
        f'echo "$*" >> "{tmp_path}/updates.log"\n'
    )
    cases = "".join(f"        {host}) exit {rc} ;;\n" for host, rc in ssh_rc.items())
    (bin_dir / "ssh").write_text(
        "#!/bin/bash\n"
        f'echo "$*" >> "{tmp_path}/ssh.log"\n'
        # The address comes before the command, the last argument.
        'host="${@: -2:1}"\n'
        'case "$host" in\n' + cases + "        *) echo unexpected host >&2; exit 99 ;;\nesac\n"
    )
    for stub in bin_dir.iterdir():
        stub.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CLUSTERCTL_HEAL_KEY": str(tmp_path / "key")}


def _run(script: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=60, check=False
    )


def test_only_healthy_nodes_clusterctl_drained_are_resumed(script: Path, tmp_path: Path) -> None:
    env = _stubs(tmp_path, NODES, {"gpu001": 0, "gpu003": 1})
    done = _run(script, env)

    assert done.returncode == 0, done.stderr
    assert (tmp_path / "updates.log").read_text() == "update nodename=gpu001 state=resume\n"
    checked = [line.split()[-2] for line in (tmp_path / "ssh.log").read_text().splitlines()]
    assert sorted(checked) == ["gpu001", "gpu003"]
    for line in (tmp_path / "ssh.log").read_text().splitlines():
        assert f"-i {tmp_path / 'key'} -l root" in line
        # The host key pinned under the node's name, nothing trusted on first use.
        assert "-o StrictHostKeyChecking=yes" in line
        assert f"-o HostKeyAlias={line.split()[-2]}" in line
        assert "-o GlobalKnownHostsFile=/dev/null" in line
    assert "gpu001: resumed: its health check passed" in done.stdout
    assert "gpu003: stays drained: its health check failed" in done.stdout
    assert "gpu002: left drained: its reason is not clusterctl's (bad fan, ticket 4711)" in done.stdout


def test_an_unreachable_node_stays_drained(script: Path, tmp_path: Path) -> None:
    env = _stubs(tmp_path, _node("gpu001", "IDLE+DRAIN", "clusterctl-verify: x"), {"gpu001": 255})
    done = _run(script, env)

    assert done.returncode == 0
    assert not (tmp_path / "updates.log").exists()
    assert "gpu001: stays drained: its health check failed (unreachable over SSH" in done.stdout


def test_slurm_unreachable_is_a_failed_round_without_a_traceback(script: Path, tmp_path: Path) -> None:
    env = _stubs(tmp_path, "slurm_load_node error: Unable to contact slurm controller\n", {}, scontrol_rc=1)
    done = _run(script, env)

    assert done.returncode == 1
    assert "clusterctl-heal: scontrol show node failed: slurm_load_node error" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_timer_period_is_the_specs_heal_every(tmp_path: Path) -> None:
    timer = _files(_plan(tmp_path, heal_every="30m"))["health/clusterctl-heal.timer"]

    assert "OnUnitInactiveSec=1800\n" in timer
    assert "OnActiveSec=1800\n" in timer
    assert group_vars(_plan(tmp_path, heal_every="30m"))["clusterctl_slurm_heal_timer"] is True


@pytest.mark.parametrize("slurm", [{"heal_every": None}, {"health_check": False}])
def test_no_timer_without_heal_every_or_the_health_check(tmp_path: Path, slurm: dict[str, Any]) -> None:
    plan = _plan(tmp_path, **slurm)

    heal = {"health/clusterctl-heal", "health/clusterctl-heal.service", "health/clusterctl-heal.timer"}
    assert heal <= set(_files(LOCAL))
    assert not heal & set(_files(plan))
    assert group_vars(plan)["clusterctl_slurm_heal_timer"] is False


def test_a_period_under_a_minute_is_refused_with_its_location(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"spec\.yaml:\d+:\d+: .*heal_every is 30s; write at least 1m"):
        _plan(tmp_path, heal_every="30s")
