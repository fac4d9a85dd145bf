"""One cloud burst group as two Pulumi stacks: the group's base, and one instance per active host.

Why two: the controller runs ``clusterctl burst resume|suspend`` with its own cloud identity,
and that identity must not be able to open the group's firewall, security group or NSG, nor
touch IAM (least privilege; the rendered ``burst/policy-<group>.json`` grants exactly what the
``nodes`` part needs). So what defines the group's network exposure is made by the operator:

- ``base`` (config ``clusterctl:part = base``, stack ``<cluster>-burst-<group>-base``, run by
  ``clusterctl up`` with the operator's credentials): the group's network pieces and launch
  configuration, for every host of the group whether active or not --
  aws: :class:`clusterctl_aws.AwsNetwork` (the group's security group; a VPC only when the
  provider names no existing subnet), the admission of the management network, a ``cluster``
  placement group, one launch template per host named ``<cluster>-<group>-<host>`` (planned
  address, EFA interfaces, encrypted root volume, no user data);
  gcp: :class:`clusterctl_gcp.GcpNetwork` (firewalls, GPU NIC networks; on A3 Ultra the second
  host network and the RoCE network) and the COLLOCATED
  resource policy; azure: :class:`clusterctl_azure.AzureNetwork` (NSGs) and the group's
  single-placement-group scale set, in the group's resource group (which must exist: the
  controller's role is scoped to it).
- ``nodes`` (the default part, stack ``<cluster>-burst-<group>``, run by the controller): the
  active hosts only. aws: an instance launched from the host's named launch template, with
  its user data (clusterctl's key, the host key the controller generated); gcp:
  :class:`clusterctl_gcp.GcpNodeGroup` on the base's subnetworks (by name) and resource policy
  (looked up by name); azure: :class:`clusterctl_azure.AzureNodeGroup` (a NIC and a VM per
  host) in the base's subnet and scale set (ids built from their names). It reads the base by
  name, not through a stack reference: the two stacks live in different backends (the
  operator's state dir and the controller's).

Input: the rendered plan (``plan.burst_cloud[<group>]``, resolved like ``plan.cloud``), the
group (config ``clusterctl:group``) and, for ``nodes``, the hosts Slurm has resumed (config
``clusterctl:activeHosts``, a JSON list). ``clusterctl burst resume`` adds hosts to that set
and runs ``up``; ``suspend`` removes them and runs ``up`` again, so Pulumi deletes exactly the
instances of the hosts that left. Every per-host resource is named after its host and never
after its position in the set, which is what keeps the other hosts' resources unchanged.
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
    cloud_init,
    ssh_sources,
)

from clusterctl.plan.burst import burst_stack_name
from clusterctl.plan.cloud import nic_subnetwork
from clusterctl.plan.models import CloudInstanceGroupPlan, CloudPlan, Plan

GROUP_KEY = "group"
ACTIVE_HOSTS_KEY = "activeHosts"
PART_KEY = "part"
PART_BASE = "base"
PART_NODES = "nodes"
PARTS = (PART_BASE, PART_NODES)
# Stack outputs beyond the shared ones (OUT_NODES holds the active hosts only).
OUT_GROUP = "group"
OUT_ACTIVE_HOSTS = "activeHosts"
OUT_PART = "part"
OUT_BASE = "base"  # what the base made, by name (for people and tests; the nodes part derives it)

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


def base_stack_name(cluster: str, group: str) -> str:
    """The (short) Pulumi stack name of a burst group's base (made by the operator at ``up``)."""
    return f"{burst_stack_name(cluster, group)}-base"


def launch_template_name(cloud: CloudPlan, host: str) -> str:
    """AWS: the name of a burst host's launch template (``<cluster>-<group>-<host>``)."""
    return f"{cloud.cluster}-{host}"


def compact_policy_name(cloud: CloudPlan) -> str:
    """GCP: the name of the group's COLLOCATED resource policy (clusterctl_gcp.compact_policy)."""
    return f"{cloud.cluster}-compact"


@dataclass
class BurstSelection:
    """Which burst group the stack is for, which part of it, and which of its hosts exist now."""

    group: str
    active_hosts: list[str]
    part: str = PART_NODES


def parse_active_hosts(raw: str | None) -> list[str]:
    """The ``clusterctl:activeHosts`` JSON list (absent or empty: no host)."""
    if not raw:
        return []
    hosts = json.loads(raw)
    if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
        raise pulumi.RunError(f"config {CONFIG_NAMESPACE}:{ACTIVE_HOSTS_KEY} must be a JSON list of hostnames: {raw}")
    return hosts


