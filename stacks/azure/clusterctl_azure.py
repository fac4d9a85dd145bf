"""The Azure cluster as Pulumi components, built only from ``plan.cloud``.

Layout: a resource group; a VNet on the management network with a node subnet (NAT gateway
for egress, an NSG that admits SSH only from inside the VNet), a public subnet for the
bastion (an NSG that admits SSH only from ``bastion.allowed_cidrs``) and a subnet for Azure
Managed Lustre; the controller and login VMs; per GPU group one scale set with a single
placement group -- the InfiniBand domain of ND-series VMs -- holding one VM per node with a
static NIC at its planned address; Azure Managed Lustre sized by the plan.

Why a flexible-orchestration scale set with explicit VMs: each VM keeps the address the plan
gave it (``hosts`` and ``slurm.conf`` use them), which a uniform scale set cannot do.

Defaults (tests/stacks/test_cloud_defaults.py asserts them):

- managed disks are encrypted at rest by the platform (server-side encryption with
  platform-managed keys is always on), and every VM asks for encryption at host
  (``securityProfile.encryptionAtHost``), which also encrypts the temporary disk and the disk
  caches on the host. Microsoft Learn, "Use the Azure CLI to enable end-to-end encryption using
  encryption at host": the subscription must have the feature registered once (``az feature
  register --namespace Microsoft.Compute --name EncryptionAtHost``);
- password authentication is off (``disablePasswordAuthentication``), only clusterctl's key;
- no NSG rule admits SSH from the internet (``*``, ``Internet``, 0.0.0.0/0) unless the plan
  says ``allow_world_ssh``.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_azure_native as azure
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

SSH_PRIORITY = 100
LUSTRE_FS = "lustrefs"  # Azure Managed Lustre always names its file system so
MAINTENANCE: azure.storagecache.AmlFilesystemMaintenanceWindowArgsDict = {
    "day_of_week": azure.storagecache.MaintenanceDayOfWeekType.SATURDAY,
    "time_of_day_utc": "22:00",
}


def image_reference(urn: str) -> azure.compute.ImageReferenceArgsDict:
    """``publisher:offer:sku:version`` as an image reference (an id when it is a resource id)."""
    if urn.startswith("/"):
        return {"id": urn}
    publisher, offer, sku, version = urn.split(":")
    return {"publisher": publisher, "offer": offer, "sku": sku, "version": version}


def _image_of(profile: Any) -> str:
    """The image a VM's storage profile names (``id``, or ``publisher:offer:sku:version``)."""
    ref = getattr(profile, "image_reference", None)
    if ref is None:
        return ""
    if getattr(ref, "id", None):
        return str(ref.id)
    parts = [getattr(ref, key, None) or "" for key in ("publisher", "offer", "sku", "version")]
    return ":".join(parts) if any(parts) else ""


def _custom_data(text: str) -> pulumi.Output[str]:
    # Azure takes base64 custom data; secret because it carries the node's private host key.
    return pulumi.Output.secret(base64.b64encode(text.encode()).decode())


@dataclass
class AzureNetworkArgs:
    """Inputs of :class:`AzureNetwork`."""

    cloud: CloudPlan
    resource_group: pulumi.Input[str]


