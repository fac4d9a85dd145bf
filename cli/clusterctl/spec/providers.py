"""Provider blocks of the spec: where the nodes come from (local Docker, bare metal, clouds).

Cloud and bare-metal fields are what the Pulumi programs in ``stacks/<provider>`` need and
the spec cannot derive: where (region, zone, existing networks), which capacity (reservations,
capacity blocks), how placement and managed Lustre are chosen, which vendor NCCL plugin runs,
and who may reach the cluster over SSH. Secrets (BMC credentials, keys) are never spec fields.
"""

from __future__ import annotations

from ipaddress import IPv4Network
from typing import Annotated, Any, Literal

from pydantic import Field, StrictBool, model_validator

from clusterctl.catalog.cloud_services import (
    DEFAULT_AWS_OFI_NCCL,
    DEFAULT_DMABUF_IMPORT_HELPER,
    DEFAULT_EFA_INSTALLER,
    DEFAULT_NCCL_GIB,
)
from clusterctl.spec.base import StrictModel
from clusterctl.spec.types import (
    AwsCapacityReservationId,
    AwsPlacementGroup,
    AwsSubnetId,
    AwsVpcId,
    AzureResourceGroup,
    AzureResourceId,
    Checksum,
    CloudImage,
    CloudRegion,
    CloudZone,
    DiskMatch,
    DnsLabel,
    Duration,
    DurationValue,
    FileName,
    GcpProjectId,
    GcpResource,
    ImageReference,
    IPv4AddressValue,
    IPv4NetworkValue,
    KernelArg,
    LinuxUser,
    NetdevName,
    PositiveInt,
    RelativePath,
    SshPublicKey,
    VersionStr,
)


class LocalProvider(StrictModel):
    """Nodes are systemd containers on this machine's Docker; GPUs are emulated."""

    kind: Literal["local"] = Field(description="Local Docker containers as nodes.")
    image: ImageReference = Field(
        "local/debian:bookworm",
        description="Node image; built locally with debootstrap when missing.",
        examples=["local/debian:bookworm"],
    )


class BmcSettings(StrictModel):
    """How clusterctl talks to the BMCs over Redfish: https with verified certificates unless said otherwise."""

    insecure_http: StrictBool = Field(
        False,
        description=(
            "Allow `http://` BMC addresses in machines.csv. The BMC credentials and power commands then cross the "
            "network in clear text; every run warns. Only for lab BMCs and emulators."
        ),
    )
    verify_tls: StrictBool = Field(
        True,
        description=(
            "Verify the BMCs' HTTPS certificates and host names. false lets anyone on the BMC network pose as a "
            "BMC and read its credentials (every run warns); give ca_bundle for self-signed certificates instead."
        ),
    )
    ca_bundle: RelativePath | None = Field(
        None,
        description=(
            "PEM file of the CA(s) that signed the BMCs' certificates, relative to the spec file (and inside its "
            "directory). When set, only these CAs are trusted for the BMCs."
        ),
        examples=["bmc-ca.pem"],
    )

    @model_validator(mode="after")
    def _ca_bundle_needs_verification(self) -> BmcSettings:
        if self.ca_bundle is not None and not self.verify_tls:
            raise ValueError(
                "`ca_bundle` is given but `verify_tls` is false, so the bundle would not be used; remove "
                "`verify_tls: false` to verify the BMCs against the bundle"
            )
        return self


ImageBoot = Literal["install", "stateless"]


class BaremetalImage(StrictModel):
    """Machines boot the node image `clusterctl image build` baked, instead of an OS installer."""

    default: ImageBoot = Field(
        "install",
        description=(
            "What a machine does with the image at its PXE boot: `install` writes it to the group's disk "
            "(install_disk, else the largest) and boots from that disk afterwards; `stateless` runs it from RAM "
            "(a tmpfs root filled from the image at every boot; the machine needs the image's unpacked size in RAM)."
        ),
    )
    groups: dict[DnsLabel, ImageBoot] = Field(
        default_factory=dict,
        description="Node groups that boot otherwise than `default` (group name -> install or stateless).",
        examples=[{"gpu": "stateless"}],
    )


