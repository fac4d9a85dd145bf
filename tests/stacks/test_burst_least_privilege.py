"""The burst controller's cloud identity: exactly what resume/suspend needs, under Pulumi's mocks.

The controller runs the ``nodes`` part of a burst group's program with the rendered policy
(render/burst.py). Asserted for AWS, GCP and Azure: every resource the nodes part registers
(and every lookup it makes) is allowed by the policy; nothing that decides the group's network
exposure (security group, firewall, NSG, network) is made by the nodes part, and the policy
allows no change to it and nothing of IAM; the base part, which makes them, is the operator's.
"""

from __future__ import annotations

import fnmatch
import sys
from pathlib import Path
from typing import Any

import pytest

from clusterctl.plan import Plan
from clusterctl.plan.models import CloudPlan
from clusterctl.render.burst import aws_policy, azure_policy, gcp_policy
from tests.stacks.conftest import STACKS, RecordingMocks, example_plan, run

if str(STACKS / "burst") not in sys.path:
    sys.path.insert(0, str(STACKS / "burst"))

from clusterctl_burst import BurstGroupArgs, burst_base, burst_group  # isort: skip
from clusterctl_stack import HostKey  # isort: skip

GROUP = "gpu-b"
TAGS = {"clusterctl-cluster": "harbor", "clusterctl-group": GROUP}
# What each resource the nodes part registers costs in the cloud's permissions (create, read,
# delete; for a lookup, the read).
AWS_NEEDS = {
    "aws:ec2/instance:Instance": [
        ("ec2:RunInstances", kind)
        for kind in ("instance", "volume", "network-interface", "launch-template", "security-group", "image")
    ]
    + [("ec2:TerminateInstances", "instance"), ("ec2:CreateTags", "instance"), ("ec2:DescribeInstances", "*")],
}
GCP_NEEDS = {
    "gcp:compute/instance:Instance": [
        "compute.instances.create",
        "compute.instances.delete",
        "compute.instances.get",
        "compute.instances.setMetadata",
        "compute.instances.setLabels",
        "compute.instances.setTags",
        "compute.disks.create",
        "compute.subnetworks.use",
        "compute.images.useReadOnly",
        "compute.resourcePolicies.use",
    ],
    "gcp:compute/getResourcePolicy:getResourcePolicy": ["compute.resourcePolicies.get"],
}
AZURE_NEEDS = {
    "azure-native:network:NetworkInterface": [
        "Microsoft.Network/networkInterfaces/write",
        "Microsoft.Network/networkInterfaces/read",
        "Microsoft.Network/networkInterfaces/delete",
        "Microsoft.Network/virtualNetworks/subnets/join/action",
    ],
    "azure-native:compute:VirtualMachine": [
        "Microsoft.Compute/virtualMachines/write",
        "Microsoft.Compute/virtualMachines/read",
        "Microsoft.Compute/virtualMachines/delete",
        "Microsoft.Compute/disks/write",
        "Microsoft.Compute/disks/delete",
        "Microsoft.Network/networkInterfaces/join/action",
        "Microsoft.Compute/virtualMachineScaleSets/read",
    ],
    "azure-native:authorization:getClientConfig": [],  # the caller's own identity: no permission
}
# Resource types that decide who reaches the nodes: only ever the base's (the operator's).
EXPOSURE = (
    "aws:ec2/securityGroup:SecurityGroup",
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule",
    "aws:ec2/vpc:Vpc",
    "aws:ec2/subnet:Subnet",
    "gcp:compute/firewall:Firewall",
    "gcp:compute/network:Network",
    "gcp:compute/subnetwork:Subnetwork",
    "azure-native:network:NetworkSecurityGroup",
    "azure-native:network:VirtualNetwork",
    "azure-native:network:Subnet",
)


def _plan(tmp_path: Path, kind: str) -> Plan:
    if kind == "aws":
        return example_plan("aws-burst.yaml")
    from tests.stacks.test_burst_stack import _other_cloud

    return _other_cloud(tmp_path, kind)


