"""The burst program (stacks/burst) under Pulumi's mocks, from examples/aws-burst.yaml.

Two parts: the group's ``base`` (made by the operator at ``clusterctl up``) and its ``nodes``
(the controller's resume/suspend). Pulumi decides what an ``up`` deletes by comparing resource
names (URNs) with the previous run: a resource registered before and not now is deleted, one
registered in both is left alone. So "suspend removes only those two" is asserted as: the run
with the smaller active set registers a subset of the earlier run's names, missing exactly the
suspended hosts'.
"""

from __future__ import annotations

import copy
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
import pytest

from clusterctl.catalog.instances import INSTANCE_TYPES
from clusterctl.pipeline import load_and_validate
from clusterctl.plan import Plan
from tests.conftest import EXAMPLES
from tests.specs import example_data, group, write_spec
from tests.stacks.conftest import MOCK_SUBSCRIPTION, STACKS, RecordingMocks, example_plan, run, takes_param, unsecret

if str(STACKS / "burst") not in sys.path:
    sys.path.insert(0, str(STACKS / "burst"))

from clusterctl_burst import (  # isort: skip
    ACTIVE_HOSTS_KEY,
    GROUP_KEY,
    PART_BASE,
    PART_KEY,
    BurstGroupArgs,
    BurstSelection,
    burst_base,
    burst_group,
    deploy,
    load_selection,
    parse_active_hosts,
)
from clusterctl_stack import HostKey, StackInputs  # isort: skip

CLUSTER_TAG = "clusterctl-cluster"
GROUP_TAG = "clusterctl-group"
INSTANCE = "aws:ec2/instance:Instance"
TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
ALL_FOUR = ["gpu-b001", "gpu-b002", "gpu-b003", "gpu-b004"]


def _keys(plan: Plan) -> dict[str, HostKey]:
    return {
        n.hostname: HostKey(private="PRIVATE-" + n.hostname, public="ssh-ed25519 AAAA" + n.hostname)
        for n in plan.nodes
        if n.burst
    }


def run_base(plan: Plan, group_name: str = "gpu-b") -> RecordingMocks:
    """The burst group's base (the operator's part) under fresh mocks."""
    return run(lambda: burst_base(BurstGroupArgs(plan=plan, group=group_name)))


def template_ips(base: RecordingMocks) -> dict[str, str]:
    """Launch template name -> primary address, as EC2 would launch from the base's templates."""
    return {
        t.inputs["name"]: next(n for n in t.inputs["networkInterfaces"] if n["interfaceType"] == "interface")[
            "privateIpAddress"
        ]
        for t in base.of_type(TEMPLATE)
    }


def run_burst(plan: Plan, active: list[str], group_name: str = "gpu-b") -> RecordingMocks:
    """The burst group's nodes part for ``active`` under fresh mocks (outputs checked against the plan)."""

    def program() -> pulumi.Output:
        component = burst_group(
            BurstGroupArgs(
                plan=plan,
                group=group_name,
                active_hosts=active,
                ssh_public_key="ssh-ed25519 AAAAcontroller",
                host_keys=_keys(plan),
            )
        )

        def check(nodes: dict[str, str]) -> None:
            # Assertions inside apply run once the outputs resolve; a wrong one fails the test.
            assert nodes == {n.hostname: n.address for n in plan.nodes if n.hostname in active}

        return component.nodes.apply(check)

    cloud = plan.burst_cloud.get(group_name)
    seeded = template_ips(run_base(plan, group_name)) if cloud is not None and cloud.provider == "aws" else {}
    return run(program, RecordingMocks(seeded))


def _by_name(mocks: RecordingMocks) -> dict[str, str]:
    return {r.name: r.typ for r in mocks.resources}


def _host_of(name: str) -> str | None:
    return next((h for h in ALL_FOUR if name.endswith(f"-{h}") or name.endswith(f"-{h}-lt")), None)


@pytest.fixture(scope="module")
def plan() -> Plan:
    return example_plan("aws-burst.yaml")


@pytest.fixture(scope="module")
def resumed(plan: Plan) -> RecordingMocks:
    """``clusterctl burst resume gpu-b[001-004]``: all four active."""
    return run_burst(plan, ALL_FOUR)


