"""Render the controller's least-privilege credentials for cloud burst groups: ``burst/``.

The controller runs ``clusterctl burst resume|suspend``, which runs one burst group's Pulumi
stack (``stacks/burst``); its cloud credentials should reach that stack's resources and
nothing else. Per cloud burst group (``plan.burst_cloud``) this renders::

    burst/policy-<group>.json   aws: an IAM policy document
                                gcp: {"customRole": <gcloud role file>, "condition": <IAM condition>}
                                azure: a custom role definition (az role definition create)
    burst/README.md             what each file is and how to attach it

How each cloud can scope it:

- AWS: every create is allowed only with the tags ``clusterctl-cluster`` and
  ``clusterctl-group`` in the request (``aws:RequestTag``); every change or delete only on
  resources carrying them (``aws:ResourceTag``); existing subnets, VPCs, placement groups and
  capacity reservations by their ids. Only ``Describe*`` (read-only, not resource-scoped in
  IAM) is region-wide. No ``iam:PassRole``: the stacks attach no instance profile.
- GCP: a project-level custom role; IAM conditions cannot test labels, so the binding
  condition limits instances and disks to the group's name prefix (``<cluster>-<group>-``).
- Azure: a custom role assignable only at the group's resource group (and an existing
  subnet); Azure RBAC has no tag conditions for compute writes.

Pure, like the rest of ``render``: everything comes from ``plan.burst_cloud``.
``tree.render_files`` calls :func:`burst_files` once.
"""

from __future__ import annotations

import json
from typing import Any

from clusterctl import __version__
from clusterctl.plan.burst import GROUP_LABEL, burst_stack_name
from clusterctl.plan.cloud import CLUSTER_LABEL
from clusterctl.plan.models import CloudPlan, Plan

# (path, text, mode) -- tree.py wraps these in RenderedFile.
FileSpec = tuple[str, str, int]

PUBLIC = 0o644
IAM_VERSION = "2012-10-17"
# Owners of the vendor images the plan defaults to (resolve:ssm: parameters under /aws/service/).
AWS_IMAGE_OWNERS = {
    "/aws/service/canonical/": "099720109477",
    "/aws/service/debian/": "136693071363",
}
AWS_SSM_PREFIX = "resolve:ssm:"
GCP_PLACEHOLDER_PROJECT = "PROJECT_ID"
AZURE_PLACEHOLDER_SUBSCRIPTION = "SUBSCRIPTION_ID"


def policy_path(group: str) -> str:
    """Where the policy of ``group`` goes in the build directory."""
    return f"burst/policy-{group}.json"


# --- AWS --------------------------------------------------------------------------------------


def _partition(region: str) -> str:
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


def _arn(cloud: CloudPlan, kind: str, ident: str = "*", *, account: str = "*") -> str:
    return f"arn:{_partition(cloud.region)}:ec2:{cloud.region}:{account}:{kind}/{ident}"


def _tagged(cloud: CloudPlan, key: str) -> dict[str, dict[str, str]]:
    """``StringEquals`` on the cluster and group tags (``key``: aws:RequestTag or aws:ResourceTag)."""
    return {
        "StringEquals": {
            f"{key}/{CLUSTER_LABEL}": cloud.labels[CLUSTER_LABEL],
            f"{key}/{GROUP_LABEL}": cloud.labels[GROUP_LABEL],
        }
    }


def _aws_image(cloud: CloudPlan) -> dict[str, Any]:
    """RunInstances on the image: by id, or by the vendor's owner for an SSM-resolved image."""
    image = cloud.image
    base: dict[str, Any] = {"Sid": "LaunchFromTheImage", "Effect": "Allow", "Action": ["ec2:RunInstances"]}
    if image.startswith("ami-"):
        return {**base, "Resource": [_arn(cloud, "image", image, account="")]}
    owner = next((o for prefix, o in AWS_IMAGE_OWNERS.items() if image.startswith(AWS_SSM_PREFIX + prefix)), None)
    statement = {**base, "Resource": [_arn(cloud, "image", account="")]}
    if owner is not None:
        statement["Condition"] = {"StringEquals": {"ec2:Owner": owner}}
    return statement


