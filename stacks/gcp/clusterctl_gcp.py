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
from dataclasses import dataclass

import clusterctl_stack as common
import pulumi
import pulumi_gcp as gcp

from clusterctl.plan.cloud import nic_subnetwork
from clusterctl.plan.models import CloudPlan

# Cluster Toolkit sets MTU 8244 on the A3 networks (gVNIC jumbo frames); TCPXO needs it.
GPU_MTU = 8244
PSA_PREFIX_LENGTH = 20  # private service access range for Managed Lustre
SSH_PORT = 22
# Instance metadata every VM gets: OS Login on, project-wide SSH keys refused (module docstring).
OS_LOGIN_METADATA = {"enable-oslogin": "TRUE", "block-project-ssh-keys": "TRUE"}
# The guest agent's configuration file and the setting that keeps it off the SSH host keys
# (GoogleCloudPlatform/guest-agent README, "Configuration": InstanceSetup set_host_keys).
GUEST_AGENT_CONFIG = "/etc/default/instance_configs.cfg"
GUEST_AGENT_KEEP_HOST_KEYS = "[InstanceSetup]\nset_host_keys = false\n"
# What cloud-init writes along with the host key clusterctl pins (cloud_init's host_key_files).
GUEST_AGENT_FILES = [{"path": GUEST_AGENT_CONFIG, "content": GUEST_AGENT_KEEP_HOST_KEYS, "permissions": "0644"}]


def ingress_sources(cloud: CloudPlan, sources: list[str], rule: str) -> list[str]:
    """An ingress firewall's source ranges: never empty (GCP reads none as 0.0.0.0/0), never world-open.

    Raises:
        ValueError: no source range, or a world-open one without ``allow_world_ssh``.
    """
    if not sources:
        raise ValueError(f"{rule}: an ingress firewall without source ranges would admit 0.0.0.0/0")
    return common.ssh_sources(cloud, sources, rule)


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


def subnetwork(
    name: str,
    subnet_name: str,
    network: pulumi.Input[str],
    cloud: CloudPlan,
    cidr: str | None,
    opts: pulumi.ResourceOptions,
    google_access: bool | None = None,
) -> gcp.compute.Subnetwork:
    """A subnetwork of ``network`` in the plan's region (``google_access``: Google APIs without external addresses)."""
    return gcp.compute.Subnetwork(
        name,
        name=subnet_name,
        network=network,
        region=cloud.region,
        ip_cidr_range=cidr,
        private_ip_google_access=google_access,
        opts=opts,
    )


def ingress_firewall(
    name: str,
    firewall_name: str,
    cloud: CloudPlan,
    network: pulumi.Input[str],
    sources: list[str],
    description: str,
    opts: pulumi.ResourceOptions,
    ssh_to: list[str] | None = None,
) -> gcp.compute.Firewall:
    """An ingress firewall admitting ``sources``: SSH to the instances tagged ``ssh_to``, else everything to all."""
    allows = (
        [gcp.compute.FirewallAllowArgs(protocol="tcp", ports=[str(SSH_PORT)])]
        if ssh_to
        else [gcp.compute.FirewallAllowArgs(protocol="all")]
    )
    return gcp.compute.Firewall(
        name,
        name=firewall_name,
        network=network,
        direction="INGRESS",
        source_ranges=ingress_sources(cloud, sources, firewall_name),
        target_tags=ssh_to,
        allows=allows,
        description=description,
        opts=opts,
    )


def boot_disk(
    image: str,
    labels: dict[str, str],
    size: int | None = None,
    disk_type: str | None = None,
    auto_delete: bool | None = None,
) -> gcp.compute.InstanceBootDiskArgs:
    """A boot disk made from ``image``, labelled like the instance."""
    return gcp.compute.InstanceBootDiskArgs(
        auto_delete=auto_delete,
        initialize_params=gcp.compute.InstanceBootDiskInitializeParamsArgs(
            image=image, size=size, type=disk_type, labels=labels
        ),
    )


