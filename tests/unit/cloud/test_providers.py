"""The cloud and bare-metal providers around a stand-in stack (no engine): the flow from
preview to inventory, confirmation, and a missing Pulumi CLI."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from clusterctl.pipeline import load_and_validate, render
from clusterctl.render import ansible_yaml
from clusterctl.run import pulumi as pulumi_adapter
from clusterctl.run.events import Event, EventBus
from clusterctl.run.hostkey_server import ServeLog
from clusterctl.run.providers import baremetal as baremetal_module
from clusterctl.run.providers import cloud as cloud_module
from clusterctl.run.providers import for_kind
from clusterctl.run.providers.base import ProviderError
from clusterctl.run.pulumi import PreviewSummary, PulumiCliMissingError, UpSummary
from tests.conftest import EXAMPLES


class FakeStack:
    """Stands in for PulumiStack: answers like a stack whose program made the planned nodes."""

    instances: ClassVar[list[FakeStack]] = []

    def __init__(self, plan, build_dir: Path, state_dir: Path, **kwargs: Any) -> None:
        self.plan, self.build_dir, self.state_dir = plan, build_dir, state_dir
        self.host_keys = kwargs.get("host_keys") or {}
        self.ssh_public_key = kwargs.get("ssh_public_key", "")
        self.calls: list[str] = []
        FakeStack.instances.append(self)

    def outputs(self) -> pulumi_adapter.StackOutputs:
        return pulumi_adapter.StackOutputs(values={})  # no machine made yet

    def preview(self) -> PreviewSummary:
        self.calls.append("preview")
        return PreviewSummary(changes={"create": 40})

    def up(self) -> UpSummary:
        self.calls.append("up")
        outputs: dict[str, Any] = {"nodes": {n.hostname: n.address for n in self.plan.nodes}, "sshUser": "ubuntu"}
        if self.plan.cluster.provider == "baremetal":
            # stacks/baremetal exports the public keys clusterctl generated (and served to the installers).
            outputs["hostKeys"] = {name: pair.public for name, pair in self.host_keys.items()}
        else:
            outputs["bastion"] = {"address": "198.51.100.9", "user": "ubuntu", "name": "bastion"}
            # The cloud stacks export the host keys clusterctl generated and injected.
            outputs["hostKeys"] = {name: pair.public for name, pair in self.host_keys.items()}
            outputs["lustre"] = {"datasets": {"source": "fs-1.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh"}}
        return UpSummary(changes={"create": 40}, outputs=outputs)

    def destroy(self) -> Any:
        self.calls.append("destroy")
        return pulumi_adapter.DestroySummary(changes={"delete": 40})


@pytest.fixture
def fake_stack(monkeypatch: pytest.MonkeyPatch) -> type[FakeStack]:
    FakeStack.instances = []
    monkeypatch.setattr(cloud_module, "PulumiStack", FakeStack)
    monkeypatch.setattr(baremetal_module, "PulumiStack", FakeStack)
    monkeypatch.setattr(cloud_module, "require_pulumi_cli", lambda: "/usr/bin/pulumi")
    monkeypatch.setattr(baremetal_module, "require_pulumi_cli", lambda: "/usr/bin/pulumi")
    return FakeStack


def _events() -> tuple[EventBus, list[Event]]:
    bus, seen = EventBus(), []
    bus.subscribe(seen.append)
    return bus, seen


def test_for_kind_builds_these_providers() -> None:
    assert isinstance(for_kind("aws"), cloud_module.CloudProvider)
    assert isinstance(for_kind("baremetal"), baremetal_module.BaremetalProvider)


def test_cloud_provision_writes_checked_inventory(fake_stack, tmp_path: Path) -> None:
    validated = load_and_validate(EXAMPLES / "aws-p5.yaml")
    build, _ = render(validated, tmp_path / "build")
    state = tmp_path / "state"
    bus, seen = _events()
    hosts = cloud_module.CloudProvider("aws").provision(validated.plan, build, state, yes=True, events=bus)
    assert [h.hostname for h in hosts] == [n.hostname for n in validated.plan.nodes]
    (stack,) = fake_stack.instances
    assert stack.calls == ["up"]  # --yes: no preview question
    assert set(stack.host_keys) == {n.hostname for n in validated.plan.nodes} | {"bastion"}
    inventory = ansible_yaml.load((build / "ansible" / "inventory" / "provisioned.yml").read_text())
    assert set(inventory["all"]["hosts"]) == {n.hostname for n in validated.plan.nodes}
    assert inventory["all"]["vars"]["clusterctl_managed_lustre"] == {
        "datasets": "fs-1.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh"
    }
    known = (state / "known_hosts").read_text()
    assert stack.host_keys["gpu001"].public in known
    assert any(e.kind == "message" and "stack updated" in e.message for e in seen)


def test_cloud_provision_asks_before_applying(fake_stack, tmp_path: Path) -> None:
    validated = load_and_validate(EXAMPLES / "aws-p5.yaml")
    build, _ = render(validated, tmp_path / "build")
    asked: list[str] = []

    def refuse(question: str) -> bool:
        asked.append(question)
        return False

    with pytest.raises(ProviderError, match="not confirmed"):
        cloud_module.CloudProvider("aws", confirm=refuse).provision(
            validated.plan, build, tmp_path / "state", yes=False, events=EventBus()
        )
    assert asked
    assert "40 to create" in asked[0]
    assert fake_stack.instances[0].calls == ["preview"]


def test_no_terminal_no_silent_apply(fake_stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    validated = load_and_validate(EXAMPLES / "aws-p5.yaml")
    build, _ = render(validated, tmp_path / "build")
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    with pytest.raises(ProviderError, match="--yes"):
        cloud_module.CloudProvider("aws").provision(
            validated.plan, build, tmp_path / "state", yes=False, events=EventBus()
        )


def test_baremetal_provision_publishes_key_and_pins_generated_host_keys(fake_stack, tmp_path: Path) -> None:
    validated = load_and_validate(EXAMPLES / "onprem-h100-256.yaml")
    build, _ = render(validated, tmp_path / "build")
    state = tmp_path / "state"

    @contextlib.contextmanager
    def serve(bind: tuple[str, int], grants: list, **_: Any) -> Iterator[ServeLog]:
        yield ServeLog(port=bind[1])  # the installers' side is tested in tests/unit/run/test_baremetal_host_keys.py

    asked: list[str] = []

    class Agents:  # every machine has its agent already (tests/unit/run/test_baremetal_failures.py sends one)
        def run(self, host: str, command: str, timeout: float) -> tuple[int, str, str]:
            asked.append(host)
            return 0, "", ""

        def send(self, host: str, command: str, data: bytes | None, timeout: float) -> tuple[int, str, str]:
            raise AssertionError(f"nothing to send to {host}")

    provider = baremetal_module.BaremetalProvider(serve_host_keys=serve, reach=lambda plan, state_dir: Agents())
    hosts = provider.provision(validated.plan, build, state, yes=True, events=EventBus())
    assert len(hosts) == 35
    # The compute machines, which pull, were asked for their agent over pinned SSH; the controllers were not.
    assert sorted(asked) == sorted(n.hostname for n in validated.plan.nodes if n.role == "compute")
    published = (build / "pxe" / "http" / "autoinstall" / "clusterctl.pub").read_text()
    assert published.startswith("ssh-ed25519 ")
    assert "PRIVATE" not in published
    (stack,) = fake_stack.instances
    assert stack.host_keys["gpu004"].public in (state / "known_hosts").read_text()


def test_destroy_confirms(fake_stack, tmp_path: Path) -> None:
    validated = load_and_validate(EXAMPLES / "aws-p5.yaml")
    provider = cloud_module.CloudProvider("aws", confirm=lambda q: True)
    provider.destroy(validated.plan, tmp_path / "build", tmp_path / "state", yes=False, events=EventBus())
    assert fake_stack.instances[0].calls == ["destroy"]


def test_missing_cli_stops_before_anything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    validated = load_and_validate(EXAMPLES / "aws-p5.yaml")
    state = tmp_path / "state"
    with pytest.raises(PulumiCliMissingError):
        cloud_module.CloudProvider("aws").provision(
            validated.plan, tmp_path / "build", state, yes=True, events=EventBus()
        )
    assert not state.exists()
    with pytest.raises(ProviderError, match="The Pulumi CLI") as info:
        cloud_module.CloudProvider("aws").status(validated.plan, state)
    assert str(info.value).count("Pulumi CLI") == 1  # once for the cluster, not once per node