def _aws_ssm(cloud: CloudPlan) -> list[dict[str, Any]]:
    if not cloud.image.startswith(AWS_SSM_PREFIX):
        return []
    name = cloud.image.removeprefix(AWS_SSM_PREFIX)
    # Public parameters (/aws/service/...) live in no account; a private one in the caller's.
    account = "" if name.startswith("/aws/service/") else "*"
    arn = f"arn:{_partition(cloud.region)}:ssm:{cloud.region}:{account}:parameter{name}"
    return [
        {
            "Sid": "ResolveTheImageParameter",
            "Effect": "Allow",
            "Action": ["ssm:GetParameter", "ssm:GetParameters"],
            "Resource": [arn],
        }
    ]


# Creates, grouped so that no statement lists a resource type that one of its actions only
# *uses*: with aws:RequestTag satisfied by the request itself, such a type would be open to
# any resource of that type (Authorize* on any security group, RunInstances in any subnet).
# (Sid, actions, types they create); a group is left out when none of its types is created.
_AWS_CREATES: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("LaunchTaggedInstances", ("ec2:RunInstances",), ("instance", "volume", "network-interface")),
    (
        "CreateTaggedStandalone",
        (
            "ec2:CreateLaunchTemplate",
            "ec2:CreatePlacementGroup",
            "ec2:CreateVpc",
            "ec2:CreateInternetGateway",
            "ec2:AllocateAddress",
        ),
        ("launch-template", "placement-group", "vpc", "internet-gateway", "elastic-ip"),
    ),
    (
        "CreateTaggedInVpc",
        ("ec2:CreateSecurityGroup", "ec2:CreateSubnet", "ec2:CreateRouteTable"),
        ("security-group", "subnet", "route-table"),
    ),
    ("CreateTaggedNatGateway", ("ec2:CreateNatGateway",), ("natgateway",)),
    (
        "CreateTaggedSecurityGroupRules",
        ("ec2:AuthorizeSecurityGroupIngress", "ec2:AuthorizeSecurityGroupEgress"),
        ("security-group-rule",),
    ),
)
# What the stack does to resources it created (they carry the group's tags): launch into
# them, change them, delete them.
_AWS_OWN_ACTIONS = (
    "ec2:RunInstances",
    "ec2:TerminateInstances",
    "ec2:CreateLaunchTemplateVersion",
    "ec2:ModifyLaunchTemplate",
    "ec2:DeleteLaunchTemplate",
    "ec2:DeleteLaunchTemplateVersions",
    "ec2:AuthorizeSecurityGroupIngress",
    "ec2:AuthorizeSecurityGroupEgress",
    "ec2:RevokeSecurityGroupIngress",
    "ec2:RevokeSecurityGroupEgress",
    "ec2:ModifySecurityGroupRules",
    "ec2:UpdateSecurityGroupRuleDescriptionsIngress",
    "ec2:UpdateSecurityGroupRuleDescriptionsEgress",
    "ec2:DeleteSecurityGroup",
)
_AWS_OWN_PLACEMENT_ACTIONS = ("ec2:DeletePlacementGroup",)
_AWS_OWN_NETWORK_ACTIONS = (
    "ec2:CreateSecurityGroup",
    "ec2:CreateSubnet",
    "ec2:CreateRouteTable",
    "ec2:CreateNatGateway",
    "ec2:ModifyVpcAttribute",
    "ec2:DeleteVpc",
    "ec2:ModifySubnetAttribute",
    "ec2:DeleteSubnet",
    "ec2:AttachInternetGateway",
    "ec2:DetachInternetGateway",
    "ec2:DeleteInternetGateway",
    "ec2:ReleaseAddress",
    "ec2:DisassociateAddress",
    "ec2:DeleteNatGateway",
    "ec2:CreateRoute",
    "ec2:ReplaceRoute",
    "ec2:DeleteRoute",
    "ec2:AssociateRouteTable",
    "ec2:DisassociateRouteTable",
    "ec2:DeleteRouteTable",
)
_AWS_NETWORK_TYPES = ("vpc", "subnet", "internet-gateway", "elastic-ip", "natgateway", "route-table")