@pytest.fixture(scope="module")
def after_suspend(plan: Plan) -> RecordingMocks:
    """Then ``clusterctl burst suspend gpu-b[001,003]``: two left."""
    return run_burst(plan, ["gpu-b002", "gpu-b004"])


@pytest.fixture(scope="module")
def base(plan: Plan) -> RecordingMocks:
    """``clusterctl up``: the group's base, with the operator's credentials."""
    return run_base(plan)


def test_resume_creates_exactly_the_four_instances(resumed: RecordingMocks, plan: Plan) -> None:
    instances = resumed.of_type(INSTANCE)
    assert sorted(r.inputs["tags"]["Name"] for r in instances) == ALL_FOUR
    assert sorted(_host_of(r.name) or "" for r in instances) == ALL_FOUR
    for instance in instances:
        assert instance.inputs["tags"][CLUSTER_TAG] == "harbor"
        assert instance.inputs["tags"][GROUP_TAG] == "gpu-b"
    # The cluster's static nodes (on-prem here) are nowhere in the burst stack.
    static = {n.hostname for n in plan.nodes if not n.burst}
    assert not [r.name for r in resumed.resources if any(r.name.endswith(f"-{h}") for h in static)]


def test_base_has_the_cloud_stacks_efa_launch_templates(base: RecordingMocks, plan: Plan) -> None:
    templates = base.of_type(TEMPLATE)
    assert len(templates) == 4  # every host of the group, active or not
    addresses = {n.hostname: n.address for n in plan.nodes}
    efa = INSTANCE_TYPES["p5.48xlarge"].efa_interfaces
    assert efa == 32
    for template in templates:
        host = _host_of(template.name)
        assert host is not None
        assert template.inputs["name"] == f"harbor-gpu-b-{host}"  # what the nodes part launches by
        assert template.inputs["instanceType"] == "p5.48xlarge"
        nics = template.inputs["networkInterfaces"]
        assert len([n for n in nics if n["interfaceType"] == "efa-only"]) == efa
        primary = next(n for n in nics if n["interfaceType"] == "interface")
        # Planned address, existing subnet from the burst provider, the group's security group.
        assert primary["privateIpAddress"] == addresses[host]
        assert primary["subnetId"] == "subnet-0def5678"
        assert (
            template.inputs["placement"]["groupName"] == base.of_type("aws:ec2/placementGroup:PlacementGroup")[0].name
        )
        assert {s["resourceType"] for s in template.inputs["tagSpecifications"]} == {
            "instance",
            "volume",
            "network-interface",
        }
        for spec in template.inputs["tagSpecifications"]:
            assert spec["tags"][GROUP_TAG] == "gpu-b"
        # No user data in the base: the host keys are the controller's, passed at launch.
        assert "userData" not in template.inputs


def test_resume_launches_from_the_named_templates_with_secret_user_data(resumed: RecordingMocks) -> None:
    for instance in resumed.of_type(INSTANCE):
        host = _host_of(instance.name)
        assert instance.inputs["launchTemplate"] == {"name": f"harbor-gpu-b-{host}", "version": "$Default"}
        secret, user_data = unsecret(instance.inputs["userData"])
        assert secret, "user data carries the host's private key and must be secret"
        assert f"ed25519_private: PRIVATE-{host}" in user_data
        # Nothing the template decides is overridden at launch.
        assert not {"subnetId", "vpcSecurityGroupIds", "securityGroups", "networkInterfaces"} & set(instance.inputs)


def test_suspend_of_two_leaves_exactly_the_other_two(resumed: RecordingMocks, after_suspend: RecordingMocks) -> None:
    instances = after_suspend.of_type(INSTANCE)
    assert sorted(r.inputs["tags"]["Name"] for r in instances) == ["gpu-b002", "gpu-b004"]
    before, after = _by_name(resumed), _by_name(after_suspend)
    # Nothing new, nothing renamed: the remaining hosts keep their names, so Pulumi leaves them alone ...
    assert set(after) <= set(before)
    for name in after:
        assert after[name] == before[name]
    # ... and what goes is exactly the suspended hosts' instances.
    gone = set(before) - set(after)
    assert {_host_of(name) for name in gone} == {"gpu-b001", "gpu-b003"}
    assert sorted(before[name] for name in gone) == [INSTANCE, INSTANCE]


