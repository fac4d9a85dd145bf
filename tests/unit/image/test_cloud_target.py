"""The cloud image targets around a stand-in image stack, builder and Ansible (no engine, no cloud).

What is asserted: the three phases run in order with the stack configuration the program reads
(profile, hash, phase, and in ``done`` the source the capture exported); the builder is reached
only with the host key clusterctl generated, pinned in a known_hosts of its own; the package list
is read over SSH before the builder is sealed; the lock gets target, reference and packages; a
failure deletes the builder; a missing Pulumi CLI stops before anything is made.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clusterctl.image import build as build_module
from clusterctl.image import cloud as cloud_image
from clusterctl.image.build import BuildJob, ImageBuildError, build_images
from clusterctl.image.cloud import BUILDER, CloudImageTarget, image_target
from clusterctl.image.drift import DPKG_QUERY
from clusterctl.image.hash import ImageHash, builder_for
from clusterctl.image.lock import LockedImage, read_lock
from clusterctl.pipeline import load_and_validate, render
from clusterctl.run import pulumi as pulumi_adapter
from clusterctl.run.ansible import ConfigureResult, HostFailure
from clusterctl.run.events import Event, EventBus
from clusterctl.run.providers import cloud as cloud_provider
from clusterctl.run.providers.images import apply_locked_images, image_hashes, same_image
from clusterctl.run.pulumi import UpSummary
from clusterctl.run.state import StateDir
from tests.conftest import EXAMPLES

DIGEST = "ab" * 32
ADDRESS = "198.51.100.20"
PACKAGES = "ii \tbash\t5.2.21-2ubuntu4\nii \tlibnccl2\t2.26.2-1+cuda12.8\nrc \told\t1.0\n"
OK = ConfigureResult(status="successful", rc=0)


class FakeStack:
    """The image stack as stacks/image answers in each phase."""

    def __init__(self, log: list[tuple[str, dict[str, str]]], target: pulumi_adapter.StackTarget, key: Any) -> None:
        self.log, self.target, self.key = log, target, key
        self.wrong_key = False

    def up(self) -> UpSummary:
        config = self.target.config
        phase = config["clusterctl:imagePhase"]
        self.log.append((phase, dict(config)))
        outputs: dict[str, Any] = {"phase": phase, "sshUser": "ubuntu"}
        if phase != "done":
            public = "ssh-ed25519 AAAAother" if self.wrong_key else self.key.public
            outputs.update(nodes={BUILDER: ADDRESS}, hostKeys={BUILDER: public}, imageSource="i-0builder")
        if phase != "build":
            outputs["imageSource"] = "i-0builder"
            outputs["image"] = {
                "ref": "ami-0123456789abcdef0",
                "name": "clusterctl-ubuntu-2404-" + DIGEST[:12],
                "hash": config["clusterctl:imageHash"],
                "profile": config["clusterctl:imageProfile"],
                "os": "ubuntu-24.04",
                "target": "aws",
            }
        return UpSummary(changes={"create": 1}, outputs=outputs)

    def destroy(self) -> Any:
        self.log.append(("destroy", dict(self.target.config)))
        return pulumi_adapter.DestroySummary(changes={"delete": 8})


class FakeRemote:
    """The builder over SSH: cloud-init done, dpkg-query's list."""

    def __init__(self, endpoint: Any, known_hosts: Path, key: Path) -> None:
        self.endpoint, self.known_hosts, self.key = endpoint, known_hosts, key
        self.commands: list[str] = []

    def run(self, host: str, command: str, timeout: float) -> tuple[int, str, str]:
        assert host == BUILDER
        self.commands.append(command)
        return (0, PACKAGES, "") if command == DPKG_QUERY else (0, "", "")


@pytest.fixture
def plan():
    return load_and_validate(EXAMPLES / "aws-p5.yaml").plan


