"""The AWS cluster as Pulumi components, built only from ``plan.cloud`` (see stacks/README.md).

Layout: a VPC on the management network with a private node subnet (egress through a NAT
gateway), a public subnet (NAT, bastion) and a storage subnet (FSx); one cluster security
group that is open to itself (EFA needs all traffic to and from the group itself) and
accepts SSH from inside the VPC (and so from the bastion); a ``cluster`` placement group;
one launch template per GPU node pinning its planned address on the ENA primary interface
and attaching an EFA-only interface on every network card (32 on p5.48xlarge); FSx for
Lustre sized by the plan. SSH from outside reaches only the bastion, and only from
``bastion.allowed_cidrs`` (never 0.0.0.0/0 unless the plan says ``allow_world_ssh``).

Defaults (tests/stacks/test_cloud_defaults.py asserts them):

- every EBS volume is encrypted: instance root volumes (``encrypted``) and the volumes of every
  launch template (``Ebs.Encrypted``), with the account's default EBS key unless it names
  another; AWS: "Amazon EBS encryption" in the EC2 user guide;
- FSx for Lustre is always encrypted at rest (there is no switch; the API takes only a KMS key
  for persistent file systems) and encrypts data in transit for SCRATCH_2 and PERSISTENT_*
  deployment types, the only ones the stack accepts (FSx for Lustre user guide, "Data
  encryption in Amazon FSx for Lustre");
- IMDSv2 only (``http_tokens = required``), no public address except on the bastion.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, TypedDict

import clusterctl_stack as common
import pulumi
import pulumi_aws as aws

from clusterctl.plan.models import CloudInstanceGroupPlan, CloudPlan

SSH_PORT = 22
ROOT_DEVICE = "/dev/sda1"  # Ubuntu AMIs' root device name
FSX_LUSTRE_VERSION = "2.15"
# FSx for Lustre deployment types that encrypt data in transit as well as at rest ("Encrypting
# data in transit": Scratch 2 and persistent file systems); SCRATCH_1 does not.
FSX_ENCRYPTED_IN_TRANSIT = ("PERSISTENT_2", "PERSISTENT_1", "SCRATCH_2")
WORLD = "0.0.0.0/0"


def tags(cloud: CloudPlan, name: str | None = None) -> dict[str, str]:
    """The cluster's labels as tags, and ``Name`` when given."""
    out = dict(cloud.labels)
    if name:
        out["Name"] = name
    return out


def provider_options(name: str, cloud: CloudPlan, parent: pulumi.Resource) -> pulumi.ResourceOptions:
    """Options for a component's children: an AWS provider in the plan's region tagging everything."""
    provider = aws.Provider(
        f"{name}-provider",
        region=cloud.region,
        default_tags=aws.ProviderDefaultTagsArgs(tags=dict(cloud.labels)),
        opts=pulumi.ResourceOptions(parent=parent),
    )
    return pulumi.ResourceOptions(parent=parent, providers={"aws": provider})


def placement_group(
    name: str, cloud: CloudPlan, opts: pulumi.ResourceOptions, tag_name: str | None = None
) -> pulumi.Input[str] | None:
    """The plan's placement group, or a new `cluster` one when the plan asks for it and names none."""
    if cloud.placement_strategy != "cluster" or cloud.placement_group:
        return cloud.placement_group
    return aws.ec2.PlacementGroup(
        f"{name}-pg", strategy="cluster", tags=tags(cloud, tag_name or f"{cloud.cluster}-gpu"), opts=opts
    ).name


def vpc(name: str, cloud: CloudPlan, cidr: str, tag_name: str, opts: pulumi.ResourceOptions) -> aws.ec2.Vpc:
    """A VPC with DNS names for its instances."""
    return aws.ec2.Vpc(
        name, cidr_block=cidr, enable_dns_support=True, enable_dns_hostnames=True, tags=tags(cloud, tag_name), opts=opts
    )