def load_selection() -> BurstSelection:
    """Read the group, the part and the active hosts from the running stack's configuration."""
    config = pulumi.Config(CONFIG_NAMESPACE)
    group = config.get(GROUP_KEY)
    if not group:
        raise pulumi.RunError(
            f"no burst group: set the Pulumi config `{CONFIG_NAMESPACE}:{GROUP_KEY}` (clusterctl burst does)"
        )
    part = config.get(PART_KEY) or PART_NODES
    if part not in PARTS:
        raise pulumi.RunError(f"config {CONFIG_NAMESPACE}:{PART_KEY} must be one of {', '.join(PARTS)}: {part}")
    return BurstSelection(group=group, active_hosts=parse_active_hosts(config.get(ACTIVE_HOSTS_KEY)), part=part)


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
    """Inputs of the burst group components (``active_hosts``, keys: the nodes part only)."""

    plan: Plan
    group: str
    active_hosts: list[str] = field(default_factory=list)
    ssh_public_key: str = ""
    host_keys: dict[str, HostKey] = field(default_factory=dict)


def _user_data(args: BurstGroupArgs, cloud: CloudPlan, host: str) -> str:
    return cloud_init(
        hostname=host,
        fqdn=args.plan.node(host).fqdn,
        user=cloud.ssh_user,
        authorized_keys=[args.ssh_public_key],
        host_key=args.host_keys.get(host),
    )


def _nodes_output(ips: dict[str, pulumi.Output[str]]) -> pulumi.Output[dict[str, str]]:
    return pulumi.Output.all(**ips) if ips else pulumi.Output.from_input({})


# --- AWS --------------------------------------------------------------------------------------


class AwsBurstBase(pulumi.ComponentResource):
    """The operator's part on AWS: security group, placement group, one named launch template per host."""

    base: dict[str, Any]

    def __init__(self, name: str, args: BurstGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterctl:burst:AwsBase", name, None, opts)
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
            cidr_ipv4=ssh_sources(cloud, [cloud.network_cidr], f"{name}-from-cluster")[0],
            description="all traffic from the cluster's management network (slurmctld, srun, SSH from the controller)",
            tags=dict(cloud.labels),
            opts=child,
        )
        placement = mod.placement_group(name, cloud, child, tag_name=cloud.cluster)
        full = cloud.group(args.group)
        templates: dict[str, str] = {}
        for host, address in zip(full.hosts, full.addresses, strict=True):
            templates[host] = launch_template_name(cloud, host)
            mod.node_launch_template(
                f"{name}-{host}-lt",
                cloud=cloud,
                group=full,
                host=host,
                address=address,
                subnet_id=network.subnet_ids["nodes"],
                security_group_id=network.cluster_sg_id,
                placement_group=placement,
                user_data=None,
                opts=child,
                template_name=templates[host],
            )
        self.base = {"securityGroupId": network.cluster_sg_id, "launchTemplates": templates}
        self.register_outputs(self.base)


