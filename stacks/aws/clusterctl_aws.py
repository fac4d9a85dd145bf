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
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
from clusterctl_stack import (
    BASTION_KEY,
    OUT_NODES,
    CloudCluster,
    CloudClusterArgs,
    HostKey,
    StackInputs,
    cloud_init,
    deploy_cloud,
    group_image,
    ssh_sources,
)

from clusterctl.plan.models import CloudInstanceGroupPlan, CloudPlan, ManagedLustrePlan, Plan

SSH_PORT = 22
ROOT_DEVICE = "/dev/sda1"  # Ubuntu AMIs' root device name
FSX_LUSTRE_VERSION = "2.15"
# FSx for Lustre deployment types that encrypt data in transit as well as at rest ("Encrypting
# data in transit": Scratch 2 and persistent file systems); SCRATCH_1 does not.
FSX_ENCRYPTED_IN_TRANSIT = ("PERSISTENT_2", "PERSISTENT_1", "SCRATCH_2")


def _tags(cloud: CloudPlan, name: str | None = None) -> dict[str, str]:
    tags = dict(cloud.labels)
    if name:
        tags["Name"] = name
    return tags


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
    tags = _tags(cloud, tag_name or f"{cloud.cluster}-gpu")
    return aws.ec2.PlacementGroup(f"{name}-pg", strategy="cluster", tags=tags, opts=opts).name


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


@dataclass
class AwsNetworkArgs:
    """Inputs of :class:`AwsNetwork`."""

    cloud: CloudPlan


