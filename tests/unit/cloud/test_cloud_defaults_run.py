"""Cloud defaults on the clusterctl side: host keys pinned from the stack outputs, the burst
group's base made with the operator's credentials, world-open SSH refused in the spec."""

from __future__ import annotations

import copy
import json
import stat
from pathlib import Path
from typing import Any, ClassVar

import pytest
from click.testing import CliRunner

from clusterctl.commands import cli
from clusterctl.pipeline import load_and_validate, render
from clusterctl.plan import Plan
from clusterctl.run import burst_cloud
from clusterctl.run.events import EventBus
from clusterctl.run.providers import cloud as cloud_module
from clusterctl.run.providers.base import ProviderError, ProvisionedHost
from clusterctl.run.providers.ssh_inventory import hosts_from_outputs, write_known_hosts
from clusterctl.run.pulumi import PLUGIN_VERSIONS, DestroySummary, PreviewSummary, PulumiError, UpSummary
from clusterctl.run.sshkeys import ensure_host_keys
from tests.conftest import EXAMPLES
from tests.specs import example_data, write_spec


@pytest.fixture(scope="module")
def plan() -> Plan:
    return load_and_validate(EXAMPLES / "aws-p5.yaml").plan


def _keys(plan: Plan, tmp_path: Path) -> dict[str, str]:
    pairs = ensure_host_keys(tmp_path / "state", [n.hostname for n in plan.nodes] + ["bastion"])
    return {name: pair.public for name, pair in pairs.items()}


def _outputs(plan: Plan, keys: dict[str, str]) -> dict[str, Any]:
    return {
        "nodes": {n.hostname: n.address for n in plan.nodes},
        "sshUser": "ubuntu",
        "hostKeys": dict(keys),
        "bastion": {"address": "198.51.100.9", "user": "ubuntu", "name": "bastion"},
    }


# --- host keys pinned from the outputs ---------------------------------------------------------


@pytest.mark.parametrize("missing", ["gpu003", "bastion"])
def test_a_key_missing_from_the_outputs_is_an_error_not_a_fallback(plan: Plan, tmp_path: Path, missing: str) -> None:
    keys = _keys(plan, tmp_path)
    outputs = _outputs(plan, keys)
    del outputs["hostKeys"][missing]
    # clusterctl knows the generated key, but the stack did not confirm it: refused.
    with pytest.raises(ProviderError, match=f"carry no SSH host key for {missing}; .*never trusts one on first use"):
        hosts_from_outputs(plan, outputs, user="ubuntu", host_keys=keys)


def test_a_different_key_in_the_outputs_is_refused(plan: Plan, tmp_path: Path) -> None:
    keys = _keys(plan, tmp_path)
    outputs = _outputs(plan, keys)
    hosts, bastion = hosts_from_outputs(plan, outputs, user="ubuntu", host_keys=keys)
    assert {h.hostname: h.host_key for h in hosts} == {n.hostname: keys[n.hostname] for n in plan.nodes}
    assert bastion is not None
    assert bastion.host_key == keys["bastion"]
    outputs["hostKeys"]["gpu001"] = keys["gpu002"]
    with pytest.raises(
        ProviderError, match="host key of gpu001 in the stack outputs is not the one clusterctl generated"
    ):
        hosts_from_outputs(plan, outputs, user="ubuntu", host_keys=keys)


