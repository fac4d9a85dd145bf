"""heal: the drain reason's prefix is the contract; a clusterctl drain is undone only when healthy.

Nodes answer through a replaying executor (`scontrol show node -o` in Slurm 22.05's format, the
health check's exit status), so every branch is driven by what a node would say.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from clusterctl.commands import cli
from clusterctl.ops.heal import HealError, heal
from clusterctl.pipeline import load_and_validate
from clusterctl.render.health import HEALTHCHECK_PATH
from clusterctl.run.state import StateDir
from clusterctl.slurm import reasons
from clusterctl.slurm.reasons import REMOVE as LEAVING
from clusterctl.spec.findings import Level
from clusterctl.verify.base import launcher_host
from tests.cli.test_report_schema import _conforms
from tests.conftest import EXAMPLES
from tests.verify_testkit import NODES_COMMAND, ReplayExecutor, resume_command, scontrol_node

PLAN = load_and_validate(EXAMPLES / "local.yaml").plan
LAUNCHER = launcher_host(PLAN)
DRAINS = {
    "gpu001": ("IDLE+DRAIN", "clusterctl-verify: nccl.all_reduce: bus bandwidth 310 GB/s under 360"),
    "gpu002": ("IDLE+DRAIN", "fan replaced, waiting for burn-in"),
    "gpu003": ("MIXED+DRAIN", "clusterctl-health: gpu: 7 of 8 GPUs present"),
    "gpu004": ("IDLE", ""),
}


def _cluster(healthy: set[str], *, drains: dict[str, tuple[str, str]] = DRAINS, resume_rc: int = 0) -> ReplayExecutor:
    nodes = dict(drains)

    def answer(host: str, command: str) -> tuple[int, str, str]:
        if command == NODES_COMMAND:
            listing = "".join(scontrol_node(h, state=s, reason=r) for h, (s, r) in nodes.items())
            return (0, listing, "") if host == LAUNCHER else (1, "", "not the launcher")
        if command == HEALTHCHECK_PATH:
            if host not in healthy:
                return 1, "", "clusterctl-health: gpu: 7 of 8 GPUs present"
            # Like the real script: a healthy node it drained itself, it resumes itself.
            if nodes[host][1].startswith("clusterctl-health:"):
                nodes[host] = ("IDLE", "")
            return 0, "", ""
        if command.startswith("scontrol update") and host == LAUNCHER:
            return resume_rc, "", "" if resume_rc == 0 else "slurm_update error: Invalid node state specified"
        return 127, "", "unexpected"

    return ReplayExecutor(answer)


def _codes(findings: list) -> dict[str, str]:
    return {f.node: f.code for f in findings}


def test_healthy_clusterctl_drains_are_resumed_and_an_admins_drain_is_not_touched() -> None:
    node = _cluster(healthy={"gpu001", "gpu002", "gpu003"})
    findings = heal(PLAN, node, LAUNCHER)

    assert _codes(findings) == {"gpu001": "heal.resumed", "gpu002": "heal.foreign", "gpu003": "heal.resumed"}
    # gpu003's health check resumed it itself (its own clusterctl-health: drain); only gpu001 needs scontrol.
    assert node.commands("scontrol update") == [(LAUNCHER, resume_command("gpu001"))]
    # The admin's node is never even health-checked; an undrained node neither.
    assert {h for h, c in node.calls if c == HEALTHCHECK_PATH} == {"gpu001", "gpu003"}
    foreign = next(f for f in findings if f.node == "gpu002")
    assert "fan replaced, waiting for burn-in" in foreign.message


def test_a_node_its_health_check_resumed_is_not_resumed_again() -> None:
    node = _cluster(healthy={"gpu001", "gpu003"})
    findings = heal(PLAN, node, LAUNCHER)

    assert _codes(findings) == {"gpu001": "heal.resumed", "gpu002": "heal.foreign", "gpu003": "heal.resumed"}
    assert "resumed by its health check" in next(f for f in findings if f.node == "gpu003").message
    assert node.commands("scontrol update") == [(LAUNCHER, resume_command("gpu001"))]


def test_an_unhealthy_node_stays_drained_with_the_health_checks_reason() -> None:
    node = _cluster(healthy={"gpu001"})
    findings = heal(PLAN, node, LAUNCHER)

    assert _codes(findings)["gpu003"] == "heal.unhealthy"
    assert next(f for f in findings if f.node == "gpu003").level is Level.ERROR
    assert "7 of 8 GPUs present" in next(f for f in findings if f.node == "gpu003").message
    assert (LAUNCHER, resume_command("gpu003")) not in node.calls


def test_dry_run_resumes_nothing() -> None:
    node = _cluster(healthy={"gpu001", "gpu003"})
    findings = heal(PLAN, node, LAUNCHER, dry_run=True)
    assert _codes(findings) == {"gpu001": "heal.ready", "gpu002": "heal.foreign", "gpu003": "heal.ready"}
    assert node.commands("scontrol update") == []


def test_a_resume_scontrol_refuses_is_an_error() -> None:
    node = _cluster(healthy={"gpu001", "gpu003"}, resume_rc=1)
    findings = heal(PLAN, node, LAUNCHER)
    assert _codes(findings)["gpu001"] == "heal.unhealthy"
    assert "Invalid node state" in next(f for f in findings if f.node == "gpu001").message


def test_slurm_unreachable_changes_nothing() -> None:
    node = ReplayExecutor(lambda h, c: (1, "", "slurm_load_node error: Unable to contact slurm controller"))
    with pytest.raises(HealError, match="Unable to contact slurm controller"):
        heal(PLAN, node, LAUNCHER)
    assert node.calls == [(LAUNCHER, NODES_COMMAND)]


def test_a_node_up_is_removing_is_left_drained_and_not_checked() -> None:
    drains = DRAINS | {"gpu004": ("IDLE+DRAIN", f"{LEAVING} (the spec no longer has it)")}
    node = _cluster(healthy={"gpu001", "gpu003", "gpu004"}, drains=drains)
    findings = heal(PLAN, node, LAUNCHER)

    assert _codes(findings)["gpu004"] == "heal.leaving"
    assert ("gpu004", HEALTHCHECK_PATH) not in node.calls
    assert (LAUNCHER, resume_command("gpu004")) not in node.calls


def test_the_command_exits_1_while_a_node_stays_unhealthy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    node = _cluster(healthy={"gpu001"})
    monkeypatch.setattr("clusterctl.commands.heal.executor_for", lambda plan, state: node)
    result = CliRunner().invoke(
        cli, ["heal", str(EXAMPLES / "local.yaml"), "--output", "json", "--state-dir", str(tmp_path)]
    )

    assert result.exit_code == 1
    data = _conforms(result.stdout, "heal")  # docs/schemas/report.schema.json
    assert data["ok"] is False
    assert {f["node"]: f["code"] for f in data["findings"]} == _codes(heal(PLAN, _cluster({"gpu001"}), LAUNCHER))


def test_heal_waits_for_no_one_while_up_holds_the_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    node = _cluster(healthy={"gpu001", "gpu003"})
    monkeypatch.setattr("clusterctl.commands.heal.executor_for", lambda plan, state: node)
    with StateDir(tmp_path, PLAN.cluster.name).lock("up"):
        result = CliRunner().invoke(cli, ["heal", str(EXAMPLES / "local.yaml"), "--state-dir", str(tmp_path)])

    assert result.exit_code == 1
    assert "is busy: clusterctl up" in result.output
    assert "Nothing was changed" in result.output
    assert node.calls == []


def test_reason_prefix_is_the_contract() -> None:
    assert reasons.PREFIX == "clusterctl"
    for reason in ("clusterctl-verify: x", "clusterctl-health: y", "clusterctl:upgrade"):
        assert reasons.ours(reason)
    for reason in ("", "Clusterctl", "admin: clusterctl-verify: x", "maintenance", "\x1b[0mclusterctl-verify: x"):
        assert not reasons.ours(reason)


def test_an_admins_reason_reaches_the_message_without_control_characters() -> None:
    """scontrol's parser cleans every line it reads; the reason comes through as text."""
    drains = {"gpu002": ("IDLE+DRAIN", "fan\x1b[2J broken")}
    findings = heal(PLAN, _cluster(healthy=set(), drains=drains), LAUNCHER)
    (finding,) = findings
    assert "\x1b" not in finding.message
    assert "fan" in finding.message
    assert "broken" in finding.message
