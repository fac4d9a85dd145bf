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
from dataclasses import dataclass
from typing import Any

import clusterctl_stack as common
import pulumi
import pulumi_azure_native as azure

from clusterctl.plan.models import CloudInstanceGroupPlan, CloudPlan

SSH_PRIORITY = 100
SSH_PORT = 22
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


def zones(cloud: CloudPlan) -> list[str] | None:
    """The plan's availability zone as Azure takes it (none: regional)."""
    return [cloud.zone] if cloud.zone else None


def ssh_rule(rule_name: str, description: str) -> azure.network.SecurityRuleArgsDict:
    """An inbound rule admitting SSH; the caller says from where (``source_address_prefix(es)``)."""
    return {
        "name": rule_name,
        "priority": SSH_PRIORITY,
        "direction": "Inbound",
        "access": "Allow",
        "protocol": "Tcp",
        "source_port_range": "*",
        "destination_address_prefix": "*",
        "destination_port_range": str(SSH_PORT),
        "description": description,
    }


def ssh_security_group(
    name: str,
    nsg_name: str,
    cloud: CloudPlan,
    rg: pulumi.Input[str],
    rule: azure.network.SecurityRuleArgsDict,
    opts: pulumi.ResourceOptions,
) -> azure.network.NetworkSecurityGroup:
    """A network security group whose one rule is ``rule`` (:func:`ssh_rule`)."""
    return azure.network.NetworkSecurityGroup(
        name,
        network_security_group_name=nsg_name,
        resource_group_name=rg,
        location=cloud.region,
        security_rules=[rule],
        tags=dict(cloud.labels),
        opts=opts,
    )


def virtual_network(
    name: str, vnet_name: str, cloud: CloudPlan, rg: pulumi.Input[str], cidr: str, parent: pulumi.Resource
) -> azure.network.VirtualNetwork:
    """A VNet whose subnets are separate resources."""
    return azure.network.VirtualNetwork(
        name,
        virtual_network_name=vnet_name,
        resource_group_name=rg,
        location=cloud.region,
        address_space={"address_prefixes": [cidr]},
        tags=dict(cloud.labels),
        # Without this the VNet would remove the subnets on update.
        opts=pulumi.ResourceOptions(parent=parent, ignore_changes=["subnets"]),
    )


def public_ip(
    name: str, ip_name: str, cloud: CloudPlan, rg: pulumi.Input[str], opts: pulumi.ResourceOptions, zonal: bool = False
) -> azure.network.PublicIPAddress:
    """A static Standard public address (``zonal``: in the plan's zone)."""
    return azure.network.PublicIPAddress(
        name,
        public_ip_address_name=ip_name,
        resource_group_name=rg,
        location=cloud.region,
        sku={"name": "Standard"},
        public_ip_allocation_method="Static",
        zones=zones(cloud) if zonal else None,
        tags=dict(cloud.labels),
        opts=opts,
    )


def address_of(ip: azure.network.PublicIPAddress) -> pulumi.Output[str]:
    """The address Azure gave a public IP."""
    return ip.ip_address.apply(lambda address: address or "")


def network_interface(
    name: str,
    nic_name: str,
    cloud: CloudPlan,
    rg: pulumi.Input[str],
    subnet_id: pulumi.Input[str],
    opts: pulumi.ResourceOptions,
    *,
    address: str | None = None,
    public_ip_id: pulumi.Input[str] | None = None,
) -> azure.network.NetworkInterface:
    """A NIC: a node's at its planned ``address`` with accelerated networking, or one with a public address."""
    config: azure.network.NetworkInterfaceIPConfigurationArgsDict = {
        "name": "primary",
        "primary": True,
        "subnet": {"id": subnet_id},
    }
    if address is not None:
        config["private_ip_allocation_method"] = "Static"
        config["private_ip_address"] = address
    else:
        config["private_ip_allocation_method"] = "Dynamic"
        config["public_ip_address"] = {"id": public_ip_id}
    return azure.network.NetworkInterface(
        name,
        network_interface_name=nic_name,
        resource_group_name=rg,
        location=cloud.region,
        enable_accelerated_networking=True if address is not None else None,
        ip_configurations=[config],
        tags=dict(cloud.labels),
        opts=opts,
    )


