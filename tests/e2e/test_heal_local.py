"""`clusterctl heal` on the local cluster: the drain reason's prefix decides, health gates the resume."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from tests.e2e.conftest import LocalCluster, save_artifact

pytestmark = [pytest.mark.e2e, pytest.mark.docker]

OURS, ADMINS, SICK = "gpu002", "gpu003", "gpu001"
LAUNCHER = "login001"


def _state(cluster: LocalCluster, host: str) -> str:
    return cluster.exec(LAUNCHER, f"sinfo -h -n {host} -o %t").stdout.strip()


def _settles(cluster: LocalCluster, host: str, states: tuple[str, ...], timeout_s: float = 90) -> str:
    """The node's state once it is one of ``states`` (a resumed node may show ``idle*`` until slurmd answers)."""
    deadline = time.monotonic() + timeout_s
    while True:
        state = _state(cluster, host)
        if state in states or time.monotonic() > deadline:
            return state
        time.sleep(3)


IN_SERVICE = ("idle", "mix", "alloc")
DRAINED = ("drain", "drng")


def _drain(cluster: LocalCluster, host: str, reason: str) -> None:
    done = cluster.exec(LAUNCHER, f"scontrol update nodename={host} state=drain reason='{reason}'")
    assert done.returncode == 0, done.stderr


def _heal(cluster: LocalCluster, name: str) -> tuple[int, dict[str, str]]:
    result = cluster.cli("heal", str(cluster.spec_path), "--output", "json", timeout=300)
    save_artifact(f"e2e-heal-{name}.json", result.stdout + result.stderr)
    data = json.loads(result.stdout)
    return result.returncode, {f["node"]: f["code"] for f in data["findings"]}


def _drain_three(cluster: LocalCluster, *, sick_by_hand: bool) -> subprocess.CompletedProcess[str]:
    """Drain OURS for verify, ADMINS for an admin's reason, and hide one of SICK's GPU devices
    (SICK drained for verify too when ``sick_by_hand``, else left to its health check)."""
    _drain(cluster, OURS, "clusterctl-verify: e2e: drained by the test")
    _drain(cluster, ADMINS, "bad fan, ticket 4711")
    if sick_by_hand:
        _drain(cluster, SICK, "clusterctl-verify: e2e: drained by the test")
    return cluster.exec(SICK, "mv /dev/nvidia7 /dev/.e2e-nvidia7")


def _reason_settles(cluster: LocalCluster, host: str, prefix: str, timeout_s: float) -> str:
    """The node's drain reason once it starts with ``prefix`` (or the last one read, at the timeout)."""
    deadline = time.monotonic() + timeout_s
    while True:
        reason = cluster.exec(LAUNCHER, f"sinfo -h -n {host} -o %E").stdout.strip()
        if reason.startswith(prefix) or time.monotonic() > deadline:
            return reason
        time.sleep(5)


def _restore(cluster: LocalCluster) -> None:
    """Put the hidden GPU device back and resume the three nodes a test drained."""
    cluster.exec(SICK, "test -e /dev/nvidia7 || mv /dev/.e2e-nvidia7 /dev/nvidia7")
    for host in (OURS, ADMINS, SICK):
        cluster.exec(LAUNCHER, f"scontrol update nodename={host} state=resume")


@pytest.mark.order(65)
def test_heal_resumes_only_healthy_nodes_clusterctl_drained(local_cluster: LocalCluster) -> None:
    hidden = _drain_three(local_cluster, sick_by_hand=False)
    try:
        assert hidden.returncode == 0, hidden.stderr
        # slurmd runs the health check every HealthCheckInterval (60 s on container nodes): it drains SICK.
        reason = _reason_settles(local_cluster, SICK, "clusterctl-health:", timeout_s=150)
        assert reason.startswith("clusterctl-health: gpus: 7 of 8"), reason
        rc, codes = _heal(local_cluster, "sick")
        assert rc == 1
        assert codes == {SICK: "heal.unhealthy", OURS: "heal.resumed", ADMINS: "heal.foreign"}
        assert _settles(local_cluster, OURS, IN_SERVICE) in IN_SERVICE
        assert _state(local_cluster, SICK).rstrip("*") in DRAINED
        assert _state(local_cluster, ADMINS).rstrip("*") in DRAINED

        local_cluster.exec(SICK, "mv /dev/.e2e-nvidia7 /dev/nvidia7").check_returncode()
        rc, codes = _heal(local_cluster, "repaired")
        assert rc == 0
        # slurmd's own periodic health check may have resumed it first (it undoes its own drains).
        assert codes in ({SICK: "heal.resumed", ADMINS: "heal.foreign"}, {ADMINS: "heal.foreign"}), codes
        assert _settles(local_cluster, SICK, IN_SERVICE) in IN_SERVICE
        # The admin's drain is the admin's to lift.
        assert _state(local_cluster, ADMINS).rstrip("*") in DRAINED
    finally:
        _restore(local_cluster)
    assert _settles(local_cluster, ADMINS, IN_SERVICE) in IN_SERVICE