def aws_policy(cloud: CloudPlan) -> dict[str, Any]:
    """The IAM policy document for one AWS burst group's stack.

    Creates need the group's tags in the request (``aws:RequestTag``), everything else the
    stack does needs them on the resource (``aws:ResourceTag``); existing network pieces,
    placement groups and capacity reservations are named by id. A statement never pairs a
    create with a resource type it only uses (see ``_AWS_CREATES``).
    """
    created = {"instance", "volume", "network-interface", "launch-template", "security-group", "security-group-rule"}
    own_actions = list(_AWS_OWN_ACTIONS)
    if cloud.placement_strategy == "cluster" and not cloud.placement_group:
        created.add("placement-group")
        own_actions += _AWS_OWN_PLACEMENT_ACTIONS
    if not cloud.existing_network:
        created.update(_AWS_NETWORK_TYPES)
        own_actions += _AWS_OWN_NETWORK_ACTIONS
    statements: list[dict[str, Any]] = []
    create_actions: list[str] = []
    for sid, actions, types in _AWS_CREATES:
        made = [kind for kind in types if kind in created]
        if not made:
            continue
        # Only the creates whose type is made here (no CreateVpc into an existing network).
        kept = [a for a in actions if a not in _CREATE_TYPE or _CREATE_TYPE[a] in created]
        create_actions += kept
        statements.append(
            {
                "Sid": sid,
                "Effect": "Allow",
                "Action": kept,
                "Resource": [_arn(cloud, kind) for kind in made],
                "Condition": _tagged(cloud, "aws:RequestTag"),
            }
        )
    own_types = [kind for kind in _AWS_TYPE_ORDER if kind in created]
    statements += [
        {
            # Tag-on-create: CreateTags is checked for every tagged create, allowed only as part of one.
            "Sid": "TagOnCreate",
            "Effect": "Allow",
            "Action": ["ec2:CreateTags"],
            "Resource": [_arn(cloud, kind) for kind in own_types],
            "Condition": {
                "StringEquals": {"ec2:CreateAction": create_actions, **_tagged(cloud, "aws:RequestTag")["StringEquals"]}
            },
        },
        {
            # Later tag changes on the group's own resources, never of the two scoping tags.
            "Sid": "RetagOwnResources",
            "Effect": "Allow",
            "Action": ["ec2:CreateTags", "ec2:DeleteTags"],
            "Resource": [_arn(cloud, kind) for kind in own_types],
            "Condition": {
                **_tagged(cloud, "aws:ResourceTag"),
                "ForAllValues:StringNotEquals": {"aws:TagKeys": [CLUSTER_LABEL, GROUP_LABEL]},
            },
        },
        {
            "Sid": "UseAndDeleteOwnResources",
            "Effect": "Allow",
            "Action": own_actions,
            "Resource": [_arn(cloud, kind) for kind in own_types],
            "Condition": _tagged(cloud, "aws:ResourceTag"),
        },
    ]
    launch_into = [_arn(cloud, "subnet", s.existing_id) for s in cloud.subnets if s.existing_id]
    if cloud.placement_group:
        launch_into.append(_arn(cloud, "placement-group", cloud.placement_group))
    if cloud.capacity_reservation_id and any(g.capacity_reservation for g in cloud.groups):
        launch_into.append(_arn(cloud, "capacity-reservation", cloud.capacity_reservation_id))
    if launch_into:
        statements.append(
            {"Sid": "LaunchIntoExisting", "Effect": "Allow", "Action": ["ec2:RunInstances"], "Resource": launch_into}
        )
    if cloud.existing_network:
        statements.append(
            {
                "Sid": "SecurityGroupInTheExistingVpc",
                "Effect": "Allow",
                "Action": ["ec2:CreateSecurityGroup"],
                "Resource": [_arn(cloud, "vpc", cloud.existing_network)],
            }
        )
    statements.append(_aws_image(cloud))
    statements.extend(_aws_ssm(cloud))
    statements.append(
        {
            # Describe calls cannot be limited to resources in IAM; they change nothing.
            "Sid": "ReadInTheRegion",
            "Effect": "Allow",
            "Action": ["ec2:Describe*"],
            "Resource": "*",
            "Condition": {"StringEquals": {"aws:RequestedRegion": cloud.region}},
        }
    )
    return {"Version": IAM_VERSION, "Id": _policy_id(cloud), "Statement": statements}