def public_interface(
    subnet: pulumi.Input[str], nic_type: str | None = None
) -> gcp.compute.InstanceNetworkInterfaceArgs:
    """A network interface with an ephemeral external address."""
    return gcp.compute.InstanceNetworkInterfaceArgs(
        subnetwork=subnet, nic_type=nic_type, access_configs=[gcp.compute.InstanceNetworkInterfaceAccessConfigArgs()]
    )


def public_address(instance: gcp.compute.Instance) -> pulumi.Output[str]:
    """The external address of an instance's first interface (:func:`public_interface`)."""
    return instance.network_interfaces.apply(
        lambda n: (n[0].access_configs or [gcp.compute.outputs.InstanceNetworkInterfaceAccessConfig()])[0].nat_ip or ""
    )


# The inputs every cloud's network component takes.
GcpNetworkArgs = common.CloudNetworkArgs


class GcpNetwork(common.CloudNetwork):
    """Host VPC and subnets, Cloud NAT, GPU VPCs, further host VPCs, the RoCE VPC, firewall rules."""

    network_id: pulumi.Output[str]
    # Subnetwork name -> id of every subnetwork a NIC after nic0 goes on (CloudNicPlan.subnetwork).
    nic_subnet_ids: dict[str, pulumi.Output[str]]

    def __init__(self, name: str, args: GcpNetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterctl:gcp:Network", name, None, opts)
        cloud = args.cloud
        child = pulumi.ResourceOptions(parent=self)
        prefix = cloud.cluster
        if cloud.existing_network:
            self.network_id = pulumi.Output.from_input(cloud.existing_network)
            self.subnet_ids = {s.purpose: pulumi.Output.from_input(s.existing_id or s.name) for s in cloud.subnets}
        else:
            self._host_network(name, cloud, child)
        inside = "everything inside the cluster network (Slurm, NFS, Lustre, SSH from the bastion)"
        ingress_firewall(
            f"{name}-internal",
            f"{prefix}-internal",
            cloud,
            self.network_id,
            # A burst group's peers: the on-prem management network across the routed link.
            [cloud.network_cidr, *cloud.peer_cidrs],
            inside,
            child,
        )
        if cloud.bastion is not None:
            ingress_firewall(
                f"{name}-bastion-ssh",
                f"{prefix}-bastion-ssh",
                cloud,
                self.network_id,
                list(cloud.bastion.allowed_cidrs),
                "SSH to the bastion from provider.allowed_ssh_cidrs only",
                child,
                ssh_to=[f"{prefix}-bastion"],
            )
        self.nic_subnet_ids = {}
        self._nic_networks(name, cloud, child)
        self._rdma_network(name, cloud, child)
        self.register_outputs({"network": self.network_id})

    def _host_network(self, name: str, cloud: CloudPlan, child: pulumi.ResourceOptions) -> None:
        prefix = cloud.cluster
        network = gcp.compute.Network(
            f"{name}-net",
            name=f"{prefix}-net",
            auto_create_subnetworks=False,
            mtu=cloud.network_mtu or GPU_MTU,
            opts=child,
        )
        self.network_id = network.id
        self.subnet_ids = {
            s.purpose: subnetwork(
                f"{name}-{s.purpose}", s.name, network.id, cloud, s.cidr, child, google_access=True
            ).id
            for s in cloud.subnets
        }
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

    def _nic_networks(self, name: str, cloud: CloudPlan, child: pulumi.ResourceOptions) -> None:
        """One VPC with one subnetwork per GPU NIC (A3 High/Mega) and per further host NIC, open to itself.

        The further host NICs are A3 Ultra's second gVNIC: the blueprint's net-1 with its internal firewall.
        """
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
            sub_name = nic_subnetwork(net)
            nic_subnet = subnetwork(f"{name}-{sub_kind}-{i}", sub_name, nic_net.id, cloud, net.cidr, child)
            sources = [net.cidr] if net.cidr else []
            ingress_firewall(
                f"{name}-{kind}-{i}-internal", f"{net.name}-internal", cloud, nic_net.id, sources, description, child
            )
            self.nic_subnet_ids[sub_name] = nic_subnet.id

    def _rdma_network(self, name: str, cloud: CloudPlan, child: pulumi.ResourceOptions) -> None:
        rdma = cloud.rdma_network
        if rdma is None:
            return
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
            made = subnetwork(f"{name}-rdmasub-{i}", sub.name, roce.id, cloud, sub.cidr, child)
            self.nic_subnet_ids[sub.name] = made.id


@dataclass
class GcpNodeGroupArgs:
    """Inputs of :class:`GcpNodeGroup`."""

    nodes: common.NodeGroupInputs
    subnet_id: pulumi.Input[str]
    # Subnetwork name -> id (or name) for every CloudNicPlan.subnetwork of the group.
    nic_subnet_ids: Mapping[str, pulumi.Input[str]]
    placement_policy: pulumi.Input[str] | None


class GcpNodeGroup(common.CloudNodeGroup):
    """The instances of one node group, each with the NICs the plan lists after nic0 (GPU, host, RDMA)."""

    def __init__(self, name: str, args: GcpNodeGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterctl:gcp:NodeGroup", name, opts)
        cloud, group = args.nodes.cloud, args.nodes.group
        child = pulumi.ResourceOptions(parent=self)
        labels = dict(cloud.labels)
        missing = sorted({nic.subnetwork for nic in group.nics} - set(args.nic_subnet_ids))
        if missing:
            raise ValueError(f"group {group.group}: its NICs' subnetworks are not made: {', '.join(missing)}")
        reservation = None
        if group.capacity_reservation and cloud.reservation:
            reservation = gcp.compute.InstanceReservationAffinityArgs(
                type="SPECIFIC_RESERVATION",
                specific_reservation=gcp.compute.InstanceReservationAffinitySpecificReservationArgs(
                    key="compute.googleapis.com/reservation-name", values=[cloud.reservation]
                ),
            )
        for host, address in args.nodes.hosts():
            fqdn = args.nodes.plan.node(host).fqdn
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
            instance = gcp.compute.Instance(
                f"{name}-{host}",
                name=f"{cloud.cluster}-{host}",
                hostname=fqdn,
                machine_type=group.instance_type,
                zone=cloud.zone,
                boot_disk=boot_disk(
                    common.group_image(cloud, group), labels, cloud.root_volume_gib, group.boot_disk_type or "pd-ssd"
                ),
                network_interfaces=nics,
                # GPU VMs cannot live-migrate: they stop for host maintenance and restart.
                scheduling=gcp.compute.InstanceSchedulingArgs(
                    on_host_maintenance="TERMINATE" if group.gpus else "MIGRATE", automatic_restart=True
                ),
                # pulumi-gcp 10 takes the one resource policy as a string.
                resource_policies=args.placement_policy if group.placement else None,
                reservation_affinity=reservation,
                metadata=instance_metadata(args.nodes.user_data(host, host_key_files=GUEST_AGENT_FILES)),
                labels=labels,
                tags=[f"{cloud.cluster}-node"],
                opts=child,
            )
            self._add_node(
                host,
                instance.network_interfaces.apply(lambda n: n[0].network_ip or ""),
                # The image the boot disk was made from (a family resolved to its image by then).
                instance.boot_disk.apply(
                    lambda d: (d.initialize_params.image or "") if d and d.initialize_params else ""
                ),
            )
        self._finish()


class GcpManagedLustre(common.ManagedLustre):
    """A Google Cloud Managed Lustre instance (throughput = tier x capacity)."""

    TYPE = "clusterctl:gcp:ManagedLustre"

    def _file_system(self, name: str, args: common.ManagedLustreArgs) -> pulumi.Output[str]:
        return gcp.lustre.Instance(
            f"{name}-lustre",
            instance_id=f"{args.cloud.cluster}-{args.fs.name}",
            location=args.cloud.zone,
            capacity_gib=str(args.fs.capacity_gib),
            filesystem=args.fs.fsname,
            network=args.network,
            per_unit_storage_throughput=str(args.fs.per_unit_mbps_per_tib),
            labels=dict(args.cloud.labels),
            opts=pulumi.ResourceOptions(parent=self, depends_on=args.depends_on),
        ).mount_point


class GcpCluster(common.CloudCluster):
    """Everything of one clusterctl cluster on Google Cloud."""

    PROVIDER = "gcp"
    network: GcpNetwork
    policy: pulumi.Output[str] | None

    def _site(self, name: str) -> pulumi.ResourceOptions:
        child = provider_options(name, self.cloud, self)
        self.network = GcpNetwork(f"{name}-net", GcpNetworkArgs(cloud=self.cloud), opts=child)
        self.policy = compact_policy(name, self.cloud, child)
        return child

    def _node_group(self, name: str, nodes: common.NodeGroupInputs) -> common.CloudNodeGroup:
        network = self.network
        group_args = GcpNodeGroupArgs(nodes, network.subnet_ids["nodes"], network.nic_subnet_ids, self.policy)
        return GcpNodeGroup(name, group_args, opts=self._child)

    def _lustre(self, name: str) -> dict[str, pulumi.Output[str]]:
        cloud, network_id = self.cloud, self.network.network_id
        psa: list[pulumi.Resource] = []
        if not cloud.existing_network:
            # Managed Lustre is reached through private service access on the host VPC.
            peering = gcp.compute.GlobalAddress(
                f"{name}-psa",
                name=f"{cloud.cluster}-psa",
                purpose="VPC_PEERING",
                address_type="INTERNAL",
                prefix_length=PSA_PREFIX_LENGTH,
                network=network_id,
                labels=dict(cloud.labels),
                opts=self._child,
            )
            psa.append(
                gcp.servicenetworking.Connection(
                    f"{name}-psa-connection",
                    network=network_id,
                    service="servicenetworking.googleapis.com",
                    reserved_peering_ranges=[peering.name],
                    opts=self._child,
                )
            )
        return {
            fs.name: GcpManagedLustre(
                f"{name}-{fs.name}", common.ManagedLustreArgs(cloud, fs, network_id, depends_on=psa), opts=self._child
            ).source
            for fs in cloud.managed_lustre
        }

    def _bastion(self, name: str, args: common.CloudClusterArgs) -> pulumi.Output[str]:
        cloud = self.cloud
        assert cloud.bastion is not None
        labels = dict(cloud.labels)
        subnet = self.network.subnet_ids.get("public", self.network.subnet_ids["nodes"])
        fqdn = f"{cloud.bastion.name}.internal"
        bastion = gcp.compute.Instance(
            f"{name}-bastion",
            name=cloud.bastion.name,
            machine_type=cloud.bastion.instance_type,
            zone=cloud.zone,
            boot_disk=boot_disk(cloud.image, labels),
            network_interfaces=[public_interface(subnet)],
            metadata=instance_metadata(args.bastion_user_data(cloud, fqdn=fqdn, host_key_files=GUEST_AGENT_FILES)),
            labels=labels,
            tags=[f"{cloud.cluster}-bastion"],
            opts=self._child,
        )
        return public_address(bastion)


# The inputs every cloud's cluster component takes.
GcpClusterArgs = common.CloudClusterArgs


def deploy(inputs: common.StackInputs) -> GcpCluster:
    """The program: one GcpCluster from the plan, and the stack outputs clusterctl reads."""
    return common.deploy_cloud(GcpCluster, inputs)
