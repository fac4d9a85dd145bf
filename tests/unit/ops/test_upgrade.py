"""Rolling upgrade: batches drained with `clusterctl:upgrade`, jobs waited for, health-gated resume, resumable.

Slurm answers through a replaying executor that keeps the node table (`scontrol show node -o` in
Slurm 22.05's format), the running jobs (`squeue -w`) and the nodes' health checks, and changes
them as the commands sent would.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import pytest

from clusterctl.ops.heal import heal
from clusterctl.ops.up import _configure
from clusterctl.ops.upgrade import (
    PROGRESS_KEY,
    REASON,
    VERSIONS_KEY,
    Roll,
    batches,
    changed_versions,
    not_upgraded,
    rolling_nodes,
)
from clusterctl.pipeline import load_and_validate
from clusterctl.render.health import HEALTHCHECK_PATH
from clusterctl.run.ansible import ConfigureResult, HostFailure, merged
from clusterctl.run.events import Event, EventBus
from clusterctl.run.providers.base import ProviderError
from clusterctl.run.state import StateDir
from clusterctl.verify.base import launcher_host
from tests.conftest import EXAMPLES
from tests.verify_testkit import NODES_COMMAND, ReplayExecutor, jobs_command, scontrol_node

PLAN = load_and_validate(EXAMPLES / "local.yaml").plan
ONPREM = load_and_validate(EXAMPLES / "onprem-h100-256.yaml").plan
GPUS = ["gpu001", "gpu002", "gpu003", "gpu004"]


class Cluster:
    """Slurm's node table, its jobs (node -> polls left) and the nodes' health, changed by the commands sent."""

    def __init__(self, plan, *, jobs=None, sick=(), drained=None) -> None:
        self.plan, self.launcher = plan, launcher_host(plan)
        hosts = [n.hostname for n in plan.nodes if n.role == "compute"]
        self.nodes = {h: ["IDLE", "", "2026-11-30T03:00:00"] for h in hosts}
        for host, reason in (drained or {}).items():
            self.nodes[host] = ["IDLE+DRAIN", reason, "2026-11-30T03:00:00"]
        self.jobs = dict(jobs or {})
        self.sick = set(sick)
        self.log: list[str] = []
        self.executor = ReplayExecutor(self.answer)

    def answer(self, host: str, command: str) -> tuple[int, str, str]:
        if command == NODES_COMMAND:
            text = "".join(
                scontrol_node(h, state=s, reason=r).replace("BootTime=2026-11-30T03:00:00", f"BootTime={b}")
                for h, (s, r, b) in self.nodes.items()
            )
            return 0, text, ""
        if command.startswith(jobs_command()):
            wanted = command.split(" -w ", 1)[1].strip("'").split(",")
            rows = []
            for i, node in enumerate(wanted):
                if self.jobs.get(node, 0) > 0:
                    self.jobs[node] -= 1
                    rows.append(f"{100 + i}|{node}")
            return 0, "\n".join(rows), ""
        if command == HEALTHCHECK_PATH:
            self.log.append(f"health {host}")
            return (1, "", "clusterctl-health: gpu: 7 of 8 GPUs present") if host in self.sick else (0, "", "")
        if command.startswith("scontrol update"):
            name = re.search(r"nodename=(\S+)", command)[1]
            base = self.nodes[name][0].split("+")[0]
            if "state=drain" in command:
                self.nodes[name][:2] = [f"{base}+DRAIN", command.split("reason=", 1)[1].strip("'")]
                self.log.append(f"drain {name}")
            else:
                self.nodes[name][:2] = [base if base != "DOWN" else "IDLE", ""]
                self.log.append(f"resume {name}")
            return 0, "", ""
        if command.startswith("scontrol reboot"):
            for name in command.split()[-1].strip("'").split(","):
                self.nodes[name] = ["DOWN", REASON, "2026-12-03T10:00:00"]
                self.log.append(f"reboot {name}")
            return 0, "", ""
        return 127, "", "unexpected"

    def converge(self, hosts: list[str]) -> ConfigureResult:
        self.log.append(f"converge {','.join(hosts)}")
        for host in hosts:
            assert self.nodes[host][0].endswith("+DRAIN") or self.nodes[host][0] == "DOWN", f"{host} not drained"
            assert not self.jobs.get(host), f"{host} converged while its job ran"
        return ConfigureResult(status="successful", rc=0, changed=dict.fromkeys(hosts, 2))


@pytest.fixture
def state(tmp_path: Path) -> StateDir:
    state = StateDir(tmp_path / "state", PLAN.cluster.name)
    state.write({VERSIONS_KEY: dict(PLAN.cluster.versions) | {"nccl": "2.21.5"}})
    return state


def _roll(cluster: Cluster, state: StateDir, **options) -> tuple[Roll, list[Event]]:
    bus, seen = EventBus(), []
    bus.subscribe(seen.append)
    clock = iter(range(0, 10**6, 5))
    return (
        Roll(
            cluster.plan,
            state,
            cluster.executor,
            bus,
            cluster.converge,
            clock=lambda: next(clock),
            sleep=lambda _s: None,
            **options,
        ),
        seen,
    )


def _nodes(plan, hosts):
    return [plan.node(h) for h in hosts]


def test_changed_versions_need_a_record() -> None:
    assert changed_versions(None, {"nccl": "2.26.2"}) == {}
    assert changed_versions({"nccl": "2.21.5", "cuda": "12.8"}, {"nccl": "2.26.2", "cuda": "12.8"}) == {
        "nccl": ("2.21.5", "2.26.2")
    }


def test_batches_are_ten_percent_or_one_su_or_what_is_asked() -> None:
    gpus = _nodes(PLAN, GPUS)
    assert batches(gpus, None) == [["gpu001"], ["gpu002"], ["gpu003"], ["gpu004"]]
    assert batches(gpus, 3) == [["gpu001", "gpu002", "gpu003"], ["gpu004"]]
    compute = [n for n in ONPREM.nodes if n.role == "compute" and n.in_service]
    by_su = batches(compute, None)
    assert len(by_su) == len({n.su for n in compute})
    assert all(len({ONPREM.node(h).su for h in batch}) == 1 for batch in by_su)


def test_only_compute_nodes_in_service_made_before_roll() -> None:
    rolling = rolling_nodes(PLAN, ["ctl001", "login001", "gpu001", "gpu002", "gpu003"])
    assert [n.hostname for n in rolling] == ["gpu001", "gpu002", "gpu003"]


def test_the_roll_goes_one_node_at_a_time_and_waits_for_the_running_job(state: StateDir) -> None:
    cluster = Cluster(PLAN, jobs={"gpu002": 3})
    roll, events = _roll(cluster, state)

    result = roll.run(_nodes(PLAN, GPUS), None)

    assert result.ok
    assert result.done == GPUS
    per_node = [[line for line in cluster.log if line.endswith(h) or line.endswith(f" {h}")] for h in GPUS]
    assert per_node[1] == ["drain gpu002", "converge gpu002", "health gpu002", "resume gpu002"]
    # One node out of service at a time: each is resumed before the next is drained.
    assert cluster.log.index("resume gpu001") < cluster.log.index("drain gpu002")
    assert cluster.log.index("resume gpu003") < cluster.log.index("drain gpu004")
    assert any("waiting for the jobs on the batch to end: 100 (gpu002)" in e.message for e in events)
    assert all(s == "IDLE" for s, _r, _b in cluster.nodes.values())
    assert state.read().get(PROGRESS_KEY) is None


def test_a_failed_health_check_stops_the_roll_and_the_next_up_goes_on(state: StateDir) -> None:
    cluster = Cluster(PLAN, sick={"gpu002"})
    roll, _ = _roll(cluster, state)

    result = roll.run(_nodes(PLAN, GPUS), None)

    assert not result.ok
    assert "health check failed on gpu002" in result.stopped
    assert cluster.nodes["gpu002"][:2] == ["IDLE+DRAIN", REASON]
    assert "drain gpu003" not in cluster.log
    assert state.read()[PROGRESS_KEY]["done"] == ["gpu001"]

    cluster.sick.clear()
    again, _ = _roll(cluster, state)
    assert again.run(_nodes(PLAN, GPUS), None).ok
    converged = [line for line in cluster.log if line.startswith("converge")]
    assert converged == ["converge gpu001", "converge gpu002", "converge gpu002", "converge gpu003", "converge gpu004"]


def test_jobs_that_outlast_the_drain_timeout_stop_the_roll_before_anything_changes_there(state: StateDir) -> None:
    cluster = Cluster(PLAN, jobs={"gpu001": 10**6})
    roll, _ = _roll(cluster, state, drain_timeout=60)

    result = roll.run(_nodes(PLAN, GPUS), None)

    assert "still run on gpu001 after 60 s" in result.stopped
    assert not any(line.startswith("converge") for line in cluster.log)
    assert cluster.nodes["gpu001"][:2] == ["IDLE+DRAIN", REASON]


def test_a_node_an_admin_drained_is_upgraded_and_left_drained(state: StateDir) -> None:
    cluster = Cluster(PLAN, drained={"gpu003": "bad fan, ticket 4711"})
    roll, _ = _roll(cluster, state)

    assert roll.run(_nodes(PLAN, GPUS), None).ok
    assert "converge gpu003" in cluster.log
    assert "resume gpu003" not in cluster.log
    assert cluster.nodes["gpu003"][:2] == ["IDLE+DRAIN", "bad fan, ticket 4711"]


def test_a_driver_change_reboots_real_nodes_through_slurm_and_resumes_them_after_the_health_check(
    tmp_path: Path,
) -> None:
    state = StateDir(tmp_path / "state", ONPREM.cluster.name)
    state.write({VERSIONS_KEY: dict(ONPREM.cluster.versions) | {"nvidia_driver": "550.127.08"}})
    cluster = Cluster(ONPREM)
    roll, _ = _roll(cluster, state, reboot=True)
    hosts = ["gpu001", "gpu002"]

    assert roll.run(_nodes(ONPREM, hosts), 2).ok
    assert cluster.log == [
        "drain gpu001",
        "drain gpu002",
        "converge gpu001,gpu002",
        "reboot gpu001",
        "reboot gpu002",
        "health gpu001",
        "health gpu002",
        "resume gpu001",
        "resume gpu002",
    ]


def test_up_converges_the_other_nodes_first_then_rolls(state: StateDir) -> None:
    """The pushed nodes first, then the pulling nodes told the new bundle one batch at a time: the
    nodes still to roll are held at the bundle they had (and a batch is drained when it gets its own)."""
    cluster = Cluster(PLAN)
    pushed: list[list[str] | None] = []
    holds: list[list[str]] = []

    def push(hosts: list[str] | None) -> ConfigureResult:
        pushed.append(hosts)
        return ConfigureResult("ok", 0)

    def pull(hold: set[str]) -> ConfigureResult:
        holds.append(sorted(hold))
        now = sorted(set(GPUS) - hold - {h for batch in holds[:-1] for h in set(GPUS) - set(batch)})
        return cluster.converge(now) if now else ConfigureResult("ok", 0)

    result, stopped = _configure(
        PLAN, state, cluster.executor, EventBus(), push, pull, None, _nodes(PLAN, GPUS), GPUS, None, 600
    )
    assert stopped == ""
    assert pushed == [["all"]]
    assert holds == [GPUS, GPUS[1:], GPUS[2:], GPUS[3:], []]
    assert result.changed == dict.fromkeys(GPUS, 2)


def test_merged_runs_keep_every_failure_and_the_first_error() -> None:
    runs = [
        ConfigureResult("successful", 0, changed={"a": 1}),
        ConfigureResult("failed", 2, changed={"a": 1}, failures=[HostFailure("b", "t", "boom")]),
    ]
    total = merged(runs)
    assert total.rc == 2
    assert total.changed == {"a": 2}
    assert [f.host for f in total.failures] == ["b"]


def test_heal_leaves_the_nodes_an_upgrade_under_way_has_not_reached(state: StateDir) -> None:
    cluster = Cluster(PLAN, jobs={"gpu001": 10**6}, sick={"gpu003"})
    roll, _ = _roll(cluster, state, drain_timeout=60)
    assert "still run on gpu001" in roll.run(_nodes(PLAN, GPUS), None).stopped
    # Stopped in its first batch: the roll is recorded as under way with nothing done.
    assert state.read()[PROGRESS_KEY]["done"] == []
    assert not_upgraded(PLAN, state) == set(GPUS)
    cluster.jobs.clear()
    cluster.nodes["gpu004"][:2] = ["IDLE+DRAIN", "clusterctl-verify: nccl.all_reduce: 310 GB/s under 360"]

    findings = heal(PLAN, cluster.executor, launcher_host(PLAN), upgrading=not_upgraded(PLAN, state))

    assert {f.node: f.code for f in findings} == {"gpu001": "heal.upgrading", "gpu004": "heal.resumed"}
    assert cluster.nodes["gpu001"][:2] == ["IDLE+DRAIN", REASON]


class FromRam(Cluster):
    """A cluster whose nodes run from RAM: a reboot brings them back with a new boot ID and no configuration."""

    def __init__(self, plan) -> None:
        super().__init__(plan)
        self.boots = dict.fromkeys(self.nodes, "boot-1")

    def answer(self, host: str, command: str) -> tuple[int, str, str]:
        if command == "cat /proc/sys/kernel/random/boot_id":
            return 0, self.boots[host] + "\n", ""
        if command.startswith("scontrol reboot"):
            for name in command.split()[-1].strip("'").split(","):
                self.boots[name] = "boot-2"
        return super().answer(host, command)


def test_nodes_that_reboot_from_ram_are_configured_again_before_slurm_takes_them_back(tmp_path: Path) -> None:
    """The provider's context serves what they boot with; they converge again once they answer from their new boot."""
    state = StateDir(tmp_path / "state", ONPREM.cluster.name)
    state.write({VERSIONS_KEY: dict(ONPREM.cluster.versions) | {"nvidia_driver": "550.127.08"}})
    cluster = FromRam(ONPREM)
    around: list[str] = []

    @contextlib.contextmanager
    def rebooting(hosts: list[str]):
        around.append(f"serving {','.join(hosts)}")
        yield [h for h in hosts if h != "gpu002"]  # gpu002 is installed: it keeps its configuration
        around.append("stopped")

    def restore(hosts: list[str]) -> None:
        cluster.log.append(f"agent {','.join(hosts)}")

    roll, seen = _roll(cluster, state, reboot=True, rebooting=rebooting, restore=restore)
    assert roll.run(_nodes(ONPREM, ["gpu001", "gpu002"]), 2).ok
    assert around == ["serving gpu001,gpu002", "stopped"]
    assert cluster.log == [
        "drain gpu001",
        "drain gpu002",
        "converge gpu001,gpu002",
        "reboot gpu001",
        "reboot gpu002",
        "agent gpu001",  # what its provider gave it at provisioning (a pulling node's agent), before it converges
        "converge gpu001",
        "health gpu001",
        "health gpu002",
        "resume gpu001",
        "resume gpu002",
    ]
    assert any("gpu001 rebooted from RAM without their configuration" in e.message for e in seen)


