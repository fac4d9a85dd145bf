"""The controller's heal timer: clusterctl.slurm as the render ships it, run the way the service runs it.

The rendered module (health/lib/) runs under ``python3 -I -S``: the standard library and nothing
else, as on a controller without clusterctl. scontrol and ssh are stubs on PATH (the real ones run
in the end-to-end test on the local cluster): each test gives scontrol a node list, ssh an exit
code per address, and reads which nodes scontrol was asked to resume and where ssh connected.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest

from clusterctl.ops.heal import drained, scope
from clusterctl.pipeline import load_and_validate
from clusterctl.plan import Plan
from clusterctl.render import render_files
from clusterctl.render.inventory import group_vars
from clusterctl.slurm import NODE_MODULES
from clusterctl.slurm.heal import TIMER, Verdict, decide
from clusterctl.slurm.nodes import parse_nodes
from clusterctl.slurm.reasons import UPGRADE
from clusterctl.spec import SpecError
from tests.conftest import EXAMPLES
from tests.specs import example_data, write_spec

LOCAL = load_and_validate(EXAMPLES / "local.yaml").plan
ADDRESS = {n.hostname: n.address for n in LOCAL.nodes}
STAMP = "[root@2026-12-03T10:00:00]"


def _node(name: str, state: str, reason: str = "", partitions: str = "gpu", addr: str = "") -> str:
    line = (
        f"NodeName={name} Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUTot=1 Gres=gpu:h100:8 NodeAddr={addr or name} "
        f"NodeHostName={name} State={state} Partitions={partitions}"
    )
    return f"{line} Reason={reason} {STAMP}" if reason else line


NODES = "\n".join(
    [
        _node("gpu001", "IDLE+DRAIN", "clusterctl-verify: nccl: 310 GB/s below 360"),
        _node("gpu002", "IDLE+DRAIN", "bad fan, ticket 4711"),
        _node("gpu003", "MIXED+DRAIN", "clusterctl-health: gpus: 7 of 8 GPU devices in /dev"),
        _node("gpu004", "IDLE+DRAIN", "clusterctl:remove (not in the spec any more)"),
        _node("gpu005", "IDLE+DRAIN", f"{UPGRADE} nvidia_driver 570 -> 575"),
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
    [spare] = parse_nodes(_node("gpu009", "IDLE+DRAIN", "clusterctl-verify: x", partitions="(null)"))

    assert decide(spare, TIMER) is Verdict.OUT_OF_SERVICE
    assert decide(spare, scope(LOCAL, ())) is Verdict.CHECK


@pytest.fixture
def shipped(tmp_path: Path) -> Path:
    """The rendered health/ files of the local example: the module and the timer's config."""
    root = tmp_path / "health"
    for path, text in _files(LOCAL).items():
        target = tmp_path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return root