HEAL_KEY = "/etc/clusterctl/heal/id_ed25519"
# As the heal timer connects: its key, the node's host key pinned under the node's name.
HEAL_SSH = (
    f"ssh -i {HEAL_KEY} -o BatchMode=yes -o StrictHostKeyChecking=yes -o GlobalKnownHostsFile=/dev/null"
    " -o UserKnownHostsFile=/etc/clusterctl/heal/known_hosts"
)


@pytest.mark.order(66)
def test_the_controllers_heal_timer_does_what_heal_does(local_cluster: LocalCluster) -> None:
    controller = next(n.hostname for n in local_cluster.plan.nodes if n.role == "controller")
    timer = local_cluster.exec(
        controller, "systemctl is-enabled clusterctl-heal.timer; systemctl is-active clusterctl-heal.timer"
    )
    assert timer.stdout.split() == ["enabled", "active"], timer.stdout + timer.stderr
    # On the nodes the heal key runs the health check, whatever the controller asks for.
    other = local_cluster.exec(
        controller, f"{HEAL_SSH} -o HostKeyAlias={OURS} root@{OURS} 'touch /tmp/e2e-heal-other-command'"
    )
    assert other.returncode == 0, other.stderr
    assert local_cluster.exec(OURS, "test -e /tmp/e2e-heal-other-command").returncode == 1

    hidden = _drain_three(local_cluster, sick_by_hand=True)
    try:
        assert hidden.returncode == 0, hidden.stderr
        # One round as the timer's service runs it, its output read directly.
        round_sick = local_cluster.exec(
            controller, "/usr/local/sbin/clusterctl-slurm heal-round /etc/clusterctl/heal/heal.json", timeout=300
        )
        save_artifact("e2e-heal-timer-sick.log", round_sick.stdout + round_sick.stderr)
        assert round_sick.returncode == 0, round_sick.stderr
        assert f"{OURS}: resumed: its health check passed" in round_sick.stdout
        assert f"{SICK}: stays drained: its health check failed" in round_sick.stdout
        assert f"{ADMINS}: left drained: its reason is not clusterctl's (bad fan, ticket 4711)" in round_sick.stdout
        assert _settles(local_cluster, OURS, IN_SERVICE) in IN_SERVICE
        assert _state(local_cluster, SICK).rstrip("*") in DRAINED
        assert _state(local_cluster, ADMINS).rstrip("*") in DRAINED

        local_cluster.exec(SICK, "mv /dev/.e2e-nvidia7 /dev/nvidia7").check_returncode()
        # The next round through systemd, as the timer starts it.
        round_repaired = local_cluster.exec(
            controller,
            "systemctl start clusterctl-heal.service && systemctl show -p Result --value clusterctl-heal.service",
            timeout=300,
        )
        save_artifact("e2e-heal-timer-repaired.log", round_repaired.stdout + round_repaired.stderr)
        assert round_repaired.returncode == 0, round_repaired.stderr
        assert round_repaired.stdout.strip() == "success"
        assert _settles(local_cluster, SICK, IN_SERVICE) in IN_SERVICE
        assert _state(local_cluster, ADMINS).rstrip("*") in DRAINED
    finally:
        _restore(local_cluster)
    assert _settles(local_cluster, ADMINS, IN_SERVICE) in IN_SERVICE