def test_inputs_of_the_remaining_hosts_do_not_change(resumed: RecordingMocks, after_suspend: RecordingMocks) -> None:
    """Same name and same inputs: not even an update for the hosts that stay."""
    before = {r.name: r.inputs for r in resumed.resources if r.typ == INSTANCE}
    for record in after_suspend.of_type(INSTANCE):
        assert record.inputs == before[record.name]


def test_nodes_part_makes_instances_only(resumed: RecordingMocks) -> None:
    """What the controller's credentials create: instances, and nothing of the network or IAM."""
    assert {r.typ for r in resumed.resources if r.custom} == {"pulumi:providers:aws", INSTANCE}
    (provider,) = resumed.of_type("pulumi:providers:aws")
    assert provider.inputs["region"] == "us-east-1"


def test_base_touches_nothing_outside_the_group(base: RecordingMocks) -> None:
    # An existing VPC and subnet: the base adds only the group's own pieces.
    assert {r.typ for r in base.resources if r.custom} == {
        "pulumi:providers:aws",
        "aws:ec2/securityGroup:SecurityGroup",
        "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
        "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule",
        "aws:ec2/placementGroup:PlacementGroup",
        TEMPLATE,
    }
    (sg,) = base.of_type("aws:ec2/securityGroup:SecurityGroup")
    assert sg.inputs["vpcId"] == "vpc-0abc1234"
    untagged = [
        (r.typ, r.name)
        for r in base.resources
        if r.custom
        and takes_param(r.typ, "tags")
        and (r.inputs.get("tags", {}).get(CLUSTER_TAG), r.inputs.get("tags", {}).get(GROUP_TAG)) != ("harbor", "gpu-b")
    ]
    assert not untagged


def test_controller_and_onprem_reach_the_burst_nodes(base: RecordingMocks, plan: Plan) -> None:
    """slurmctld (on-prem, over the VPN) must reach slurmd: the group admits the management network."""
    rules = base.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    assert any(
        r.inputs["ipProtocol"] == "-1" and r.inputs.get("cidrIpv4") == plan.cluster.management_cidr for r in rules
    )
    assert not any(r.inputs.get("cidrIpv4") == "0.0.0.0/0" for r in rules)


def test_no_active_host_no_instance(plan: Plan) -> None:
    mocks = run_burst(plan, [])
    assert not mocks.of_type(INSTANCE)
    assert not mocks.of_type(TEMPLATE)  # the templates are the base's, untouched by the nodes part


def test_hosts_outside_the_group_are_refused(plan: Plan) -> None:
    with pytest.raises(ValueError, match="not hosts of burst group gpu-b: gpu001"):
        run_burst(plan, ["gpu-b001", "gpu001"])


def test_static_groups_are_not_burst_groups(plan: Plan) -> None:
    with pytest.raises(ValueError, match="gpu is not a cloud burst group of harbor"):
        run_burst(plan, ["gpu001"], group_name="gpu")


def test_deploy_exports_the_active_hosts(plan: Plan) -> None:
    exported: dict[str, Any] = {}

    def program() -> None:
        original = pulumi.export
        try:
            pulumi.export = lambda key, value: exported.__setitem__(key, value)  # type: ignore[assignment]
            deploy(
                StackInputs(plan=plan, ssh_public_key="k", host_keys=_keys(plan)),
                BurstSelection(group="gpu-b", active_hosts=["gpu-b003", "gpu-b001"]),
            )
        finally:
            pulumi.export = original

    run(program)
    assert exported["activeHosts"] == ["gpu-b001", "gpu-b003"]  # plan order
    assert exported["group"] == "gpu-b"
    assert exported["sshUser"] == "ubuntu"
    assert exported["hostKeys"] == {"gpu-b001": "ssh-ed25519 AAAAgpu-b001", "gpu-b003": "ssh-ed25519 AAAAgpu-b003"}