class BaremetalProvider(StrictModel):
    """Physical servers driven through their BMCs (Redfish) and PXE."""

    kind: Literal["baremetal"] = Field(description="Bare-metal servers.")
    machines: RelativePath = Field(
        description=(
            "CSV of machines (hostname,bmc,mac,rack), relative to the spec file and inside its directory (no "
            "absolute path, `..` or symlink leading out of it)."
        ),
        examples=["machines.csv"],
    )
    pxe_interface: NetdevName = Field("eno1", description="Provisioning interface the PXE server listens on.")
    ssh_user: LinuxUser = Field("ubuntu", description="User the autoinstall creates for clusterctl.")
    pxe_server: IPv4AddressValue | None = Field(
        None,
        description="Address of the PXE/TFTP/HTTP server on the management network (default: the network's .2).",
        examples=["10.20.0.2"],
    )
    http_port: PositiveInt = Field(
        8080, description="Port of the HTTP server that serves the autoinstall files and the installer ISO."
    )
    host_key_port: PositiveInt = Field(
        8081,
        description=(
            "Port on pxe_server where `clusterctl up` (run on the PXE server) serves each machine its SSH host key, "
            "once, to the machine's planned address and MAC, while it installs; the key never enters the build "
            "directory. Must differ from http_port."
        ),
    )
    installer_iso: FileName | None = Field(
        None,
        description="Ubuntu live-server ISO file name served over HTTP (default: the spec OS's current point release).",
        examples=["ubuntu-24.04.2-live-server-amd64.iso"],
    )
    boot_mode: Literal["UEFI", "Legacy"] = Field(
        "UEFI",
        description=(
            "Firmware boot mode of the one-time PXE boot override (Redfish BootSourceOverrideMode); a machine "
            "booting otherwise says so in the optional `boot_mode` column of machines.csv."
        ),
    )
    image: BaremetalImage | None = Field(
        None,
        description=(
            "Boot the baked node image (`clusterctl image build`: a root filesystem archive the PXE server serves) "
            "instead of installing Ubuntu with its autoinstall. Needed for an OS without an autoinstall (debian-12); "
            "`clusterctl up` then refuses to start before every hardware profile has its image in the lock."
        ),
        examples=[{"default": "install", "groups": {"gpu": "stateless"}}],
    )
    kernel_args: list[KernelArg] = Field(
        default_factory=list,
        description=(
            "Extra kernel arguments of the machines booting the baked image, e.g. the serial console the BMC "
            "records (console=ttyS0,115200n8); an installed machine keeps them in its own boot loader."
        ),
        examples=[["console=tty0", "console=ttyS0,115200n8"]],
    )
    bmc: BmcSettings = Field(
        default_factory=BmcSettings,
        description="How the BMCs are reached over Redfish (https, certificate verification, CA bundle).",
        examples=[{"verify_tls": True, "ca_bundle": "bmc-ca.pem"}],
    )
    bmc_verify_tls: StrictBool | None = Field(
        None,
        description="Deprecated: write `bmc: {verify_tls: ...}`. Still honoured: it sets `bmc.verify_tls`.",
    )
    ready_port: PositiveInt = Field(22, description="TCP port that answers once a node has installed and booted.")
    ready_timeout: DurationValue = Field(
        default_factory=lambda: Duration(45, "m"),
        description="How long to wait for a node to answer on ready_port after the PXE boot.",
    )
    install_disk: DiskMatch | None = Field(
        None,
        description=(
            "Disk the autoinstall installs to, as a device path match under /dev (globs allowed, e.g. "
            "/dev/disk/by-id/nvme-*SERIAL*; default: the largest disk)."
        ),
        examples=["/dev/nvme0n1"],
    )
    ssh_authorized_keys: list[SshPublicKey] = Field(
        default_factory=list,
        description=(
            "Extra public keys (operators') authorized for ssh_user, one .pub line each without options; "
            "clusterctl adds its own key at `up`."
        ),
        examples=[["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4f ops@example.com"]],
    )

    @model_validator(mode="before")
    @classmethod
    def _bmc_verify_tls_sets_bmc(cls, data: Any) -> Any:
        """The deprecated ``bmc_verify_tls`` keeps working: it sets ``bmc.verify_tls`` (rule BMC001 warns)."""
        if not isinstance(data, dict) or not isinstance(data.get("bmc_verify_tls"), bool):
            return data
        bmc = data.get("bmc", {})
        if not isinstance(bmc, dict):
            return data
        if "verify_tls" in bmc and bmc["verify_tls"] != data["bmc_verify_tls"]:
            raise ValueError(
                "`bmc_verify_tls` (deprecated) and `bmc.verify_tls` disagree; remove `bmc_verify_tls` and keep "
                "`bmc.verify_tls`"
            )
        return {**data, "bmc": {**bmc, "verify_tls": data["bmc_verify_tls"]}}

    @model_validator(mode="after")
    def _host_key_port_is_its_own(self) -> BaremetalProvider:
        """The host key server and the PXE server's HTTP server cannot share a port."""
        if self.host_key_port == self.http_port:
            raise ValueError(
                f"host_key_port and http_port are both {self.http_port}; clusterctl serves the host keys itself "
                "next to the PXE server's HTTP server, so give host_key_port another port (default 8081)"
            )
        return self


