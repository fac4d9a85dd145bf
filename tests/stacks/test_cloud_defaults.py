"""Cloud defaults every program keeps, under Pulumi's mocks (issue 18, "Cloud defaults").

For each stack: disks encrypted (AWS EBS and launch templates, Azure encryption at host; GCP
and FSx encrypt at rest with no switch, so the stack's choices that matter are asserted), OS
Login with project keys blocked on GCP (and the guest agent kept off the pinned host key),
password logins off, no ingress rule admitting SSH from the whole internet unless the plan
says ``allow_world_ssh`` (and then only on the bastion), and the host keys in the outputs.
"""

from __future__ import annotations

import base64
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from clusterctl.plan import Plan
from clusterctl.run.providers.base import ProviderError
from clusterctl.run.providers.ssh_inventory import hosts_from_outputs
from tests.plan_edits import replaced
from tests.stacks.conftest import STACKS, RecordingMocks, example_plan, run, unsecret

if str(STACKS / "burst") not in sys.path:
    sys.path.insert(0, str(STACKS / "burst"))

from clusterctl_aws import AwsCluster, AwsClusterArgs  # isort: skip
from clusterctl_aws import deploy as aws_deploy  # isort: skip
from clusterctl_azure import AzureCluster, AzureClusterArgs  # isort: skip
from clusterctl_azure import deploy as azure_deploy  # isort: skip
from clusterctl_baremetal import deploy as baremetal_deploy  # isort: skip
from clusterctl_burst import BurstGroupArgs, burst_base, burst_group  # isort: skip
from clusterctl_gcp import GcpCluster, GcpClusterArgs  # isort: skip
from clusterctl_gcp import deploy as gcp_deploy  # isort: skip
from clusterctl_stack import HostKey, StackInputs, WorldOpenSshError  # isort: skip

AWS_INSTANCE = "aws:ec2/instance:Instance"
AWS_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
AWS_INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
GCP_INSTANCE = "gcp:compute/instance:Instance"
GCP_FIREWALL = "gcp:compute/firewall:Firewall"
AZURE_VM = "azure-native:compute:VirtualMachine"
AZURE_NSG = "azure-native:network:NetworkSecurityGroup"
WORLD = ("0.0.0.0/0", "::/0")
CLUSTERS: dict[str, tuple[str, Callable[..., Any], Callable[..., Any]]] = {
    "aws": ("aws-p5.yaml", AwsCluster, AwsClusterArgs),
    "gcp": ("gcp-a3mega.yaml", GcpCluster, GcpClusterArgs),
    "azure": ("azure-ndv5.yaml", AzureCluster, AzureClusterArgs),
}
DEPLOYS = {"aws": aws_deploy, "gcp": gcp_deploy, "azure": azure_deploy}


def _keys(plan: Plan) -> dict[str, HostKey]:
    names = [n.hostname for n in plan.nodes] + ["bastion"]
    return {name: HostKey(private=f"PRIVATE-{name}", public=f"ssh-ed25519 AAAA{name}") for name in names}


def _cluster(kind: str, plan: Plan) -> RecordingMocks:
    _, component, args = CLUSTERS[kind]
    return run(
        lambda: component(plan.cluster.name, args(plan=plan, ssh_public_key="ssh-ed25519 AAAAk", host_keys=_keys(plan)))
    )


@pytest.fixture(scope="module")
def plans() -> dict[str, Plan]:
    return {kind: example_plan(example) for kind, (example, _, _) in CLUSTERS.items()}


@pytest.fixture(scope="module")
def clusters(plans: dict[str, Plan]) -> dict[str, RecordingMocks]:
    return {kind: _cluster(kind, plan) for kind, plan in plans.items()}


def _burst_plan(tmp_path: Path, kind: str) -> Plan:
    if kind == "aws":
        return example_plan("aws-burst.yaml")
    from tests.stacks.test_burst_stack import _other_cloud

    return _other_cloud(tmp_path, kind)


