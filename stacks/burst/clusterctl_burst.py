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

import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pulumi
from clusterctl_stack import (
    CONFIG_NAMESPACE,
    OUT_HOST_KEYS,
    OUT_NODES,
    OUT_SSH_USER,
    HostKey,
    NodeGroupInputs,
    StackInputs,
    cloud_module,
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

    def active_nodes(self, cloud: CloudPlan) -> NodeGroupInputs:
        """The group narrowed to its active hosts, as the cloud programs' node groups take it."""
        group = active_group(cloud, self.group, self.active_hosts)
        return NodeGroupInputs(cloud, self.plan, group, self.ssh_public_key, self.host_keys)


def _nodes_output(ips: dict[str, pulumi.Output[str]]) -> pulumi.Output[dict[str, str]]:
    return pulumi.Output.all(**ips) if ips else pulumi.Output.from_input({})


class _BurstPart(pulumi.ComponentResource):
    """What both parts of a burst group start from: the cloud program's components and the group's plan."""

    TYPE: ClassVar[str]  # the component's type token

    def __init__(self, name: str, args: BurstGroupArgs, opts: pulumi.ResourceOptions | None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        self.cloud = burst_cloud(args.plan, args.group)
        self.mod = cloud_module(self.cloud.provider)

    def _children(self, name: str, args: BurstGroupArgs) -> pulumi.ResourceOptions:
        """Options for the part's children (here: a provider for the group's region)."""
        return self.mod.provider_options(name, self.cloud, self)


class BurstBase(_BurstPart):
    """The operator's part of a burst group; each cloud's subclass makes it and says what it made."""

    base: dict[str, Any]

    def __init__(self, name: str, args: BurstGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(name, args, opts)
        self.base = self._base(name, args, self._children(name, args))
        self.register_outputs(self.base)

    def _base(self, name: str, args: BurstGroupArgs, child: pulumi.ResourceOptions) -> dict[str, Any]:
        raise NotImplementedError


class BurstGroup(_BurstPart):
    """The controller's part of a burst group; each cloud's subclass makes the active hosts' instances."""

    nodes: pulumi.Output[dict[str, str]]

    def __init__(self, name: str, args: BurstGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(name, args, opts)
        self.nodes = _nodes_output(self._nodes(name, args, self._children(name, args)))
        self.register_outputs({OUT_NODES: self.nodes})

    def _nodes(self, name: str, args: BurstGroupArgs, child: pulumi.ResourceOptions) -> dict[str, pulumi.Output[str]]:
        """Hostname -> private address of each active host's instance."""
        raise NotImplementedError


# --- AWS --------------------------------------------------------------------------------------


class AwsBurstBase(BurstBase):
    """The operator's part on AWS: security group, placement group, one named launch template per host."""

    TYPE = "clusterctl:burst:AwsBase"

    def _base(self, name: str, args: BurstGroupArgs, child: pulumi.ResourceOptions) -> dict[str, Any]:
        mod, cloud = self.mod, self.cloud
        network = mod.AwsNetwork(f"{name}-net", mod.AwsNetworkArgs(cloud=cloud), opts=child)
        # The cluster stack's group admits only itself; burst nodes are also talked to by the
        # controller and login nodes elsewhere on the management network (slurmctld -> slurmd,
        # srun), which on a hybrid cluster are on-prem behind the VPN.
        # The group's own network is cloud.network_cidr (the cluster stack's group rule admits it);
        # the on-prem management network is a peer across the routed link.
        why = "all traffic from the cluster's management network (slurmctld, srun, SSH from the controller)"
        for i, cidr in enumerate(cloud.peer_cidrs or [cloud.network_cidr]):
            suffix = "" if i == 0 else f"-{i}"
            management = {
                "ip_protocol": "-1",
                "cidr_ipv4": ssh_sources(cloud, [cidr], f"{name}-from-cluster{suffix}")[0],
            }
            mod.rule("in", f"{name}-from-cluster{suffix}", cloud, network.cluster_sg_id, why, management, child)
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
        return {"securityGroupId": network.cluster_sg_id, "launchTemplates": templates}


class AwsBurstGroup(BurstGroup):
    """The controller's part on AWS: one instance per active host, from the host's named launch template."""

    TYPE = "clusterctl:burst:AwsGroup"

    def _nodes(self, name: str, args: BurstGroupArgs, child: pulumi.ResourceOptions) -> dict[str, pulumi.Output[str]]:
        import pulumi_aws as aws

        nodes = args.active_nodes(self.cloud)
        ips: dict[str, pulumi.Output[str]] = {}
        for host in nodes.group.hosts:
            instance = aws.ec2.Instance(
                f"{name}-{host}",
                # Address, interfaces, security group, placement, encrypted volume: the template's.
                launch_template=aws.ec2.InstanceLaunchTemplateArgs(
                    name=launch_template_name(self.cloud, host), version="$Default"
                ),
                # Secret: the user data carries the node's private SSH host key.
                user_data=pulumi.Output.secret(nodes.user_data(host)),
                tags=self.mod.tags(self.cloud, host),
                opts=child,
            )
            ips[host] = instance.private_ip
        return ips


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


class GcpBurstBase(BurstBase):
    """The operator's part on Google Cloud: network or firewalls, GPU/host/RoCE NIC networks, compact policy."""

    TYPE = "clusterctl:burst:GcpBase"

    def _base(self, name: str, args: BurstGroupArgs, child: pulumi.ResourceOptions) -> dict[str, Any]:
        network = self.mod.GcpNetwork(f"{name}-net", self.mod.GcpNetworkArgs(cloud=self.cloud), opts=child)
        self.mod.compact_policy(name, self.cloud, child)
        nodes, nic_subnets = _gcp_subnet_refs(self.cloud)
        return {"network": network.network_id, "subnetwork": nodes, "nicSubnetworks": nic_subnets}


class GcpBurstGroup(BurstGroup):
    """The controller's part on Google Cloud: the active hosts' instances on the base's networks."""

    TYPE = "clusterctl:burst:GcpGroup"

    def _nodes(self, name: str, args: BurstGroupArgs, child: pulumi.ResourceOptions) -> dict[str, pulumi.Output[str]]:
        import pulumi_gcp as gcp

        cloud = self.cloud
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
        group_args = self.mod.GcpNodeGroupArgs(args.active_nodes(cloud), subnet, {s: s for s in nic_subnets}, policy)
        ips: dict[str, pulumi.Output[str]] = self.mod.GcpNodeGroup(f"{name}-nodes", group_args, opts=child).private_ips
        return ips


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


def _azure_children(part: _BurstPart, group: str) -> pulumi.ResourceOptions:
    """Options for an Azure part's children, refused unless the plan names the group's resource group."""
    if part.cloud.resource_group is None:
        raise ValueError(f"burst group {group}: the plan names no Azure resource group")
    return pulumi.ResourceOptions(parent=part)


class AzureBurstBase(BurstBase):
    """The operator's part on Azure: network and NSGs, the group's scale set, in the group's resource group.

    The resource group is not created here: the controller's role is assigned at that group's
    scope (least privilege), so the group has to exist before the role can be given.
    """

    TYPE = "clusterctl:burst:AzureBase"

    def _children(self, name: str, args: BurstGroupArgs) -> pulumi.ResourceOptions:
        return _azure_children(self, args.group)

    def _base(self, name: str, args: BurstGroupArgs, child: pulumi.ResourceOptions) -> dict[str, Any]:
        mod, cloud, rg = self.mod, self.cloud, self.cloud.resource_group
        network = mod.AzureNetwork(f"{name}-net", mod.AzureNetworkArgs(cloud=cloud, resource_group=rg), opts=child)
        full = cloud.group(args.group)
        base: dict[str, Any] = {"subnet": network.subnet_ids.get("nodes")}
        if full.scale_set:
            base["scaleSet"] = mod.scale_set(f"{name}-vmss", cloud, full, rg, child).id
        return base


class AzureBurstGroup(BurstGroup):
    """The controller's part on Azure: a NIC and a VM per active host, in the base's subnet and scale set."""

    TYPE = "clusterctl:burst:AzureGroup"

    def _children(self, name: str, args: BurstGroupArgs) -> pulumi.ResourceOptions:
        return _azure_children(self, args.group)

    def _nodes(self, name: str, args: BurstGroupArgs, child: pulumi.ResourceOptions) -> dict[str, pulumi.Output[str]]:
        import pulumi_azure_native as azure

        cloud = self.cloud
        nodes = args.active_nodes(cloud)
        subscription = azure.authorization.get_client_config_output(
            opts=pulumi.InvokeOptions(parent=self)
        ).subscription_id
        ids = subscription.apply(lambda sub: _azure_ids(cloud, nodes.group, sub))
        scale_set_id = ids.apply(lambda pair: pair[1] or "") if nodes.group.scale_set else None
        group_args = self.mod.AzureNodeGroupArgs(
            nodes, cloud.resource_group, ids.apply(lambda pair: pair[0]), scale_set_id
        )
        ips: dict[str, pulumi.Output[str]] = self.mod.AzureNodeGroup(
            f"{name}-nodes", group_args, opts=child
        ).private_ips
        return ips


BASES: dict[str, type[BurstBase]] = {"aws": AwsBurstBase, "gcp": GcpBurstBase, "azure": AzureBurstBase}
COMPONENTS: dict[str, type[BurstGroup]] = {"aws": AwsBurstGroup, "gcp": GcpBurstGroup, "azure": AzureBurstGroup}


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