class AwsBurstGroup(pulumi.ComponentResource):
    """The controller's part on AWS: one instance per active host, from the host's named launch template."""

    nodes: pulumi.Output[dict[str, str]]

    def __init__(self, name: str, args: BurstGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterctl:burst:AwsGroup", name, None, opts)
        import pulumi_aws as aws

        mod = cloud_module("aws")
        cloud = burst_cloud(args.plan, args.group)
        child = mod.provider_options(name, cloud, self)
        ips: dict[str, pulumi.Output[str]] = {}
        for host in active_group(cloud, args.group, args.active_hosts).hosts:
            instance = aws.ec2.Instance(
                f"{name}-{host}",
                # Address, interfaces, security group, placement, encrypted volume: the template's.
                launch_template=aws.ec2.InstanceLaunchTemplateArgs(
                    name=launch_template_name(cloud, host), version="$Default"
                ),
                # Secret: the user data carries the node's private SSH host key.
                user_data=pulumi.Output.secret(_user_data(args, cloud, host)),
                tags={**cloud.labels, "Name": host},
                opts=child,
            )
            ips[host] = instance.private_ip
        self.nodes = _nodes_output(ips)
        self.register_outputs({OUT_NODES: self.nodes})


# --- GCP --------------------------------------------------------------------------------------


def _gcp_subnet_refs(cloud: CloudPlan) -> tuple[str, list[str]]:
    """The node subnetwork and the NIC subnetworks (GPU, further host, RoCE) by name.

    clusterctl_gcp.GcpNetwork names them as the plan's CloudNicPlan.subnetwork says.
    """
    nodes = next(s for s in cloud.subnets if s.purpose == "nodes")
    nics = [nic_subnetwork(net) for net in (*cloud.gpu_networks, *cloud.host_networks)]
    if cloud.rdma_network is not None:
        nics += [sub.name for sub in cloud.rdma_network.subnets]
    return nodes.existing_id or nodes.name, nics


class GcpBurstBase(pulumi.ComponentResource):
    """The operator's part on Google Cloud: network or firewalls, GPU/host/RoCE NIC networks, compact policy."""

    base: dict[str, Any]

    def __init__(self, name: str, args: BurstGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterctl:burst:GcpBase", name, None, opts)
        mod = cloud_module("gcp")
        cloud = burst_cloud(args.plan, args.group)
        child = mod.provider_options(name, cloud, self)
        network = mod.GcpNetwork(f"{name}-net", mod.GcpNetworkArgs(cloud=cloud), opts=child)
        mod.compact_policy(name, cloud, child)
        nodes, nic_subnets = _gcp_subnet_refs(cloud)
        self.base = {"network": network.network_id, "subnetwork": nodes, "nicSubnetworks": nic_subnets}
        self.register_outputs(self.base)


class GcpBurstGroup(pulumi.ComponentResource):
    """The controller's part on Google Cloud: the active hosts' instances on the base's networks."""

    nodes: pulumi.Output[dict[str, str]]

    def __init__(self, name: str, args: BurstGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterctl:burst:GcpGroup", name, None, opts)
        import pulumi_gcp as gcp

        mod = cloud_module("gcp")
        cloud = burst_cloud(args.plan, args.group)
        child = mod.provider_options(name, cloud, self)
        subnet, nic_subnets = _gcp_subnet_refs(cloud)
        policy: pulumi.Output[str] | None = None
        if cloud.placement_strategy == "compact":
            provider = child.providers.get("gcp") if isinstance(child.providers, dict) else None
            policy = gcp.compute.get_resource_policy_output(
                name=compact_policy_name(cloud),
                region=cloud.region,
                project=cloud.project,
                opts=pulumi.InvokeOptions(parent=self, provider=provider),
            ).self_link
        nodes = mod.GcpNodeGroup(
            f"{name}-nodes",
            mod.GcpNodeGroupArgs(
                cloud=cloud,
                plan=args.plan,
                group=active_group(cloud, args.group, args.active_hosts),
                subnet_id=subnet,
                nic_subnet_ids={s: s for s in nic_subnets},
                placement_policy=policy,
                ssh_public_key=args.ssh_public_key,
                host_keys=args.host_keys,
            ),
            opts=child,
        )
        self.nodes = _nodes_output(nodes.private_ips)
        self.register_outputs({OUT_NODES: self.nodes})


# --- Azure ------------------------------------------------------------------------------------


def _azure_ids(cloud: CloudPlan, group: CloudInstanceGroupPlan, subscription: str) -> tuple[str, str | None]:
    """The node subnet's and the scale set's resource ids (the base names them; an existing subnet has its id)."""
    rg = f"/subscriptions/{subscription}/resourceGroups/{cloud.resource_group}/providers"
    nodes = next(s for s in cloud.subnets if s.purpose == "nodes")
    subnet = nodes.existing_id or (
        f"{rg}/Microsoft.Network/virtualNetworks/{cloud.cluster}-vnet/subnets/{nodes.name}"  # AzureNetwork's names
    )
    scale_set = f"{rg}/Microsoft.Compute/virtualMachineScaleSets/{group.scale_set}" if group.scale_set else None
    return subnet, scale_set


class AzureBurstBase(pulumi.ComponentResource):
    """The operator's part on Azure: network and NSGs, the group's scale set, in the group's resource group.

    The resource group is not created here: the controller's role is assigned at that group's
    scope (least privilege), so the group has to exist before the role can be given.
    """

    base: dict[str, Any]

    def __init__(self, name: str, args: BurstGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterctl:burst:AzureBase", name, None, opts)
        mod = cloud_module("azure")
        cloud = burst_cloud(args.plan, args.group)
        if cloud.resource_group is None:
            raise ValueError(f"burst group {args.group}: the plan names no Azure resource group")
        child = pulumi.ResourceOptions(parent=self)
        network = mod.AzureNetwork(
            f"{name}-net", mod.AzureNetworkArgs(cloud=cloud, resource_group=cloud.resource_group), opts=child
        )
        full = cloud.group(args.group)
        self.base = {"subnet": network.subnet_ids.get("nodes")}
        if full.scale_set:
            self.base["scaleSet"] = mod.scale_set(f"{name}-vmss", cloud, full, cloud.resource_group, child).id
        self.register_outputs(self.base)


class AzureBurstGroup(pulumi.ComponentResource):
    """The controller's part on Azure: a NIC and a VM per active host, in the base's subnet and scale set."""

    nodes: pulumi.Output[dict[str, str]]

    def __init__(self, name: str, args: BurstGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterctl:burst:AzureGroup", name, None, opts)
        import pulumi_azure_native as azure

        mod = cloud_module("azure")
        cloud = burst_cloud(args.plan, args.group)
        if cloud.resource_group is None:
            raise ValueError(f"burst group {args.group}: the plan names no Azure resource group")
        child = pulumi.ResourceOptions(parent=self)
        group = active_group(cloud, args.group, args.active_hosts)
        subscription = azure.authorization.get_client_config_output(
            opts=pulumi.InvokeOptions(parent=self)
        ).subscription_id
        ids = subscription.apply(lambda sub: _azure_ids(cloud, group, sub))
        nodes = mod.AzureNodeGroup(
            f"{name}-nodes",
            mod.AzureNodeGroupArgs(
                cloud=cloud,
                plan=args.plan,
                group=group,
                resource_group=cloud.resource_group,
                subnet_id=ids.apply(lambda pair: pair[0]),
                ssh_public_key=args.ssh_public_key,
                host_keys=args.host_keys,
                scale_set_id=ids.apply(lambda pair: pair[1] or "") if group.scale_set else None,
            ),
            opts=child,
        )
        self.nodes = _nodes_output(nodes.private_ips)
        self.register_outputs({OUT_NODES: self.nodes})


BurstBase = AwsBurstBase | GcpBurstBase | AzureBurstBase
BurstGroup = AwsBurstGroup | GcpBurstGroup | AzureBurstGroup
BASES: dict[str, type[AwsBurstBase] | type[GcpBurstBase] | type[AzureBurstBase]] = {
    "aws": AwsBurstBase,
    "gcp": GcpBurstBase,
    "azure": AzureBurstBase,
}
COMPONENTS: dict[str, type[AwsBurstGroup] | type[GcpBurstGroup] | type[AzureBurstGroup]] = {
    "aws": AwsBurstGroup,
    "gcp": GcpBurstGroup,
    "azure": AzureBurstGroup,
}


def burst_base(args: BurstGroupArgs, opts: pulumi.ResourceOptions | None = None) -> BurstBase:
    """The base component for the group's cloud, named ``<cluster>-burst-<group>-base``."""
    cloud = burst_cloud(args.plan, args.group)
    return BASES[cloud.provider](base_stack_name(args.plan.cluster.name, args.group), args, opts)


def burst_group(args: BurstGroupArgs, opts: pulumi.ResourceOptions | None = None) -> BurstGroup:
    """The nodes component for the group's cloud, named ``<cluster>-burst-<group>`` (stable across runs)."""
    cloud = burst_cloud(args.plan, args.group)
    name = burst_stack_name(args.plan.cluster.name, args.group)
    return COMPONENTS[cloud.provider](name, args, opts)


def deploy(inputs: StackInputs, selection: BurstSelection | None = None) -> BurstBase | BurstGroup:
    """The program: the group's base, or its active hosts; and the stack outputs clusterctl reads.

    ``selection`` defaults to the stack configuration (``clusterctl:group``, ``clusterctl:part``,
    ``clusterctl:activeHosts``).
    """
    chosen = selection or load_selection()
    plan = inputs.plan
    cloud = burst_cloud(plan, chosen.group)
    if chosen.part == PART_BASE:
        base = burst_base(BurstGroupArgs(plan=plan, group=chosen.group))
        for key, value in {OUT_GROUP: chosen.group, OUT_PART: PART_BASE, OUT_BASE: base.base}.items():
            pulumi.export(key, value)
        return base
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
        OUT_PART: PART_NODES,
        OUT_ACTIVE_HOSTS: active,
    }
    for key, value in outputs.items():
        pulumi.export(key, value)
    return component
