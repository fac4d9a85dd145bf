"""``image build``, ``up --locked``, and the lock in ``status`` and ``verify``, with a fake image target and nodes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from clusterctl.commands import cli
from clusterctl.image.build import BuildJob, FoundImage, InstallRunner
from clusterctl.image.hash import ImageHash
from clusterctl.image.lock import Lock, LockedImage, read_lock, write_lock
from clusterctl.render import ansible_yaml
from clusterctl.run.ansible import ConfigureResult, HostFailure
from clusterctl.run.events import EventBus
from clusterctl.run.state import StateDir
from tests.conftest import EXAMPLES
from tests.verify_testkit import ReplayExecutor, Response, scontrol_node, scontrol_partition

PACKAGES = {"adduser": "3.134", "bash": "5.2.15-2+b7", "hello": "2.10-3"}
DPKG = "".join(f"ii \t{name}\t{version}\n" for name, version in PACKAGES.items())


class FakeTarget:
    """Images in a dict; a build runs the real install callback (which writes the builder's directory)."""

    name = "local"
    base = "local/debian:bookworm"

    def __init__(self) -> None:
        self.images: dict[str, FoundImage] = {}
        self.built: list[str] = []
        self.inventories: dict[str, Any] = {}
        self.fail = False

    def arch(self) -> str:
        return "amd64"

    def find(self, image: ImageHash, os: str) -> FoundImage | None:
        return self.images.get(image.hash)

    def present(self, locked: LockedImage) -> bool:
        return any(f.ref == locked.ref for f in self.images.values())

    def packages(self, ref: str) -> dict[str, str]:
        return dict(PACKAGES)

    def build(self, job: BuildJob, install: InstallRunner, events: EventBus) -> FoundImage:
        result = install({"ansible_connection": "community.docker.docker", "ansible_host": "builder"})
        self.inventories[job.image.profile] = ansible_yaml.load(
            (job.build_dir / "ansible/inventory/hosts.yml").read_text()
        )
        if not result.succeeded:
            from clusterctl.image.build import ImageBuildError, failure_message

            raise ImageBuildError(failure_message(job.image.profile, result))
        self.built.append(job.image.profile)
        found = FoundImage(
            ref=f"sha256:{job.image.hash}", tag=f"clusterctl/node:x-{job.image.short}", packages=PACKAGES
        )
        self.images[job.image.hash] = found
        return found


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "local.yaml"
    shutil.copy(EXAMPLES / "local.yaml", path)
    return path


@pytest.fixture
def target(monkeypatch: pytest.MonkeyPatch) -> FakeTarget:
    fake = FakeTarget()
    monkeypatch.setattr("clusterctl.commands.image.target_for", lambda plan, **where: fake)
    monkeypatch.setattr("clusterctl.ops.images.target_for", lambda plan, **where: fake)
    monkeypatch.setattr(
        "clusterctl.image.build.run_playbook", lambda *a, **k: ConfigureResult(status="successful", rc=0)
    )
    return fake


def invoke(tmp_path: Path, *args: str) -> Result:
    return CliRunner().invoke(
        cli, [*args[:2], *args[2:], "--state-dir", str(tmp_path / "state")], catch_exceptions=False
    )


def build(tmp_path: Path, spec: Path, *extra: str) -> Result:
    return invoke(tmp_path, "image", "build", str(spec), "--out", str(tmp_path / "build"), *extra)


def test_build_then_reuse(tmp_path: Path, spec: Path, target: FakeTarget) -> None:
    first = build(tmp_path, spec)
    assert first.exit_code == 0, first.output
    assert sorted(target.built) == ["emu-h100", "small"]
    lock = read_lock(tmp_path / "clusterctl.lock")
    assert lock is not None
    assert lock.cluster == "local"
    assert set(lock.images) == {"emu-h100", "small"}
    assert lock.images["small"].packages == PACKAGES
    assert f"small: built clusterctl/node:x-{lock.images['small'].hash[:12]}" in first.stdout
    assert "Lock written: " in first.stdout
    text = (tmp_path / "clusterctl.lock").read_text()

    second = build(tmp_path, spec)
    assert second.exit_code == 0, second.output
    assert sorted(target.built) == ["emu-h100", "small"]  # nothing built again
    for profile in ("small", "emu-h100"):
        image = lock.images[profile]
        assert f"{profile}: reused {image.tag} (hash {image.hash}, 3 packages)" in second.stdout
    assert "Lock unchanged: " in second.stdout
    assert (tmp_path / "clusterctl.lock").read_text() == text


def test_builder_inventory_is_one_host_in_every_group_of_the_profile(
    tmp_path: Path, spec: Path, target: FakeTarget
) -> None:
    assert build(tmp_path, spec, "--profile", "small").exit_code == 0
    assert target.built == ["small"]
    inventory = target.inventories["small"]["all"]
    (name,) = inventory["hosts"]
    assert inventory["hosts"][name]["clusterctl_stage"] == "install"
    assert inventory["hosts"][name]["ansible_host"] == "builder"
    groups = {g for g, members in inventory["children"].items() if name in (members.get("hosts") or {})}
    assert {"controller", "login", "group_ctl", "group_login"} <= groups
    assert "compute" not in groups
    text = (tmp_path / "build/local.image.small/ansible/inventory/hosts.yml").read_text()
    assert 'clusterctl_stage: !unsafe "install"' in text
    group_vars = (tmp_path / "build/local.image.small/ansible/inventory/group_vars/all.yml").read_text()
    assert "clusterctl_versions:" in group_vars
    # No cluster file reaches the builder.
    assert not (tmp_path / "build/local.image.small/slurm").exists()


def test_build_json_output(tmp_path: Path, spec: Path, target: FakeTarget) -> None:
    result = build(tmp_path, spec, "--profile", "emu-h100", "-o", "json")
    assert result.exit_code == 0, result.output
    # Progress events come first, one JSON object a line; the result is the last, indented, object.
    data = json.loads(result.stdout[result.stdout.rindex("\n{\n") :])
    assert data["images"][0]["profile"] == "emu-h100"
    assert data["images"][0]["action"] == "built"
    assert "common" in data["images"][0]["roles"]


def test_unknown_profile_is_refused(tmp_path: Path, spec: Path, target: FakeTarget) -> None:
    result = build(tmp_path, spec, "--profile", "nope")
    assert result.exit_code == 1
    assert "no node uses hardware profile 'nope'; the spec's profiles are emu-h100, small" in result.stderr
    assert not (tmp_path / "clusterctl.lock").exists()


def test_failed_install_leaves_the_lock_alone(tmp_path: Path, spec: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeTarget()
    monkeypatch.setattr("clusterctl.commands.image.target_for", lambda plan, **where: fake)
    failed = ConfigureResult(status="failed", rc=2, failures=[HostFailure("clusterctl-image", "Install x", "no x")])
    monkeypatch.setattr("clusterctl.image.build.run_playbook", lambda *a, **k: failed)
    result = build(tmp_path, spec)
    assert result.exit_code == 1
    assert "the install stage failed on the builder of emu-h100: Install x: no x" in result.stderr
    assert not (tmp_path / "clusterctl.lock").exists()


def test_another_clusters_lock_is_not_overwritten(tmp_path: Path, spec: Path, target: FakeTarget) -> None:
    write_lock(tmp_path / "clusterctl.lock", Lock("other", "0.1.0", "", "", {}))
    result = build(tmp_path, spec)
    assert result.exit_code == 1
    assert "is the lock of cluster other, not local; give this spec its own lock file with --lock FILE" in (
        result.stderr
    )
    assert build(tmp_path, spec, "--lock", str(tmp_path / "mine.lock")).exit_code == 0


def test_image_build_for_a_cloud_provider_without_the_pulumi_cli(tmp_path: Path, monkeypatch) -> None:
    """The cloud targets run stacks/image through Pulumi: without its CLI, the adapter's message and no lock."""
    import clusterctl.run.pulumi as adapter

    monkeypatch.setattr(adapter.shutil, "which", lambda name: None)
    result = invoke(tmp_path, "image", "build", str(EXAMPLES / "aws-p5.yaml"), "--lock", str(tmp_path / "x.lock"))
    assert result.exit_code == 1
    assert "The Pulumi CLI (`pulumi`) is not on PATH" in result.stderr
    assert "The lock was not changed" in result.stderr
    assert not (tmp_path / "x.lock").exists()


# --- up --locked ------------------------------------------------------------------------------


def test_up_locked_without_a_lock_does_nothing(tmp_path: Path, spec: Path, target: FakeTarget) -> None:
    result = invoke(tmp_path, "up", str(spec), "--locked", "--out", str(tmp_path / "b"))
    assert result.exit_code == 1
    assert f"--locked: there is no lock at {tmp_path / 'clusterctl.lock'}" in result.stderr
    assert "Nothing was done." in result.stderr
    assert not (tmp_path / "state").exists()
    assert not (tmp_path / "b").exists()


def test_up_locked_names_every_mismatch(tmp_path: Path, spec: Path, target: FakeTarget) -> None:
    assert build(tmp_path, spec).exit_code == 0
    spec.write_text(spec.read_text().replace('enroot: "3.5.0"', 'enroot: "3.5.1"'))
    emu = read_lock(tmp_path / "clusterctl.lock").images["emu-h100"]  # type: ignore[union-attr]
    target.images = {h: f for h, f in target.images.items() if f.ref != emu.ref}  # the emu image is gone
    result = invoke(tmp_path, "up", str(spec), "--locked", "--out", str(tmp_path / "b"))
    assert result.exit_code == 1
    err = " ".join(result.stderr.split())
    assert f"--locked: the spec no longer matches {tmp_path / 'clusterctl.lock'}:" in err
    assert f"- the locked image of emu-h100 ({emu.tag}) is not on local" in err
    assert "- the spec or the roles changed since small's image was built" in err
    assert "versions.enroot 3.5.0 -> 3.5.1" in err
    assert f"Run `clusterctl image build {spec}`" in err
    assert not (tmp_path / "state" / "local" / "state.json").exists()
    assert not (tmp_path / "b").exists()


def test_up_locked_and_no_image_exclude_each_other(tmp_path: Path, spec: Path) -> None:
    result = invoke(tmp_path, "up", str(spec), "--locked", "--no-image")
    assert result.exit_code == 2
    assert "--locked and --no-image exclude each other" in result.stderr


def test_up_hands_the_usable_locked_images_to_the_run(
    tmp_path: Path, spec: Path, target: FakeTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert build(tmp_path, spec).exit_code == 0
    spec.write_text(spec.read_text().replace('enroot: "3.5.0"', 'enroot: "3.5.1"'))
    seen: dict[str, Any] = {}

    def up(validated: Any, state: Any, bus: Any, **kwargs: Any) -> Any:
        seen.update(kwargs)
        raise SystemExit(0)

    monkeypatch.setattr("clusterctl.commands.up.up", up)
    result = invoke(tmp_path, "up", str(spec), "--out", str(tmp_path / "b"))
    assert result.exit_code == 0
    # small's image no longer matches: a warning, and its nodes start from the base image.
    assert set(seen["images"]) == {"emu-h100"}
    assert "the spec or the roles changed since small's image was built" in result.stderr
    result = invoke(tmp_path, "up", str(spec), "--no-image", "--out", str(tmp_path / "b"))
    assert seen["images"] is None


# --- status and verify against the lock --------------------------------------------------------


def _lock_beside(spec: Path) -> None:
    images = {
        p: LockedImage(p, h * 64, "local", f"sha256:{h * 64}", "debian-12", "amd64", dict(PACKAGES))
        for p, h in (("small", "a"), ("emu-h100", "b"))
    }
    write_lock(spec.parent / "clusterctl.lock", Lock("local", "0.1.0", "", "", images))


def _nodes(changed_on: str) -> ReplayExecutor:
    def answer(host: str, command: str) -> Response | None:
        if command.startswith("dpkg-query"):
            if host == changed_on:
                return 0, DPKG.replace("2.10-3", "2.10-2+hand") + "ii \tvim\t9.0\n", ""
            return 0, DPKG + "ii \tchrony\t4.3\n", ""
        if command == "true":
            return 0, "", ""
        if command.startswith("scontrol show node"):
            return 0, "".join(scontrol_node(f"gpu00{i}", partitions="gpu") for i in range(1, 5)), ""
        if command.startswith("scontrol show partition"):
            return 0, scontrol_partition("gpu", "gpu[001-004]"), ""
        if command.startswith("systemctl is-active slurmd"):
            return 0, "active\n", ""
        return 1, "", "not here"

    return ReplayExecutor(answer)


def test_status_shows_package_drift(tmp_path: Path, spec: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _lock_beside(spec)
    executor = _nodes("gpu002")

    class Machines:
        def status(self, plan: Any, state_dir: Path) -> dict[str, str]:
            return {n.hostname: "running" for n in plan.nodes}

    monkeypatch.setattr("clusterctl.ops.status.for_kind", lambda kind: Machines())
    monkeypatch.setattr("clusterctl.ops.status.executor_for", lambda plan, state_dir: executor)
    StateDir(tmp_path / "state", "local").write({"status": "up"})  # brought up before
    result = invoke(tmp_path, "status", str(spec), "-o", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    nodes = {n["hostname"]: n for n in data["nodes"]}
    assert nodes["gpu002"]["packages"]["changed"] == {"hello": {"locked": "2.10-3", "installed": "2.10-2+hand"}}
    assert nodes["gpu002"]["packages"]["extra"] == {"vim": "9.0"}
    assert nodes["gpu001"]["packages"]["drifted"] is False
    assert nodes["gpu001"]["packages"]["extra"] == {"chrony": "4.3"}
    assert (
        f"gpu002: packages differ from {tmp_path / 'clusterctl.lock'}: hello 2.10-3 -> 2.10-2+hand "
        "(+1 not in the image)" in data["drift"]
    )
    assert sum("packages differ" in line for line in data["drift"]) == 1
    # One dpkg-query per node.
    assert len(executor.commands("dpkg-query")) == 6
    text = CliRunner(env={"COLUMNS": "300"}).invoke(
        cli, ["status", str(spec), "--state-dir", str(tmp_path / "state")], catch_exceptions=False
    )
    row = next(line for line in text.stdout.splitlines() if "gpu002" in line and "│" in line)
    assert "drift: hello 2.10-3 -> 2.10-2+hand (+1 not in the image)" in row
    row = next(line for line in text.stdout.splitlines() if "gpu001" in line and "│" in line)
    assert "ok (+1 not in the image)" in row


def test_verify_fails_a_drifted_node_naming_the_package(
    tmp_path: Path, spec: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _lock_beside(spec)
    executor = _nodes("gpu003")
    monkeypatch.setattr("clusterctl.commands.verify.executor_for", lambda plan, state_dir: executor)
    result = CliRunner().invoke(
        cli,
        ["verify", str(spec), "--only", "packages", "--no-drain", "--out", str(tmp_path / "b"), "-o", "json"],
        catch_exceptions=False,
    )
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    verdicts = {n["hostname"]: n["checks"]["packages"] for n in data["nodes"]}
    assert verdicts == {n: "fail" if n == "gpu003" else "pass" for n in verdicts}
    assert len(verdicts) == 6
    assert data["failing_nodes"] == ["gpu003"]
    messages = {f["node"]: f["message"] for f in data["findings"] if f["rule"] == "packages"}
    assert messages["gpu003"] == (
        "1 package(s) of the emu-h100 image differ on gpu003: hello 2.10-3 -> 2.10-2+hand; "
        "1 package(s) not in the image (not checked)."
    )


def test_verify_without_a_lock_has_no_packages_check(
    tmp_path: Path, spec: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    executor = _nodes("gpu003")
    monkeypatch.setattr("clusterctl.commands.verify.executor_for", lambda plan, state_dir: executor)
    result = CliRunner().invoke(
        cli, ["verify", str(spec), "--only", "packages", "--out", str(tmp_path / "b")], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    assert executor.commands("dpkg-query") == []
