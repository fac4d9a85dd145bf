"""One cloud burst group as a Pulumi stack: exactly one instance per active burst host.

Input: the rendered plan (``plan.burst_cloud[<group>]``, resolved like ``plan.cloud``), the
group (config ``clusterctl:group``) and the hosts Slurm has resumed (config
``clusterctl:activeHosts``, a JSON list). ``clusterctl burst resume`` adds hosts to that set
and runs ``up``; ``suspend`` removes them and runs ``up`` again, so Pulumi deletes exactly the
instances of the hosts that left. Every per-host resource is named after its host and never
after its position in the set, which is what keeps the other hosts' resources unchanged.

What the stack holds per cloud, built from the cluster stacks' own components (nothing here
re-implements a launch template, an EFA layout, a scale set or a network):

- aws: :class:`clusterctl_aws.AwsNetwork` (the group's security group; a VPC only when the
  provider names no existing subnet), a ``cluster`` placement group, and
  :class:`clusterctl_aws.AwsNodeGroup` for the active hosts (one EFA launch template each);
- gcp: :class:`clusterctl_gcp.GcpNetwork`, a COLLOCATED resource policy,
  :class:`clusterctl_gcp.GcpNodeGroup` for the active hosts;
- azure: :class:`clusterctl_azure.AzureNetwork` and :class:`clusterctl_azure.AzureNodeGroup`
  (single-placement-group scale set, one VM per active host) in the group's resource group,
  which must exist (the controller's role is scoped to it).

The network, placement group and scale set stay while the stack exists, even with no active
host: they are free or cheap, and recreating them would eat into Slurm's ResumeTimeout.
Everything carries the labels ``clusterctl-cluster`` and ``clusterctl-group``.
"""

from __future__ import annotations

import importlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pulumi
from clusterctl_stack import (
    CONFIG_NAMESPACE,
    OUT_HOST_KEYS,
    OUT_NODES,
    OUT_SSH_USER,
    HostKey,
    StackInputs,
)

from clusterctl.plan.burst import burst_stack_name
from clusterctl.plan.models import CloudInstanceGroupPlan, CloudPlan, Plan

GROUP_KEY = "group"
ACTIVE_HOSTS_KEY = "activeHosts"
# Stack outputs beyond the shared ones (OUT_NODES holds the active hosts only).
OUT_GROUP = "group"
OUT_ACTIVE_HOSTS = "activeHosts"

STACKS = Path(__file__).resolve().parent.parent


def cloud_module(kind: str) -> ModuleType:
    """The cluster program's components for ``kind`` (``stacks/<kind>/clusterctl_<kind>.py``).

    Why imported on demand: a burst stack needs one cloud's SDK only, and importing
    pulumi_azure_native alone takes seconds.
    """
    folder = STACKS / kind
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    return importlib.import_module(f"clusterctl_{kind}")


@dataclass
class BurstSelection:
    """Which burst group the stack is for and which of its hosts exist now."""

    group: str
    active_hosts: list[str]


def parse_active_hosts(raw: str | None) -> list[str]:
    """The ``clusterctl:activeHosts`` JSON list (absent or empty: no host)."""
    if not raw:
        return []
    hosts = json.loads(raw)
    if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
        raise pulumi.RunError(f"config {CONFIG_NAMESPACE}:{ACTIVE_HOSTS_KEY} must be a JSON list of hostnames: {raw}")
    return hosts


def load_selection() -> BurstSelection:
    """Read the group and its active hosts from the running stack's configuration."""
    config = pulumi.Config(CONFIG_NAMESPACE)
    group = config.get(GROUP_KEY)
    if not group:
        raise pulumi.RunError(
            f"no burst group: set the Pulumi config `{CONFIG_NAMESPACE}:{GROUP_KEY}` (clusterctl burst does)"
        )
    return BurstSelection(group=group, active_hosts=parse_active_hosts(config.get(ACTIVE_HOSTS_KEY)))