def subnet(
    name: str,
    cloud: CloudPlan,
    vpc_id: pulumi.Input[str],
    cidr: str | None,
    tag_name: str,
    opts: pulumi.ResourceOptions,
) -> aws.ec2.Subnet:
    """A subnet in the plan's zone; no instance gets a public address unless it asks for one."""
    return aws.ec2.Subnet(
        name,
        vpc_id=vpc_id,
        cidr_block=cidr,
        availability_zone=cloud.zone,
        map_public_ip_on_launch=False,
        tags=tags(cloud, tag_name),
        opts=opts,
    )


def default_route(
    name: str,
    cloud: CloudPlan,
    vpc_id: pulumi.Input[str],
    route: aws.ec2.RouteTableRouteArgs,
    tag_name: str,
    subnets: Mapping[str, pulumi.Input[str]],
    opts: pulumi.ResourceOptions,
) -> None:
    """A route table sending everything through ``route``, associated with ``subnets`` (resource name -> subnet id)."""
    table = aws.ec2.RouteTable(name, vpc_id=vpc_id, routes=[route], tags=tags(cloud, tag_name), opts=opts)
    for association, subnet_id in subnets.items():
        aws.ec2.RouteTableAssociation(association, subnet_id=subnet_id, route_table_id=table.id, opts=opts)


def security_group(
    name: str,
    cloud: CloudPlan,
    vpc_id: pulumi.Input[str],
    description: str,
    tag_name: str,
    opts: pulumi.ResourceOptions,
) -> aws.ec2.SecurityGroup:
    """An empty security group; its rules are separate resources (:func:`rule`)."""
    return aws.ec2.SecurityGroup(name, vpc_id=vpc_id, description=description, tags=tags(cloud, tag_name), opts=opts)


class RuleMatch(TypedDict, total=False):
    """The traffic a security group rule matches (arguments of ``aws.vpc.SecurityGroup*Rule``)."""

    ip_protocol: str
    from_port: int
    to_port: int
    cidr_ipv4: pulumi.Input[str]
    referenced_security_group_id: pulumi.Input[str]


def ssh(cidr: pulumi.Input[str]) -> RuleMatch:
    """SSH from or to ``cidr``."""
    return {"ip_protocol": "tcp", "from_port": SSH_PORT, "to_port": SSH_PORT, "cidr_ipv4": cidr}


RULES = {"in": aws.vpc.SecurityGroupIngressRule, "out": aws.vpc.SecurityGroupEgressRule}


def rule(
    direction: Literal["in", "out"],
    name: str,
    cloud: CloudPlan,
    security_group_id: pulumi.Input[str],
    description: str,
    match: RuleMatch,
    opts: pulumi.ResourceOptions,
) -> None:
    """One ingress (``in``) or egress (``out``) rule of a security group."""
    RULES[direction](
        name, security_group_id=security_group_id, description=description, tags=tags(cloud), opts=opts, **match
    )


def ssh_ingress(
    name: str,
    cloud: CloudPlan,
    security_group_id: pulumi.Input[str],
    sources: list[str],
    description: str,
    opts: pulumi.ResourceOptions,
) -> None:
    """One SSH ingress rule per source network (``<name>-<i>``), each checked by ``ssh_sources`` before."""
    for i, cidr in enumerate(sources):
        rule("in", f"{name}-{i}", cloud, security_group_id, description, ssh(cidr), opts)


