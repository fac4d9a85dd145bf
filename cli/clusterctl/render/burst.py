"""Render the controller's least-privilege credentials for cloud burst groups: ``burst/``.

The controller runs ``clusterctl burst resume|suspend``, which runs the ``nodes`` part of one
burst group's Pulumi program (``stacks/burst``): instances only. The group's network exposure
(security group, firewalls, NSGs) and launch configuration are its ``base`` part, which
``clusterctl up`` makes with the operator's credentials. So the controller's credentials can
launch and delete the group's instances and nothing else: they cannot change a security group,
firewall or NSG, nor anything in IAM. Per cloud burst group (``plan.burst_cloud``) this renders::

    burst/policy-<group>.json   aws: an IAM policy document
                                gcp: {"customRole": <gcloud role file>, "condition": <IAM condition>}
                                azure: a custom role definition (az role definition create)
    burst/README.md             what each file is and how to attach it

How each cloud can scope it:

- AWS: ``ec2:RunInstances`` only from a launch template, creating instances, volumes and
  network interfaces that carry the tags ``clusterctl-cluster`` and ``clusterctl-group``
  (``aws:RequestTag``), using only launch templates, security groups, subnets and placement
  groups that carry them (``aws:ResourceTag``, set by the base) or are named by id;
  ``ec2:TerminateInstances`` only on instances that carry them. Only ``Describe*`` (read-only,
  not resource-scoped in IAM) is region-wide. An explicit ``Deny`` of every security group
  change and of ``iam:*`` holds even if another policy of the same identity allows them. No
  ``iam:PassRole``: the stacks attach no instance profile.
- GCP: a project-level custom role with instance and disk permissions and the *use* of
  subnetworks, images and resource policies -- no ``compute.firewalls.*``, no
  ``compute.networks.*``, nothing of IAM; IAM conditions cannot test labels, so the binding
  condition limits instances and disks to the group's name prefix (``<cluster>-<group>-``).
- Azure: a custom role assignable only at the group's resource group (and an existing
  subnet) with VM, disk and NIC actions and the *join* of the subnet -- no
  ``Microsoft.Network/networkSecurityGroups/*``, no ``Microsoft.Authorization/*``; Azure RBAC
  has no tag conditions for compute writes.

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
from clusterctl.render.environment import render_template

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
README_TEMPLATE = "burst/README.md.j2"


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


# What a resume launches: an instance with its volumes and interfaces, all tagged by the request.
_AWS_LAUNCHED = ("instance", "volume", "network-interface")
# Security group changes and IAM: never the controller's, even when another policy allows them.
AWS_DENIED = (
    "ec2:AuthorizeSecurityGroupIngress",
    "ec2:AuthorizeSecurityGroupEgress",
    "ec2:RevokeSecurityGroupIngress",
    "ec2:RevokeSecurityGroupEgress",
    "ec2:ModifySecurityGroupRules",
    "ec2:UpdateSecurityGroupRuleDescriptionsIngress",
    "ec2:UpdateSecurityGroupRuleDescriptionsEgress",
    "ec2:CreateSecurityGroup",
    "ec2:DeleteSecurityGroup",
    "iam:*",
)


def aws_policy(cloud: CloudPlan) -> dict[str, Any]:
    """The IAM policy document for one AWS burst group's ``nodes`` part: run and terminate instances.

    What RunInstances creates needs the group's tags in the request (``aws:RequestTag``) and a
    launch template (``ec2:LaunchTemplate``); what it uses -- the base's launch templates,
    security group, subnets and placement group -- needs them on the resource
    (``aws:ResourceTag``) or is named by id; TerminateInstances needs them on the instance.
    Nothing creates, changes or deletes a security group, a network or an IAM entity.
    """
    used = ["launch-template", "security-group"]
    if not cloud.existing_network:
        used.append("subnet")  # the base made the subnets, tagged
    if cloud.placement_strategy == "cluster" and not cloud.placement_group:
        used.append("placement-group")  # the base made it, tagged
    statements: list[dict[str, Any]] = [
        {
            "Sid": "LaunchTaggedInstancesFromATemplate",
            "Effect": "Allow",
            "Action": ["ec2:RunInstances"],
            "Resource": [_arn(cloud, kind) for kind in _AWS_LAUNCHED],
            "Condition": {
                **_tagged(cloud, "aws:RequestTag"),
                "ArnLike": {"ec2:LaunchTemplate": _arn(cloud, "launch-template")},
            },
        },
        {
            "Sid": "LaunchWithTheGroupsBase",
            "Effect": "Allow",
            "Action": ["ec2:RunInstances"],
            "Resource": [_arn(cloud, kind) for kind in used],
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
    statements.append(_aws_image(cloud))
    statements.extend(_aws_ssm(cloud))
    launched = [_arn(cloud, kind) for kind in _AWS_LAUNCHED]
    statements += [
        {
            # Tag-on-create: CreateTags is checked for every tagged launch, allowed only as part of one.
            "Sid": "TagOnLaunch",
            "Effect": "Allow",
            "Action": ["ec2:CreateTags"],
            "Resource": launched,
            "Condition": {
                "StringEquals": {
                    "ec2:CreateAction": ["RunInstances"],
                    **_tagged(cloud, "aws:RequestTag")["StringEquals"],
                }
            },
        },
        {
            # Later tag changes on the group's own instances, never of the two scoping tags.
            "Sid": "RetagOwnInstances",
            "Effect": "Allow",
            "Action": ["ec2:CreateTags", "ec2:DeleteTags"],
            "Resource": launched,
            "Condition": {
                **_tagged(cloud, "aws:ResourceTag"),
                "ForAllValues:StringNotEquals": {"aws:TagKeys": [CLUSTER_LABEL, GROUP_LABEL]},
            },
        },
        {
            "Sid": "TerminateOwnInstances",
            "Effect": "Allow",
            "Action": ["ec2:TerminateInstances"],
            "Resource": [_arn(cloud, "instance")],
            "Condition": _tagged(cloud, "aws:ResourceTag"),
        },
        {
            # Describe calls cannot be limited to resources in IAM; they change nothing.
            "Sid": "ReadInTheRegion",
            "Effect": "Allow",
            "Action": ["ec2:Describe*"],
            "Resource": "*",
            "Condition": {"StringEquals": {"aws:RequestedRegion": cloud.region}},
        },
        {
            # Holds even when another policy of the controller's identity allows these.
            "Sid": "NeverSecurityGroupsOrIam",
            "Effect": "Deny",
            "Action": list(AWS_DENIED),
            "Resource": "*",
        },
    ]
    return {"Version": IAM_VERSION, "Id": _policy_id(cloud), "Statement": statements}


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
# The base's COLLOCATED policy is looked up by name and attached, never made or changed here.
GCP_PLACEMENT_PERMISSIONS = (
    "compute.resourcePolicies.get",
    "compute.resourcePolicies.use",
)


def _gcp_role_id(cloud: CloudPlan) -> str:
    # Custom role ids take letters, digits, '_' and '.' only.
    return _policy_id(cloud).replace("-", "_")


def gcp_policy(cloud: CloudPlan) -> dict[str, Any]:
    """The custom role (gcloud ``--file`` format) and the binding condition for one GCP burst group."""
    permissions = set(GCP_INSTANCE_PERMISSIONS)
    if cloud.placement_strategy == "compact":
        permissions |= set(GCP_PLACEMENT_PERMISSIONS)
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
    # A VM joins the base's flexible scale set when it is created (the scale set's write).
    "Microsoft.Compute/virtualMachineScaleSets/read",
    "Microsoft.Compute/virtualMachineScaleSets/write",
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
    """``burst/README.md`` (``templates/burst/README.md.j2``): each group's policy file and how to attach it."""
    groups = [
        {
            "group": group,
            "provider": cloud.provider,
            "path": policy_path(group).removeprefix("burst/"),
            "stack": burst_stack_name(plan.cluster.name, group),
            "role_id": _gcp_role_id(cloud),
            "policy_id": _policy_id(cloud),
            "subscription": _azure_subscription(cloud),
            "resource_group": cloud.resource_group or "",
            "scope": f"/subscriptions/{_azure_subscription(cloud)}/resourceGroups/{cloud.resource_group}",
            "region": cloud.region,
        }
        for group, cloud in sorted(plan.burst_cloud.items())
    ]
    return render_template(
        README_TEMPLATE,
        cluster=plan.cluster.name,
        spec_file=plan.cluster.spec_file,
        version=__version__,
        groups=groups,
        cluster_label=CLUSTER_LABEL,
        group_label=GROUP_LABEL,
        gcp_placeholder=GCP_PLACEHOLDER_PROJECT,
        azure_placeholder=AZURE_PLACEHOLDER_SUBSCRIPTION,
    )


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
