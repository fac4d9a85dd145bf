"""The Google Cloud cluster as Pulumi components, built only from ``plan.cloud``.

Layout (Cluster Toolkit's A3 blueprints, techref §1.8): a host VPC (MTU ``network_mtu``: 8244,
8896 with A3 Ultra) with a node subnet and a public subnet, Cloud NAT for egress (nodes have no
external addresses), one VPC per GPU NIC for GPUDirect-TCPX/TCPXO, firewall rules that open each
network to itself and SSH from outside only to the bastion from ``bastion.allowed_cidrs``, a
COLLOCATED (compact) resource policy for the GPU nodes, the instances at their planned host
addresses, private service access and Managed Lustre instances sized by the plan.

A3 Ultra (a3-ultragpu-8g, GoogleCloudPlatform/cluster-toolkit@1047080
``examples/machine-learning/a3-ultragpu-8g/a3ultra-slurm-blueprint.yaml`` and
``modules/network/gpu-rdma-vpc``): a second host VPC for the second gVNIC (``enp192s20``, the
blueprint's net-1, open to itself like the GPU VPCs), and one RoCE VPC with the zone's
``<zone>-vpc-roce`` network profile and one subnet per RDMA NIC, without firewall rules
(gpu-rdma-vpc refuses them). The instances get nic0 and nic1 as GVNIC and nic2..9 as MRDMA on
the RoCE subnets (the nodeset's ``additional_networks``: net-1, then the RDMA interfaces) and
boot from hyperdisk-balanced (the blueprint's ``disk_type``). Which NIC goes on which
subnetwork is the plan's (``CloudInstanceGroupPlan.nics``).

GCP networks, subnetworks, firewalls, routers and resource policies take no labels: they are
named ``<cluster>-...`` instead; everything that takes labels carries the cluster label.

Defaults (tests/stacks/test_cloud_defaults.py asserts them):

- OS Login on every instance (``enable-oslogin: TRUE``) and project-wide SSH keys refused
  (``block-project-ssh-keys: TRUE``): people reach nodes through IAM, and a key added to the
  project's metadata opens no node. How clusterctl itself gets in, from Google's "About OS
  Login" (https://cloud.google.com/compute/docs/oslogin): "VMs that use OS Login can't use
  metadata-based SSH keys", but "you can configure an authorized_keys file to provision access
  for a local user account even when OS Login is enabled ... Local user accounts and OS Login
  users must have different usernames and UIDs." So clusterctl's key never goes into the
  ``ssh-keys`` metadata: cloud-init (the ``user-data`` metadata key) creates the local
  ``ssh_user`` with the key in its ``authorized_keys``, as on AWS and Azure. OS Login user
  names are ``<user>_<domain>`` (``sa_<id>`` for service accounts), so ``ubuntu`` never clashes.
- The node's SSH host key is the one clusterctl generated: the guest agent generates host keys
  on a VM's first boot unless ``[InstanceSetup] set_host_keys = false`` is in
  /etc/default/instance_configs.cfg (GoogleCloudPlatform/guest-agent README, "Configuration"),
  which cloud-init writes (``write_files`` runs in cloud-init.service, before
  network-online.target; google-guest-agent.service starts after it).
- Boot disks are encrypted at rest by Google (always on, Google-managed keys).
- No firewall admits SSH from 0.0.0.0/0 unless the plan says ``allow_world_ssh``; an ingress
  firewall never goes without source ranges (GCP reads that as 0.0.0.0/0).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp
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

from clusterctl.plan.cloud import nic_subnetwork
from clusterctl.plan.models import CloudInstanceGroupPlan, CloudPlan, ManagedLustrePlan, Plan

# Cluster Toolkit sets MTU 8244 on the A3 networks (gVNIC jumbo frames); TCPXO needs it.
GPU_MTU = 8244
PSA_PREFIX_LENGTH = 20  # private service access range for Managed Lustre
# Instance metadata every VM gets: OS Login on, project-wide SSH keys refused (module docstring).
OS_LOGIN_METADATA = {"enable-oslogin": "TRUE", "block-project-ssh-keys": "TRUE"}
# The guest agent's configuration file and the setting that keeps it off the SSH host keys
# (GoogleCloudPlatform/guest-agent README, "Configuration": InstanceSetup set_host_keys).
GUEST_AGENT_CONFIG = "/etc/default/instance_configs.cfg"
GUEST_AGENT_KEEP_HOST_KEYS = "[InstanceSetup]\nset_host_keys = false\n"


def ingress_sources(cloud: CloudPlan, sources: list[str], rule: str) -> list[str]:
    """An ingress firewall's source ranges: never empty (GCP reads none as 0.0.0.0/0), never world-open.

    Raises:
        ValueError: no source range, or a world-open one without ``allow_world_ssh``.
    """
    if not sources:
        raise ValueError(f"{rule}: an ingress firewall without source ranges would admit 0.0.0.0/0")
    return ssh_sources(cloud, sources, rule)


def node_user_data(*, hostname: str, fqdn: str, user: str, authorized_keys: list[str], host_key: HostKey | None) -> str:
    """cloud-init user data for a GCP VM: the shared one, plus the guest agent told to keep the host key."""
    extra = None
    if host_key is not None:
        extra = {
            "write_files": [{"path": GUEST_AGENT_CONFIG, "content": GUEST_AGENT_KEEP_HOST_KEYS, "permissions": "0644"}]
        }
    return cloud_init(
        hostname=hostname, fqdn=fqdn, user=user, authorized_keys=authorized_keys, host_key=host_key, extra=extra
    )


def instance_metadata(user_data: str) -> pulumi.Output[dict[str, str]]:
    """An instance's metadata: the user data (secret: it carries the private host key) and OS Login."""
    return pulumi.Output.secret({"user-data": user_data, **OS_LOGIN_METADATA})