# The type each single-type create makes (creates of types the stack does not make are left out).
_CREATE_TYPE = {
    "ec2:CreatePlacementGroup": "placement-group",
    "ec2:CreateVpc": "vpc",
    "ec2:CreateInternetGateway": "internet-gateway",
    "ec2:AllocateAddress": "elastic-ip",
    "ec2:CreateSubnet": "subnet",
    "ec2:CreateRouteTable": "route-table",
}
_AWS_TYPE_ORDER = (
    "instance",
    "volume",
    "network-interface",
    "launch-template",
    "security-group",
    "security-group-rule",
    "placement-group",
    *_AWS_NETWORK_TYPES,
)


def _policy_id(cloud: CloudPlan) -> str:
    return f"clusterctl-{burst_stack_name(cloud.labels[CLUSTER_LABEL], cloud.labels[GROUP_LABEL])}"


# --- GCP --------------------------------------------------------------------------------------

GCP_INSTANCE_PERMISSIONS = (
    "compute.instances.create",
    "compute.instances.delete",
    "compute.instances.get",
    "compute.instances.list",
    "compute.instances.setLabels",
    "compute.instances.setMetadata",
    "compute.instances.setScheduling",
    "compute.instances.setTags",
    "compute.disks.create",
    "compute.disks.get",
    "compute.disks.setLabels",
    "compute.images.get",
    "compute.images.getFromFamily",
    "compute.images.useReadOnly",
    "compute.subnetworks.get",
    "compute.subnetworks.use",
    "compute.zones.get",
    "compute.zoneOperations.get",
    "compute.regionOperations.get",
    "compute.globalOperations.get",
)
GCP_PLACEMENT_PERMISSIONS = (
    "compute.resourcePolicies.create",
    "compute.resourcePolicies.delete",
    "compute.resourcePolicies.get",
    "compute.resourcePolicies.use",
)
GCP_NETWORK_PERMISSIONS = (
    "compute.networks.create",
    "compute.networks.delete",
    "compute.networks.get",
    "compute.networks.updatePolicy",
    "compute.subnetworks.create",
    "compute.subnetworks.delete",
    "compute.routers.create",
    "compute.routers.delete",
    "compute.routers.get",
    "compute.routers.update",
)
GCP_FIREWALL_PERMISSIONS = (
    "compute.firewalls.create",
    "compute.firewalls.delete",
    "compute.firewalls.get",
    "compute.firewalls.update",
    "compute.networks.updatePolicy",
)


def _gcp_role_id(cloud: CloudPlan) -> str:
    # Custom role ids take letters, digits, '_' and '.' only.
    return _policy_id(cloud).replace("-", "_")


def gcp_policy(cloud: CloudPlan) -> dict[str, Any]:
    """The custom role (gcloud ``--file`` format) and the binding condition for one GCP burst group."""
    permissions = set(GCP_INSTANCE_PERMISSIONS) | set(GCP_FIREWALL_PERMISSIONS)
    if cloud.placement_strategy == "compact":
        permissions |= set(GCP_PLACEMENT_PERMISSIONS)
    if not cloud.existing_network or cloud.gpu_networks:
        permissions |= set(GCP_NETWORK_PERMISSIONS)
    project = cloud.project or GCP_PLACEHOLDER_PROJECT
    prefix = f"{cloud.cluster}-"
    # Instances (and their boot disks, named after them) of this stack are named
    # <cluster>-<group>-<host>. List calls carry no resource name, so resource types other
    # than instances and disks pass the condition; the role alone limits those.
    expression = " || ".join(
        [
            '(resource.type != "compute.googleapis.com/Instance" && resource.type != "compute.googleapis.com/Disk")',
            f'resource.name.extract("/instances/{{name}}").startsWith("{prefix}")',
            f'resource.name.extract("/disks/{{name}}").startsWith("{prefix}")',
        ]
    )
    cluster, group = cloud.labels[CLUSTER_LABEL], cloud.labels[GROUP_LABEL]
    return {
        "customRole": {
            "title": f"clusterctl burst {cluster}/{group}",
            "description": (
                f"Create and delete the instances of burst group {group} of cluster {cluster} "
                f"(stack {burst_stack_name(cluster, group)})"
            ),
            "stage": "GA",
            "includedPermissions": sorted(permissions),
        },
        "roleId": _gcp_role_id(cloud),
        "project": project,
        "condition": {
            "title": f"clusterctl {cloud.cluster} only",
            "description": "IAM conditions cannot test labels: instances and disks are limited to the group's prefix",
            "expression": expression,
        },
    }