class AzureNetwork(pulumi.ComponentResource):
    """VNet, subnets, NAT gateway and network security groups."""

    subnet_ids: dict[str, pulumi.Output[str]]

    def __init__(self, name: str, args: AzureNetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterctl:azure:Network", name, None, opts)
        cloud, rg = args.cloud, args.resource_group
        child = pulumi.ResourceOptions(parent=self)
        tags = dict(cloud.labels)
        self.subnet_ids = {}
        if any(s.existing_id for s in cloud.subnets):
            for subnet in cloud.subnets:
                if subnet.existing_id:
                    self.subnet_ids[subnet.purpose] = pulumi.Output.from_input(subnet.existing_id)
            self.register_outputs({})
            return
        vnet = azure.network.VirtualNetwork(
            f"{name}-vnet",
            virtual_network_name=f"{cloud.cluster}-vnet",
            resource_group_name=rg,
            location=cloud.region,
            address_space={"address_prefixes": [cloud.network_cidr]},
            tags=tags,
            # The subnets are separate resources; without this the VNet would remove them on update.
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["subnets"]),
        )
        nodes_nsg = azure.network.NetworkSecurityGroup(
            f"{name}-nodes-nsg",
            network_security_group_name=f"{cloud.cluster}-nodes",
            resource_group_name=rg,
            location=cloud.region,
            security_rules=[
                {
                    "name": "ssh-from-vnet",
                    "priority": SSH_PRIORITY,
                    "direction": "Inbound",
                    "access": "Allow",
                    "protocol": "Tcp",
                    "source_address_prefix": "VirtualNetwork",
                    "source_port_range": "*",
                    "destination_address_prefix": "*",
                    "destination_port_range": "22",
                    "description": "SSH from inside the VNet (the bastion, or clusterctl in the network)",
                }
            ],
            tags=tags,
            opts=child,
        )
        nat_ip = azure.network.PublicIPAddress(
            f"{name}-nat-ip",
            public_ip_address_name=f"{cloud.cluster}-nat",
            resource_group_name=rg,
            location=cloud.region,
            sku={"name": "Standard"},
            public_ip_allocation_method="Static",
            zones=[cloud.zone] if cloud.zone else None,
            tags=tags,
            opts=child,
        )
        nat = azure.network.NatGateway(
            f"{name}-nat",
            nat_gateway_name=f"{cloud.cluster}-nat",
            resource_group_name=rg,
            location=cloud.region,
            sku={"name": "Standard"},
            public_ip_addresses=[{"id": nat_ip.id}],
            zones=[cloud.zone] if cloud.zone else None,
            tags=tags,
            opts=child,
        )
        bastion_nsg = None
        if cloud.bastion is not None:
            bastion_nsg = azure.network.NetworkSecurityGroup(
                f"{name}-bastion-nsg",
                network_security_group_name=f"{cloud.cluster}-bastion",
                resource_group_name=rg,
                location=cloud.region,
                security_rules=[
                    {
                        "name": "ssh-from-allowed",
                        "priority": SSH_PRIORITY,
                        "direction": "Inbound",
                        "access": "Allow",
                        "protocol": "Tcp",
                        "source_address_prefixes": ssh_sources(
                            cloud, cloud.bastion.allowed_cidrs, f"{cloud.cluster}-bastion"
                        ),
                        "source_port_range": "*",
                        "destination_address_prefix": "*",
                        "destination_port_range": "22",
                        "description": "SSH from provider.allowed_ssh_cidrs only",
                    }
                ],
                tags=tags,
                opts=child,
            )
        for subnet in cloud.subnets:
            extra: dict[str, Any] = {}
            if subnet.purpose == "nodes":
                extra = {"network_security_group": {"id": nodes_nsg.id}, "nat_gateway": {"id": nat.id}}
            elif subnet.purpose == "public" and bastion_nsg is not None:
                extra = {"network_security_group": {"id": bastion_nsg.id}}
            created = azure.network.Subnet(
                f"{name}-{subnet.purpose}",
                subnet_name=subnet.name,
                resource_group_name=rg,
                virtual_network_name=vnet.name,
                address_prefix=subnet.cidr,
                opts=child,
                **extra,
            )
            self.subnet_ids[subnet.purpose] = created.id
        self.register_outputs({"subnets": self.subnet_ids})


def _vm(
    name: str,
    *,
    cloud: CloudPlan,
    rg: pulumi.Input[str],
    vm_name: str,
    size: str,
    nic_id: pulumi.Input[str],
    user_data: str,
    ssh_public_key: str,
    parent: pulumi.Resource,
    scale_set_id: pulumi.Input[str] | None = None,
    reservation_group: str | None = None,
    image: str | None = None,
) -> azure.compute.VirtualMachine:
    return azure.compute.VirtualMachine(
        name,
        vm_name=vm_name,
        resource_group_name=rg,
        location=cloud.region,
        zones=[cloud.zone] if cloud.zone else None,
        hardware_profile={"vm_size": size},
        network_profile={"network_interfaces": [{"id": nic_id, "primary": True}]},
        os_profile={
            "computer_name": vm_name,
            "admin_username": cloud.ssh_user,
            "custom_data": _custom_data(user_data),
            "linux_configuration": {
                "disable_password_authentication": True,
                "ssh": {
                    "public_keys": [
                        {"path": f"/home/{cloud.ssh_user}/.ssh/authorized_keys", "key_data": ssh_public_key}
                    ]
                },
            },
        },
        storage_profile={
            "image_reference": image_reference(image or cloud.image),
            "os_disk": {
                "create_option": "FromImage",
                "disk_size_gb": cloud.root_volume_gib,
                "managed_disk": {"storage_account_type": "Premium_LRS"},
                "delete_option": "Delete",
            },
        },
        # Encryption at host: temporary disk and caches too (module docstring).
        security_profile={"encryption_at_host": True},
        virtual_machine_scale_set={"id": scale_set_id} if scale_set_id is not None else None,
        capacity_reservation=(
            {"capacity_reservation_group": {"id": reservation_group}} if reservation_group is not None else None
        ),
        tags={**cloud.labels, "Name": vm_name},
        opts=pulumi.ResourceOptions(parent=parent),
    )


