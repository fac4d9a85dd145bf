"""Cloud burst bookkeeping (run/burst_cloud.py) with the Pulumi adapter faked at its boundary.

The fake stands in for ``PulumiStack``: it records the active set each ``up`` was asked to
deploy (the stack config ``clusterctl:activeHosts``) and answers with the outputs the burst
program exports for it, or fails like the engine does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

from clusterctl.ops import burst as burst_module
from clusterctl.pipeline import load_and_validate
from clusterctl.plan import Plan
from clusterctl.render import ansible_yaml
from clusterctl.run import burst_cloud
from clusterctl.run.events import Event, EventBus
from clusterctl.run.providers.base import ProviderError, ProvisionedHost
from clusterctl.run.pulumi import (
    INSTALL_HINT,
    PLUGIN_VERSIONS,
    PULUMI_SDK_VERSION,
    PulumiCliMissingError,
    PulumiError,
    UpSummary,
    cluster_target,
    load_stack_module,
    stack_name,
)
from tests.conftest import EXAMPLES, REPO_ROOT

GROUP = "gpu-b"


class FakeStack:
    """Answers ``up`` like the burst program would; ``fail`` makes the next ``up`` calls raise."""

    ups: ClassVar[list[list[str]]] = []
    fail: ClassVar[list[str]] = []  # one engine error text per failing up, consumed in order

    def __init__(self, plan: Plan, build_dir: Path, state_dir: Path, **kwargs: Any) -> None:
        self.plan = plan
        self.target = kwargs["target"]
        self.host_keys = kwargs.get("host_keys") or {}
        assert kwargs.get("ssh_public_key", "").startswith("ssh-ed25519 ")

    def up(self) -> UpSummary:
        active = json.loads(self.target.config[burst_cloud.ACTIVE_HOSTS_CONFIG])
        FakeStack.ups.append(active)
        if FakeStack.fail:
            # Worded like PulumiStack.up's error: engine lines, then the adapter's advice.
            raise PulumiError(
                f"pulumi up of {self.target.stack} failed: {FakeStack.fail.pop(0)}\nWhat was created is recorded "
                "in /state/pulumi; run `clusterctl up` again after fixing this or `clusterctl down`."
            )
        nodes = {n.hostname: n.address for n in self.plan.nodes if n.hostname in active}
        keys = {h: self.host_keys[h].public for h in active}  # the program exports the injected keys
        return UpSummary(
            changes={"create": len(active)}, outputs={"nodes": nodes, "sshUser": "ubuntu", "hostKeys": keys}
        )


@pytest.fixture(scope="module")
def plan() -> Plan:
    return load_and_validate(EXAMPLES / "aws-burst.yaml").plan


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> type[FakeStack]:
    FakeStack.ups, FakeStack.fail = [], []
    monkeypatch.setattr(burst_cloud, "PulumiStack", FakeStack)
    monkeypatch.setattr(burst_cloud, "require_pulumi_cli", lambda: "/usr/bin/pulumi")
    monkeypatch.setattr(burst_cloud, "wait_for_ssh", lambda hosts, timeout: None)
    return FakeStack


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    build, state = tmp_path / "build", tmp_path / "state"
    (build / "ansible" / "inventory").mkdir(parents=True)
    return build, state


def _events() -> tuple[EventBus, list[Event]]:
    bus, seen = EventBus(), []
    bus.subscribe(seen.append)
    return bus, seen


def _nodes(plan: Plan, *names: str) -> list:
    return [plan.node(name) for name in names]


def resume(plan: Plan, dirs: tuple[Path, Path], *names: str) -> list[ProvisionedHost]:
    build, state = dirs
    return burst_cloud.resume_cloud(plan, "aws", _nodes(plan, *names), build, state, _events()[0])


def suspend(plan: Plan, dirs: tuple[Path, Path], *names: str) -> None:
    build, state = dirs
    burst_cloud.suspend_cloud(plan, "aws", _nodes(plan, *names), build, state, _events()[0])


def active(dirs: tuple[Path, Path]) -> list[str]:
    return burst_cloud.active_hosts(dirs[1], GROUP)


def inventory_hosts(dirs: tuple[Path, Path]) -> dict[str, Any] | None:
    path = dirs[0] / "ansible" / "inventory" / f"provisioned-burst-{GROUP}.yml"
    if not path.exists():
        return None
    return ansible_yaml.load(path.read_text())["all"]["hosts"]


def test_resume_adds_to_the_active_set_and_returns_the_hosts(fake, plan: Plan, dirs) -> None:
    hosts = resume(plan, dirs, "gpu-b001", "gpu-b002")
    assert fake.ups == [["gpu-b001", "gpu-b002"]]
    assert active(dirs) == ["gpu-b001", "gpu-b002"]
    assert [(h.hostname, h.address, h.user) for h in hosts] == [
        ("gpu-b001", "10.60.0.4", "ubuntu"),
        ("gpu-b002", "10.60.0.5", "ubuntu"),
    ]
    assert all(h.host_key and h.host_key.startswith("ssh-ed25519 ") for h in hosts)
    entries = inventory_hosts(dirs)
    assert entries is not None
    assert sorted(entries) == ["gpu-b001", "gpu-b002"]
    assert entries["gpu-b001"]["ansible_host"] == "10.60.0.4"
    assert entries["gpu-b001"]["ansible_user"] == "ubuntu"
    assert "StrictHostKeyChecking=yes" in entries["gpu-b001"]["ansible_ssh_common_args"]
    known = (dirs[1] / "burst" / "cloud" / f"{GROUP}.known_hosts").read_text()
    assert "10.60.0.4,gpu-b001 ssh-ed25519 " in known


def test_resume_is_idempotent(fake, plan: Plan, dirs) -> None:
    first = resume(plan, dirs, "gpu-b001", "gpu-b002")
    again = resume(plan, dirs, "gpu-b002", "gpu-b001")
    assert fake.ups == [["gpu-b001", "gpu-b002"]]  # no second up
    assert active(dirs) == ["gpu-b001", "gpu-b002"]
    assert sorted(h.hostname for h in again) == sorted(h.hostname for h in first)


def test_overlapping_resume_deploys_the_union_in_plan_order(fake, plan: Plan, dirs) -> None:
    resume(plan, dirs, "gpu-b003")
    resume(plan, dirs, "gpu-b002", "gpu-b003")
    assert fake.ups == [["gpu-b003"], ["gpu-b002", "gpu-b003"]]
    assert active(dirs) == ["gpu-b002", "gpu-b003"]


def test_suspend_of_absent_hosts_is_a_no_op(fake, plan: Plan, dirs) -> None:
    suspend(plan, dirs, "gpu-b004")  # never resumed: no state, no up
    assert fake.ups == []
    assert not burst_cloud.state_path(dirs[1], GROUP).exists()
    resume(plan, dirs, "gpu-b001")
    suspend(plan, dirs, "gpu-b003", "gpu-b004")
    assert fake.ups == [["gpu-b001"]]
    assert active(dirs) == ["gpu-b001"]


def test_suspend_removes_only_those_hosts(fake, plan: Plan, dirs) -> None:
    resume(plan, dirs, "gpu-b001", "gpu-b002", "gpu-b003", "gpu-b004")
    suspend(plan, dirs, "gpu-b001", "gpu-b003")
    assert fake.ups[-1] == ["gpu-b002", "gpu-b004"]
    assert active(dirs) == ["gpu-b002", "gpu-b004"]
    assert sorted(inventory_hosts(dirs) or {}) == ["gpu-b002", "gpu-b004"]
    suspend(plan, dirs, "gpu-b001", "gpu-b003")  # again: nothing to do
    assert len(fake.ups) == 2
    suspend(plan, dirs, "gpu-b002", "gpu-b004")
    assert fake.ups[-1] == []
    assert active(dirs) == []
    assert inventory_hosts(dirs) is None  # no active host: no inventory file


def test_no_capacity_rolls_back_and_says_so(fake, plan: Plan, dirs) -> None:
    resume(plan, dirs, "gpu-b001")
    fake.fail = [
        "error: creating EC2 Instance: operation error EC2: RunInstances, https response error StatusCode: 500, "
        "api error InsufficientInstanceCapacity: We currently do not have sufficient p5.48xlarge capacity"
    ]
    with pytest.raises(ProviderError) as info:
        resume(plan, dirs, "gpu-b002", "gpu-b003")
    message = str(info.value)
    assert message.startswith("no capacity (InsufficientInstanceCapacity): ")
    assert "p5.48xlarge" in message
    assert "clusterctl up" not in message  # the adapter's advice is for `up`, not for a node reason
    # The failed up, then the clean-up up without the hosts this resume added.
    assert fake.ups[1:] == [["gpu-b001", "gpu-b002", "gpu-b003"], ["gpu-b001"]]
    assert active(dirs) == ["gpu-b001"]
    assert burst_cloud.read_state(dirs[1], GROUP).converged
    # The next resume retries from scratch.
    resume(plan, dirs, "gpu-b002", "gpu-b003")
    assert fake.ups[-1] == ["gpu-b001", "gpu-b002", "gpu-b003"]


def test_failed_cleanup_is_retried_by_the_next_call(fake, plan: Plan, dirs) -> None:
    fake.fail = ["api error VcpuLimitExceeded: You have requested more vCPU capacity", "connection reset"]
    with pytest.raises(ProviderError, match=r"^quota exceeded \(VcpuLimitExceeded\).*cleanup pending"):
        resume(plan, dirs, "gpu-b001")
    assert active(dirs) == []
    assert not burst_cloud.read_state(dirs[1], GROUP).converged
    # A suspend of hosts that are not active still runs up once, to finish the clean-up.
    suspend(plan, dirs, "gpu-b001")
    assert fake.ups[-1] == []
    assert burst_cloud.read_state(dirs[1], GROUP).converged
    suspend(plan, dirs, "gpu-b001")
    assert len(fake.ups) == 3


def test_failed_suspend_keeps_the_hosts_out_of_the_set(fake, plan: Plan, dirs) -> None:
    resume(plan, dirs, "gpu-b001", "gpu-b002")
    fake.fail = ["error: AuthorizationFailed... UnauthorizedOperation: You are not authorized to perform ec2:Terminate"]
    with pytest.raises(ProviderError, match=r"^not permitted \(UnauthorizedOperation\)"):
        suspend(plan, dirs, "gpu-b001")
    assert active(dirs) == ["gpu-b002"]
    resume(plan, dirs, "gpu-b002")  # not converged: runs up, which removes gpu-b001 now
    assert fake.ups[-1] == ["gpu-b002"]


def test_pulumi_cli_missing_changes_nothing(fake, monkeypatch: pytest.MonkeyPatch, plan: Plan, dirs) -> None:
    def missing() -> str:
        raise PulumiCliMissingError(INSTALL_HINT)

    monkeypatch.setattr(burst_cloud, "require_pulumi_cli", missing)
    for call in (resume, suspend):
        with pytest.raises(ProviderError, match=r"^Pulumi CLI missing") as info:
            call(plan, dirs, "gpu-b001")
        assert "https://get.pulumi.com" in str(info.value)
    assert fake.ups == []
    assert not dirs[1].exists()


def test_hosts_that_never_answer_ssh_are_released(fake, monkeypatch: pytest.MonkeyPatch, plan: Plan, dirs) -> None:
    def silent(hosts: list[ProvisionedHost], timeout: float) -> None:
        raise ProviderError(f"no SSH: {hosts[0].hostname} did not answer")

    resume(plan, dirs, "gpu-b001")
    monkeypatch.setattr(burst_cloud, "wait_for_ssh", silent)
    with pytest.raises(ProviderError, match=r"^no SSH: gpu-b001"):
        resume(plan, dirs, "gpu-b001", "gpu-b004")
    # gpu-b001 was active before this call and stays; gpu-b004 goes again.
    assert active(dirs) == ["gpu-b001"]
    assert fake.ups[-1] == ["gpu-b001"]


def test_groups_without_a_burst_stack_are_refused(fake, plan: Plan, dirs) -> None:
    build, state = dirs
    with pytest.raises(ProviderError, match="gpu001: group gpu is not a aws burst group"):
        burst_cloud.resume_cloud(plan, "aws", _nodes(plan, "gpu001"), build, state, _events()[0])
    with pytest.raises(ProviderError, match="not a gcp burst group"):
        burst_cloud.resume_cloud(plan, "gcp", _nodes(plan, "gpu-b001"), build, state, _events()[0])


def test_burst_target_is_the_groups_own_stack(plan: Plan) -> None:
    target = burst_cloud.burst_target(plan, GROUP, ["gpu-b002"])
    assert target.stack == "organization/clusterctl-burst/harbor-burst-gpu-b"
    assert target.project == "clusterctl-burst"
    assert target.program == "burst"
    assert target.plugins == PLUGIN_VERSIONS["aws"]
    assert target.config == {"clusterctl:group": GROUP, "clusterctl:activeHosts": '["gpu-b002"]'}
    assert target.workspace == "harbor-burst-gpu-b"
    # The cluster's own stack is unchanged by targets.
    assert cluster_target(plan).stack == stack_name(plan)


def test_burst_program_is_pinned_and_loadable() -> None:
    module = load_stack_module("burst")
    assert callable(module.deploy)
    assert "name: clusterctl-burst" in (REPO_ROOT / "stacks" / "burst" / "Pulumi.yaml").read_text()
    requirements = (REPO_ROOT / "stacks" / "burst" / "requirements.txt").read_text().splitlines()
    pins = dict(line.split("==") for line in requirements if "==" in line)
    assert pins.pop("pulumi") == PULUMI_SDK_VERSION
    expected = {f"pulumi-{n}": v for kind in ("aws", "gcp", "azure") for n, v in PLUGIN_VERSIONS[kind].items()}
    assert pins == expected


@pytest.mark.parametrize(
    ("kind", "text", "start"),
    [
        ("aws", "api error InsufficientInstanceCapacity: no p5", "no capacity (InsufficientInstanceCapacity)"),
        ("aws", "ReservationCapacityExceeded", "no capacity (ReservationCapacityExceeded)"),
        ("gcp", "ZONE_RESOURCE_POOL_EXHAUSTED: a3-megagpu-8g", "no capacity (ZONE_RESOURCE_POOL_EXHAUSTED)"),
        ("gcp", "Quota 'NVIDIA_H100_GPUS' exceeded", "quota exceeded (Quota)"),
        ("azure", "Code=ZonalAllocationFailed", "no capacity (ZonalAllocationFailed)"),
        ("azure", "Code=AuthorizationFailed", "not permitted (AuthorizationFailed)"),
        ("azure", "Code=ResourceGroupNotFound", "resource group missing (ResourceGroupNotFound)"),
        ("aws", "something else", "aws provider error"),
    ],
)
def test_classify(kind: str, text: str, start: str) -> None:
    assert burst_cloud.classify(kind, text).startswith(start)


def test_wait_for_ssh_polls_until_every_host_answers() -> None:
    hosts = [ProvisionedHost("a", "10.0.0.1"), ProvisionedHost("b", "10.0.0.2")]
    tries: dict[str, int] = {}
    slept: list[float] = []

    def connect(address: str, port: int, timeout: float) -> None:
        tries[address] = tries.get(address, 0) + 1
        if address == "10.0.0.2" and tries[address] < 3:
            raise ConnectionRefusedError

    burst_cloud.wait_for_ssh(hosts, 60, poll=1, connect=connect, sleep=slept.append)
    assert tries == {"10.0.0.1": 1, "10.0.0.2": 3}  # an answering host is not asked again
    assert slept == [1, 1]


def test_wait_for_ssh_names_who_did_not_answer() -> None:
    def refuse(address: str, port: int, timeout: float) -> None:
        raise TimeoutError

    with pytest.raises(ProviderError, match=r"^no SSH: b \(10\.0\.0\.2\) did not answer on port 22 within 0 s"):
        burst_cloud.wait_for_ssh([ProvisionedHost("b", "10.0.0.2")], 0, connect=refuse, sleep=lambda _: None)


def test_ssh_wait_is_a_share_of_resume_timeout(plan: Plan) -> None:
    assert burst_cloud.ssh_wait_s(plan, GROUP) == 1500 * burst_cloud.SSH_SHARE_OF_RESUME_TIMEOUT


def test_burst_resume_marks_nodes_down_with_the_reason(fake, monkeypatch: pytest.MonkeyPatch, plan: Plan, dirs) -> None:
    """Through ``clusterctl burst resume``: the provider's words end up in Slurm's node reason."""
    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr(burst_module.commands, "run_here", lambda argv, *_: calls.append(tuple(argv[1:])))
    monkeypatch.setattr(burst_module, "run_playbook", lambda *a, **k: pytest.fail("nothing to configure"))
    fake.fail = ["api error InsufficientInstanceCapacity: none left"]
    build, state = dirs
    outcome = burst_module.resume(plan, "gpu-b[001-002]", build, state, _events()[0], munge_key_file=Path("/k"))
    assert sorted(outcome.failed) == ["gpu-b001", "gpu-b002"]
    downs = [c for c in calls if "state=down" in c]
    assert len(downs) == 2
    assert any(part.startswith("reason=clusterctl-burst: provisioning failed: no capacity") for part in downs[0])
    # ...and no longer powering up, so an operator's `state=resume` lets the next job resume it again.
    forced = [c for c in calls if "state=power_down_force" in c]
    assert sorted(c[1] for c in forced) == ["nodename=gpu-b001", "nodename=gpu-b002"]
    assert all(calls.index(f) > calls.index(d) for f, d in zip(forced, downs, strict=True))
    assert active(dirs) == []