class AwsNetwork(pulumi.ComponentResource):
    """VPC, subnets, internet and NAT gateways, route tables and the security groups."""

    vpc_id: pulumi.Output[str]
    subnet_ids: dict[str, pulumi.Output[str]]
    cluster_sg_id: pulumi.Output[str]
    bastion_sg_id: pulumi.Output[str] | None

    def __init__(self, name: str, args: AwsNetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterctl:aws:Network", name, None, opts)
        cloud = args.cloud
        child = pulumi.ResourceOptions(parent=self)
        self.subnet_ids = {}
        if cloud.existing_network:
            self.vpc_id = pulumi.Output.from_input(cloud.existing_network)
            for subnet in cloud.subnets:
                if subnet.existing_id:
                    self.subnet_ids[subnet.purpose] = pulumi.Output.from_input(subnet.existing_id)
        else:
            vpc = aws.ec2.Vpc(
                f"{name}-vpc",
                cidr_block=cloud.network_cidr,
                enable_dns_support=True,
                enable_dns_hostnames=True,
                tags=_tags(cloud, f"{cloud.cluster}-vpc"),
                opts=child,
            )
            self.vpc_id = vpc.id
            for subnet in cloud.subnets:
                created = aws.ec2.Subnet(
                    f"{name}-{subnet.purpose}",
                    vpc_id=vpc.id,
                    cidr_block=subnet.cidr,
                    availability_zone=cloud.zone,
                    map_public_ip_on_launch=False,
                    tags=_tags(cloud, subnet.name),
                    opts=child,
                )
                self.subnet_ids[subnet.purpose] = created.id
            self._routes(name, cloud, vpc, child)
        self.cluster_sg_id = self._cluster_group(name, cloud, child)
        self.bastion_sg_id = self._bastion_group(name, cloud, child) if cloud.bastion else None
        self.register_outputs({"vpcId": self.vpc_id, "clusterSecurityGroupId": self.cluster_sg_id})

    def _routes(self, name: str, cloud: CloudPlan, vpc: aws.ec2.Vpc, child: pulumi.ResourceOptions) -> None:
        igw = aws.ec2.InternetGateway(
            f"{name}-igw", vpc_id=vpc.id, tags=_tags(cloud, f"{cloud.cluster}-igw"), opts=child
        )
        public_rt = aws.ec2.RouteTable(
            f"{name}-public-rt",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id)],
            tags=_tags(cloud, f"{cloud.cluster}-public"),
            opts=child,
        )
        aws.ec2.RouteTableAssociation(
            f"{name}-public-rta", subnet_id=self.subnet_ids["public"], route_table_id=public_rt.id, opts=child
        )
        # Nodes have no public addresses (instances with several network cards cannot get one
        # anyway); they reach package mirrors through a NAT gateway in the public subnet.
        eip = aws.ec2.Eip(f"{name}-nat-eip", domain="vpc", tags=_tags(cloud, f"{cloud.cluster}-nat"), opts=child)
        nat = aws.ec2.NatGateway(
            f"{name}-nat",
            allocation_id=eip.id,
            subnet_id=self.subnet_ids["public"],
            tags=_tags(cloud, f"{cloud.cluster}-nat"),
            opts=child,
        )
        private_rt = aws.ec2.RouteTable(
            f"{name}-private-rt",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat.id)],
            tags=_tags(cloud, f"{cloud.cluster}-private"),
            opts=child,
        )
        for purpose in ("nodes", "storage"):
            if purpose in self.subnet_ids:
                aws.ec2.RouteTableAssociation(
                    f"{name}-{purpose}-rta",
                    subnet_id=self.subnet_ids[purpose],
                    route_table_id=private_rt.id,
                    opts=child,
                )

    def _cluster_group(self, name: str, cloud: CloudPlan, child: pulumi.ResourceOptions) -> pulumi.Output[str]:
        sg = aws.ec2.SecurityGroup(
            f"{name}-cluster-sg",
            vpc_id=self.vpc_id,
            description=f"clusterctl {cloud.cluster}: nodes and FSx talk to each other freely (EFA needs it)",
            tags=_tags(cloud, f"{cloud.cluster}-cluster"),
            opts=child,
        )
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-cluster-self-in",
            security_group_id=sg.id,
            ip_protocol="-1",
            referenced_security_group_id=sg.id,
            description="all traffic within the cluster (EFA, Slurm, Lustre)",
            tags=_tags(cloud),
            opts=child,
        )
        aws.vpc.SecurityGroupEgressRule(
            f"{name}-cluster-self-out",
            security_group_id=sg.id,
            ip_protocol="-1",
            referenced_security_group_id=sg.id,
            description="all traffic within the cluster (EFA requires the self-referencing egress rule)",
            tags=_tags(cloud),
            opts=child,
        )
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-cluster-ssh-vpc",
            security_group_id=sg.id,
            ip_protocol="tcp",
            from_port=SSH_PORT,
            to_port=SSH_PORT,
            cidr_ipv4=ssh_sources(cloud, [cloud.network_cidr], f"{name}-cluster-ssh-vpc")[0],
            description="SSH from inside the VPC (the bastion, or clusterctl running in the network)",
            tags=_tags(cloud),
            opts=child,
        )
        aws.vpc.SecurityGroupEgressRule(
            f"{name}-cluster-out",
            security_group_id=sg.id,
            ip_protocol="-1",
            cidr_ipv4="0.0.0.0/0",
            description="outbound through the NAT gateway (packages, container images)",
            tags=_tags(cloud),
            opts=child,
        )
        return sg.id

    def _bastion_group(self, name: str, cloud: CloudPlan, child: pulumi.ResourceOptions) -> pulumi.Output[str]:
        assert cloud.bastion is not None
        sg = aws.ec2.SecurityGroup(
            f"{name}-bastion-sg",
            vpc_id=self.vpc_id,
            description=f"clusterctl {cloud.cluster}: SSH to the bastion from allowed_ssh_cidrs only",
            tags=_tags(cloud, f"{cloud.cluster}-bastion"),
            opts=child,
        )
        for i, cidr in enumerate(ssh_sources(cloud, cloud.bastion.allowed_cidrs, f"{name}-bastion-sg")):
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-bastion-ssh-{i}",
                security_group_id=sg.id,
                ip_protocol="tcp",
                from_port=SSH_PORT,
                to_port=SSH_PORT,
                cidr_ipv4=cidr,
                description="SSH from a network listed in provider.allowed_ssh_cidrs",
                tags=_tags(cloud),
                opts=child,
            )
        aws.vpc.SecurityGroupEgressRule(
            f"{name}-bastion-out",
            security_group_id=sg.id,
            ip_protocol="tcp",
            from_port=SSH_PORT,
            to_port=SSH_PORT,
            cidr_ipv4=cloud.network_cidr,
            description="the bastion only forwards SSH into the VPC",
            tags=_tags(cloud),
            opts=child,
        )
        return sg.id