def _own_network(cloud: CloudPlan) -> CloudPlan:
    """The same AWS group without an existing VPC: its base makes the network."""
    subnets = [s.model_copy(update={"existing_id": None, "cidr": "10.20.0.0/17"}) for s in cloud.subnets]
    return cloud.model_copy(update={"existing_network": None, "subnets": subnets})


def _parts(plan: Plan) -> tuple[RecordingMocks, RecordingMocks]:
    base = run(lambda: burst_base(BurstGroupArgs(plan=plan, group=GROUP)))
    hosts = plan.burst_cloud[GROUP].group(GROUP).hosts
    keys = {h: HostKey(private=f"PRIVATE-{h}", public=f"ssh-ed25519 AAAA{h}") for h in hosts}
    nodes = run(
        lambda: burst_group(
            BurstGroupArgs(plan=plan, group=GROUP, active_hosts=hosts, ssh_public_key="k", host_keys=keys)
        )
    )
    return base, nodes


def _used(mocks: RecordingMocks) -> set[str]:
    return {r.typ for r in mocks.resources if r.custom and not r.typ.startswith("pulumi:providers:")} | {
        token for token, _ in mocks.calls
    }


# --- AWS ---------------------------------------------------------------------------------------


def _allows(policy: dict[str, Any], action: str, kind: str) -> bool:
    """Whether an Allow statement grants ``action`` on resource type ``kind`` (conditions aside)."""
    for statement in policy["Statement"]:
        if statement["Effect"] != "Allow" or not any(fnmatch.fnmatchcase(action, a) for a in statement["Action"]):
            continue
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        if any(r == "*" or r.split(":", 5)[5].split("/")[0] == kind for r in resources):
            return True
    return False


def _denied(policy: dict[str, Any], action: str) -> bool:
    return any(
        s["Effect"] == "Deny" and s["Resource"] == "*" and any(fnmatch.fnmatchcase(action, a) for a in s["Action"])
        for s in policy["Statement"]
    )


def test_aws_nodes_part_needs_only_what_the_policy_allows(tmp_path: Path) -> None:
    plan = _plan(tmp_path, "aws")
    base, nodes = _parts(plan)
    policy = aws_policy(plan.burst_cloud[GROUP])
    used = _used(nodes)
    assert used == set(AWS_NEEDS)  # instances, nothing else
    for token in used:
        for action, kind in AWS_NEEDS[token]:
            assert _allows(policy, action, kind), (token, action, kind)
    # The subnet and placement group the base's templates name, by id/name or by the base's tags.
    assert _allows(policy, "ec2:RunInstances", "subnet")
    assert _allows(policy, "ec2:RunInstances", "placement-group")
    # What decides exposure is the base's, made with the operator's credentials.
    assert not (used & set(EXPOSURE))
    assert _used(base) & set(EXPOSURE)


@pytest.mark.parametrize("network", ["existing", "own"])
def test_aws_policy_cannot_touch_security_groups_or_iam(tmp_path: Path, network: str) -> None:
    cloud = _plan(tmp_path, "aws").burst_cloud[GROUP]
    policy = aws_policy(cloud if network == "existing" else _own_network(cloud))
    allowed = [a for s in policy["Statement"] if s["Effect"] == "Allow" for a in s["Action"]]
    assert not [a for a in allowed if "SecurityGroup" in a or a.startswith("iam:")], allowed
    assert not [a for a in allowed if a.startswith(("ec2:CreateVpc", "ec2:CreateSubnet", "ec2:CreateRoute"))]
    for action in (
        "ec2:AuthorizeSecurityGroupIngress",
        "ec2:AuthorizeSecurityGroupEgress",
        "ec2:RevokeSecurityGroupIngress",
        "ec2:ModifySecurityGroupRules",
        "ec2:CreateSecurityGroup",
        "iam:PassRole",
        "iam:PutRolePolicy",
        "iam:AttachRolePolicy",
    ):
        assert _denied(policy, action), action  # even if another policy of the identity allows it
    # Every mutating grant is tied to the group's tags or to named resources.
    for statement in policy["Statement"]:
        if statement["Effect"] != "Allow" or all(
            a.startswith(("ec2:Describe", "ssm:Get")) for a in statement["Action"]
        ):
            continue
        condition = statement.get("Condition", {})
        tags = {k.split("/", 1)[1]: v for k, v in condition.get("StringEquals", {}).items() if k.startswith("aws:")}
        named = all(not r.endswith("/*") for r in statement["Resource"])
        assert tags == TAGS or named or "ec2:Owner" in condition.get("StringEquals", {}), statement["Sid"]
    (terminate,) = [s for s in policy["Statement"] if "ec2:TerminateInstances" in s["Action"]]
    assert terminate["Condition"]["StringEquals"] == {f"aws:ResourceTag/{k}": v for k, v in TAGS.items()}
    (launch,) = [s for s in policy["Statement"] if s["Sid"] == "LaunchTaggedInstancesFromATemplate"]
    assert "ec2:LaunchTemplate" in launch["Condition"]["ArnLike"]  # run instances only from a launch template