def instance(
    name: str,
    cloud: CloudPlan,
    *,
    ami: pulumi.Input[str],
    instance_type: str,
    subnet_id: pulumi.Input[str],
    security_group_id: pulumi.Input[str],
    user_data: str,
    tag_name: str,
    opts: pulumi.ResourceOptions,
    volume_gib: int | None = None,
    private_ip: str | None = None,
    public: bool | None = None,
    shutdown: str | None = None,
) -> aws.ec2.Instance:
    """An instance with the defaults of every program: encrypted gp3 root volume, IMDSv2 only, secret user data.

    ``public`` gives it a public address; ``shutdown`` is what a shutdown from inside does.
    """
    return aws.ec2.Instance(
        name,
        ami=ami,
        instance_type=instance_type,
        availability_zone=cloud.zone,
        subnet_id=subnet_id,
        private_ip=private_ip,
        associate_public_ip_address=public,
        vpc_security_group_ids=[security_group_id],
        instance_initiated_shutdown_behavior=shutdown,
        # Secret: the user data carries the instance's private SSH host key.
        user_data=pulumi.Output.secret(user_data),
        root_block_device=aws.ec2.InstanceRootBlockDeviceArgs(
            volume_size=volume_gib, volume_type="gp3", encrypted=True, tags=tags(cloud, tag_name)
        ),
        metadata_options=aws.ec2.InstanceMetadataOptionsArgs(http_tokens="required"),
        tags=tags(cloud, tag_name),
        opts=opts,
    )


def efa_network_interfaces(
    group: CloudInstanceGroupPlan, address: str, subnet_id: pulumi.Input[str], security_group_id: pulumi.Input[str]
) -> list[aws.ec2.LaunchTemplateNetworkInterfaceArgs]:
    """The network interfaces of one GPU instance: ENA primary plus one EFA-only per card.

    AWS's layout for instances with several network cards: the primary (card 0, device 0) is an
    ENA interface -- it carries the node's address -- then an EFA-only interface on card 0
    device 1 and on device 0 of every other card. EFA-only interfaces take no IP address.
    """
    nics = [
        aws.ec2.LaunchTemplateNetworkInterfaceArgs(
            network_card_index=0,
            device_index=0,
            interface_type="interface",
            subnet_id=subnet_id,
            private_ip_address=address,
            security_groups=[security_group_id],
            delete_on_termination="true",
        )
    ]
    for card in range(group.efa_interfaces):
        nics.append(
            aws.ec2.LaunchTemplateNetworkInterfaceArgs(
                network_card_index=card,
                device_index=1 if card == 0 else 0,
                interface_type="efa-only",
                subnet_id=subnet_id,
                security_groups=[security_group_id],
                delete_on_termination="true",
            )
        )
    return nics


# The inputs every cloud's network component takes.
AwsNetworkArgs = common.CloudNetworkArgs


