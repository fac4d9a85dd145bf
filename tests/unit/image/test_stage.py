"""``up`` with locked images: new nodes from their profile's image, configure stage only on nodes made from it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clusterctl.image.lock import LockedImage
from clusterctl.image.stage import STAGE_INVENTORY, baked_hosts, write_stage_inventory
from clusterctl.ops import up as orchestrate
from clusterctl.ops.readiness import Readiness
from clusterctl.pipeline import load_and_validate, render
from clusterctl.plan import Plan
from clusterctl.render import ansible_yaml
from clusterctl.run.ansible import ConfigureResult
from clusterctl.run.events import EventBus
from clusterctl.run.providers import local as local_provider
from clusterctl.run.providers.base import ProvisionedHost
from clusterctl.run.state import StateDir
from tests.conftest import EXAMPLES

SMALL = "a" * 64
EMU = "b" * 64


def locked(profile: str, digest: str) -> LockedImage:
    return LockedImage(profile, digest, "local", f"sha256:{digest[:1] * 64}", "debian-12", "amd64", {"bash": "5.2"})


def host(name: str, image_hash: str | None) -> ProvisionedHost:
    return ProvisionedHost(hostname=name, address="172.30.0.10", connection="docker", image_hash=image_hash)


@pytest.fixture
def plan() -> Plan:
    return load_and_validate(EXAMPLES / "local.yaml").plan


def test_baked_hosts_are_those_made_from_their_profiles_locked_image(plan: Plan) -> None:
    images = {"small": locked("small", SMALL), "emu-h100": locked("emu-h100", EMU)}
    hosts = [
        host("ctl001", SMALL),  # made from the locked image
        host("login001", None),  # a plain base image
        host("gpu001", EMU),
        host("gpu002", "c" * 64),  # an image of an older lock
        host("gpu003", SMALL),  # another profile's image
    ]
    assert baked_hosts(plan, hosts, images) == ["ctl001", "gpu001"]
    assert baked_hosts(plan, hosts, {}) == []


def _stage_vars(build_dir: Path) -> dict[str, Any]:
    text = (build_dir / STAGE_INVENTORY).read_text()
    assert '!unsafe "configure"' in text or "hosts: {}" in text
    return dict(ansible_yaml.load(text)["all"]["hosts"] or {})


def test_stage_inventory_is_written_only_when_needed(tmp_path: Path, plan: Plan) -> None:
    validated = load_and_validate(EXAMPLES / "local.yaml")
    build_dir, _ = render(validated, tmp_path / "build")
    assert write_stage_inventory(build_dir, plan, []) is None
    assert not (build_dir / STAGE_INVENTORY).exists()
    write_stage_inventory(build_dir, plan, ["gpu001", "ctl001"])
    assert _stage_vars(build_dir) == {
        "ctl001": {"clusterctl_stage": "configure"},
        "gpu001": {"clusterctl_stage": "configure"},
    }
    # A later run without baked nodes empties it: no node keeps a stage it no longer has.
    write_stage_inventory(build_dir, plan, [])
    assert _stage_vars(build_dir) == {}
    # A re-render keeps it (it is a run file, outside the manifest).
    render(validated, build_dir)
    assert (build_dir / STAGE_INVENTORY).exists()


def test_up_passes_locked_images_and_stages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    validated = load_and_validate(EXAMPLES / "local.yaml")
    state = StateDir(tmp_path / "state", validated.plan.cluster.name)
    state.ensure()
    seen: dict[str, Any] = {}

    class Provider:
        def provision(self, plan: Plan, build_dir: Path, state_dir: Path, **_: Any) -> list[ProvisionedHost]:
            return [host("ctl001", SMALL), host("login001", None), host("gpu001", EMU)]

    def for_kind(kind: str, images: dict[str, LockedImage] | None = None) -> Provider:
        seen["images"] = images
        return Provider()

    def run_playbook(build_dir: Path, *args: Any, **kwargs: Any) -> ConfigureResult:
        seen["stages"] = _stage_vars(build_dir)
        return ConfigureResult(status="successful", rc=0)

    def pull(self: Any, hold: set[str]) -> ConfigureResult:
        # The pulling nodes are told their stage in their pointer (tests/unit/ops/test_pull.py publishes for real).
        seen["pull stages"] = {h: "configure" for h in self.run.result.baked if h in self.run.pulled}
        return ConfigureResult(status="successful", rc=0)

    monkeypatch.setattr(orchestrate, "for_kind", for_kind)
    monkeypatch.setattr(orchestrate, "run_playbook", run_playbook)
    monkeypatch.setattr(orchestrate._Puller, "converge", pull)
    monkeypatch.setattr(orchestrate, "check_cluster", lambda *a: Readiness())
    images = {"small": locked("small", SMALL), "emu-h100": locked("emu-h100", EMU)}
    result = orchestrate.up(validated, state, EventBus(), out_dir=tmp_path / "build", images=images)
    assert result.ok, result.error
    assert seen["images"] == images
    assert seen["stages"] == {"ctl001": {"clusterctl_stage": "configure"}, "gpu001": {"clusterctl_stage": "configure"}}
    assert seen["pull stages"] == {"gpu001": "configure"}
    assert result.baked == ["ctl001", "gpu001"]


def test_local_provider_makes_each_node_from_its_profiles_image(monkeypatch: pytest.MonkeyPatch, plan: Plan) -> None:
    runs: list[list[str]] = []
    images = {"emu-h100": "sha256:" + "e" * 64}

    def docker(*args: str, **_: Any) -> Any:
        if args[0] == "run":
            runs.append(list(args))
        return type("Done", (), {"stdout": "", "stderr": "", "returncode": 0})()

    def inspect(kind: str, name: str) -> dict[str, Any] | None:
        if kind == "container" and any(name in r for r in runs):
            image = runs[[name in r for r in runs].index(True)][-2]
            digest = EMU if image == images["emu-h100"] else None
            return {"Config": {"Labels": {"clusterctl.image.hash": digest} if digest else {}}}
        return None

    monkeypatch.setattr(local_provider, "docker", docker)
    monkeypatch.setattr(local_provider, "inspect", inspect)
    monkeypatch.setattr(local_provider, "wait_booted", lambda name: None)
    monkeypatch.setattr(local_provider, "engine_available", lambda: True)
    monkeypatch.setattr(local_provider, "ensure_engine_and_image", lambda image, events: None)
    monkeypatch.setattr(local_provider, "_ensure_network", lambda plan: "net")
    agents: list[str] = []
    monkeypatch.setattr(
        local_provider, "pull_bootstrap", lambda *a: lambda node, container: agents.append(node.hostname)
    )
    hosts = local_provider.LocalProvider(images).provision(plan, Path("b"), Path("s"), yes=True, events=EventBus())
    # The compute nodes, made now, got their agent (tests/e2e: through docker exec); the others are pushed.
    assert sorted(agents) == [n.hostname for n in plan.nodes if n.role == "compute"]
    made = {r[r.index("--hostname") + 1]: r[-2] for r in runs}
    assert made["gpu001"] == images["emu-h100"]
    assert made["ctl001"] == local_provider.DEFAULT_IMAGE
    by_name = {h.hostname: h.image_hash for h in hosts}
    assert by_name["gpu001"] == EMU
    assert by_name["ctl001"] is None


def test_a_pulling_profiles_image_carries_the_agents_engine() -> None:
    """The local example's GPU nodes pull: their image bakes the engine (its versions are in the hash);
    the controller's and login node's profile does not."""
    from clusterctl.image.hash import profile_hash

    plan = load_and_validate(EXAMPLES / "local.yaml").plan
    assert "engine" in profile_hash(plan, "emu-h100").inputs
    assert "engine" not in profile_hash(plan, "small").inputs