# --- GCP ---------------------------------------------------------------------------------------


def test_gcp_nodes_part_needs_only_what_the_role_grants(tmp_path: Path) -> None:
    plan = _plan(tmp_path, "gcp")
    base, nodes = _parts(plan)
    permissions = set(gcp_policy(plan.burst_cloud[GROUP])["customRole"]["includedPermissions"])
    used = _used(nodes)
    assert used == set(GCP_NEEDS)
    for token in used:
        assert set(GCP_NEEDS[token]) <= permissions, (token, set(GCP_NEEDS[token]) - permissions)
    assert not (used & set(EXPOSURE))
    assert "gcp:compute/firewall:Firewall" in _used(base)


def test_gcp_role_cannot_touch_firewalls_networks_or_iam(tmp_path: Path) -> None:
    policy = gcp_policy(_plan(tmp_path, "gcp").burst_cloud[GROUP])
    permissions = policy["customRole"]["includedPermissions"]
    owned_elsewhere = ("compute.firewalls.", "compute.networks.", "compute.routers.", "iam.", "resourcemanager.")
    forbidden = [p for p in permissions if p.startswith(owned_elsewhere) or p.endswith(".setIamPolicy")]
    # Subnetworks are used (and read), never made, changed or deleted.
    forbidden += [p for p in permissions if p.startswith("compute.subnetworks.") and not p.endswith((".use", ".get"))]
    forbidden += [p for p in permissions if p == "compute.instances.setServiceAccount"]  # no identity on the nodes
    assert not forbidden
    assert not [p for p in permissions if "*" in p]
    assert "resource.name.extract" in policy["condition"]["expression"]  # instances and disks by prefix


# --- Azure -------------------------------------------------------------------------------------


def test_azure_nodes_part_needs_only_what_the_role_allows(tmp_path: Path) -> None:
    plan = _plan(tmp_path, "azure")
    base, nodes = _parts(plan)
    actions = set(azure_policy(plan.burst_cloud[GROUP])["Actions"])
    used = _used(nodes)
    assert used == set(AZURE_NEEDS)
    for token in used:
        assert set(AZURE_NEEDS[token]) <= actions, (token, set(AZURE_NEEDS[token]) - actions)
    assert not (used & set(EXPOSURE))
    assert "azure-native:network:NetworkSecurityGroup" in _used(base)


def test_azure_role_cannot_touch_nsgs_networks_or_authorization(tmp_path: Path) -> None:
    policy = azure_policy(_plan(tmp_path, "azure").burst_cloud[GROUP])
    actions = policy["Actions"]
    forbidden = [
        a
        for a in actions
        if a.startswith(("Microsoft.Network/networkSecurityGroups/", "Microsoft.Authorization/"))
        or a
        in (
            "Microsoft.Network/virtualNetworks/write",
            "Microsoft.Network/virtualNetworks/delete",
            "Microsoft.Network/virtualNetworks/subnets/write",
            "Microsoft.Network/virtualNetworks/subnets/delete",
            "Microsoft.Network/publicIPAddresses/write",
            "Microsoft.Compute/virtualMachineScaleSets/delete",
        )
    ]
    assert not forbidden
    assert not [a for a in actions if "*" in a]
    assert policy["AssignableScopes"] == ["/subscriptions/SUBSCRIPTION_ID/resourceGroups/clusterctl-harbor-gpu-b"]