def burst_cloud(plan: Plan, group: str) -> CloudPlan:
    """The burst group's cloud plan; refuses groups that are not cloud burst groups."""
    if group not in plan.burst_cloud:
        known = ", ".join(sorted(plan.burst_cloud)) or "none"
        raise ValueError(f"{group} is not a cloud burst group of {plan.cluster.name} (cloud burst groups: {known})")
    return plan.burst_cloud[group]


def active_group(cloud: CloudPlan, group: str, active_hosts: list[str]) -> CloudInstanceGroupPlan:
    """The group's instance plan narrowed to ``active_hosts`` (plan order, planned addresses)."""
    full = cloud.group(group)
    unknown = sorted(set(active_hosts) - set(full.hosts))
    if unknown:
        raise ValueError(f"not hosts of burst group {group}: {', '.join(unknown)}")
    wanted = set(active_hosts)
    pairs = [(h, a) for h, a in zip(full.hosts, full.addresses, strict=True) if h in wanted]
    return full.model_copy(update={"hosts": [h for h, _ in pairs], "addresses": [a for _, a in pairs]})


@dataclass
class BurstGroupArgs:
    """Inputs of the burst group components."""

    plan: Plan
    group: str
    active_hosts: list[str]
    ssh_public_key: str
    host_keys: dict[str, HostKey] = field(default_factory=dict)


class AwsBurstGroup(pulumi.ComponentResource):
    """A burst group on AWS: security group, cluster placement group, the active hosts' instances."""

    nodes: pulumi.Output[dict[str, str]]

    def __init__(self, name: str, args: BurstGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterctl:burst:AwsGroup", name, None, opts)
        import pulumi_aws as aws

        mod = cloud_module("aws")
        cloud = burst_cloud(args.plan, args.group)
        child = mod.provider_options(name, cloud, self)
        network = mod.AwsNetwork(f"{name}-net", mod.AwsNetworkArgs(cloud=cloud), opts=child)
        # The cluster stack's group admits only itself; burst nodes are also talked to by the
        # controller and login nodes elsewhere on the management network (slurmctld -> slurmd,
        # srun), which on a hybrid cluster are on-prem behind the VPN.
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-from-cluster",
            security_group_id=network.cluster_sg_id,
            ip_protocol="-1",
            cidr_ipv4=cloud.network_cidr,
            description="all traffic from the cluster's management network (slurmctld, srun, SSH from the controller)",
            tags=dict(cloud.labels),
            opts=child,
        )
        placement = mod.placement_group(name, cloud, child, tag_name=cloud.cluster)
        nodes = mod.AwsNodeGroup(
            f"{name}-nodes",
            mod.AwsNodeGroupArgs(
                cloud=cloud,
                plan=args.plan,
                group=active_group(cloud, args.group, args.active_hosts),
                subnet_id=network.subnet_ids["nodes"],
                security_group_id=network.cluster_sg_id,
                placement_group=placement,
                ssh_public_key=args.ssh_public_key,
                host_keys=args.host_keys,
            ),
            opts=child,
        )
        self.nodes = pulumi.Output.all(**nodes.private_ips) if nodes.private_ips else pulumi.Output.from_input({})
        self.register_outputs({OUT_NODES: self.nodes})