class Rig:
    """A CloudImageTarget with every outside part replaced, and what each part saw."""

    def __init__(self, plan, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(cloud_image, "require_pulumi_cli", lambda: "/usr/bin/pulumi")
        self.log: list[tuple[str, dict[str, str]]] = []
        self.stacks: list[FakeStack] = []
        self.remotes: list[FakeRemote] = []
        self.sealed: list[Path] = []
        self.installs: list[dict[str, Any]] = []
        self.wrong_key = False
        self.state = tmp_path / "state"
        self.state.mkdir(mode=0o700)
        self.events = EventBus()
        self.seen: list[Event] = []
        self.events.subscribe(self.seen.append)

        def stack(target, key):
            made = FakeStack(self.log, target, key)
            made.wrong_key = self.wrong_key
            self.stacks.append(made)
            return made

        def remote(endpoint, known_hosts, key):
            made = FakeRemote(endpoint, known_hosts, key)
            self.remotes.append(made)
            return made

        def seal(job, run_state, events):
            self.sealed.append(run_state)
            # The list is read before the seal: the seal removes the login user it is read as.
            assert self.remotes[-1].commands[-1] == DPKG_QUERY
            return OK

        self.target = CloudImageTarget(
            plan, self.state, tmp_path / "build", stack=stack, remote=remote, seal=seal, port_open=lambda a: False
        )
        self.job = BuildJob(
            plan=plan,
            builder=builder_for(plan, "p5"),
            image=ImageHash(profile="p5", hash=DIGEST),
            build_dir=tmp_path / "image-build",
        )

    def install(self, connection: dict[str, Any]) -> ConfigureResult:
        self.installs.append(connection)
        return OK


def test_phases_in_order_with_the_configuration_the_program_reads(plan, tmp_path, monkeypatch) -> None:
    rig = Rig(plan, tmp_path, monkeypatch)
    found = rig.target.build(rig.job, rig.install, rig.events)
    assert [phase for phase, _ in rig.log] == ["build", "capture", "done"]
    for _, config in rig.log:
        assert config["clusterctl:imageProfile"] == "p5"
        assert config["clusterctl:imageHash"] == DIGEST
    assert rig.log[0][1]["clusterctl:imageSource"] == ""
    assert rig.log[2][1]["clusterctl:imageSource"] == "i-0builder"  # what the capture exported
    assert {s.target.stack for s in rig.stacks} == {"organization/clusterctl-image/forge-p5"}
    assert {s.target.program for s in rig.stacks} == {"image"}
    assert found.ref == "ami-0123456789abcdef0"
    assert found.tag == "clusterctl-ubuntu-2404-" + DIGEST[:12]
    # Installed packages only (dpkg's "rc" entries are not installed).
    assert found.packages == {"bash": "5.2.21-2ubuntu4", "libnccl2": "2.26.2-1+cuda12.8"}
    assert len(rig.sealed) == 1


def test_builder_reached_only_with_its_pinned_key(plan, tmp_path, monkeypatch) -> None:
    rig = Rig(plan, tmp_path, monkeypatch)
    rig.target.build(rig.job, rig.install, rig.events)
    (connection,) = rig.installs
    key = rig.stacks[0].key
    assert connection["ansible_host"] == ADDRESS
    assert connection["ansible_user"] == "ubuntu"
    assert connection["ansible_become"] is True
    args = connection["ansible_ssh_common_args"]
    assert "StrictHostKeyChecking=yes" in args
    (remote,) = rig.remotes
    assert f"UserKnownHostsFile={remote.known_hosts.resolve()}" in args
    assert remote.known_hosts.read_text() == f"{ADDRESS},{BUILDER} {key.public}\n"
    # The generated key is kept in the state directory like a node's (its private half is secret).
    stored = rig.state / "secrets" / "ssh" / "host_keys" / "image.p5"
    assert stored.stat().st_mode & 0o777 == 0o600
    assert rig.stacks[0].key.private == stored.read_text()


def test_another_host_key_is_refused_and_the_builder_deleted(plan, tmp_path, monkeypatch) -> None:
    rig = Rig(plan, tmp_path, monkeypatch)
    rig.wrong_key = True
    with pytest.raises(ImageBuildError, match="not the one clusterctl generated") as caught:
        rig.target.build(rig.job, rig.install, rig.events)
    assert "The builder was deleted" in str(caught.value)
    assert [phase for phase, _ in rig.log] == ["build", "destroy"]
    assert not rig.installs


def test_install_failure_deletes_the_builder(plan, tmp_path, monkeypatch) -> None:
    rig = Rig(plan, tmp_path, monkeypatch)
    failure = HostFailure(host="clusterctl-image", task="nvidia_driver : Install the driver", message="no space left")

    def install(connection: dict[str, Any]) -> ConfigureResult:
        return ConfigureResult(status="failed", rc=2, failures=[failure])

    with pytest.raises(ImageBuildError, match="nvidia_driver : Install the driver: no space left"):
        rig.target.build(rig.job, install, rig.events)
    assert [phase for phase, _ in rig.log] == ["build", "destroy"]
    assert not rig.sealed
    assert not rig.target.record_path(DIGEST).exists()


def test_interrupted_build_deletes_the_builder_too(plan, tmp_path, monkeypatch) -> None:
    rig = Rig(plan, tmp_path, monkeypatch)

    def install(connection: dict[str, Any]) -> ConfigureResult:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        rig.target.build(rig.job, install, rig.events)
    assert rig.log[-1][0] == "destroy"


def test_builder_that_does_not_power_off_fails(plan, tmp_path, monkeypatch) -> None:
    rig = Rig(plan, tmp_path, monkeypatch)
    rig.target._port_open = lambda address: True
    rig.target._sleep = lambda s: None
    rig.target.poweroff_wait_s = 0
    with pytest.raises(ImageBuildError, match="did not power off"):
        rig.target.build(rig.job, rig.install, rig.events)
    assert "capture" not in [phase for phase, _ in rig.log]


def test_without_the_pulumi_cli_nothing_is_made(plan, tmp_path, monkeypatch) -> None:
    rig = Rig(plan, tmp_path, monkeypatch)
    monkeypatch.setattr(pulumi_adapter.shutil, "which", lambda name: None)
    monkeypatch.setattr(cloud_image, "require_pulumi_cli", pulumi_adapter.require_pulumi_cli)
    with pytest.raises(ImageBuildError, match=r"Pulumi CLI \(`pulumi`\) is not on PATH") as caught:
        rig.target.build(rig.job, rig.install, rig.events)
    assert "https://get.pulumi.com" in str(caught.value)
    assert not rig.log
    assert not (rig.state / "secrets").exists()


def test_the_record_finds_the_image_again(plan, tmp_path, monkeypatch) -> None:
    rig = Rig(plan, tmp_path, monkeypatch)
    assert rig.target.find(rig.job.image, "ubuntu-24.04") is None
    rig.target.build(rig.job, rig.install, rig.events)
    found = rig.target.find(rig.job.image, "ubuntu-24.04")
    assert found is not None
    assert found.ref == "ami-0123456789abcdef0"
    assert rig.target.packages("ami-0123456789abcdef0") == found.packages
    record = json.loads(rig.target.record_path(DIGEST).read_text())
    assert record["target"] == "aws"
    assert rig.target.record_path(DIGEST).stat().st_mode & 0o777 == 0o600
    with pytest.raises(ImageBuildError, match="not recorded here"):
        rig.target.packages("ami-0fromanothercluster")


def test_image_build_writes_the_lock_entry(plan, tmp_path, monkeypatch) -> None:
    """Through build_images, as `clusterctl image build` runs it: one profile, target aws, the AMI."""
    rig = Rig(plan, tmp_path, monkeypatch)
    validated = load_and_validate(EXAMPLES / "aws-p5.yaml")
    ran: list[Path] = []

    def run_playbook(build_dir: Path, state_dir: Path, events: EventBus, **kwargs: Any) -> ConfigureResult:
        ran.append(build_dir)
        return OK

    monkeypatch.setattr(build_module, "run_playbook", run_playbook)
    lock_file = tmp_path / "clusterctl.lock"
    report = build_images(
        validated,
        rig.target,
        lock_file=lock_file,
        state=StateDir(tmp_path / "states", "forge"),
        events=rig.events,
        build_root=tmp_path / "build",
        only="p5",
    )
    assert [r.action for r in report.results] == ["built"]
    lock = read_lock(lock_file)
    assert lock is not None
    entry = lock.images["p5"]
    assert (entry.target, entry.ref, entry.os, entry.arch) == ("aws", "ami-0123456789abcdef0", "ubuntu-24.04", "amd64")
    assert entry.packages == {"bash": "5.2.21-2ubuntu4", "libnccl2": "2.26.2-1+cuda12.8"}
    assert entry.tag.startswith("clusterctl-ubuntu-2404-")
    # The builder's inventory, with the SSH connection the target handed over.
    inventory = (ran[0] / "ansible" / "inventory" / "hosts.yml").read_text()
    assert ADDRESS in inventory
    assert "StrictHostKeyChecking=yes" in inventory
    assert 'clusterctl_stage: !unsafe "install"' in inventory


# --- up: the cluster stack boots the locked image --------------------------------------------------


def test_apply_locked_images_sets_the_profile_groups_only(plan) -> None:
    locked = LockedImage(profile="p5", hash=DIGEST, target="aws", ref="ami-0locked", os="ubuntu-24.04", arch="amd64")
    applied = apply_locked_images(plan, {"p5": locked})
    images = {g.group: g.image for g in applied.cloud.groups}
    assert images == {"ctl": None, "login": None, "gpu": "ami-0locked"}
    assert {g.group: g.image for g in plan.cloud.groups} == dict.fromkeys(images)  # the input plan is unchanged


def test_image_hashes_from_the_lock_or_the_record(plan, tmp_path, monkeypatch) -> None:
    rig = Rig(plan, tmp_path, monkeypatch)
    rig.target.build(rig.job, rig.install, rig.events)
    assert image_hashes(plan, {"p5": "ami-0123456789abcdef0"}, rig.state) == {"p5": DIGEST}
    assert image_hashes(plan, {"p5": "ami-0unknown"}, rig.state) == {}
    locked = LockedImage(profile="head", hash="cd" * 32, target="aws", ref="ami-1", os="ubuntu-24.04", arch="amd64")
    assert image_hashes(plan, {"head": locked}, rig.state) == {"head": "cd" * 32}


def test_cloud_provider_boots_locked_images_and_reports_them(tmp_path, monkeypatch) -> None:
    from tests.unit.cloud.test_providers import FakeStack

    class ClusterStack(FakeStack):
        """A stack whose instances were made from their group's image, but gpu001 (made before the lock)."""

        def up(self) -> UpSummary:
            result = super().up()
            images = {h: g.image or self.plan.cloud.image for g in self.plan.cloud.groups for h in g.hosts}
            images["gpu001"] = self.plan.cloud.image
            return UpSummary(changes=result.changes, outputs={**result.outputs, "nodeImages": images})

    FakeStack.instances = []
    monkeypatch.setattr(cloud_provider, "PulumiStack", ClusterStack)
    monkeypatch.setattr(cloud_provider, "require_pulumi_cli", lambda: "/usr/bin/pulumi")
    validated = load_and_validate(EXAMPLES / "aws-p5.yaml")
    build, _ = render(validated, tmp_path / "build")
    locked = LockedImage(profile="p5", hash=DIGEST, target="aws", ref="ami-0locked", os="ubuntu-24.04", arch="amd64")
    provider = cloud_provider.CloudProvider("aws", images={"p5": locked})
    hosts = provider.provision(validated.plan, build, tmp_path / "state", yes=True, events=EventBus())
    (stack,) = FakeStack.instances
    assert {g.hardware: g.image for g in stack.plan.cloud.groups} == {"head": None, "p5": "ami-0locked"}
    hardware = {n.hostname: n.hardware for n in validated.plan.nodes}
    # Only nodes the cloud says were made from the locked image skip the install stage.
    assert {h.hostname: h.image_hash for h in hosts} == {
        name: (DIGEST if hw == "p5" and name != "gpu001" else None) for name, hw in hardware.items()
    }


def test_image_target_pins_the_plugins_of_the_plan_cloud(plan) -> None:
    target = image_target(plan, "p5", DIGEST, "capture", "i-1")
    assert target.plugins == pulumi_adapter.PLUGIN_VERSIONS["aws"]
    assert target.workspace == "image-p5"
    assert target.project == "clusterctl-image"


def test_image_stack_requirements_pin_the_plugin_versions() -> None:
    from tests.conftest import REPO_ROOT

    lines = (REPO_ROOT / "stacks" / "image" / "requirements.txt").read_text().splitlines()
    pins = dict(line.split("==") for line in lines if "==" in line)
    expected = {
        f"pulumi-{n}": v for kind in ("aws", "gcp", "azure") for n, v in pulumi_adapter.PLUGIN_VERSIONS[kind].items()
    }
    assert {k: v for k, v in pins.items() if k != "pulumi"} == expected
    assert pins["pulumi"] == pulumi_adapter.PULUMI_SDK_VERSION


@pytest.mark.parametrize(
    ("booted", "ref", "same"),
    [
        ("ami-0abc", "ami-0abc", True),
        ("ami-0abc", "ami-0abd", False),
        (
            "https://www.googleapis.com/compute/v1/projects/p/global/images/clusterctl-ubuntu-2404-0123456789ab",
            "projects/p/global/images/clusterctl-ubuntu-2404-0123456789ab",
            True,
        ),
        (
            "/subscriptions/S/resourceGroups/RG/x/versions/1.0.0",
            "/subscriptions/s/resourcegroups/rg/x/versions/1.0.0",
            True,
        ),
        ("", "ami-0abc", False),
        (None, None, False),
    ],
)
def test_same_image(booted, ref, same: bool) -> None:
    assert same_image(booted, ref) is same