@dataclass
class AwsNodeGroupArgs:
    """Inputs of :class:`AwsNodeGroup`."""

    cloud: CloudPlan
    plan: Plan
    group: CloudInstanceGroupPlan
    subnet_id: pulumi.Input[str]
    security_group_id: pulumi.Input[str]
    placement_group: pulumi.Input[str] | None
    ssh_public_key: str
    host_keys: dict[str, HostKey] = field(default_factory=dict)


class AwsNodeGroup(pulumi.ComponentResource):
    """The instances of one node group; GPU groups get one EFA launch template per node."""

    private_ips: dict[str, pulumi.Output[str]]
    images: dict[str, pulumi.Output[str]]

    def __init__(self, name: str, args: AwsNodeGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterctl:aws:NodeGroup", name, None, opts)
        cloud, group = args.cloud, args.group
        child = pulumi.ResourceOptions(parent=self)
        self.private_ips = {}
        self.images = {}
        for host, address in zip(group.hosts, group.addresses, strict=True):
            node = args.plan.node(host)
            user_data = cloud_init(
                hostname=host,
                fqdn=node.fqdn,
                user=cloud.ssh_user,
                authorized_keys=[args.ssh_public_key],
                host_key=args.host_keys.get(host),
            )
            if group.efa_interfaces:
                instance = self._efa_instance(name, args, host, address, user_data, child)
            else:
                instance = aws.ec2.Instance(
                    f"{name}-{host}",
                    ami=group_image(cloud, group),
                    instance_type=group.instance_type,
                    availability_zone=cloud.zone,
                    subnet_id=args.subnet_id,
                    private_ip=address,
                    vpc_security_group_ids=[args.security_group_id],
                    # Secret: the user data carries the node's private SSH host key.
                    user_data=pulumi.Output.secret(user_data),
                    root_block_device=aws.ec2.InstanceRootBlockDeviceArgs(
                        volume_size=cloud.root_volume_gib, volume_type="gp3", encrypted=True, tags=_tags(cloud, host)
                    ),
                    metadata_options=aws.ec2.InstanceMetadataOptionsArgs(http_tokens="required"),
                    tags=_tags(cloud, host),
                    opts=child,
                )
            self.private_ips[host] = instance.private_ip
            # The AMI EC2 launched it from (for a launch template's instance, the template's then).
            self.images[host] = instance.ami
        self.register_outputs({"privateIps": self.private_ips})

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
            cloud=args.cloud,
            group=args.group,
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
            tags=_tags(args.cloud, host),
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
        image_id=group_image(cloud, group),
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
            aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags=_tags(cloud, host))
            for kind in ("instance", "volume", "network-interface")
        ],
        tags=_tags(cloud, f"{host}-lt"),
        opts=opts,
    )


@dataclass
class FsxLustreArgs:
    """Inputs of :class:`FsxLustre`."""

    cloud: CloudPlan
    fs: ManagedLustrePlan
    subnet_id: pulumi.Input[str]
    security_group_id: pulumi.Input[str]


