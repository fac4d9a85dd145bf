"""Slurm's records are data: a NodeAddr or a drain reason cannot run a command, forge a record or undo an admin's drain.

Whoever can set a NodeAddr or a reason (a Slurm admin, or root on any node: it holds the munge
key) must not reach a shell, an ssh option or the heal decision. The heal timer runs the module
the render ships (tests/shipped_slurm.py); ``clusterctl heal`` runs through a replaying executor.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from clusterctl.ops.heal import heal
from clusterctl.render.health import HEALTHCHECK_PATH
from tests.shipped_slurm import ADDRESS, LOCAL, heal_round, node_line, ship, ssh_lines, stubs
from tests.verify_testkit import NODES_COMMAND, ReplayExecutor, scontrol_node

# The two ways a reason can carry a second record: a character splitlines() breaks at, and a
# second NodeName record written after it. Slurm itself ends a record at "\n" only.
SEPARATORS = ["\x1e", "\x1c", "\x1d", "\x85", "\u2028", "\u2029", "\x0b", "\x0c"]


@pytest.mark.parametrize(
    "addr",
    ["-oProxyCommand=touch${IFS}canary", "-oProxyCommand=touch canary", "--", "10.0.0.1 -oX=y", "gpu001;id", "-v"],
)
def test_the_heal_timer_connects_to_the_plans_address_whatever_nodeaddr_says(tmp_path: Path, addr: str) -> None:
    shipped = ship(tmp_path)
    env = stubs(
        tmp_path,
        node_line("gpu001", "IDLE+DRAIN", "clusterctl-health: gpus: 7 of 8", addr=addr),
        {ADDRESS["gpu001"]: 0},
    )
    done = heal_round(shipped, env)

    assert done.returncode == 0, done.stderr
    [argv] = ssh_lines(tmp_path)
    assert argv.endswith(f"-- {ADDRESS['gpu001']} clusterctl-healthcheck")
    assert "canary" not in argv
    assert "-o ProxyCommand=none" in argv
    assert not (tmp_path / "canary").exists()


def test_a_real_ssh_never_runs_a_proxy_command_from_slurm(tmp_path: Path) -> None:
    """The finding as it was seen: NodeAddr=-oProxyCommand=... ran the command as root on the controller."""
    real_ssh = shutil.which("ssh")
    if real_ssh is None:
        pytest.skip("no ssh client on this machine")
    shipped = ship(tmp_path)
    canary = tmp_path / "canary"
    nodes = node_line("gpu001", "IDLE+DRAIN", "clusterctl-health: x", addr=f"-oProxyCommand=touch${{IFS}}{canary}")
    env = stubs(tmp_path, nodes, {})
    (tmp_path / "bin" / "ssh").unlink()
    (tmp_path / "bin" / "ssh").symlink_to(real_ssh)
    # The plan's address of gpu001 is a closed port here: the check fails and the node stays drained.
    done = heal_round(shipped, env, addresses={"gpu001": "127.0.0.1"}, check_timeout_s=20)

    assert done.returncode == 0, done.stderr
    assert "gpu001: stays drained" in done.stdout
    assert not canary.exists()
    assert not (tmp_path / "updates.log").exists()


@pytest.mark.parametrize("separator", SEPARATORS)
def test_a_forged_record_in_an_admins_reason_makes_the_timer_resume_nothing(tmp_path: Path, separator: str) -> None:
    shipped = ship(tmp_path)
    forged = f"keep out{separator}NodeName=gpu002 State=IDLE+DRAIN Partitions=gpu Reason=clusterctl-health: y"
    nodes = node_line("gpu002", "IDLE+DRAIN", forged) + "\n" + node_line("gpu001", "IDLE")
    env = stubs(tmp_path, nodes, {ADDRESS["gpu002"]: 0})
    done = heal_round(shipped, env)

    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "updates.log").exists()
    assert ssh_lines(tmp_path) == []
    assert separator not in done.stdout


def test_a_second_record_for_a_drained_node_resumes_nothing(tmp_path: Path) -> None:
    shipped = ship(tmp_path)
    nodes = (
        node_line("gpu002", "IDLE+DRAIN", "keep out") + "\n" + node_line("gpu002", "IDLE+DRAIN", "clusterctl-health: y")
    )
    env = stubs(tmp_path, nodes, {ADDRESS["gpu002"]: 0})
    done = heal_round(shipped, env)

    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "updates.log").exists()
    assert ssh_lines(tmp_path) == []


@pytest.mark.parametrize("separator", SEPARATORS)
def test_clusterctl_heal_never_resumes_a_node_an_admin_drained(separator: str) -> None:
    """The finding as it was seen: a reason carrying a second record for gpu002 made heal resume it."""
    forged = f"keep out{separator}NodeName=gpu002 State=IDLE+DRAIN Partitions=gpu Reason=clusterctl-health: y"
    listing = scontrol_node("gpu001", partitions="gpu") + scontrol_node(
        "gpu002", state="IDLE+DRAIN", reason=forged, partitions="gpu"
    )
    launcher = LOCAL.launcher()

    def answer(host: str, command: str) -> tuple[int, str, str]:
        if command == NODES_COMMAND and host == launcher:
            return 0, listing, ""
        if command == HEALTHCHECK_PATH:
            return 0, "", ""
        return 0, "", ""

    executor = ReplayExecutor(answer)
    findings = heal(LOCAL, executor, launcher)

    assert not executor.commands("scontrol update")
    assert [(h, c) for h, c in executor.calls if c == HEALTHCHECK_PATH] == []
    assert {f.node: f.code for f in findings} == {"gpu002": "heal.ambiguous"}