def _burst(plan: Plan, part: str) -> RecordingMocks:
    keys = {
        n.hostname: HostKey(private=f"PRIVATE-{n.hostname}", public=f"ssh-ed25519 AAAA{n.hostname}") for n in plan.nodes
    }
    if part == "base":
        return run(lambda: burst_base(BurstGroupArgs(plan=plan, group="gpu-b")))
    hosts = plan.burst_cloud["gpu-b"].group("gpu-b").hosts
    return run(
        lambda: burst_group(
            BurstGroupArgs(
                plan=plan, group="gpu-b", active_hosts=hosts, ssh_public_key="ssh-ed25519 AAAAk", host_keys=keys
            )
        )
    )


# --- encryption --------------------------------------------------------------------------------


def test_aws_every_volume_is_encrypted(clusters: dict[str, RecordingMocks]) -> None:
    created = clusters["aws"]
    templates = created.of_type(AWS_TEMPLATE)
    assert templates
    for template in templates:
        (mapping,) = template.inputs["blockDeviceMappings"]
        assert mapping["ebs"]["encrypted"] == "true", template.name
    plain = [r for r in created.of_type(AWS_INSTANCE) if "launchTemplate" not in r.inputs]
    assert {r.name.rsplit("-", 1)[-1] for r in plain} >= {"bastion"}
    for instance in plain:  # the controller, login and bastion instances without a template
        assert instance.inputs["rootBlockDevice"]["encrypted"] is True, instance.name


def test_aws_fsx_is_a_deployment_type_that_encrypts_in_transit(clusters: dict[str, RecordingMocks], plans) -> None:
    filesystems = clusters["aws"].of_type("aws:fsx/lustreFileSystem:LustreFileSystem")
    assert filesystems
    # At rest FSx for Lustre always encrypts (no switch to assert); in transit only these types do.
    assert {fs.inputs["deploymentType"] for fs in filesystems} <= {"PERSISTENT_2", "PERSISTENT_1", "SCRATCH_2"}
    scratch1 = replaced(plans["aws"], {"cloud.managed_lustre.0.tier": "SCRATCH_1"})
    with pytest.raises(ValueError, match="does not encrypt data in transit"):
        _cluster("aws", scratch1)


@pytest.mark.parametrize("kind", ["aws"])
def test_aws_burst_base_templates_encrypt_their_volumes(tmp_path: Path, kind: str) -> None:
    base = _burst(_burst_plan(tmp_path, kind), "base")
    templates = base.of_type(AWS_TEMPLATE)
    assert len(templates) == 4
    assert all(t.inputs["blockDeviceMappings"][0]["ebs"]["encrypted"] == "true" for t in templates)
    assert all(t.inputs["metadataOptions"]["httpTokens"] == "required" for t in templates)


def test_azure_vms_encrypt_at_host_and_refuse_passwords(clusters: dict[str, RecordingMocks], tmp_path: Path) -> None:
    burst = _burst(_burst_plan(tmp_path, "azure"), "nodes")
    vms = clusters["azure"].of_type(AZURE_VM) + burst.of_type(AZURE_VM)
    assert len(vms) > 4
    for vm in vms:
        assert vm.inputs["securityProfile"]["encryptionAtHost"] is True, vm.name
        secret, os_profile = unsecret(vm.inputs["osProfile"])  # secret: its custom data holds the host key
        assert secret
        assert os_profile["linuxConfiguration"]["disablePasswordAuthentication"] is True, vm.name
        cloud_config = yaml.safe_load(base64.b64decode(unsecret(os_profile["customData"])[1]))
        assert cloud_config["ssh_pwauth"] is False


# --- GCP: OS Login, and clusterctl's own way in ------------------------------------------------


def _gcp_instances(tmp_path: Path, clusters: dict[str, RecordingMocks]) -> list:
    burst = _burst(_burst_plan(tmp_path, "gcp"), "nodes")
    return clusters["gcp"].of_type(GCP_INSTANCE) + burst.of_type(GCP_INSTANCE)


