"""Cloud burst groups in the plan (plan/burst.py) and the controller's rendered least-privilege policy
(render/burst.py)."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from clusterctl.pipeline import load_and_validate, render
from clusterctl.plan import Plan
from clusterctl.plan.models import CloudPlan
from clusterctl.render.burst import aws_policy, azure_policy, burst_files, gcp_policy
from tests.conftest import EXAMPLES
from tests.specs import example_data, group, write_spec

# Read-only AWS actions: everything else a statement allows counts as mutating.
READ_ONLY = ("ec2:Describe", "ssm:GetParameter")
# IAM's limit for a managed policy (characters without whitespace).
MANAGED_POLICY_LIMIT = 6144
TAG_KEYS = {"clusterctl-cluster": "harbor", "clusterctl-group": "gpu-b"}


@pytest.fixture(scope="module")
def plan() -> Plan:
    return load_and_validate(EXAMPLES / "aws-burst.yaml").plan


@pytest.fixture(scope="module")
def cloud(plan: Plan) -> CloudPlan:
    return plan.burst_cloud["gpu-b"]


def own_network(cloud: CloudPlan) -> CloudPlan:
    """The same group without an existing VPC: its stack creates the network too."""
    subnets = [s.model_copy(update={"existing_id": None, "cidr": "10.20.0.0/17"}) for s in cloud.subnets]
    return cloud.model_copy(update={"existing_network": None, "subnets": subnets})


def _other_cloud(tmp_path: Path, kind: str, **provider: Any) -> Plan:
    data = copy.deepcopy(example_data("aws-burst.yaml"))
    burst = group(data, "gpu-b")["burst"]
    if kind == "gcp":
        data["hardware"]["p5"]["instance_type"] = "a3-megagpu-8g"
        burst["provider"] = {
            "kind": "gcp",
            "region": "us-central1",
            "zone": "us-central1-a",
            "cidr": "10.60.0.0/24",
            **provider,
        }
    else:
        data["hardware"]["p5"]["instance_type"] = "Standard_ND96isr_H100_v5"
        burst["provider"] = {"kind": "azure", "region": "eastus", "cidr": "10.60.0.0/24", **provider}
    path = write_spec(tmp_path, data)
    shutil.copy(EXAMPLES / "aws-burst-machines.csv", tmp_path / "aws-burst-machines.csv")
    return load_and_validate(path).plan


# --- plan -------------------------------------------------------------------------------------


def test_plan_has_the_burst_groups_cloud_facts(plan: Plan, cloud: CloudPlan) -> None:
    assert set(plan.burst_cloud) == {"gpu-b"}
    assert plan.cloud is None  # the static part is bare metal
    assert cloud.provider == "aws"
    assert cloud.cluster == "harbor-gpu-b"  # the name prefix of the group's resources
    assert cloud.labels == {**TAG_KEYS, "managed-by": "clusterctl"}
    (instances,) = cloud.groups
    assert instances.group == "gpu-b"
    assert instances.instance_type == "p5.48xlarge"
    assert instances.efa_interfaces == 32
    assert instances.placement
    assert instances.hosts == [n.hostname for n in plan.nodes if n.burst]
    assert instances.addresses == [n.address for n in plan.nodes if n.burst]
    assert cloud.placement_strategy == "cluster"
    assert cloud.existing_network == "vpc-0abc1234"
    assert [s.existing_id for s in cloud.subnets] == ["subnet-0def5678"]
    assert cloud.bastion is None
    assert cloud.managed_lustre == []


def test_local_burst_groups_have_no_burst_stack() -> None:
    assert load_and_validate(EXAMPLES / "local-burst.yaml").plan.burst_cloud == {}


def test_gcp_burst_group_is_prefixed(tmp_path: Path) -> None:
    cloud = _other_cloud(tmp_path, "gcp", project="acme-ml").burst_cloud["gpu-b"]
    assert cloud.project == "acme-ml"
    assert [s.name for s in cloud.subnets] == ["harbor-gpu-b-nodes", "harbor-gpu-b-public"]
    assert cloud.gpu_networks
    assert all(n.name.startswith("harbor-gpu-b-gpunet-") for n in cloud.gpu_networks)
    assert cloud.placement_strategy == "compact"


# --- AWS --------------------------------------------------------------------------------------


def _statements(policy: dict[str, Any]) -> list[dict[str, Any]]:
    """The Allow statements (the one Deny is checked on its own)."""
    return [s for s in policy["Statement"] if s["Effect"] == "Allow"]


def _allowed_actions(policy: dict[str, Any]) -> set[str]:
    return {a for s in _statements(policy) for a in s["Action"]}


def _mutating(statement: dict[str, Any]) -> list[str]:
    return [a for a in statement["Action"] if not a.startswith(READ_ONLY)]


def _tag_conditions(statement: dict[str, Any]) -> set[str]:
    equals = statement.get("Condition", {}).get("StringEquals", {})
    return {k.split("/")[0] for k, v in equals.items() if "/" in k and TAG_KEYS.get(k.split("/", 1)[1]) == v}


@pytest.mark.parametrize("network", ["existing", "own"])
def test_aws_policy_has_no_wildcard_resource_for_mutating_actions(cloud: CloudPlan, network: str) -> None:
    policy = aws_policy(cloud if network == "existing" else own_network(cloud))
    assert policy["Version"] == "2012-10-17"
    for statement in _statements(policy):
        assert statement["Effect"] == "Allow"
        if not _mutating(statement):
            continue
        resources = statement["Resource"]
        assert isinstance(resources, list), statement["Sid"]
        assert "*" not in resources, statement["Sid"]
        for arn in resources:
            assert arn.startswith(("arn:aws:ec2:us-east-1:", "arn:aws:ssm:us-east-1:")), arn
        # Every resource is either named by id or guarded by both tags (or, for the image, its owner).
        by_id = all(not arn.endswith("/*") for arn in resources)
        tagged = _tag_conditions(statement) in ({"aws:RequestTag"}, {"aws:ResourceTag"})
        owner = "ec2:Owner" in statement.get("Condition", {}).get("StringEquals", {})
        assert by_id or tagged or owner, statement["Sid"]


def test_aws_policy_creates_need_the_tags_and_deletes_need_them_on_the_resource(cloud: CloudPlan) -> None:
    statements = _statements(aws_policy(cloud))
    (launch,) = [s for s in statements if s["Sid"] == "LaunchTaggedInstancesFromATemplate"]
    assert launch["Action"] == ["ec2:RunInstances"]
    assert _tag_conditions(launch) == {"aws:RequestTag"}
    # Only from a launch template (the base's: the template itself is checked by its tags below).
    assert launch["Condition"]["ArnLike"] == {"ec2:LaunchTemplate": "arn:aws:ec2:us-east-1:*:launch-template/*"}
    # RunInstances under aws:RequestTag only on what it creates; subnets, security groups and
    # templates it launches into are checked by their own tags or ids.
    assert sorted(arn.rsplit(":", 1)[1] for arn in launch["Resource"]) == [
        "instance/*",
        "network-interface/*",
        "volume/*",
    ]
    (base,) = [s for s in statements if s["Sid"] == "LaunchWithTheGroupsBase"]
    assert _tag_conditions(base) == {"aws:ResourceTag"}
    assert sorted(arn.rsplit(":", 1)[1] for arn in base["Resource"]) == [
        "launch-template/*",
        "placement-group/*",
        "security-group/*",
    ]
    terminate = [s for s in statements if "ec2:TerminateInstances" in s["Action"]]
    assert terminate
    assert all(_tag_conditions(s) == {"aws:ResourceTag"} for s in terminate)
    tagging = [s for s in statements if "ec2:CreateTags" in s["Action"]]
    assert {s["Sid"] for s in tagging} == {"TagOnLaunch", "RetagOwnInstances"}
    on_create = next(s for s in tagging if s["Sid"] == "TagOnLaunch")
    assert on_create["Condition"]["StringEquals"]["ec2:CreateAction"] == ["RunInstances"]
    retag = next(s for s in tagging if s["Sid"] == "RetagOwnInstances")
    # Tags are set and changed only on what a resume launched, never on the base's pieces.
    assert sorted(arn.rsplit(":", 1)[1] for s in tagging for arn in s["Resource"]) == sorted(
        ["instance/*", "volume/*", "network-interface/*"] * 2
    )
    assert retag["Condition"]["ForAllValues:StringNotEquals"]["aws:TagKeys"] == list(TAG_KEYS)


def test_aws_policy_never_pairs_a_create_with_a_type_it_only_uses(cloud: CloudPlan) -> None:
    """Under aws:RequestTag a used type would be open to any resource of that type."""
    uses = {
        "ec2:RunInstances": {"subnet", "security-group", "launch-template", "placement-group", "image"},
        "ec2:AuthorizeSecurityGroupIngress": {"security-group"},
        "ec2:AuthorizeSecurityGroupEgress": {"security-group"},
        "ec2:CreateSecurityGroup": {"vpc"},
        "ec2:CreateSubnet": {"vpc"},
        "ec2:CreateRouteTable": {"vpc"},
        "ec2:CreateNatGateway": {"subnet", "elastic-ip"},
    }
    for variant in (cloud, own_network(cloud)):
        for statement in _statements(aws_policy(variant)):
            if _tag_conditions(statement) != {"aws:RequestTag"}:
                continue
            types = {arn.rsplit(":", 1)[1].split("/")[0] for arn in statement["Resource"]}
            for action in statement["Action"]:
                assert not (uses.get(action, set()) & types), (statement["Sid"], action)


def test_aws_policy_names_existing_network_pieces_by_id(cloud: CloudPlan) -> None:
    text = json.dumps(aws_policy(cloud))
    assert "subnet/subnet-0def5678" in text
    assert ":subnet/*" not in text  # only the named subnet
    # The network is the base's, made by the operator: the controller creates no piece of it,
    # whether the VPC exists or the base made it (its subnets are then used by their tags).
    for variant in (cloud, own_network(cloud)):
        actions = _allowed_actions(aws_policy(variant)) - {"ec2:CreateTags", "ec2:DeleteTags"}
        assert not [a for a in actions if a.startswith(("ec2:Create", "ec2:Delete", "ec2:Modify", "ec2:Allocate"))], (
            actions
        )
    (base,) = [s for s in _statements(aws_policy(own_network(cloud))) if s["Sid"] == "LaunchWithTheGroupsBase"]
    assert "arn:aws:ec2:us-east-1:*:subnet/*" in base["Resource"]


def test_aws_policy_has_no_pass_role_and_fits_a_managed_policy(cloud: CloudPlan) -> None:
    for variant in (cloud, own_network(cloud)):
        policy = aws_policy(variant)
        assert "iam:" not in json.dumps(_statements(policy))  # the stacks attach no instance profile
        assert len(json.dumps(policy, separators=(",", ":"))) < MANAGED_POLICY_LIMIT


def test_aws_image_is_limited_to_its_vendor(cloud: CloudPlan) -> None:
    (image,) = [s for s in _statements(aws_policy(cloud)) if s["Sid"] == "LaunchFromTheImage"]
    assert image["Condition"] == {"StringEquals": {"ec2:Owner": "099720109477"}}  # Canonical
    pinned = aws_policy(cloud.model_copy(update={"image": "ami-0123456789abcdef0"}))
    (image,) = [s for s in _statements(pinned) if s["Sid"] == "LaunchFromTheImage"]
    assert image["Resource"] == ["arn:aws:ec2:us-east-1::image/ami-0123456789abcdef0"]
    assert not [s for s in _statements(pinned) if s["Sid"] == "ResolveTheImageParameter"]


def test_aws_capacity_reservation_and_placement_group_by_id(cloud: CloudPlan) -> None:
    groups = [g.model_copy(update={"capacity_reservation": True}) for g in cloud.groups]
    reserved = cloud.model_copy(
        update={"capacity_reservation_id": "cr-0abc", "placement_group": "odcr-pg", "groups": groups}
    )
    statements = _statements(aws_policy(reserved))
    (launch,) = [s for s in statements if s["Sid"] == "LaunchIntoExisting"]
    assert "arn:aws:ec2:us-east-1:*:capacity-reservation/cr-0abc" in launch["Resource"]
    assert "arn:aws:ec2:us-east-1:*:placement-group/odcr-pg" in launch["Resource"]
    assert "ec2:CreatePlacementGroup" not in json.dumps(statements)


# --- GCP and Azure ----------------------------------------------------------------------------


def test_gcp_role_and_condition(tmp_path: Path) -> None:
    policy = gcp_policy(_other_cloud(tmp_path, "gcp", project="acme-ml").burst_cloud["gpu-b"])
    permissions = policy["customRole"]["includedPermissions"]
    for needed in ("create", "delete", "get", "list", "setMetadata", "setLabels"):
        assert f"compute.instances.{needed}" in permissions
    assert permissions == sorted(permissions)
    assert not [p for p in permissions if not p.startswith("compute.")]  # no IAM, no project admin
    assert "compute.resourcePolicies.use" in permissions  # compact placement: the base's policy, attached
    assert "compute.resourcePolicies.create" not in permissions
    assert policy["project"] == "acme-ml"
    assert policy["roleId"] == "clusterctl_harbor_burst_gpu_b"
    expression = policy["condition"]["expression"]
    assert 'resource.name.extract("/instances/{name}").startsWith("harbor-gpu-b-")' in expression
    assert 'resource.name.extract("/disks/{name}").startsWith("harbor-gpu-b-")' in expression


def test_azure_role_is_scoped_to_the_resource_group(tmp_path: Path) -> None:
    policy = azure_policy(_other_cloud(tmp_path, "azure").burst_cloud["gpu-b"])
    for verb in ("read", "write", "delete"):
        assert f"Microsoft.Compute/virtualMachines/{verb}" in policy["Actions"]
    assert not [a for a in policy["Actions"] if "*" in a]
    assert policy["AssignableScopes"] == ["/subscriptions/SUBSCRIPTION_ID/resourceGroups/clusterctl-harbor-gpu-b"]
    assert policy["IsCustom"] is True
    assert "Microsoft.Authorization" not in json.dumps(policy)


def test_azure_existing_subnet_names_the_subscription(tmp_path: Path) -> None:
    subnet = "/subscriptions/1111-2222/resourceGroups/net/providers/Microsoft.Network/virtualNetworks/v/subnets/burst"
    policy = azure_policy(_other_cloud(tmp_path, "azure", subnet_id=subnet).burst_cloud["gpu-b"])
    assert policy["AssignableScopes"] == ["/subscriptions/1111-2222/resourceGroups/clusterctl-harbor-gpu-b", subnet]
    assert "Microsoft.Network/virtualNetworks/write" not in policy["Actions"]  # the network exists
    assert "Microsoft.Network/virtualNetworks/subnets/join/action" in policy["Actions"]


# --- render -----------------------------------------------------------------------------------


def test_render_writes_one_policy_per_cloud_burst_group(tmp_path: Path) -> None:
    validated = load_and_validate(EXAMPLES / "aws-burst.yaml")
    build, _ = render(validated, tmp_path / "build")
    policy = json.loads((build / "burst" / "policy-gpu-b.json").read_text())
    assert policy == aws_policy(validated.plan.burst_cloud["gpu-b"])
    readme = (build / "burst" / "README.md").read_text()
    assert "Generated by clusterctl" in readme
    assert "policy-gpu-b.json" in readme
    assert "burst/policy-gpu-b.json" in (build / ".clusterctl-manifest").read_text().split()


def test_no_cloud_burst_group_no_burst_files() -> None:
    assert burst_files(load_and_validate(EXAMPLES / "local-burst.yaml").plan) == []
    assert burst_files(load_and_validate(EXAMPLES / "aws-p5.yaml").plan) == []