class FsxLustre(pulumi.ComponentResource):
    """An FSx for Lustre file system sized by the plan (PerUnitStorageThroughput x capacity)."""

    source: pulumi.Output[str]

    def __init__(self, name: str, args: FsxLustreArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterctl:aws:FsxLustre", name, None, opts)
        fs, cloud = args.fs, args.cloud
        persistent = fs.tier.startswith("PERSISTENT")
        if fs.tier not in FSX_ENCRYPTED_IN_TRANSIT:
            raise ValueError(
                f"FSx deployment type {fs.tier} does not encrypt data in transit; use one of "
                f"{', '.join(FSX_ENCRYPTED_IN_TRANSIT)}"
            )
        filesystem = aws.fsx.LustreFileSystem(
            f"{name}-fsx",
            storage_capacity=fs.capacity_gib,
            deployment_type=fs.tier,
            per_unit_storage_throughput=fs.per_unit_mbps_per_tib if persistent else None,
            subnet_ids=args.subnet_id,  # pulumi-aws 7 takes the one subnet as a string
            security_group_ids=[args.security_group_id],
            file_system_type_version=FSX_LUSTRE_VERSION,
            data_compression_type="NONE",
            tags=_tags(cloud, f"{cloud.cluster}-{fs.name}"),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.source = pulumi.Output.concat(filesystem.dns_name, "@tcp:/", filesystem.mount_name)
        self.register_outputs({"source": self.source})


# The inputs every cloud's cluster component takes.
AwsClusterArgs = CloudClusterArgs


class AwsCluster(CloudCluster):
    """Everything of one clusterctl cluster on AWS."""

    def __init__(self, name: str, args: AwsClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterctl:aws:Cluster", name, None, opts)
        cloud = args.plan.cloud
        if cloud is None or cloud.provider != "aws":
            raise ValueError("the plan is not an AWS plan (plan.cloud.provider != aws)")
        child = provider_options(name, cloud, self)
        network = AwsNetwork(f"{name}-net", AwsNetworkArgs(cloud=cloud), opts=child)
        placement = placement_group(name, cloud, child)
        ips: dict[str, pulumi.Output[str]] = {}
        images: dict[str, pulumi.Output[str]] = {}
        for group_plan in cloud.groups:
            nodes = AwsNodeGroup(
                f"{name}-{group_plan.group}",
                AwsNodeGroupArgs(
                    cloud=cloud,
                    plan=args.plan,
                    group=group_plan,
                    subnet_id=network.subnet_ids["nodes"],
                    security_group_id=network.cluster_sg_id,
                    placement_group=placement,
                    ssh_public_key=args.ssh_public_key,
                    host_keys=args.host_keys,
                ),
                opts=child,
            )
            ips.update(nodes.private_ips)
            images.update(nodes.images)
        self.nodes = pulumi.Output.all(**ips)
        self.node_images = pulumi.Output.all(**images)
        self.lustre = {}
        storage_subnet = network.subnet_ids.get("storage", network.subnet_ids["nodes"])
        for fs in cloud.managed_lustre:
            fsx = FsxLustre(
                f"{name}-{fs.name}",
                FsxLustreArgs(cloud=cloud, fs=fs, subnet_id=storage_subnet, security_group_id=network.cluster_sg_id),
                opts=child,
            )
            self.lustre[fs.name] = fsx.source
        self.bastion_address = None
        if cloud.bastion is not None and network.bastion_sg_id is not None:
            bastion = aws.ec2.Instance(
                f"{name}-bastion",
                ami=cloud.image,
                instance_type=cloud.bastion.instance_type,
                availability_zone=cloud.zone,
                subnet_id=network.subnet_ids["public"],
                associate_public_ip_address=True,
                vpc_security_group_ids=[network.bastion_sg_id],
                root_block_device=aws.ec2.InstanceRootBlockDeviceArgs(
                    volume_type="gp3", encrypted=True, tags=_tags(cloud, cloud.bastion.name)
                ),
                user_data=pulumi.Output.secret(
                    cloud_init(
                        hostname=cloud.bastion.name,
                        fqdn=cloud.bastion.name,
                        user=cloud.ssh_user,
                        authorized_keys=[args.ssh_public_key],
                        host_key=args.host_keys.get(BASTION_KEY),
                    )
                ),
                metadata_options=aws.ec2.InstanceMetadataOptionsArgs(http_tokens="required"),
                tags=_tags(cloud, cloud.bastion.name),
                opts=child,
            )
            self.bastion_address = bastion.public_ip
        self.register_outputs({OUT_NODES: self.nodes})


def deploy(inputs: StackInputs) -> AwsCluster:
    """The program: one AwsCluster from the plan, and the stack outputs clusterctl reads."""
    return deploy_cloud(AwsCluster, inputs)
