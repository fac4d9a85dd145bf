"""`clusterctl heal` on the local cluster: the drain reason's prefix decides, health gates the resume."""

from __future__ import annotations

import json
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


@pytest.mark.order(65)
def test_heal_resumes_only_healthy_nodes_clusterctl_drained(local_cluster: LocalCluster) -> None:
    _drain(local_cluster, OURS, "clusterctl-verify: e2e: drained by the test")
    _drain(local_cluster, ADMINS, "bad fan, ticket 4711")
    _drain(local_cluster, SICK, "clusterctl-verify: e2e: drained by the test")
    hidden = local_cluster.exec(SICK, "mv /dev/nvidia7 /dev/.e2e-nvidia7")
    try:
        assert hidden.returncode == 0, hidden.stderr
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
        local_cluster.exec(SICK, "test -e /dev/nvidia7 || mv /dev/.e2e-nvidia7 /dev/nvidia7")
        for host in (OURS, ADMINS, SICK):
            local_cluster.exec(LAUNCHER, f"scontrol update nodename={host} state=resume")
    assert _settles(local_cluster, ADMINS, IN_SERVICE) in IN_SERVICE