def provider_options(name: str, cloud: CloudPlan, parent: pulumi.Resource) -> pulumi.ResourceOptions:
    """Options for a component's children: a Google provider in the plan's project and zone, labelling everything."""
    provider = gcp.Provider(
        f"{name}-provider",
        project=cloud.project,
        region=cloud.region,
        zone=cloud.zone,
        default_labels=dict(cloud.labels),
        opts=pulumi.ResourceOptions(parent=parent),
    )
    return pulumi.ResourceOptions(parent=parent, providers={"gcp": provider})


def compact_policy(name: str, cloud: CloudPlan, opts: pulumi.ResourceOptions) -> pulumi.Output[str] | None:
    """A COLLOCATED placement policy's self link when the plan asks for compact placement."""
    if cloud.placement_strategy != "compact":
        return None
    return gcp.compute.ResourcePolicy(
        f"{name}-compact",
        name=f"{cloud.cluster}-compact",
        region=cloud.region,
        group_placement_policy=gcp.compute.ResourcePolicyGroupPlacementPolicyArgs(collocation="COLLOCATED"),
        opts=opts,
    ).self_link


@dataclass
class GcpNetworkArgs:
    """Inputs of :class:`GcpNetwork`."""

    cloud: CloudPlan


class GcpNetwork(pulumi.ComponentResource):
    """Host VPC and subnets, Cloud NAT, GPU VPCs, further host VPCs, the RoCE VPC, firewall rules."""

    network_id: pulumi.Output[str]
    subnet_ids: dict[str, pulumi.Output[str]]
    # Subnetwork name -> id of every subnetwork a NIC after nic0 goes on (CloudNicPlan.subnetwork).
    nic_subnet_ids: dict[str, pulumi.Output[str]]

    def __init__(self, name: str, args: GcpNetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterctl:gcp:Network", name, None, opts)
        cloud = args.cloud
        child = pulumi.ResourceOptions(parent=self)
        prefix = cloud.cluster
        self.subnet_ids = {}
        if cloud.existing_network:
            self.network_id = pulumi.Output.from_input(cloud.existing_network)
            for subnet in cloud.subnets:
                self.subnet_ids[subnet.purpose] = pulumi.Output.from_input(subnet.existing_id or subnet.name)
        else:
            network = gcp.compute.Network(
                f"{name}-net",
                name=f"{prefix}-net",
                auto_create_subnetworks=False,
                mtu=cloud.network_mtu or GPU_MTU,
                opts=child,
            )
            self.network_id = network.id
            for subnet in cloud.subnets:
                created = gcp.compute.Subnetwork(
                    f"{name}-{subnet.purpose}",
                    name=subnet.name,
                    network=network.id,
                    region=cloud.region,
                    ip_cidr_range=subnet.cidr,
                    private_ip_google_access=True,
                    opts=child,
                )
                self.subnet_ids[subnet.purpose] = created.id
            router = gcp.compute.Router(
                f"{name}-router", name=f"{prefix}-router", network=network.id, region=cloud.region, opts=child
            )
            gcp.compute.RouterNat(
                f"{name}-nat",
                name=f"{prefix}-nat",
                router=router.name,
                region=cloud.region,
                nat_ip_allocate_option="AUTO_ONLY",
                source_subnetwork_ip_ranges_to_nat="ALL_SUBNETWORKS_ALL_IP_RANGES",
                opts=child,
            )
        gcp.compute.Firewall(
            f"{name}-internal",
            name=f"{prefix}-internal",
            network=self.network_id,
            direction="INGRESS",
            source_ranges=ingress_sources(cloud, [cloud.network_cidr], f"{prefix}-internal"),
            allows=[gcp.compute.FirewallAllowArgs(protocol="all")],
            description="everything inside the cluster network (Slurm, NFS, Lustre, SSH from the bastion)",
            opts=child,
        )
        if cloud.bastion is not None:
            gcp.compute.Firewall(
                f"{name}-bastion-ssh",
                name=f"{prefix}-bastion-ssh",
                network=self.network_id,
                direction="INGRESS",
                source_ranges=ingress_sources(cloud, list(cloud.bastion.allowed_cidrs), f"{prefix}-bastion-ssh"),
                target_tags=[f"{prefix}-bastion"],
                allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=["22"])],
                description="SSH to the bastion from provider.allowed_ssh_cidrs only",
                opts=child,
            )
        self.nic_subnet_ids = {}
        # One VPC with one subnetwork per GPU NIC (A3 High/Mega) and per further host NIC (A3
        # Ultra's second gVNIC: the blueprint's net-1 with its internal firewall), open to itself.
        gpu_why = "GPUDirect traffic between the GPU NICs of this rail"
        host_why = "traffic between the second host NICs of the nodes"
        per_nic = [("gpunet", "gpusub", i, net, gpu_why) for i, net in enumerate(cloud.gpu_networks)]
        per_nic += [("hostnet", "hostsub", i, net, host_why) for i, net in enumerate(cloud.host_networks)]
        for kind, sub_kind, i, net, description in per_nic:
            nic_net = gcp.compute.Network(
                f"{name}-{kind}-{i}",
                name=net.name,
                auto_create_subnetworks=False,
                mtu=cloud.network_mtu or GPU_MTU,
                opts=child,
            )
            nic_subnet = gcp.compute.Subnetwork(
                f"{name}-{sub_kind}-{i}",
                name=nic_subnetwork(net),
                network=nic_net.id,
                region=cloud.region,
                ip_cidr_range=net.cidr,
                opts=child,
            )
            gcp.compute.Firewall(
                f"{name}-{kind}-{i}-internal",
                name=f"{net.name}-internal",
                network=nic_net.id,
                direction="INGRESS",
                source_ranges=ingress_sources(cloud, [net.cidr] if net.cidr else [], f"{net.name}-internal"),
                allows=[gcp.compute.FirewallAllowArgs(protocol="all")],
                description=description,
                opts=child,
            )
            self.nic_subnet_ids[nic_subnetwork(net)] = nic_subnet.id
        rdma = cloud.rdma_network
        if rdma is not None:
            if rdma.network_profile is None:
                raise ValueError(
                    f"{rdma.name}: the RoCE network profile is named by project; the plan has no project "
                    "(set provider.project, rule CLD017)"
                )
            # gpu-rdma-vpc (cluster-toolkit@1047080 modules/network/gpu-rdma-vpc/main.tf): the
            # network profile, REGIONAL routing, one subnetwork per RDMA NIC, and no firewall
            # rules (its variables.tf refuses firewall_rules on the RoCE network).
            roce = gcp.compute.Network(
                f"{name}-rdma",
                name=rdma.name,
                auto_create_subnetworks=False,
                mtu=rdma.mtu,
                routing_mode="REGIONAL",
                network_profile=rdma.network_profile,
                opts=child,
            )
            for i, sub in enumerate(rdma.subnets):
                self.nic_subnet_ids[sub.name] = gcp.compute.Subnetwork(
                    f"{name}-rdmasub-{i}",
                    name=sub.name,
                    network=roce.id,
                    region=cloud.region,
                    ip_cidr_range=sub.cidr,
                    opts=child,
                ).id
        self.register_outputs({"network": self.network_id})