# --- Azure ------------------------------------------------------------------------------------

AZURE_COMPUTE_ACTIONS = (
    "Microsoft.Compute/virtualMachines/read",
    "Microsoft.Compute/virtualMachines/write",
    "Microsoft.Compute/virtualMachines/delete",
    "Microsoft.Compute/virtualMachineScaleSets/read",
    "Microsoft.Compute/virtualMachineScaleSets/write",
    "Microsoft.Compute/virtualMachineScaleSets/delete",
    "Microsoft.Compute/disks/read",
    "Microsoft.Compute/disks/write",
    "Microsoft.Compute/disks/delete",
    "Microsoft.Network/networkInterfaces/read",
    "Microsoft.Network/networkInterfaces/write",
    "Microsoft.Network/networkInterfaces/delete",
    "Microsoft.Network/networkInterfaces/join/action",
    "Microsoft.Network/virtualNetworks/subnets/read",
    "Microsoft.Network/virtualNetworks/subnets/join/action",
    "Microsoft.Resources/subscriptions/resourceGroups/read",
)
AZURE_NETWORK_ACTIONS = (
    "Microsoft.Network/virtualNetworks/read",
    "Microsoft.Network/virtualNetworks/write",
    "Microsoft.Network/virtualNetworks/delete",
    "Microsoft.Network/virtualNetworks/subnets/write",
    "Microsoft.Network/virtualNetworks/subnets/delete",
    "Microsoft.Network/networkSecurityGroups/read",
    "Microsoft.Network/networkSecurityGroups/write",
    "Microsoft.Network/networkSecurityGroups/delete",
    "Microsoft.Network/networkSecurityGroups/join/action",
    "Microsoft.Network/natGateways/read",
    "Microsoft.Network/natGateways/write",
    "Microsoft.Network/natGateways/delete",
    "Microsoft.Network/natGateways/join/action",
    "Microsoft.Network/publicIPAddresses/read",
    "Microsoft.Network/publicIPAddresses/write",
    "Microsoft.Network/publicIPAddresses/delete",
    "Microsoft.Network/publicIPAddresses/join/action",
)
AZURE_RESERVATION_ACTIONS = (
    "Microsoft.Compute/capacityReservationGroups/read",
    "Microsoft.Compute/capacityReservationGroups/deploy/action",
    "Microsoft.Compute/capacityReservationGroups/capacityReservations/read",
    "Microsoft.Compute/capacityReservationGroups/capacityReservations/deploy/action",
)


def _azure_subscription(cloud: CloudPlan) -> str:
    """The subscription, when an existing subnet's resource id names it."""
    for subnet in cloud.subnets:
        parts = (subnet.existing_id or "").split("/")
        if len(parts) > 2 and parts[1].lower() == "subscriptions":
            return parts[2]
    return AZURE_PLACEHOLDER_SUBSCRIPTION