class AwsNetwork(common.CloudNetwork):
    """VPC, subnets, internet and NAT gateways, route tables and the security groups."""

    vpc_id: pulumi.Output[str]
    cluster_sg_id: pulumi.Output[str]
    bastion_sg_id: pulumi.Output[str] | None

    def __init__(self, name: str, args: AwsNetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterctl:aws:Network", name, None, opts)
        cloud = args.cloud
        child = pulumi.ResourceOptions(parent=self)
        if cloud.existing_network:
            self.vpc_id = pulumi.Output.from_input(cloud.existing_network)
            self.subnet_ids = common.existing_subnet_ids(cloud)
        else:
            new_vpc = vpc(f"{name}-vpc", cloud, cloud.network_cidr, f"{cloud.cluster}-vpc", child)
            self.vpc_id = new_vpc.id
            self.subnet_ids = {
                net.purpose: subnet(f"{name}-{net.purpose}", cloud, new_vpc.id, net.cidr, net.name, child).id
                for net in cloud.subnets
            }
            self._routes(name, cloud, new_vpc, child)
        self.cluster_sg_id = self._cluster_group(name, cloud, child)
        self.bastion_sg_id = self._bastion_group(name, cloud, child) if cloud.bastion else None
        self.register_outputs({"vpcId": self.vpc_id, "clusterSecurityGroupId": self.cluster_sg_id})

    def _routes(self, name: str, cloud: CloudPlan, new_vpc: aws.ec2.Vpc, child: pulumi.ResourceOptions) -> None:
        igw = aws.ec2.InternetGateway(
            f"{name}-igw", vpc_id=new_vpc.id, tags=tags(cloud, f"{cloud.cluster}-igw"), opts=child
        )
        public = {f"{name}-public-rta": self.subnet_ids["public"]}
        internet = aws.ec2.RouteTableRouteArgs(cidr_block=WORLD, gateway_id=igw.id)
        default_route(f"{name}-public-rt", cloud, new_vpc.id, internet, f"{cloud.cluster}-public", public, child)
        # Nodes have no public addresses (instances with several network cards cannot get one
        # anyway); they reach package mirrors through a NAT gateway in the public subnet.
        eip = aws.ec2.Eip(f"{name}-nat-eip", domain="vpc", tags=tags(cloud, f"{cloud.cluster}-nat"), opts=child)
        nat = aws.ec2.NatGateway(
            f"{name}-nat",
            allocation_id=eip.id,
            subnet_id=self.subnet_ids["public"],
            tags=tags(cloud, f"{cloud.cluster}-nat"),
            opts=child,
        )
        private = {f"{name}-{p}-rta": self.subnet_ids[p] for p in ("nodes", "storage") if p in self.subnet_ids}
        outbound = aws.ec2.RouteTableRouteArgs(cidr_block=WORLD, nat_gateway_id=nat.id)
        default_route(f"{name}-private-rt", cloud, new_vpc.id, outbound, f"{cloud.cluster}-private", private, child)

    def _cluster_group(self, name: str, cloud: CloudPlan, child: pulumi.ResourceOptions) -> pulumi.Output[str]:
        sg = security_group(
            f"{name}-cluster-sg",
            cloud,
            self.vpc_id,
            f"clusterctl {cloud.cluster}: nodes and FSx talk to each other freely (EFA needs it)",
            f"{cloud.cluster}-cluster",
            child,
        )
        itself: RuleMatch = {"ip_protocol": "-1", "referenced_security_group_id": sg.id}
        inside_why = "all traffic within the cluster (EFA, Slurm, Lustre)"
        rule("in", f"{name}-cluster-self-in", cloud, sg.id, inside_why, itself, child)
        egress_why = "all traffic within the cluster (EFA requires the self-referencing egress rule)"
        rule("out", f"{name}-cluster-self-out", cloud, sg.id, egress_why, itself, child)
        ssh_why = "SSH from inside the VPC (the bastion, or clusterctl running in the network)"
        vpc_ssh = ssh(common.ssh_sources(cloud, [cloud.network_cidr], f"{name}-cluster-ssh-vpc")[0])
        rule("in", f"{name}-cluster-ssh-vpc", cloud, sg.id, ssh_why, vpc_ssh, child)
        nat_why = "outbound through the NAT gateway (packages, container images)"
        rule("out", f"{name}-cluster-out", cloud, sg.id, nat_why, {"ip_protocol": "-1", "cidr_ipv4": WORLD}, child)
        return sg.id

    def _bastion_group(self, name: str, cloud: CloudPlan, child: pulumi.ResourceOptions) -> pulumi.Output[str]:
        assert cloud.bastion is not None
        why = f"clusterctl {cloud.cluster}: SSH to the bastion from allowed_ssh_cidrs only"
        sg = security_group(f"{name}-bastion-sg", cloud, self.vpc_id, why, f"{cloud.cluster}-bastion", child)
        allowed = common.ssh_sources(cloud, cloud.bastion.allowed_cidrs, f"{name}-bastion-sg")
        ssh_why = "SSH from a network listed in provider.allowed_ssh_cidrs"
        ssh_ingress(f"{name}-bastion-ssh", cloud, sg.id, allowed, ssh_why, child)
        forward_why = "the bastion only forwards SSH into the VPC"
        rule("out", f"{name}-bastion-out", cloud, sg.id, forward_why, ssh(cloud.network_cidr), child)
        return sg.id


@dataclass
class AwsNodeGroupArgs:
    """Inputs of :class:`AwsNodeGroup`."""

    nodes: common.NodeGroupInputs
    subnet_id: pulumi.Input[str]
    security_group_id: pulumi.Input[str]
    placement_group: pulumi.Input[str] | None


class AwsNodeGroup(common.CloudNodeGroup):
    """The instances of one node group; GPU groups get one EFA launch template per node."""

    def __init__(self, name: str, args: AwsNodeGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterctl:aws:NodeGroup", name, opts)
        cloud, group = args.nodes.cloud, args.nodes.group
        child = pulumi.ResourceOptions(parent=self)
        for host, address in args.nodes.hosts():
            user_data = args.nodes.user_data(host)
            if group.efa_interfaces:
                made = self._efa_instance(name, args, host, address, user_data, child)
            else:
                made = instance(
                    f"{name}-{host}",
                    cloud,
                    ami=common.group_image(cloud, group),
                    instance_type=group.instance_type,
                    subnet_id=args.subnet_id,
                    security_group_id=args.security_group_id,
                    user_data=user_data,
                    tag_name=host,
                    opts=child,
                    volume_gib=cloud.root_volume_gib,
                    private_ip=address,
                )
            # The AMI EC2 launched it from (for a launch template's instance, the template's then).
            self._add_node(host, made.private_ip, made.ami)
        self._finish()

    def _efa_instance(
        self,
        name: str,
        args: AwsNodeGroupArgs,
        host: str,
        address: str,
        user_data: str,
        child: pulumi.ResourceOptions,
    ) -> aws.ec2.Instance:
        # One launch template per node: it is the only place a pinned primary address can live
        # next to the EFA interfaces (RunInstances refuses an instance-level address with them).
        template = node_launch_template(
            f"{name}-{host}-lt",
            cloud=args.nodes.cloud,
            group=args.nodes.group,
            host=host,
            address=address,
            subnet_id=args.subnet_id,
            security_group_id=args.security_group_id,
            placement_group=args.placement_group,
            user_data=user_data,
            opts=child,
        )
        return aws.ec2.Instance(
            f"{name}-{host}",
            launch_template=aws.ec2.InstanceLaunchTemplateArgs(
                id=template.id, version=template.latest_version.apply(str)
            ),
            tags=tags(args.nodes.cloud, host),
            opts=child,
        )


def node_launch_template(
    resource_name: str,
    *,
    cloud: CloudPlan,
    group: CloudInstanceGroupPlan,
    host: str,
    address: str,
    subnet_id: pulumi.Input[str],
    security_group_id: pulumi.Input[str],
    placement_group: pulumi.Input[str] | None,
    user_data: str | None,
    opts: pulumi.ResourceOptions,
    template_name: str | None = None,
) -> aws.ec2.LaunchTemplate:
    """The launch template of one node: its planned address, EFA interfaces, encrypted root volume.

    ``user_data`` None leaves it out (a burst group's templates: the controller passes each
    node's user data when it runs the instance); ``template_name`` names the template so an
    instance can be launched from it by name.
    """
    reservation = None
    market = None
    if group.capacity_reservation and cloud.capacity_reservation_id:
        reservation = aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
            capacity_reservation_target=aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
                capacity_reservation_id=cloud.capacity_reservation_id
            )
        )
        if cloud.capacity_block:
            market = aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(market_type="capacity-block")
    placement = (
        aws.ec2.LaunchTemplatePlacementArgs(group_name=placement_group, availability_zone=cloud.zone)
        if group.placement and placement_group is not None
        else aws.ec2.LaunchTemplatePlacementArgs(availability_zone=cloud.zone)
    )
    return aws.ec2.LaunchTemplate(
        resource_name,
        name=template_name,
        update_default_version=True if template_name else None,
        image_id=common.group_image(cloud, group),
        instance_type=group.instance_type,
        network_interfaces=efa_network_interfaces(group, address, subnet_id, security_group_id),
        placement=placement,
        capacity_reservation_specification=reservation,
        instance_market_options=market,
        block_device_mappings=[
            aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                device_name=ROOT_DEVICE,
                ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                    volume_size=cloud.root_volume_gib,
                    volume_type="gp3",
                    delete_on_termination="true",
                    encrypted="true",
                ),
            )
        ],
        metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(http_tokens="required"),
        # Launch templates take base64 user data; secret because it carries the host key.
        user_data=(
            pulumi.Output.secret(base64.b64encode(user_data.encode()).decode()) if user_data is not None else None
        ),
        tag_specifications=[
            aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags=tags(cloud, host))
            for kind in ("instance", "volume", "network-interface")
        ],
        tags=tags(cloud, f"{host}-lt"),
        opts=opts,
    )