def test_a_node_that_does_not_come_back_from_ram_stops_the_roll(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state", ONPREM.cluster.name)
    state.write({VERSIONS_KEY: dict(ONPREM.cluster.versions) | {"nvidia_driver": "550.127.08"}})
    cluster = Cluster(ONPREM)  # boot IDs never answer: the node does not come back

    @contextlib.contextmanager
    def rebooting(hosts: list[str]):
        yield hosts

    roll, _ = _roll(cluster, state, reboot=True, rebooting=rebooting)
    result = roll.run(_nodes(ONPREM, ["gpu001"]), 1)
    assert result.stopped == "gpu001 did not answer over SSH within 1800 s of the reboot"
    assert "resume gpu001" not in cluster.log


def test_a_node_whose_agent_cannot_be_put_back_after_the_reboot_stays_drained(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state", ONPREM.cluster.name)
    state.write({VERSIONS_KEY: dict(ONPREM.cluster.versions) | {"nvidia_driver": "550.127.08"}})
    cluster = FromRam(ONPREM)

    @contextlib.contextmanager
    def rebooting(hosts: list[str]):
        yield hosts

    def restore(hosts: list[str]) -> None:
        raise ProviderError("gpu001: setting up its configuration agent failed: no space left on device")

    roll, _ = _roll(cluster, state, reboot=True, rebooting=rebooting, restore=restore)
    result = roll.run(_nodes(ONPREM, ["gpu001"]), 1)
    assert result.stopped == (
        "rebooting gpu001: gpu001: setting up its configuration agent failed: no space left on device"
    )
    assert "converge gpu001" not in cluster.log[cluster.log.index("reboot gpu001") :]
    assert "resume gpu001" not in cluster.log