@dataclass
class AzureNodeGroupArgs:
    """Inputs of :class:`AzureNodeGroup`."""

    cloud: CloudPlan
    plan: Plan
    group: CloudInstanceGroupPlan
    resource_group: pulumi.Input[str]
    subnet_id: pulumi.Input[str]
    ssh_public_key: str
    host_keys: dict[str, HostKey] = field(default_factory=dict)
    # A scale set made elsewhere (a burst group's, made by the operator): used, not created.
    scale_set_id: pulumi.Input[str] | None = None


def scale_set(
    name: str, cloud: CloudPlan, group: CloudInstanceGroupPlan, rg: pulumi.Input[str], opts: pulumi.ResourceOptions
) -> azure.compute.VirtualMachineScaleSet:
    """A GPU group's flexible scale set with one placement group (the InfiniBand domain)."""
    # InfiniBand reaches only within one placement group: the whole group is one, and a single
    # placement group holds at most 100 VMs (the rules check the count).
    return azure.compute.VirtualMachineScaleSet(
        name,
        vm_scale_set_name=group.scale_set,
        resource_group_name=rg,
        location=cloud.region,
        zones=[cloud.zone] if cloud.zone else None,
        orchestration_mode="Flexible",
        platform_fault_domain_count=1,
        single_placement_group=True,
        tags=dict(cloud.labels),
        opts=opts,
    )