class FsxLustre(common.ManagedLustre):
    """An FSx for Lustre file system sized by the plan (PerUnitStorageThroughput x capacity)."""

    TYPE = "clusterctl:aws:FsxLustre"

    def _file_system(self, name: str, args: common.ManagedLustreArgs) -> pulumi.Output[str]:
        fs = args.fs
        assert args.security_group_id is not None  # the cluster group: FSx and the nodes talk freely
        if fs.tier not in FSX_ENCRYPTED_IN_TRANSIT:
            raise ValueError(
                f"FSx deployment type {fs.tier} does not encrypt data in transit; use one of "
                f"{', '.join(FSX_ENCRYPTED_IN_TRANSIT)}"
            )
        filesystem = aws.fsx.LustreFileSystem(
            f"{name}-fsx",
            storage_capacity=fs.capacity_gib,
            deployment_type=fs.tier,
            per_unit_storage_throughput=fs.per_unit_mbps_per_tib if fs.tier.startswith("PERSISTENT") else None,
            subnet_ids=args.network,  # pulumi-aws 7 takes the one subnet as a string
            security_group_ids=[args.security_group_id],
            file_system_type_version=FSX_LUSTRE_VERSION,
            data_compression_type="NONE",
            tags=tags(args.cloud, f"{args.cloud.cluster}-{fs.name}"),
            opts=pulumi.ResourceOptions(parent=self),
        )
        return pulumi.Output.concat(filesystem.dns_name, "@tcp:/", filesystem.mount_name)