class CloudProviderBase(StrictModel):
    """Fields shared by the cloud providers."""

    region: CloudRegion = Field(description="Cloud region.", examples=["us-east-1"])
    zone: CloudZone | None = Field(None, description="Availability zone; GPU capacity is usually zonal.")
    allowed_ssh_cidrs: list[IPv4NetworkValue] = Field(
        default_factory=list,
        description=(
            "Networks allowed to reach the SSH jump host (bastion) the stack creates; nodes only accept SSH from "
            "inside the cluster network. Empty: no bastion and no SSH from outside (run clusterctl from inside "
            "the network, e.g. over VPN)."
        ),
        examples=[["203.0.113.0/24"]],
    )
    allow_world_ssh: StrictBool = Field(
        False,
        description=(
            "Allow `0.0.0.0/0` in allowed_ssh_cidrs: the bastion then takes SSH attempts from the whole internet. "
            "Without it a world-open network is an error (rule CLD011), and the stacks refuse it too."
        ),
    )
    ssh_user: LinuxUser = Field("ubuntu", description="User clusterctl connects as.")
    image: CloudImage | None = Field(
        None,
        description=(
            "OS image: an AMI id or `resolve:ssm:<parameter>` (AWS), an image or family self-link (GCP), or a "
            "`publisher:offer:sku:version` URN (Azure). Default: the vendor's image of the spec's `os`."
        ),
    )
    root_volume_gib: PositiveInt = Field(200, description="Boot disk size of every node in GiB.")
    cidr: IPv4NetworkValue | None = Field(
        None,
        description=(
            "Burst groups only (under nodes[].burst.provider): the group's own network on this cloud, routed to the "
            "on-prem management network (VPN, Direct Connect, Interconnect, ExpressRoute) and not overlapping it. "
            "With an existing subnet (subnet_id, subnetwork) it is that subnet's range; otherwise the burst stack "
            "makes its node subnet in the lower half. Burst nodes take their addresses from it, past the addresses "
            "the provider reserves (AWS and Azure the first four and the last, GCP the first two and the last two)."
        ),
        examples=["10.60.0.0/24"],
    )


class AwsProvider(CloudProviderBase):
    """Amazon EC2 (EFA) through the Pulumi program in ``stacks/aws``."""

    kind: Literal["aws"] = Field(description="Amazon Web Services.")
    vpc_id: AwsVpcId | None = Field(
        None, description="Existing VPC to use instead of creating one (needs subnet_id).", examples=["vpc-0abc1234"]
    )
    subnet_id: AwsSubnetId | None = Field(
        None,
        description="Existing subnet for the nodes; its CIDR must be the spec's management_cidr.",
        examples=["subnet-0b578c46a39edb5d3"],
    )
    public_subnet_id: AwsSubnetId | None = Field(
        None, description="Existing public subnet for the bastion (with an existing VPC and allowed_ssh_cidrs)."
    )
    placement_group: AwsPlacementGroup | None = Field(
        None,
        description=(
            "Existing cluster placement group for the GPU nodes (e.g. the one an ODCR was made in). "
            "Default: the stack creates one with strategy `cluster`."
        ),
    )
    capacity_reservation_id: AwsCapacityReservationId | None = Field(
        None,
        description="On-Demand Capacity Reservation or Capacity Block (`cr-...`) the GPU nodes launch into.",
        examples=["cr-0eaf243f6d60fcc9a"],
    )
    capacity_block: StrictBool = Field(
        False,
        description=(
            "capacity_reservation_id is an EC2 Capacity Block for ML (market type capacity-block). Capacity Blocks "
            "are already placed together, so no placement group is used."
        ),
    )
    fsx_deployment_type: Literal["PERSISTENT_2", "PERSISTENT_1", "SCRATCH_2"] = Field(
        "PERSISTENT_2", description="FSx for Lustre deployment type of managed `lustre` tiers."
    )
    fsx_per_unit_storage_throughput: PositiveInt | None = Field(
        None,
        description=(
            "FSx PerUnitStorageThroughput in MB/s/TiB (PERSISTENT_2: 125, 250, 500, 1000). Default: the lowest tier "
            "that meets the tier's bandwidth at its capacity_tib, else the highest."
        ),
    )
    aws_ofi_nccl: VersionStr = Field(
        DEFAULT_AWS_OFI_NCCL,
        description=(
            "aws-ofi-nccl (NCCL's EFA plugin) version; keys the NCCL settings. When the EFA installer ships the "
            "plugin it must be that release; otherwise roles/efa builds it from its release tarball."
        ),
        examples=["1.14.2"],
    )
    efa_installer: VersionStr = Field(
        DEFAULT_EFA_INSTALLER,
        description=(
            "EFA installer version (libfabric, Open MPI, rdma-core, EFA driver and, since 1.3x, aws-ofi-nccl); "
            "installed by roles/efa on the EFA nodes."
        ),
        examples=["1.41.0"],
    )
    efa_installer_checksum: Checksum | None = Field(
        None,
        description=(
            "Checksum of the EFA installer tarball. Default: the one clusterctl knows for the release "
            "(ParallelCluster's pins); required for other releases."
        ),
        examples=["sha256:3506354cdfbe31ff552fe75f5d0d9bb7efd29cf79bd99457347d29c751c38f9f"],
    )
    aws_ofi_nccl_checksum: Checksum | None = Field(
        None,
        description=(
            "Checksum of the aws-ofi-nccl release tarball, for installers that do not ship the plugin "
            "(roles/efa builds it then). Default: the one clusterctl knows for the release."
        ),
        examples=["sha256:3722e0790b98e65d04f143fe8484fd0a05dcec6419eeac1cdcad5e49f6c7cf8e"],
    )