def test_selection_comes_from_the_stack_config() -> None:
    pulumi.runtime.set_mocks(RecordingMocks(), project="clusterctl-test", stack="test", preview=False)
    pulumi.runtime.set_all_config(
        {f"clusterctl:{GROUP_KEY}": "gpu-b", f"clusterctl:{ACTIVE_HOSTS_KEY}": '["gpu-b002"]'}
    )
    try:
        assert load_selection() == BurstSelection(group="gpu-b", active_hosts=["gpu-b002"], part="nodes")
        pulumi.runtime.set_all_config({f"clusterctl:{GROUP_KEY}": "gpu-b", f"clusterctl:{PART_KEY}": PART_BASE})
        assert load_selection() == BurstSelection(group="gpu-b", active_hosts=[], part="base")
        pulumi.runtime.set_all_config({f"clusterctl:{GROUP_KEY}": "gpu-b", f"clusterctl:{PART_KEY}": "all"})
        with pytest.raises(pulumi.RunError, match="must be one of base, nodes"):
            load_selection()
    finally:
        pulumi.runtime.set_all_config({})
    assert parse_active_hosts(None) == []
    with pytest.raises(pulumi.RunError, match="JSON list of hostnames"):
        parse_active_hosts('{"gpu-b001": 1}')


# --- the same program on GCP and Azure ----------------------------------------------------------


def _other_cloud(tmp_path: Path, kind: str) -> Plan:
    data = copy.deepcopy(example_data("aws-burst.yaml"))
    burst = group(data, "gpu-b")["burst"]
    if kind == "gcp":
        data["hardware"]["p5"]["instance_type"] = "a3-megagpu-8g"
        burst["provider"] = {
            "kind": "gcp",
            "region": "us-central1",
            "zone": "us-central1-a",
            "project": "acme-ml",
            "cidr": "10.60.0.0/24",
        }
    else:
        data["hardware"]["p5"]["instance_type"] = "Standard_ND96isr_H100_v5"
        burst["provider"] = {"kind": "azure", "region": "eastus", "cidr": "10.60.0.0/24"}
    path = write_spec(tmp_path, data)
    shutil.copy(EXAMPLES / "aws-burst-machines.csv", tmp_path / "aws-burst-machines.csv")
    return load_and_validate(path).plan


CLOUD_CASES: dict[str, tuple[str, Callable[[Any], str]]] = {
    "gcp": ("gcp:compute/instance:Instance", lambda r: r.inputs["labels"][GROUP_TAG]),
    "azure": ("azure-native:compute:VirtualMachine", lambda r: r.inputs["tags"][GROUP_TAG]),
}


def test_deploy_base_part_exports_what_it_made(plan: Plan) -> None:
    exported: dict[str, Any] = {}

    def program() -> None:
        original = pulumi.export
        try:
            pulumi.export = lambda key, value: exported.__setitem__(key, value)  # type: ignore[assignment]
            deploy(
                StackInputs(plan=plan, ssh_public_key=""), BurstSelection(group="gpu-b", active_hosts=[], part="base")
            )
        finally:
            pulumi.export = original

    mocks = run(program)
    assert exported["part"] == "base"
    assert exported["group"] == "gpu-b"
    assert exported["base"]["launchTemplates"] == {h: f"harbor-gpu-b-{h}" for h in ALL_FOUR}
    assert not mocks.of_type(INSTANCE)


@pytest.mark.parametrize("kind", sorted(CLOUD_CASES))
def test_other_clouds_resume_and_suspend_the_same_way(kind: str, tmp_path: Path) -> None:
    plan = _other_cloud(tmp_path, kind)
    token, group_label = CLOUD_CASES[kind]
    before = run_burst(plan, ALL_FOUR)
    after = run_burst(plan, ["gpu-b002", "gpu-b004"])
    assert len(before.of_type(token)) == 4
    assert {group_label(r) for r in before.of_type(token)} == {"gpu-b"}
    names_before, names_after = _by_name(before), _by_name(after)
    assert set(names_after) <= set(names_before)
    gone = set(names_before) - set(names_after)
    assert {h for name in gone for h in ALL_FOUR if h in name} == {"gpu-b001", "gpu-b003"}
    assert len(after.of_type(token)) == 2