def _stubs(tmp_path: Path, nodes: str, ssh_rc: dict[str, int], scontrol_rc: int = 0) -> dict[str, str]:
    """scontrol and ssh stubs on PATH; scontrol's updates go to updates.log, ssh's argv (one per line) to ssh.log."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "nodes.txt").write_text(nodes)
    (bin_dir / "scontrol").write_text(
        "#!/bin/sh\n"
        f'[ "$1" = show ] && {{ cat "{tmp_path}/nodes.txt"; exit {scontrol_rc}; }}\n'
        f'echo "$*" >> "{tmp_path}/updates.log"\n'
    )
    cases = "".join(f"        {address}) exit {rc} ;;\n" for address, rc in ssh_rc.items())
    (bin_dir / "ssh").write_text(
        "#!/bin/bash\n"
        f'printf "%s\\n" "$*" >> "{tmp_path}/ssh.log"\n'
        # The address comes before the command, the last argument.
        'host="${@: -2:1}"\n'
        'case "$host" in\n' + cases + "        *) echo unexpected host >&2; exit 99 ;;\nesac\n"
    )
    for stub in bin_dir.iterdir():
        stub.chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)}


def _round(shipped: Path, env: dict[str, str], **config: Any) -> subprocess.CompletedProcess[str]:
    """One round as clusterctl-heal.service runs it, on the shipped module alone (no site-packages)."""
    settings = json.loads((shipped / "heal.json").read_text()) | {"key": str(shipped / "key")} | config
    (shipped / "heal.json").write_text(json.dumps(settings))
    code = (
        f"import sys; sys.path.insert(0, {str(shipped / 'lib')!r}); "
        "from clusterctl.slurm.__main__ import main; "
        f"sys.exit(main(['heal-round', {str(shipped / 'heal.json')!r}]))"
    )
    return subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, env=env, timeout=60, check=False
    )


def _ssh_lines(tmp_path: Path) -> list[str]:
    log = tmp_path / "ssh.log"
    return log.read_text().splitlines() if log.exists() else []


def test_only_healthy_nodes_clusterctl_drained_are_resumed(shipped: Path, tmp_path: Path) -> None:
    env = _stubs(tmp_path, NODES, {ADDRESS["gpu001"]: 0, ADDRESS["gpu003"]: 1})
    done = _round(shipped, env)

    assert done.returncode == 0, done.stderr
    assert (tmp_path / "updates.log").read_text() == "update nodename=gpu001 state=resume\n"
    lines = _ssh_lines(tmp_path)
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


@pytest.mark.parametrize(
    "addr", ["-oProxyCommand=touch${IFS}canary", "-oProxyCommand=touch canary", "--", "10.0.0.1 -oX=y", "gpu001;id"]
)
def test_ssh_goes_to_the_plan_address_whatever_slurm_says(shipped: Path, tmp_path: Path, addr: str) -> None:
    nodes = _node("gpu001", "IDLE+DRAIN", "clusterctl-health: gpus: 7 of 8", addr=addr)
    env = _stubs(tmp_path, nodes, {ADDRESS["gpu001"]: 0})
    done = _round(shipped, env)

    assert done.returncode == 0, done.stderr
    [line] = _ssh_lines(tmp_path)
    assert line.endswith(f"-- {ADDRESS['gpu001']} clusterctl-healthcheck")
    assert "canary" not in line
    assert not (tmp_path / "canary").exists()


def test_a_real_ssh_never_runs_a_proxy_command_from_slurm(shipped: Path, tmp_path: Path) -> None:
    real_ssh = shutil.which("ssh")
    if real_ssh is None:
        pytest.skip("no ssh client on this machine")
    canary = tmp_path / "canary"
    nodes = _node("gpu001", "IDLE+DRAIN", "clusterctl-health: x", addr=f"-oProxyCommand=touch${{IFS}}{canary}")
    env = _stubs(tmp_path, nodes, {})
    (tmp_path / "bin" / "ssh").unlink()
    (tmp_path / "bin" / "ssh").symlink_to(real_ssh)
    # The plan's address of gpu001 is a closed port here: the check fails, the node stays drained.
    done = _round(shipped, env, addresses={"gpu001": "127.0.0.1"}, check_timeout_s=20)

    assert done.returncode == 0, done.stderr
    assert "gpu001: stays drained" in done.stdout
    assert not canary.exists()
    assert not (tmp_path / "updates.log").exists()


@pytest.mark.parametrize("separator", ["\x1e", "\x85", "\u2028", "\x0b", "\x0c", "\x1c"])
def test_a_forged_record_in_an_admins_reason_resumes_nothing(shipped: Path, tmp_path: Path, separator: str) -> None:
    forged = f"keep out{separator}NodeName=gpu002 State=IDLE+DRAIN Partitions=gpu Reason=clusterctl-health: y"
    nodes = _node("gpu002", "IDLE+DRAIN", forged) + "\n" + _node("gpu001", "IDLE")
    env = _stubs(tmp_path, nodes, {ADDRESS["gpu002"]: 0})
    done = _round(shipped, env)

    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "updates.log").exists()
    assert _ssh_lines(tmp_path) == []
    assert "gpu002: left drained (ambiguous" in done.stdout
    assert separator not in done.stdout


def test_a_node_not_in_the_plan_is_never_checked(shipped: Path, tmp_path: Path) -> None:
    env = _stubs(tmp_path, _node("evil001", "IDLE+DRAIN", "clusterctl-verify: x", addr="10.9.9.9"), {"10.9.9.9": 0})
    done = _round(shipped, env)

    assert done.returncode == 0, done.stderr
    assert _ssh_lines(tmp_path) == []
    assert not (tmp_path / "updates.log").exists()
    assert "evil001: stays drained: its health check failed (not a node of this cluster's plan)" in done.stdout


def test_an_unreachable_node_stays_drained(shipped: Path, tmp_path: Path) -> None:
    env = _stubs(tmp_path, _node("gpu001", "IDLE+DRAIN", "clusterctl-verify: x"), {ADDRESS["gpu001"]: 255})
    done = _round(shipped, env)

    assert done.returncode == 0
    assert not (tmp_path / "updates.log").exists()
    assert "gpu001: stays drained: its health check failed (unreachable over SSH" in done.stdout


def test_slurm_unreachable_is_a_failed_round_without_a_traceback(shipped: Path, tmp_path: Path) -> None:
    env = _stubs(tmp_path, "slurm_load_node error: Unable to contact slurm controller\n", {}, scontrol_rc=1)
    done = _round(shipped, env)

    assert done.returncode == 1
    assert "clusterctl-heal: scontrol show node failed: slurm_load_node error" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_shipped_module_is_clusterctls_own() -> None:
    rendered = _files(LOCAL)
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
    timer = _files(_plan(tmp_path, heal_every="30m"))["health/clusterctl-heal.timer"]

    assert "OnUnitInactiveSec=1800\n" in timer
    assert "OnActiveSec=1800\n" in timer
    assert group_vars(_plan(tmp_path, heal_every="30m"))["clusterctl_slurm_heal_timer"] is True


@pytest.mark.parametrize("slurm", [{"heal_every": None}, {"health_check": False}])
def test_no_timer_without_heal_every_or_the_health_check(tmp_path: Path, slurm: dict[str, Any]) -> None:
    plan = _plan(tmp_path, **slurm)

    heal = {"health/heal.json", "health/clusterctl-heal.service", "health/clusterctl-heal.timer"}
    assert heal <= set(_files(LOCAL))
    assert not heal & set(_files(plan))
    assert group_vars(plan)["clusterctl_slurm_heal_timer"] is False


def test_a_period_under_a_minute_is_refused_with_its_location(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"spec\.yaml:\d+:\d+: .*heal_every is 30s; write at least 1m"):
        _plan(tmp_path, heal_every="30s")


def test_the_environment_does_not_redirect_the_shipped_command() -> None:
    launcher = _files(LOCAL)["health/clusterctl-slurm"]

    assert launcher.startswith("#!/usr/bin/python3 -I\n")
    assert os.sep + "usr/local/lib/clusterctl/python" in launcher