class GcpProvider(CloudProviderBase):
    """Google Compute Engine through the Pulumi program in ``stacks/gcp``."""

    kind: Literal["gcp"] = Field(description="Google Cloud.")
    project: GcpProjectId | None = Field(None, description="GCP project id (default: from the environment).")
    network: GcpResource | None = Field(
        None, description="Existing VPC network for the host NICs (needs subnetwork): a name or self-link."
    )
    subnetwork: GcpResource | None = Field(
        None, description="Existing subnetwork; its range must be the spec's management_cidr."
    )
    reservation: GcpResource | None = Field(
        None,
        description="Specific reservation the GPU nodes consume (reservation affinity SPECIFIC_RESERVATION).",
        examples=["a3mega-reservation"],
    )
    placement_policy: Literal["compact", "none"] = Field(
        "compact", description="Compact placement (COLLOCATED resource policy) for the GPU nodes."
    )
    gpu_network_cidr: IPv4NetworkValue = Field(
        IPv4Network("172.16.0.0/16"),
        description=(
            "Range the per-NIC networks take their /20 subnets from (A3 High/Mega: one per GPU NIC; A3 Ultra: the "
            "second host NIC's, then one per RDMA NIC); must not overlap management."
        ),
    )
    gpudirect_plugin: VersionStr | None = Field(
        None,
        description=(
            'GPUDirect-TCPX/TCPXO NCCL plugin release (nccl-plugin-gpudirecttcpx-dev tag, e.g. "1.0.17"). '
            "Default: the newest in clusterctl's catalog for the machine type's fabric."
        ),
    )
    lustre_per_unit_storage_throughput: Literal[125, 250, 500, 1000] | None = Field(
        None,
        description="Managed Lustre performance tier in MB/s per TiB. Default: chosen from the tier's bandwidth.",
    )
    dmabuf_import_helper: VersionStr = Field(
        DEFAULT_DMABUF_IMPORT_HELPER,
        description=(
            "dmabuf-import-helper DKMS module (Google's gpudirect-tcpxo apt repository) built on A3 Mega "
            "(GPUDirect-TCPXO) nodes."
        ),
        examples=["1.1"],
    )
    nccl_gib: VersionStr = Field(
        DEFAULT_NCCL_GIB,
        description="gIB NCCL plugin package `nccl-gib` (Google's gpudirect-gib apt repository) on A3 Ultra nodes.",
        examples=["1.1.0"],
    )


class AzureProvider(CloudProviderBase):
    """Azure ND-series VMs through the Pulumi program in ``stacks/azure``."""

    kind: Literal["azure"] = Field(description="Microsoft Azure.")
    resource_group: AzureResourceGroup | None = Field(None, description="Resource group (default: clusterctl-<name>).")
    subnet_id: AzureResourceId | None = Field(
        None, description="Existing subnet resource id for the nodes; its prefix must be the management_cidr."
    )
    capacity_reservation_group_id: AzureResourceId | None = Field(
        None, description="Capacity reservation group the GPU scale set allocates from."
    )
    lustre_sku: (
        Literal[
            "AMLFS-Durable-Premium-40",
            "AMLFS-Durable-Premium-125",
            "AMLFS-Durable-Premium-250",
            "AMLFS-Durable-Premium-500",
        ]
        | None
    ) = Field(None, description="Azure Managed Lustre SKU. Default: chosen from the tier's bandwidth.")


Provider = Annotated[
    LocalProvider | BaremetalProvider | AwsProvider | GcpProvider | AzureProvider,
    Field(discriminator="kind"),
]
ProviderKind = Literal["local", "baremetal", "aws", "gcp", "azure"]
CloudProvider = AwsProvider | GcpProvider | AzureProvider