def test_gcp_burst_names_never_clash_with_the_cluster_stack(tmp_path: Path) -> None:
    """GCP names networks and instances project-wide: the group's are prefixed <cluster>-<group>."""
    plan = _other_cloud(tmp_path, "gcp")
    for mocks in (run_base(plan), run_burst(plan, ALL_FOUR)):
        named = [
            r.inputs["name"] for r in mocks.resources if r.custom and "name" in r.inputs and r.typ.startswith("gcp:")
        ]
        assert named
        assert all(name.startswith("harbor-gpu-b-") for name in named), named


def test_gcp_nodes_use_the_bases_networks_and_policy_by_name(tmp_path: Path) -> None:
    plan = _other_cloud(tmp_path, "gcp")
    base, nodes = run_base(plan), run_burst(plan, ["gpu-b001"])
    subnets = {r.inputs["name"] for r in base.of_type("gcp:compute/subnetwork:Subnetwork")}
    (policy,) = base.of_type("gcp:compute/resourcePolicy:ResourcePolicy")
    (instance,) = nodes.of_type("gcp:compute/instance:Instance")
    used = {nic["subnetwork"] for nic in instance.inputs["networkInterfaces"]}
    assert used <= subnets  # every NIC on a subnetwork the base made
    assert len(used) == 1 + len(plan.burst_cloud["gpu-b"].gpu_networks)
    assert instance.inputs["resourcePolicies"].endswith(f"/resourcePolicies/{policy.inputs['name']}")


def test_azure_burst_uses_the_groups_resource_group(tmp_path: Path) -> None:
    plan = _other_cloud(tmp_path, "azure")
    for mocks in (run_base(plan), run_burst(plan, ALL_FOUR)):
        assert not mocks.of_type("azure-native:resources:ResourceGroup")
        groups = {r.inputs["resourceGroupName"] for r in mocks.resources if "resourceGroupName" in r.inputs}
        assert groups == {"clusterctl-harbor-gpu-b"}


def test_azure_nodes_join_the_bases_subnet_and_scale_set(tmp_path: Path) -> None:
    plan = _other_cloud(tmp_path, "azure")
    base, nodes = run_base(plan), run_burst(plan, ["gpu-b001"])
    (subnet,) = [s for s in base.of_type("azure-native:network:Subnet") if s.inputs["subnetName"].endswith("-nodes")]
    (vnet,) = base.of_type("azure-native:network:VirtualNetwork")
    (vmss,) = base.of_type("azure-native:compute:VirtualMachineScaleSet")
    (nic,) = nodes.of_type("azure-native:network:NetworkInterface")
    (vm,) = nodes.of_type("azure-native:compute:VirtualMachine")
    prefix = f"/subscriptions/{MOCK_SUBSCRIPTION}/resourceGroups/clusterctl-harbor-gpu-b/providers"
    assert nic.inputs["ipConfigurations"][0]["subnet"]["id"] == (
        f"{prefix}/Microsoft.Network/virtualNetworks/{vnet.inputs['virtualNetworkName']}/subnets/"
        f"{subnet.inputs['subnetName']}"
    )
    assert vm.inputs["virtualMachineScaleSet"]["id"] == (
        f"{prefix}/Microsoft.Compute/virtualMachineScaleSets/{vmss.inputs['vmScaleSetName']}"
    )
    assert not nodes.of_type("azure-native:compute:VirtualMachineScaleSet")


def test_the_program_reads_group_and_active_hosts_from_config(plan: Plan) -> None:
    """What `clusterctl burst` runs: deploy() with the selection from the stack configuration."""
    pulumi.runtime.set_all_config(
        {f"clusterctl:{GROUP_KEY}": "gpu-b", f"clusterctl:{ACTIVE_HOSTS_KEY}": '["gpu-b004", "gpu-b001"]'}
    )
    try:
        mocks = run(lambda: deploy(StackInputs(plan=plan, ssh_public_key="k", host_keys=_keys(plan))))
    finally:
        pulumi.runtime.set_all_config({})
    assert sorted(r.inputs["tags"]["Name"] for r in mocks.of_type(INSTANCE)) == ["gpu-b001", "gpu-b004"]
