"""Provider blocks of the spec: where the nodes come from (local Docker, bare metal, clouds)."""

from __future__ import annotations

from ipaddress import IPv4Network
from typing import Annotated, Literal

from pydantic import Field

from clusterctl.spec.base import StrictModel


class LocalProvider(StrictModel):
    """Nodes are systemd containers on this machine's Docker; GPUs are emulated."""

    kind: Literal["local"] = Field(description="Local Docker containers as nodes.")
    image: str = Field(
        "local/debian:bookworm",
        description="Node image; built locally with debootstrap when missing.",
        examples=["local/debian:bookworm"],
    )


class BaremetalProvider(StrictModel):
    """Physical servers driven through their BMCs (Redfish) and PXE."""

    kind: Literal["baremetal"] = Field(description="Bare-metal servers.")
    machines: str = Field(
        description="CSV of machines (hostname,bmc,mac,rack), relative to the spec file.",
        examples=["machines.csv"],
    )
    pxe_interface: str = Field("eno1", description="Provisioning interface the PXE server listens on.")
    ssh_user: str = Field("ubuntu", description="User the autoinstall creates for clusterctl.")


class CloudProviderBase(StrictModel):
    """Fields shared by the cloud providers."""

    region: str = Field(description="Cloud region.", examples=["us-east-1"])
    zone: str | None = Field(None, description="Availability zone; GPU capacity is usually zonal.")
    allowed_ssh_cidrs: list[IPv4Network] = Field(
        default_factory=list,
        description="Networks allowed to reach the login node over SSH. Empty: no SSH from outside.",
        examples=[["203.0.113.0/24"]],
    )
    ssh_user: str = Field("ubuntu", description="User clusterctl connects as.")


class AwsProvider(CloudProviderBase):
    """Amazon EC2 (EFA) through the Pulumi program in ``stacks/aws``."""

    kind: Literal["aws"] = Field(description="Amazon Web Services.")


class GcpProvider(CloudProviderBase):
    """Google Compute Engine through the Pulumi program in ``stacks/gcp``."""

    kind: Literal["gcp"] = Field(description="Google Cloud.")
    project: str | None = Field(None, description="GCP project id (default: from the environment).")


class AzureProvider(CloudProviderBase):
    """Azure ND-series VMs through the Pulumi program in ``stacks/azure``."""

    kind: Literal["azure"] = Field(description="Microsoft Azure.")
    resource_group: str | None = Field(None, description="Resource group (default: clusterctl-<name>).")


Provider = Annotated[
    LocalProvider | BaremetalProvider | AwsProvider | GcpProvider | AzureProvider,
    Field(discriminator="kind"),
]
ProviderKind = Literal["local", "baremetal", "aws", "gcp", "azure"]