def test_gcp_os_login_on_and_project_keys_blocked(clusters: dict[str, RecordingMocks], tmp_path: Path) -> None:
    instances = _gcp_instances(tmp_path, clusters)
    assert any(r.name.endswith("-bastion") for r in instances)
    for instance in instances:
        secret, metadata = unsecret(instance.inputs["metadata"])
        assert secret, "the metadata carries the user data with a private host key"
        assert metadata["enable-oslogin"] == "TRUE", instance.name
        assert metadata["block-project-ssh-keys"] == "TRUE", instance.name
        # OS Login ignores metadata keys: clusterctl never puts its key there ...
        assert "ssh-keys" not in metadata
        assert "sshKeys" not in metadata


def test_gcp_clusterctl_key_goes_to_a_local_user_and_the_host_key_stays(
    clusters: dict[str, RecordingMocks], tmp_path: Path
) -> None:
    """... but in the authorized_keys of the local ssh_user cloud-init creates, which OS Login leaves alone."""
    for instance in _gcp_instances(tmp_path, clusters):
        config = yaml.safe_load(unsecret(instance.inputs["metadata"])[1]["user-data"].removeprefix("#cloud-config\n"))
        (user,) = config["users"]
        assert user["name"] == "ubuntu"
        assert user["ssh_authorized_keys"] == ["ssh-ed25519 AAAAk"]
        assert config["ssh_pwauth"] is False
        # The guest agent would make new host keys on first boot; it is told not to.
        assert config["ssh_keys"]["ed25519_private"].startswith("PRIVATE-")
        (agent,) = [f for f in config["write_files"] if f["path"] == "/etc/default/instance_configs.cfg"]
        assert "[InstanceSetup]\nset_host_keys = false\n" in agent["content"]


def test_gcp_firewalls_never_lack_sources(plans: dict[str, Plan]) -> None:
    """GCP reads an ingress firewall without source ranges as 0.0.0.0/0."""
    broken = replaced(plans["gcp"], {"cloud.gpu_networks.0.cidr": None})
    with pytest.raises(ValueError, match=r"without source ranges would admit 0\.0\.0\.0/0"):
        _cluster("gcp", broken)


# --- no SSH from the whole internet without allow_world_ssh ------------------------------------


def _world_open(created: RecordingMocks) -> list[str]:
    """Names of ingress rules that admit SSH (port 22, or every port) from everyone."""
    found = []
    for rule in created.of_type(AWS_INGRESS):
        ssh = rule.inputs["ipProtocol"] == "-1" or rule.inputs.get("fromPort", 0) <= 22 <= rule.inputs.get("toPort", 0)
        if ssh and (rule.inputs.get("cidrIpv4") in WORLD or rule.inputs.get("cidrIpv6") in WORLD):
            found.append(rule.name)
    for rule in created.of_type(GCP_FIREWALL):
        ssh = any(a["protocol"] == "all" or "22" in a.get("ports", ["22"]) for a in rule.inputs["allows"])
        sources = rule.inputs.get("sourceRanges") or ["0.0.0.0/0"]  # none: GCP's default is the world
        if ssh and rule.inputs["direction"] == "INGRESS" and any(s in WORLD for s in sources):
            found.append(rule.name)
    for nsg in created.of_type(AZURE_NSG):
        for rule in nsg.inputs.get("securityRules", []):
            sources = rule.get("sourceAddressPrefixes") or [rule.get("sourceAddressPrefix")]
            inbound = rule["direction"] == "Inbound" and rule["access"] == "Allow"
            world = any(str(s).lower() in ("*", "internet", "any", *WORLD) for s in sources)
            if inbound and world and rule["destinationPortRange"] in ("22", "*"):
                found.append(f"{nsg.name}/{rule['name']}")
    return found


@pytest.mark.parametrize("kind", sorted(CLUSTERS))
@pytest.mark.parametrize("world", WORLD)
def test_world_open_bastion_refused_without_allow_world_ssh(
    plans: dict[str, Plan], clusters: dict[str, RecordingMocks], kind: str, world: str
) -> None:
    assert clusters[kind].resources
    assert not _world_open(clusters[kind])  # closed by default ...
    opened = replaced(plans[kind], {"cloud.bastion.allowed_cidrs": ["203.0.113.0/24", world]})
    with pytest.raises(WorldOpenSshError, match="allow_world_ssh"):  # ... and a /0 refused without the flag
        _cluster(kind, opened)