class AwsCluster(common.CloudCluster):
    """Everything of one clusterctl cluster on AWS."""

    PROVIDER = "aws"
    network: AwsNetwork
    placement: pulumi.Input[str] | None

    def _site(self, name: str) -> pulumi.ResourceOptions:
        child = provider_options(name, self.cloud, self)
        self.network = AwsNetwork(f"{name}-net", AwsNetworkArgs(cloud=self.cloud), opts=child)
        self.placement = placement_group(name, self.cloud, child)
        return child

    def _node_group(self, name: str, nodes: common.NodeGroupInputs) -> common.CloudNodeGroup:
        network = self.network
        group_args = AwsNodeGroupArgs(nodes, network.subnet_ids["nodes"], network.cluster_sg_id, self.placement)
        return AwsNodeGroup(name, group_args, opts=self._child)

    def _lustre(self, name: str) -> dict[str, pulumi.Output[str]]:
        storage = self.network.subnet_ids.get("storage", self.network.subnet_ids["nodes"])
        sg_id = self.network.cluster_sg_id
        return {
            fs.name: FsxLustre(
                f"{name}-{fs.name}", common.ManagedLustreArgs(self.cloud, fs, storage, sg_id), opts=self._child
            ).source
            for fs in self.cloud.managed_lustre
        }

    def _bastion(self, name: str, args: common.CloudClusterArgs) -> pulumi.Output[str]:
        cloud = self.cloud
        assert cloud.bastion is not None
        assert self.network.bastion_sg_id is not None  # made whenever the plan has a bastion
        bastion = instance(
            f"{name}-bastion",
            cloud,
            ami=cloud.image,
            instance_type=cloud.bastion.instance_type,
            subnet_id=self.network.subnet_ids["public"],
            security_group_id=self.network.bastion_sg_id,
            user_data=args.bastion_user_data(cloud),
            tag_name=cloud.bastion.name,
            opts=self._child,
            public=True,
        )
        return bastion.public_ip


# The inputs every cloud's cluster component takes.
AwsClusterArgs = common.CloudClusterArgs


def deploy(inputs: common.StackInputs) -> AwsCluster:
    """The program: one AwsCluster from the plan, and the stack outputs clusterctl reads."""
    return common.deploy_cloud(AwsCluster, inputs)