@pytest.mark.parametrize(
    "bad",
    [
        "ssh-ed25519 AAAAC3Nza\n@cert-authority * ssh-ed25519 AAAAevil",
        "@revoked ssh-ed25519 AAAAC3NzaC1lZDI1NTE5",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5\n",
        "ssh-dss AAAAB3NzaC1kc3MAAACBAP",
        "not a key",
        "",
        42,
    ],
)
def test_a_key_of_the_wrong_shape_never_reaches_known_hosts(plan: Plan, bad: Any) -> None:
    outputs = _outputs(plan, {n.hostname: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5" for n in plan.nodes})
    outputs["hostKeys"]["bastion"] = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5"
    outputs["hostKeys"]["gpu001"] = bad
    with pytest.raises(ProviderError, match="gpu001"):
        hosts_from_outputs(plan, outputs, user="ubuntu")


@pytest.mark.parametrize("address", ["10.0.0.1 evil", "10.0.0.1,*", "host.example.com", "[::1]:22"])
def test_an_address_of_the_wrong_shape_is_refused(plan: Plan, tmp_path: Path, address: str) -> None:
    keys = _keys(plan, tmp_path)
    outputs = _outputs(plan, keys)
    outputs["nodes"]["gpu001"] = address
    with pytest.raises(ProviderError, match="not an IP address"):
        hosts_from_outputs(plan, outputs, user="ubuntu", host_keys=keys)


def test_known_hosts_is_written_atomically_and_never_through_a_link(plan: Plan, tmp_path: Path) -> None:
    keys = _keys(plan, tmp_path)
    hosts, bastion = hosts_from_outputs(plan, _outputs(plan, keys), user="ubuntu", host_keys=keys)
    assert bastion is not None
    folder = tmp_path / "state"
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    known = folder / "known_hosts"
    known.symlink_to(victim)  # a link planted where known_hosts goes is replaced, not followed
    write_known_hosts(known, [*hosts, bastion])
    assert victim.read_text() == "keep\n"
    assert not known.is_symlink()
    assert stat.S_IMODE(known.stat().st_mode) == 0o644
    lines = known.read_text().splitlines()
    assert len(lines) == len(plan.nodes) + 1
    assert f"198.51.100.9 {keys['bastion']}" in lines
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_known_hosts_has_no_unpinned_entry(tmp_path: Path) -> None:
    with pytest.raises(ProviderError, match="no SSH host key is known for a"):
        write_known_hosts(tmp_path / "kh", [ProvisionedHost("a", "10.0.0.1")])
    assert not (tmp_path / "kh").exists()


class _NoBastionStack:
    def __init__(self, plan: Plan, build_dir: Path, state_dir: Path, **kwargs: Any) -> None:
        self.plan, self.host_keys = plan, kwargs.get("host_keys") or {}

    def up(self) -> UpSummary:
        outputs = {
            "nodes": {n.hostname: n.address for n in self.plan.nodes},
            "hostKeys": {name: pair.public for name, pair in self.host_keys.items()},
        }
        return UpSummary(changes={}, outputs=outputs)


def test_a_planned_bastion_missing_from_the_outputs_is_an_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    validated = load_and_validate(EXAMPLES / "aws-p5.yaml")
    build, _ = render(validated, tmp_path / "build")
    monkeypatch.setattr(cloud_module, "PulumiStack", _NoBastionStack)
    monkeypatch.setattr(cloud_module, "require_pulumi_cli", lambda: "/usr/bin/pulumi")
    with pytest.raises(ProviderError, match="plan has a bastion but the stack outputs name none"):
        cloud_module.CloudProvider("aws").provision(
            validated.plan, build, tmp_path / "state", yes=True, events=EventBus()
        )


def test_burst_up_refuses_a_host_key_it_did_not_generate(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    burst_plan = load_and_validate(EXAMPLES / "aws-burst.yaml").plan

    class WrongKeys:
        def __init__(self, plan: Plan, build_dir: Path, state_dir: Path, **kwargs: Any) -> None:
            self.plan, self.target = plan, kwargs["target"]

        def up(self) -> UpSummary:
            active = json.loads(self.target.config[burst_cloud.ACTIVE_HOSTS_CONFIG])
            nodes = {n.hostname: n.address for n in self.plan.nodes if n.hostname in active}
            keys = dict.fromkeys(active, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5someoneelse")
            return UpSummary(changes={}, outputs={"nodes": nodes, "hostKeys": keys})

    monkeypatch.setattr(burst_cloud, "PulumiStack", WrongKeys)
    monkeypatch.setattr(burst_cloud, "require_pulumi_cli", lambda: "/usr/bin/pulumi")
    build, state = tmp_path / "build", tmp_path / "state"
    (build / "ansible" / "inventory").mkdir(parents=True)
    with pytest.raises(ProviderError, match="no host key, or not the generated one, for gpu-b001"):
        burst_cloud.resume_cloud(burst_plan, "aws", [burst_plan.node("gpu-b001")], build, state, EventBus())
    assert burst_cloud.active_hosts(state, "gpu-b") == []  # rolled back


# --- the burst group's base: the operator's, at `up` --------------------------------------------


class BaseStack:
    """Records what the base stacks were asked to do."""

    made: ClassVar[list[tuple[str, str, dict[str, str]]]] = []
    fail_destroy: ClassVar[bool] = False

    def __init__(self, plan: Plan, build_dir: Path, state_dir: Path, **kwargs: Any) -> None:
        self.target = kwargs["target"]
        assert not kwargs.get("host_keys")  # the base carries no node's key

    def preview(self) -> PreviewSummary:
        BaseStack.made.append(("preview", self.target.stack, dict(self.target.config)))
        return PreviewSummary(changes={"create": 7})

    def up(self) -> UpSummary:
        BaseStack.made.append(("up", self.target.stack, dict(self.target.config)))
        return UpSummary(changes={"create": 7}, outputs={"part": "base"})

    def destroy(self) -> DestroySummary:
        if BaseStack.fail_destroy:
            raise PulumiError("pulumi destroy failed: DependencyViolation: resource sg-1 has a dependent object")
        BaseStack.made.append(("destroy", self.target.stack, dict(self.target.config)))
        return DestroySummary(changes={"delete": 7})


@pytest.fixture
def base_stack(monkeypatch: pytest.MonkeyPatch) -> type[BaseStack]:
    BaseStack.made, BaseStack.fail_destroy = [], False
    monkeypatch.setattr(burst_cloud, "PulumiStack", BaseStack)
    monkeypatch.setattr(burst_cloud, "require_pulumi_cli", lambda: "/usr/bin/pulumi")
    return BaseStack


def test_base_target_is_the_groups_base_stack() -> None:
    burst_plan = load_and_validate(EXAMPLES / "aws-burst.yaml").plan
    target = burst_cloud.base_target(burst_plan, "gpu-b")
    assert target.stack == "organization/clusterctl-burst/harbor-burst-gpu-b-base"
    assert target.program == "burst"
    assert target.config == {"clusterctl:group": "gpu-b", "clusterctl:part": "base"}
    assert target.workspace == "harbor-burst-gpu-b-base"
    assert target.plugins == PLUGIN_VERSIONS["aws"]
    # The controller's stack is another one, and runs the nodes part (the default).
    nodes = burst_cloud.burst_target(burst_plan, "gpu-b", [])
    assert nodes.stack != target.stack
    assert "clusterctl:part" not in nodes.config


def test_up_makes_every_burst_base_after_asking(base_stack: type[BaseStack], tmp_path: Path) -> None:
    burst_plan = load_and_validate(EXAMPLES / "aws-burst.yaml").plan
    asked: list[str] = []
    made = burst_cloud.prepare_cloud_groups(
        burst_plan, tmp_path, tmp_path, EventBus(), yes=False, confirm=lambda q: asked.append(q) or True
    )
    assert made == ["gpu-b"]
    assert [m[0] for m in base_stack.made] == ["preview", "up"]
    assert base_stack.made[-1][1].endswith("harbor-burst-gpu-b-base")
    assert len(asked) == 1
    assert "burst group gpu-b base" in asked[0]
    base_stack.made = []
    with pytest.raises(ProviderError, match="base of burst group gpu-b was not confirmed"):
        burst_cloud.prepare_cloud_groups(burst_plan, tmp_path, tmp_path, EventBus(), yes=False, confirm=lambda q: False)
    assert [m[0] for m in base_stack.made] == ["preview"]


def test_no_cloud_burst_group_no_base(base_stack: type[BaseStack], tmp_path: Path) -> None:
    plan = load_and_validate(EXAMPLES / "aws-p5.yaml").plan
    assert (
        burst_cloud.prepare_cloud_groups(plan, tmp_path, tmp_path, EventBus(), yes=True, confirm=lambda q: True) == []
    )
    assert base_stack.made == []


def test_down_destroys_the_instances_then_the_bases_and_says_why_it_cannot(
    base_stack: type[BaseStack], tmp_path: Path
) -> None:
    burst_plan = load_and_validate(EXAMPLES / "aws-burst.yaml").plan
    burst_cloud.write_state(tmp_path, "gpu-b", burst_cloud.GroupState(active=["gpu-b001"]))
    assert burst_cloud.destroy_cloud_bases(burst_plan, tmp_path, tmp_path, EventBus()) == ["gpu-b"]
    assert [(m[0], m[1]) for m in base_stack.made] == [
        ("destroy", burst_cloud.burst_target(burst_plan, "gpu-b", []).stack),
        ("destroy", burst_cloud.base_target(burst_plan, "gpu-b").stack),
    ]
    assert not burst_cloud.state_path(tmp_path, "gpu-b").exists()
    base_stack.fail_destroy = True
    with pytest.raises(ProviderError, match="DependencyViolation"):
        burst_cloud.destroy_cloud_bases(burst_plan, tmp_path, tmp_path, EventBus())


def test_a_missing_base_says_to_run_up() -> None:
    text = "error: InvalidLaunchTemplateName.NotFoundException: The specified launch template does not exist"
    assert burst_cloud.classify("aws", text).startswith("burst group base missing: run `clusterctl up`")


# --- the spec: allow_world_ssh -----------------------------------------------------------------


def _world_spec(tmp_path: Path, allow: bool | None) -> Path:
    data = copy.deepcopy(example_data("aws-p5.yaml"))
    data["provider"]["allowed_ssh_cidrs"] = ["0.0.0.0/0"]
    if allow is not None:
        data["provider"]["allow_world_ssh"] = allow
    return write_spec(tmp_path, data)


def test_world_open_ssh_is_a_located_error_that_cannot_be_skipped(tmp_path: Path) -> None:
    spec = str(_world_spec(tmp_path, None))
    result = CliRunner().invoke(cli, ["validate", spec], catch_exceptions=False)
    assert result.exit_code == 1
    output = result.stdout + result.stderr
    assert "CLD011" in output
    assert "allowed_ssh_cidrs" in output
    assert "allow_world_ssh: true" in output  # the hint names the way out
    assert "Traceback" not in output
    skipped = CliRunner().invoke(cli, ["validate", spec, "--skip-rule", "ssh-exposure"], catch_exceptions=False)
    assert skipped.exit_code == 2
    assert "safety rules cannot be skipped" in skipped.stderr


def test_allow_world_ssh_reaches_the_plan(tmp_path: Path) -> None:
    validated = load_and_validate(_world_spec(tmp_path, True))
    assert validated.plan.cloud is not None
    assert validated.plan.cloud.allow_world_ssh is True
    assert validated.plan.cloud.bastion is not None
    assert validated.plan.cloud.bastion.allowed_cidrs == ["0.0.0.0/0"]
    assert load_and_validate(EXAMPLES / "aws-p5.yaml").plan.cloud.allow_world_ssh is False  # type: ignore[union-attr]
    # A strict bool: "yes" is not true.
    result = CliRunner().invoke(cli, ["validate", str(_world_spec(tmp_path, "yes"))], catch_exceptions=False)  # type: ignore[arg-type]
    assert result.exit_code == 1
    assert "allow_world_ssh" in result.stdout + result.stderr