@pytest.mark.parametrize("kind", sorted(CLUSTERS))
def test_world_open_bastion_only_with_allow_world_ssh(plans: dict[str, Plan], kind: str) -> None:
    opened = replaced(plans[kind], {"cloud.bastion.allowed_cidrs": ["0.0.0.0/0"], "cloud.allow_world_ssh": True})
    created = _cluster(kind, opened)
    world = _world_open(created)
    assert len(world) == 1  # the bastion's rule, and nothing that reaches the nodes
    assert "bastion" in world[0]


@pytest.mark.parametrize("kind", ["aws", "gcp", "azure"])
def test_burst_groups_never_open_ssh_to_the_world(tmp_path: Path, kind: str) -> None:
    plan = _burst_plan(tmp_path, kind)
    for part in ("base", "nodes"):
        assert not _world_open(_burst(plan, part))
    opened = replaced(plan, {"burst_cloud.gpu-b.network_cidr": "0.0.0.0/0"})
    if kind != "azure":  # Azure admits the VNet by its service tag, never by a range
        with pytest.raises(WorldOpenSshError):
            _burst(opened, "base")


# --- host keys in the outputs --------------------------------------------------------------------


def _exports(program: Callable[[], Any], mocks: RecordingMocks | None = None) -> dict[str, Any]:
    exported: dict[str, Any] = {}

    def wrapped() -> Any:
        original = pulumi.export
        try:
            pulumi.export = lambda key, value: exported.__setitem__(key, value)  # type: ignore[assignment]
            return program()
        finally:
            pulumi.export = original

    run(wrapped, mocks)
    return exported


@pytest.mark.parametrize("kind", sorted(CLUSTERS))
def test_outputs_are_where_every_host_key_is_pinned_from(plans: dict[str, Plan], kind: str) -> None:
    plan = plans[kind]
    keys = _keys(plan)
    exported = _exports(lambda: DEPLOYS[kind](StackInputs(plan=plan, ssh_public_key="k", host_keys=keys)))
    assert exported["hostKeys"] == {name: key.public for name, key in keys.items()}
    assert exported["bastion"]["name"] == "bastion"  # the key the bastion's address is pinned with
    # What clusterctl reads back: every key from these outputs; one missing is an error, not a guess.
    generated = {name: key.public for name, key in keys.items()}
    outputs = {
        "nodes": {n.hostname: n.address for n in plan.nodes},
        "hostKeys": dict(exported["hostKeys"]),
        "bastion": {"address": "198.51.100.9", "name": "bastion"},
    }
    hosts, bastion = hosts_from_outputs(plan, outputs, user="ubuntu", host_keys=generated)
    assert [h.host_key for h in hosts] == [generated[n.hostname] for n in plan.nodes]
    assert bastion is not None
    assert bastion.host_key == generated["bastion"]
    del outputs["hostKeys"][plan.nodes[0].hostname]
    with pytest.raises(ProviderError, match=f"no SSH host key for {plan.nodes[0].hostname}"):
        hosts_from_outputs(plan, outputs, user="ubuntu", host_keys=generated)


def test_baremetal_outputs_carry_the_recorded_host_keys() -> None:
    """Bare metal records each machine's key (RedfishNode.host_key); the output names every machine."""
    plan = example_plan("onprem-h100-256.yaml")
    keys: dict[str, Any] = {}

    def program() -> Any:
        exported: dict[str, Any] = {}
        original = pulumi.export
        try:
            pulumi.export = lambda key, value: exported.__setitem__(key, value)  # type: ignore[assignment]
            baremetal_deploy(StackInputs(plan=plan, ssh_public_key=""))
        finally:
            pulumi.export = original
        return exported["hostKeys"].apply(keys.update)

    run(program)
    assert set(keys) == {m.hostname for m in plan.baremetal.machines}
    # Under mocks no machine was scanned (no key recorded): clusterctl then refuses, never learns one.
    assert set(keys.values()) == {None}
    with pytest.raises(ProviderError, match="no SSH host key"):
        hosts_from_outputs(plan, {"nodes": {n.hostname: n.address for n in plan.nodes}, "hostKeys": keys}, user="u")