def azure_policy(cloud: CloudPlan) -> dict[str, Any]:
    """The custom role definition (``az role definition create``) for one Azure burst group."""
    subscription = _azure_subscription(cloud)
    scopes = [f"/subscriptions/{subscription}/resourceGroups/{cloud.resource_group}"]
    # Joining an existing subnet is checked on the subnet itself.
    scopes += [s.existing_id for s in cloud.subnets if s.existing_id]
    actions = list(AZURE_COMPUTE_ACTIONS)
    if not any(s.existing_id for s in cloud.subnets):
        actions += AZURE_NETWORK_ACTIONS
    if cloud.capacity_reservation_group_id and any(g.capacity_reservation for g in cloud.groups):
        actions += AZURE_RESERVATION_ACTIONS
        scopes.append(cloud.capacity_reservation_group_id)
    return {
        "Name": _policy_id(cloud),
        "IsCustom": True,
        "Description": (
            f"clusterctl: create and delete the VMs of burst group {cloud.labels[GROUP_LABEL]} of cluster "
            f"{cloud.labels[CLUSTER_LABEL]}, in resource group {cloud.resource_group} only"
        ),
        "Actions": sorted(set(actions)),
        "NotActions": [],
        "DataActions": [],
        "NotDataActions": [],
        "AssignableScopes": scopes,
    }


# --- files ------------------------------------------------------------------------------------

POLICIES = {"aws": aws_policy, "gcp": gcp_policy, "azure": azure_policy}


def _readme(plan: Plan) -> str:
    lines = [
        f"# Burst credentials for {plan.cluster.name}",
        "",
        f"Generated by clusterctl {__version__} from {plan.cluster.spec_file}; do not edit.",
        "",
        "The controller runs `clusterctl burst resume|suspend`, which drives one Pulumi stack per cloud burst group",
        "(program `stacks/burst`). Give the controller's cloud identity these permissions and nothing more:",
        "",
    ]
    for group, cloud in sorted(plan.burst_cloud.items()):
        path = policy_path(group).removeprefix("burst/")
        stack = burst_stack_name(plan.cluster.name, group)
        lines.append(f"## {group} ({cloud.provider}, stack `{stack}`)")
        lines.append("")
        if cloud.provider == "aws":
            lines += [
                f"`{path}` is an IAM policy: every create needs the tags `{CLUSTER_LABEL}={plan.cluster.name}` and",
                f"`{GROUP_LABEL}={group}`, every change or delete needs them on the resource.",
                "",
                "```sh",
                f"aws iam create-policy --policy-name clusterctl-{stack} --policy-document file://{path}",
                "```",
            ]
        elif cloud.provider == "gcp":
            lines += [
                f"`{path}` holds the custom role (`customRole`) and the condition of its binding (`condition`).",
                f"Replace {GCP_PLACEHOLDER_PROJECT} if the spec names no project.",
                "",
                "```sh",
                f"jq .customRole {path} > role.json",
                f"gcloud iam roles create {_gcp_role_id(cloud)} --project PROJECT --file role.json",
                "gcloud projects add-iam-policy-binding PROJECT --member serviceAccount:CONTROLLER_SA \\",
                f"  --role projects/PROJECT/roles/{_gcp_role_id(cloud)} \\",
                f'  --condition "expression=$(jq -r .condition.expression {path}),title=clusterctl-{stack}"',
                "```",
            ]
        else:
            lines += [
                f"`{path}` is a custom role assignable at resource group `{cloud.resource_group}` only. Create the",
                "resource group once (the burst stack does not: the role cannot be given before it exists), replace",
                f"{AZURE_PLACEHOLDER_SUBSCRIPTION} if it is still there, then:",
                "",
                "```sh",
                f"az group create --name {cloud.resource_group} --location {cloud.region}",
                f"az role definition create --role-definition @{path}",
                f'az role assignment create --assignee CONTROLLER_IDENTITY --role "{_policy_id(cloud)}" \\',
                f"  --scope /subscriptions/{_azure_subscription(cloud)}/resourceGroups/{cloud.resource_group}",
                "```",
            ]
        lines.append("")
    return "\n".join(lines)


def _json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2) + "\n"


def burst_files(plan: Plan) -> list[FileSpec]:
    """The burst credential files of the build directory (none without cloud burst groups).

    Returns:
        ``(path, text, mode)`` per file: one policy per cloud burst group and a README.
    """
    if not plan.burst_cloud:
        return []
    out: list[FileSpec] = [
        (policy_path(group), _json(POLICIES[cloud.provider](cloud)), PUBLIC)
        for group, cloud in sorted(plan.burst_cloud.items())
    ]
    out.append(("burst/README.md", _readme(plan), PUBLIC))
    return out