class GcpBurstGroup(pulumi.ComponentResource):
    """A burst group on Google Cloud: network or firewall, compact policy, the active hosts' instances."""

    nodes: pulumi.Output[dict[str, str]]

    def __init__(self, name: str, args: BurstGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterctl:burst:GcpGroup", name, None, opts)
        mod = cloud_module("gcp")
        cloud = burst_cloud(args.plan, args.group)
        child = mod.provider_options(name, cloud, self)
        network = mod.GcpNetwork(f"{name}-net", mod.GcpNetworkArgs(cloud=cloud), opts=child)
        policy = mod.compact_policy(name, cloud, child)
        nodes = mod.GcpNodeGroup(
            f"{name}-nodes",
            mod.GcpNodeGroupArgs(
                cloud=cloud,
                plan=args.plan,
                group=active_group(cloud, args.group, args.active_hosts),
                subnet_id=network.subnet_ids["nodes"],
                gpu_subnet_ids=network.gpu_subnet_ids,
                placement_policy=policy,
                ssh_public_key=args.ssh_public_key,
                host_keys=args.host_keys,
            ),
            opts=child,
        )
        self.nodes = pulumi.Output.all(**nodes.private_ips) if nodes.private_ips else pulumi.Output.from_input({})
        self.register_outputs({OUT_NODES: self.nodes})


class AzureBurstGroup(pulumi.ComponentResource):
    """A burst group on Azure: network, scale set and the active hosts' VMs in the group's resource group.

    The resource group is not created here: the controller's role is assigned at that group's
    scope (least privilege), so the group has to exist before the role can be given.
    """

    nodes: pulumi.Output[dict[str, str]]

    def __init__(self, name: str, args: BurstGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterctl:burst:AzureGroup", name, None, opts)
        mod = cloud_module("azure")
        cloud = burst_cloud(args.plan, args.group)
        if cloud.resource_group is None:
            raise ValueError(f"burst group {args.group}: the plan names no Azure resource group")
        child = pulumi.ResourceOptions(parent=self)
        network = mod.AzureNetwork(
            f"{name}-net", mod.AzureNetworkArgs(cloud=cloud, resource_group=cloud.resource_group), opts=child
        )
        nodes = mod.AzureNodeGroup(
            f"{name}-nodes",
            mod.AzureNodeGroupArgs(
                cloud=cloud,
                plan=args.plan,
                group=active_group(cloud, args.group, args.active_hosts),
                resource_group=cloud.resource_group,
                subnet_id=network.subnet_ids["nodes"],
                ssh_public_key=args.ssh_public_key,
                host_keys=args.host_keys,
            ),
            opts=child,
        )
        self.nodes = pulumi.Output.all(**nodes.private_ips) if nodes.private_ips else pulumi.Output.from_input({})
        self.register_outputs({OUT_NODES: self.nodes})


BurstGroup = AwsBurstGroup | GcpBurstGroup | AzureBurstGroup
COMPONENTS: dict[str, type[AwsBurstGroup] | type[GcpBurstGroup] | type[AzureBurstGroup]] = {
    "aws": AwsBurstGroup,
    "gcp": GcpBurstGroup,
    "azure": AzureBurstGroup,
}


def burst_group(args: BurstGroupArgs, opts: pulumi.ResourceOptions | None = None) -> BurstGroup:
    """The component for the group's cloud, named ``<cluster>-burst-<group>`` (stable across runs)."""
    cloud = burst_cloud(args.plan, args.group)
    name = burst_stack_name(args.plan.cluster.name, args.group)
    return COMPONENTS[cloud.provider](name, args, opts)


def deploy(inputs: StackInputs, selection: BurstSelection | None = None) -> BurstGroup:
    """The program: the burst group with its active hosts, and the stack outputs clusterctl reads.

    ``selection`` defaults to the stack configuration (``clusterctl:group``, ``clusterctl:activeHosts``).
    """
    chosen = selection or load_selection()
    plan = inputs.plan
    cloud = burst_cloud(plan, chosen.group)
    component = burst_group(
        BurstGroupArgs(
            plan=plan,
            group=chosen.group,
            active_hosts=chosen.active_hosts,
            ssh_public_key=inputs.ssh_public_key,
            host_keys=inputs.host_keys,
        )
    )
    active = active_group(cloud, chosen.group, chosen.active_hosts).hosts
    outputs: dict[str, Any] = {
        OUT_NODES: component.nodes,
        OUT_SSH_USER: cloud.ssh_user,
        OUT_HOST_KEYS: {h: inputs.host_keys[h].public for h in active if h in inputs.host_keys},
        OUT_GROUP: chosen.group,
        OUT_ACTIVE_HOSTS: active,
    }
    for key, value in outputs.items():
        pulumi.export(key, value)
    return component