class AzureNodeGroup(pulumi.ComponentResource):
    """One node group: VMs with static NICs; GPU groups in one single-placement-group scale set."""

    private_ips: dict[str, pulumi.Output[str]]
    images: dict[str, pulumi.Output[str]]

    def __init__(self, name: str, args: AzureNodeGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterctl:azure:NodeGroup", name, None, opts)
        cloud, group, rg = args.cloud, args.group, args.resource_group
        child = pulumi.ResourceOptions(parent=self)
        tags = dict(cloud.labels)
        scale_set_id: pulumi.Input[str] | None = args.scale_set_id
        if group.scale_set and scale_set_id is None:
            scale_set_id = scale_set(f"{name}-vmss", cloud, group, rg, child).id
        reservation = cloud.capacity_reservation_group_id if group.capacity_reservation else None
        self.private_ips = {}
        self.images = {}
        for host, address in zip(group.hosts, group.addresses, strict=True):
            node = args.plan.node(host)
            nic = azure.network.NetworkInterface(
                f"{name}-{host}-nic",
                network_interface_name=f"{cloud.cluster}-{host}",
                resource_group_name=rg,
                location=cloud.region,
                enable_accelerated_networking=True,
                ip_configurations=[
                    {
                        "name": "primary",
                        "primary": True,
                        "subnet": {"id": args.subnet_id},
                        "private_ip_allocation_method": "Static",
                        "private_ip_address": address,
                    }
                ],
                tags=tags,
                opts=child,
            )
            vm = _vm(
                f"{name}-{host}",
                cloud=cloud,
                rg=rg,
                vm_name=host,
                size=group.instance_type,
                nic_id=nic.id,
                user_data=cloud_init(
                    hostname=host,
                    fqdn=node.fqdn,
                    user=cloud.ssh_user,
                    authorized_keys=[args.ssh_public_key],
                    host_key=args.host_keys.get(host),
                ),
                ssh_public_key=args.ssh_public_key,
                parent=self,
                scale_set_id=scale_set_id,
                reservation_group=reservation,
                image=group_image(cloud, group),
            )
            self.private_ips[host] = nic.ip_configurations.apply(
                lambda configs: (configs or [])[0].private_ip_address or "" if configs else ""
            )
            # The image the VM was made from: a gallery image version by id, a marketplace image by URN.
            self.images[host] = vm.storage_profile.apply(_image_of)
        self.register_outputs({"privateIps": self.private_ips})


@dataclass
class AzureManagedLustreArgs:
    """Inputs of :class:`AzureManagedLustre`."""

    cloud: CloudPlan
    fs: ManagedLustrePlan
    resource_group: pulumi.Input[str]
    subnet_id: pulumi.Input[str]


class AzureManagedLustre(pulumi.ComponentResource):
    """An Azure Managed Lustre file system (throughput = SKU MB/s per TiB x capacity)."""

    source: pulumi.Output[str]

    def __init__(self, name: str, args: AzureManagedLustreArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterctl:azure:ManagedLustre", name, None, opts)
        fs, cloud = args.fs, args.cloud
        filesystem = azure.storagecache.AmlFilesystem(
            f"{name}-amlfs",
            aml_filesystem_name=f"{cloud.cluster}-{fs.name}",
            resource_group_name=args.resource_group,
            location=cloud.region,
            sku={"name": fs.tier},
            storage_capacity_ti_b=fs.capacity_gib / 1024,
            filesystem_subnet=args.subnet_id,
            maintenance_window=MAINTENANCE,
            zones=[cloud.zone] if cloud.zone else None,
            tags=dict(cloud.labels),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.source = filesystem.client_info.apply(lambda info: f"{info.mgs_address}@tcp:/{LUSTRE_FS}" if info else "")
        self.register_outputs({"source": self.source})


# The inputs every cloud's cluster component takes.
AzureClusterArgs = CloudClusterArgs


class AzureCluster(CloudCluster):
    """Everything of one clusterctl cluster on Azure."""

    def __init__(self, name: str, args: AzureClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterctl:azure:Cluster", name, None, opts)
        cloud = args.plan.cloud
        if cloud is None or cloud.provider != "azure" or cloud.resource_group is None:
            raise ValueError("the plan is not an Azure plan (plan.cloud.provider != azure)")
        child = pulumi.ResourceOptions(parent=self)
        tags = dict(cloud.labels)
        rg = azure.resources.ResourceGroup(
            f"{name}-rg", resource_group_name=cloud.resource_group, location=cloud.region, tags=tags, opts=child
        )
        network = AzureNetwork(f"{name}-net", AzureNetworkArgs(cloud=cloud, resource_group=rg.name), opts=child)
        ips: dict[str, pulumi.Output[str]] = {}
        images: dict[str, pulumi.Output[str]] = {}
        for group_plan in cloud.groups:
            nodes = AzureNodeGroup(
                f"{name}-{group_plan.group}",
                AzureNodeGroupArgs(
                    cloud=cloud,
                    plan=args.plan,
                    group=group_plan,
                    resource_group=rg.name,
                    subnet_id=network.subnet_ids["nodes"],
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
        for fs in cloud.managed_lustre:
            lustre = AzureManagedLustre(
                f"{name}-{fs.name}",
                AzureManagedLustreArgs(
                    cloud=cloud,
                    fs=fs,
                    resource_group=rg.name,
                    subnet_id=network.subnet_ids.get("storage", network.subnet_ids["nodes"]),
                ),
                opts=child,
            )
            self.lustre[fs.name] = lustre.source
        self.bastion_address = None
        if cloud.bastion is not None:
            public_ip = azure.network.PublicIPAddress(
                f"{name}-bastion-ip",
                public_ip_address_name=cloud.bastion.name,
                resource_group_name=rg.name,
                location=cloud.region,
                sku={"name": "Standard"},
                public_ip_allocation_method="Static",
                tags=tags,
                opts=child,
            )
            nic = azure.network.NetworkInterface(
                f"{name}-bastion-nic",
                network_interface_name=cloud.bastion.name,
                resource_group_name=rg.name,
                location=cloud.region,
                ip_configurations=[
                    {
                        "name": "primary",
                        "primary": True,
                        "subnet": {"id": network.subnet_ids.get("public", network.subnet_ids["nodes"])},
                        "private_ip_allocation_method": "Dynamic",
                        "public_ip_address": {"id": public_ip.id},
                    }
                ],
                tags=tags,
                opts=child,
            )
            _vm(
                f"{name}-bastion",
                cloud=cloud,
                rg=rg.name,
                vm_name=cloud.bastion.name,
                size=cloud.bastion.instance_type,
                nic_id=nic.id,
                user_data=cloud_init(
                    hostname=cloud.bastion.name,
                    fqdn=cloud.bastion.name,
                    user=cloud.ssh_user,
                    authorized_keys=[args.ssh_public_key],
                    host_key=args.host_keys.get(BASTION_KEY),
                ),
                ssh_public_key=args.ssh_public_key,
                parent=self,
            )
            self.bastion_address = public_ip.ip_address.apply(lambda ip: ip or "")
        self.register_outputs({OUT_NODES: self.nodes})


def deploy(inputs: StackInputs) -> AzureCluster:
    """The program: one AzureCluster from the plan, and the stack outputs clusterctl reads."""
    return deploy_cloud(AzureCluster, inputs)