# The inputs every cloud's network component takes (Azure: with the resource group).
AzureNetworkArgs = common.CloudNetworkArgs


class AzureNetwork(common.CloudNetwork):
    """VNet, subnets, NAT gateway and network security groups."""

    def __init__(self, name: str, args: AzureNetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterctl:azure:Network", name, None, opts)
        cloud, rg = args.cloud, args.resource_group
        assert rg is not None
        child = pulumi.ResourceOptions(parent=self)
        if any(s.existing_id for s in cloud.subnets):
            self.subnet_ids = common.existing_subnet_ids(cloud)
            self.register_outputs({})
            return
        vnet = virtual_network(f"{name}-vnet", f"{cloud.cluster}-vnet", cloud, rg, cloud.network_cidr, self)
        inside = ssh_rule("ssh-from-vnet", "SSH from inside the VNet (the bastion, or clusterctl in the network)")
        inside["source_address_prefix"] = "VirtualNetwork"
        nodes_nsg = ssh_security_group(f"{name}-nodes-nsg", f"{cloud.cluster}-nodes", cloud, rg, inside, child)
        nat_ip = public_ip(f"{name}-nat-ip", f"{cloud.cluster}-nat", cloud, rg, child, zonal=True)
        nat = azure.network.NatGateway(
            f"{name}-nat",
            nat_gateway_name=f"{cloud.cluster}-nat",
            resource_group_name=rg,
            location=cloud.region,
            sku={"name": "Standard"},
            public_ip_addresses=[{"id": nat_ip.id}],
            zones=zones(cloud),
            tags=dict(cloud.labels),
            opts=child,
        )
        bastion_nsg = None
        if cloud.bastion is not None:
            allowed = ssh_rule("ssh-from-allowed", "SSH from provider.allowed_ssh_cidrs only")
            allowed["source_address_prefixes"] = common.ssh_sources(
                cloud, cloud.bastion.allowed_cidrs, f"{cloud.cluster}-bastion"
            )
            bastion_nsg = ssh_security_group(
                f"{name}-bastion-nsg", f"{cloud.cluster}-bastion", cloud, rg, allowed, child
            )
        self.subnet_ids = {}
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


def virtual_machine(
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
    """A Linux VM with the defaults of every program: key logins only, encryption at host, premium OS disk."""
    return azure.compute.VirtualMachine(
        name,
        vm_name=vm_name,
        resource_group_name=rg,
        location=cloud.region,
        zones=zones(cloud),
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

    nodes: common.NodeGroupInputs
    resource_group: pulumi.Input[str]
    subnet_id: pulumi.Input[str]
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
        zones=zones(cloud),
        orchestration_mode="Flexible",
        platform_fault_domain_count=1,
        single_placement_group=True,
        tags=dict(cloud.labels),
        opts=opts,
    )


class AzureNodeGroup(common.CloudNodeGroup):
    """One node group: VMs with static NICs; GPU groups in one single-placement-group scale set."""

    def __init__(self, name: str, args: AzureNodeGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterctl:azure:NodeGroup", name, opts)
        cloud, group, rg = args.nodes.cloud, args.nodes.group, args.resource_group
        child = pulumi.ResourceOptions(parent=self)
        scale_set_id: pulumi.Input[str] | None = args.scale_set_id
        if group.scale_set and scale_set_id is None:
            scale_set_id = scale_set(f"{name}-vmss", cloud, group, rg, child).id
        reservation = cloud.capacity_reservation_group_id if group.capacity_reservation else None
        for host, address in args.nodes.hosts():
            nic = network_interface(
                f"{name}-{host}-nic", f"{cloud.cluster}-{host}", cloud, rg, args.subnet_id, child, address=address
            )
            vm = virtual_machine(
                f"{name}-{host}",
                cloud=cloud,
                rg=rg,
                vm_name=host,
                size=group.instance_type,
                nic_id=nic.id,
                user_data=args.nodes.user_data(host),
                ssh_public_key=args.nodes.ssh_public_key,
                parent=self,
                scale_set_id=scale_set_id,
                reservation_group=reservation,
                image=common.group_image(cloud, group),
            )
            self._add_node(
                host,
                nic.ip_configurations.apply(
                    lambda configs: (configs or [])[0].private_ip_address or "" if configs else ""
                ),
                # The image the VM was made from: a gallery image version by id, a marketplace image by URN.
                vm.storage_profile.apply(_image_of),
            )
        self._finish()


class AzureManagedLustre(common.ManagedLustre):
    """An Azure Managed Lustre file system (throughput = SKU MB/s per TiB x capacity)."""

    TYPE = "clusterctl:azure:ManagedLustre"

    def _file_system(self, name: str, args: common.ManagedLustreArgs) -> pulumi.Output[str]:
        filesystem = azure.storagecache.AmlFilesystem(
            f"{name}-amlfs",
            aml_filesystem_name=f"{args.cloud.cluster}-{args.fs.name}",
            resource_group_name=args.resource_group,
            location=args.cloud.region,
            sku={"name": args.fs.tier},
            storage_capacity_ti_b=args.fs.capacity_gib / 1024,
            filesystem_subnet=args.network,
            maintenance_window=MAINTENANCE,
            zones=zones(args.cloud),
            tags=dict(args.cloud.labels),
            opts=pulumi.ResourceOptions(parent=self),
        )
        return filesystem.client_info.apply(lambda info: f"{info.mgs_address}@tcp:/{LUSTRE_FS}" if info else "")


class AzureCluster(common.CloudCluster):
    """Everything of one clusterctl cluster on Azure."""

    PROVIDER = "azure"
    rg: azure.resources.ResourceGroup
    network: AzureNetwork

    def _site(self, name: str) -> pulumi.ResourceOptions:
        cloud = self.cloud
        if cloud.resource_group is None:
            raise common.not_provider_plan("azure")
        child = pulumi.ResourceOptions(parent=self)
        self.rg = azure.resources.ResourceGroup(
            f"{name}-rg",
            resource_group_name=cloud.resource_group,
            location=cloud.region,
            tags=dict(cloud.labels),
            opts=child,
        )
        self.network = AzureNetwork(
            f"{name}-net", AzureNetworkArgs(cloud=cloud, resource_group=self.rg.name), opts=child
        )
        return child

    def _node_group(self, name: str, nodes: common.NodeGroupInputs) -> common.CloudNodeGroup:
        group_args = AzureNodeGroupArgs(nodes, self.rg.name, self.network.subnet_ids["nodes"])
        return AzureNodeGroup(name, group_args, opts=self._child)

    def _lustre(self, name: str) -> dict[str, pulumi.Output[str]]:
        storage = self.network.subnet_ids.get("storage", self.network.subnet_ids["nodes"])
        return {
            fs.name: AzureManagedLustre(
                f"{name}-{fs.name}",
                common.ManagedLustreArgs(self.cloud, fs, storage, resource_group=self.rg.name),
                opts=self._child,
            ).source
            for fs in self.cloud.managed_lustre
        }

    def _bastion(self, name: str, args: common.CloudClusterArgs) -> pulumi.Output[str]:
        cloud = self.cloud
        assert cloud.bastion is not None
        bastion, rg = cloud.bastion.name, self.rg.name
        ip = public_ip(f"{name}-bastion-ip", bastion, cloud, rg, self._child)
        public = self.network.subnet_ids.get("public", self.network.subnet_ids["nodes"])
        nic = network_interface(f"{name}-bastion-nic", bastion, cloud, rg, public, self._child, public_ip_id=ip.id)
        virtual_machine(
            f"{name}-bastion",
            cloud=cloud,
            rg=rg,
            vm_name=bastion,
            size=cloud.bastion.instance_type,
            nic_id=nic.id,
            user_data=args.bastion_user_data(cloud),
            ssh_public_key=args.ssh_public_key,
            parent=self,
        )
        return address_of(ip)


# The inputs every cloud's cluster component takes.
AzureClusterArgs = common.CloudClusterArgs


def deploy(inputs: common.StackInputs) -> AzureCluster:
    """The program: one AzureCluster from the plan, and the stack outputs clusterctl reads."""
    return common.deploy_cloud(AzureCluster, inputs)