@dataclass
class GcpNodeGroupArgs:
    """Inputs of :class:`GcpNodeGroup`."""

    cloud: CloudPlan
    plan: Plan
    group: CloudInstanceGroupPlan
    subnet_id: pulumi.Input[str]
    # Subnetwork name -> id (or name) for every CloudNicPlan.subnetwork of the group.
    nic_subnet_ids: Mapping[str, pulumi.Input[str]]
    placement_policy: pulumi.Input[str] | None
    ssh_public_key: str
    host_keys: dict[str, HostKey] = field(default_factory=dict)


class GcpNodeGroup(pulumi.ComponentResource):
    """The instances of one node group, each with the NICs the plan lists after nic0 (GPU, host, RDMA)."""

    private_ips: dict[str, pulumi.Output[str]]
    images: dict[str, pulumi.Output[str]]

    def __init__(self, name: str, args: GcpNodeGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterctl:gcp:NodeGroup", name, None, opts)
        cloud, group = args.cloud, args.group
        child = pulumi.ResourceOptions(parent=self)
        labels = dict(cloud.labels)
        self.private_ips = {}
        self.images = {}
        missing = sorted({nic.subnetwork for nic in group.nics} - set(args.nic_subnet_ids))
        if missing:
            raise ValueError(f"group {group.group}: its NICs' subnetworks are not made: {', '.join(missing)}")
        for host, address in zip(group.hosts, group.addresses, strict=True):
            node = args.plan.node(host)
            nics = [
                gcp.compute.InstanceNetworkInterfaceArgs(
                    subnetwork=args.subnet_id, network_ip=address, nic_type="GVNIC"
                )
            ]
            # The plan's NICs in the order the guest names them: A3 High/Mega one gVNIC per GPU
            # network (enp6s0, enp7s0, ...); A3 Ultra the second host gVNIC, then MRDMA x 8.
            nics += [
                gcp.compute.InstanceNetworkInterfaceArgs(
                    subnetwork=args.nic_subnet_ids[nic.subnetwork], nic_type=nic.nic_type
                )
                for nic in group.nics
            ]
            reservation = None
            if group.capacity_reservation and cloud.reservation:
                reservation = gcp.compute.InstanceReservationAffinityArgs(
                    type="SPECIFIC_RESERVATION",
                    specific_reservation=gcp.compute.InstanceReservationAffinitySpecificReservationArgs(
                        key="compute.googleapis.com/reservation-name", values=[cloud.reservation]
                    ),
                )
            user_data = node_user_data(
                hostname=host,
                fqdn=node.fqdn,
                user=cloud.ssh_user,
                authorized_keys=[args.ssh_public_key],
                host_key=args.host_keys.get(host),
            )
            instance = gcp.compute.Instance(
                f"{name}-{host}",
                name=f"{cloud.cluster}-{host}",
                hostname=node.fqdn,
                machine_type=group.instance_type,
                zone=cloud.zone,
                boot_disk=gcp.compute.InstanceBootDiskArgs(
                    initialize_params=gcp.compute.InstanceBootDiskInitializeParamsArgs(
                        image=group_image(cloud, group),
                        size=cloud.root_volume_gib,
                        type=group.boot_disk_type or "pd-ssd",
                        labels=labels,
                    )
                ),
                network_interfaces=nics,
                # GPU VMs cannot live-migrate: they stop for host maintenance and restart.
                scheduling=gcp.compute.InstanceSchedulingArgs(
                    on_host_maintenance="TERMINATE" if group.gpus else "MIGRATE", automatic_restart=True
                ),
                # pulumi-gcp 10 takes the one resource policy as a string.
                resource_policies=args.placement_policy if group.placement else None,
                reservation_affinity=reservation,
                metadata=instance_metadata(user_data),
                labels=labels,
                tags=[f"{cloud.cluster}-node"],
                opts=child,
            )
            self.private_ips[host] = instance.network_interfaces.apply(lambda n: n[0].network_ip or "")
            # The image the boot disk was made from (a family resolved to its image by then).
            self.images[host] = instance.boot_disk.apply(
                lambda d: (d.initialize_params.image or "") if d and d.initialize_params else ""
            )
        self.register_outputs({"privateIps": self.private_ips})


@dataclass
class GcpManagedLustreArgs:
    """Inputs of :class:`GcpManagedLustre`."""

    cloud: CloudPlan
    fs: ManagedLustrePlan
    network_id: pulumi.Input[str]
    depends_on: list[pulumi.Resource] = field(default_factory=list)


class GcpManagedLustre(pulumi.ComponentResource):
    """A Google Cloud Managed Lustre instance (throughput = tier x capacity)."""

    source: pulumi.Output[str]

    def __init__(self, name: str, args: GcpManagedLustreArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterctl:gcp:ManagedLustre", name, None, opts)
        fs, cloud = args.fs, args.cloud
        instance = gcp.lustre.Instance(
            f"{name}-lustre",
            instance_id=f"{cloud.cluster}-{fs.name}",
            location=cloud.zone,
            capacity_gib=str(fs.capacity_gib),
            filesystem=fs.fsname,
            network=args.network_id,
            per_unit_storage_throughput=str(fs.per_unit_mbps_per_tib),
            labels=dict(cloud.labels),
            opts=pulumi.ResourceOptions(parent=self, depends_on=args.depends_on),
        )
        self.source = instance.mount_point
        self.register_outputs({"source": self.source})


# The inputs every cloud's cluster component takes.
GcpClusterArgs = CloudClusterArgs


class GcpCluster(CloudCluster):
    """Everything of one clusterctl cluster on Google Cloud."""

    def __init__(self, name: str, args: GcpClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterctl:gcp:Cluster", name, None, opts)
        cloud = args.plan.cloud
        if cloud is None or cloud.provider != "gcp":
            raise ValueError("the plan is not a GCP plan (plan.cloud.provider != gcp)")
        child = provider_options(name, cloud, self)
        network = GcpNetwork(f"{name}-net", GcpNetworkArgs(cloud=cloud), opts=child)
        policy = compact_policy(name, cloud, child)
        ips: dict[str, pulumi.Output[str]] = {}
        images: dict[str, pulumi.Output[str]] = {}
        for group_plan in cloud.groups:
            nodes = GcpNodeGroup(
                f"{name}-{group_plan.group}",
                GcpNodeGroupArgs(
                    cloud=cloud,
                    plan=args.plan,
                    group=group_plan,
                    subnet_id=network.subnet_ids["nodes"],
                    nic_subnet_ids=network.nic_subnet_ids,
                    placement_policy=policy,
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
        if cloud.managed_lustre:
            psa: list[pulumi.Resource] = []
            if not cloud.existing_network:
                # Managed Lustre is reached through private service access on the host VPC.
                peering = gcp.compute.GlobalAddress(
                    f"{name}-psa",
                    name=f"{cloud.cluster}-psa",
                    purpose="VPC_PEERING",
                    address_type="INTERNAL",
                    prefix_length=PSA_PREFIX_LENGTH,
                    network=network.network_id,
                    labels=dict(cloud.labels),
                    opts=child,
                )
                psa.append(
                    gcp.servicenetworking.Connection(
                        f"{name}-psa-connection",
                        network=network.network_id,
                        service="servicenetworking.googleapis.com",
                        reserved_peering_ranges=[peering.name],
                        opts=child,
                    )
                )
            for fs in cloud.managed_lustre:
                lustre = GcpManagedLustre(
                    f"{name}-{fs.name}",
                    GcpManagedLustreArgs(cloud=cloud, fs=fs, network_id=network.network_id, depends_on=psa),
                    opts=child,
                )
                self.lustre[fs.name] = lustre.source
        self.bastion_address = None
        if cloud.bastion is not None:
            bastion = gcp.compute.Instance(
                f"{name}-bastion",
                name=cloud.bastion.name,
                machine_type=cloud.bastion.instance_type,
                zone=cloud.zone,
                boot_disk=gcp.compute.InstanceBootDiskArgs(
                    initialize_params=gcp.compute.InstanceBootDiskInitializeParamsArgs(
                        image=cloud.image, labels=dict(cloud.labels)
                    )
                ),
                network_interfaces=[
                    gcp.compute.InstanceNetworkInterfaceArgs(
                        subnetwork=network.subnet_ids.get("public", network.subnet_ids["nodes"]),
                        access_configs=[gcp.compute.InstanceNetworkInterfaceAccessConfigArgs()],
                    )
                ],
                metadata=instance_metadata(
                    node_user_data(
                        hostname=cloud.bastion.name,
                        fqdn=f"{cloud.bastion.name}.internal",
                        user=cloud.ssh_user,
                        authorized_keys=[args.ssh_public_key],
                        host_key=args.host_keys.get(BASTION_KEY),
                    )
                ),
                labels=dict(cloud.labels),
                tags=[f"{cloud.cluster}-bastion"],
                opts=child,
            )
            self.bastion_address = bastion.network_interfaces.apply(
                lambda n: (
                    (n[0].access_configs or [gcp.compute.outputs.InstanceNetworkInterfaceAccessConfig()])[0].nat_ip
                    or ""
                )
            )
        self.register_outputs({OUT_NODES: self.nodes})


def deploy(inputs: StackInputs) -> GcpCluster:
    """The program: one GcpCluster from the plan, and the stack outputs clusterctl reads."""
    return deploy_cloud(GcpCluster, inputs)
