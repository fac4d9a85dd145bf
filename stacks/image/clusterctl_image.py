"""Baked node images on AWS, GCP and Azure: a builder instance, converged by clusterctl, captured.

One stack per cluster and hardware profile (``<cluster>-<profile>``, project
``clusterctl-image``). The program runs three times, in three *phases* (config
``clusterctl:imagePhase``), because what happens between them -- the install stage of the
roles over SSH -- is clusterctl's, not Pulumi's:

1. ``build``: a small throw-away network and one builder instance booted from the base image of
   the spec's OS (``plan.cloud.image``: the same resolution the cluster stacks use), with
   clusterctl's key for ``ssh_user`` and the SSH host key clusterctl generated for it
   (``hostKeys["builder"]``, injected by cloud-init exactly as on the cluster's nodes), a public
   address and SSH open only to ``provider.allowed_ssh_cidrs`` (never 0.0.0.0/0 without
   ``allow_world_ssh``). Outputs: ``nodes`` {builder: address}, ``hostKeys``, ``sshUser`` -- the
   same keys as every cluster stack, so clusterctl pins the key before its first connection --
   and ``imageSource``. clusterctl then runs site.yml with ``clusterctl_stage=install`` on it,
   reads its package list, and seals it (roles/image_seal: machine id, host keys, cloud-init
   state and clusterctl's key removed; Azure: ``waagent -deprovision+user``) and powers it off.
2. ``capture``: the builder as before (GCP: ``desired_status = TERMINATED``, so the provider
   stops it before the disk is read) and the image, wired to it:
   AWS ``ec2.AmiFromInstance`` of the builder (CreateImage: stops the instance for a
   consistent snapshot); GCP ``compute.Image`` from the builder's boot disk; Azure a snapshot of
   the builder's OS disk and a Compute Gallery image definition (``osState: Generalized``,
   Gen2) with one image version from that snapshot.
3. ``done``: the image alone, with the same inputs (the source id comes back as
   ``clusterctl:imageSource`` from the capture phase's outputs), so Pulumi keeps it and deletes
   the builder, its disk, network and (Azure) the snapshot. Pulumi deletes what left the
   program only after every other step of the update.

Why the image is made from a snapshot on Azure and not from the VM: an image version "from a
VM" needs the VM deallocated and marked generalized (``az vm deallocate``, ``az vm
generalize``), two actions no Pulumi resource performs. A gallery image version also takes a
managed disk snapshot as its source (Microsoft Learn, "Create an image definition and an image
version"); the definition says Generalized, which is true because ``waagent -deprovision+user``
ran in the guest before the snapshot.

Names carry the content hash of the image (``clusterctl-<os>-<hash12>``), and the image and
its Azure gallery are tagged with the whole hash, the profile and the OS: a cluster whose
profile hashes the same uses the same image (its clusterctl.lock names it). Because other
clusters may boot from it, nothing captured is deleted by Pulumi (``retain_on_delete``):
deleting an image is an explicit act in the cloud's console or CLI.

Defaults (tests/stacks/test_image_stack.py asserts them, as test_cloud_defaults.py does for
the cluster stacks): encrypted disks (AWS EBS ``encrypted``, Azure encryption at host, GCP
always), IMDSv2 only, OS Login on and project keys blocked on GCP with the guest agent kept
off the pinned host key, password logins off, SSH only from the allowed networks.
"""

from __future__ import annotations

import importlib
import re
import sys
from dataclasses import dataclass
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

from clusterctl.plan.models import CloudPlan, Plan

# Stack config keys (clusterctl.image.cloud sets them).
PROFILE_KEY = "imageProfile"
HASH_KEY = "imageHash"
PHASE_KEY = "imagePhase"
SOURCE_KEY = "imageSource"
PHASE_BUILD = "build"
PHASE_CAPTURE = "capture"
PHASE_DONE = "done"
PHASES = (PHASE_BUILD, PHASE_CAPTURE, PHASE_DONE)
# Stack outputs beyond the shared ones.
OUT_IMAGE = "image"  # {"ref", "name", "hash", "profile", "os", "target"} once captured
OUT_IMAGE_SOURCE = "imageSource"  # what the image is (or will be) made from
OUT_PHASE = "phase"
BUILDER = "builder"  # the builder's name in nodes/hostKeys (and its host key in the state dir)

# The builder is a general-purpose VM of the same architecture (x86-64): the install stage
# builds kernel modules and installs user space, none of which needs the GPU. Enough cores for
# DKMS and CUDA's packages; encryption at host and Gen2 on Azure.
BUILDER_TYPES = {"aws": "m7i.2xlarge", "gcp": "n2-standard-8", "azure": "Standard_D8s_v5"}
# The builder's own network, deleted with it (it never meets the cluster's).
BUILDER_CIDR = "10.254.0.0/24"
SSH_PORT = 22
HASH_RE = re.compile(r"\A(?:sha256:)?(?P<hex>[0-9a-f]{12,64})\Z")
SHORT_HASH = 12
# GCP label values are at most 63 characters: a sha256 is 64 (the description has all of it).
GCP_LABEL_MAX = 63
# Tag keys every image carries.
HASH_TAG = "clusterctl-image-hash"
PROFILE_TAG = "clusterctl-image-profile"
OS_TAG = "clusterctl-image-os"
# Azure: the image definition's identity and the one version of it (a definition per hash).
AZURE_GALLERY = "clusterctl_images"
AZURE_PUBLISHER = "clusterctl"
AZURE_VERSION = "1.0.0"
# GCP: what the image tells the instances booted from it (the A3 nodes need gVNIC; Ubuntu's
# own images declare the same features).
GCP_GUEST_OS_FEATURES = ("GVNIC", "UEFI_COMPATIBLE", "VIRTIO_SCSI_MULTIQUEUE")

STACKS = Path(__file__).resolve().parent.parent


def cloud_module(kind: str) -> ModuleType:
    """The cluster program's components for ``kind`` (``stacks/<kind>/clusterctl_<kind>.py``), imported on demand."""
    folder = STACKS / kind
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    return importlib.import_module(f"clusterctl_{kind}")


# --- what to build --------------------------------------------------------------------------


@dataclass(frozen=True)
class ImageSelection:
    """Which image the stack is for and how far it has got.

    Attributes:
        profile: the hardware profile (a key of the spec's ``hardware``).
        hash: the image's content hash (hex, optionally ``sha256:``-prefixed).
        phase: ``build``, ``capture`` or ``done``.
        source: the id the image is made from (``imageSource`` of an earlier phase); needed in
            ``done``, where the builder is gone.
    """

    profile: str
    hash: str
    phase: str = PHASE_BUILD
    source: str | None = None

    @property
    def digest(self) -> str:
        """The hash as bare lower-case hex."""
        match = HASH_RE.match(self.hash.strip().lower())
        if match is None:
            raise ValueError(
                f"image hash {self.hash[:80]!a} is not a sha256 hex digest; clusterctl image build computes it"
            )
        return match["hex"]

    @property
    def short(self) -> str:
        """The first 12 hex digits (names)."""
        return self.digest[:SHORT_HASH]


def load_selection() -> ImageSelection:
    """Read profile, hash, phase and source from the running stack's configuration."""
    config = pulumi.Config(CONFIG_NAMESPACE)
    profile, digest = config.get(PROFILE_KEY), config.get(HASH_KEY)
    if not profile or not digest:
        raise pulumi.RunError(
            f"no image to build: set `{CONFIG_NAMESPACE}:{PROFILE_KEY}` and `{CONFIG_NAMESPACE}:{HASH_KEY}` "
            "(clusterctl image build does)"
        )
    phase = config.get(PHASE_KEY) or PHASE_BUILD
    if phase not in PHASES:
        raise pulumi.RunError(f"config {CONFIG_NAMESPACE}:{PHASE_KEY} must be one of {', '.join(PHASES)}: {phase}")
    return ImageSelection(profile=profile, hash=digest, phase=phase, source=config.get(SOURCE_KEY) or None)


def os_slug(os_name: str) -> str:
    """``ubuntu-24.04`` -> ``ubuntu-2404`` (names allow no dots on GCP)."""
    return re.sub(r"[^a-z0-9-]", "", os_name.lower().replace(".", ""))


def image_name(plan: Plan, selection: ImageSelection) -> str:
    """``clusterctl-<os>-<hash12>``: the same content gives the same name, whichever profile or cluster built it."""
    return f"clusterctl-{os_slug(plan.cluster.os)}-{selection.short}"


def builder_name(cloud: CloudPlan, selection: ImageSelection) -> str:
    """The builder's instance name: ``<cluster>-image-<hash12>`` (a DNS label, at most 63 characters)."""
    return f"{cloud.cluster[: 63 - 7 - SHORT_HASH]}-image-{selection.short}"


def image_tags(plan: Plan, selection: ImageSelection, *, label_max: int | None = None) -> dict[str, str]:
    """What the image carries besides the cluster's labels: hash, profile, OS."""
    digest = selection.digest if label_max is None else selection.digest[:label_max]
    return {HASH_TAG: digest, PROFILE_TAG: selection.profile, OS_TAG: os_slug(plan.cluster.os)}


def profile_cloud(plan: Plan, profile: str) -> CloudPlan:
    """The plan's cloud section, checked to have nodes of ``profile``.

    Raises:
        ValueError: not a cloud plan, or no instance group of that hardware profile.
    """
    cloud = plan.cloud
    if cloud is None:
        raise ValueError("the plan is not a cloud plan (plan.cloud is empty); images for bare metal are archives")
    profiles = sorted({g.hardware for g in cloud.groups})
    if profile not in profiles:
        raise ValueError(
            f"no node group of {plan.cluster.name} uses hardware profile {profile} (its profiles: "
            f"{', '.join(profiles)})"
        )
    return cloud


def builder_sources(cloud: CloudPlan) -> list[str]:
    """Where SSH to the builder may come from: the spec's allowed_ssh_cidrs, world-open only if allowed.

    Raises:
        ValueError: the spec names no allowed_ssh_cidrs (nothing could reach the builder).
        WorldOpenSshError: a /0 without ``allow_world_ssh``.
    """
    if cloud.bastion is None or not cloud.bastion.allowed_cidrs:
        raise ValueError(
            "clusterctl reaches the image builder over SSH from the networks in provider.allowed_ssh_cidrs; the spec "
            "names none. Add the network clusterctl runs from (e.g. your address /32) and run again"
        )
    return ssh_sources(cloud, cloud.bastion.allowed_cidrs, f"{cloud.cluster}-image-builder-ssh")


def builder_user_data(cloud: CloudPlan, name: str, ssh_public_key: str, host_key: HostKey | None) -> str:
    """cloud-init of the builder: clusterctl's user and key, and the host key clusterctl pinned."""
    return cloud_init(
        hostname=name, fqdn=name, user=cloud.ssh_user, authorized_keys=[ssh_public_key], host_key=host_key
    )


def _tags(cloud: CloudPlan, name: str | None = None) -> dict[str, str]:
    return {**cloud.labels, **({"Name": name} if name else {})}


@dataclass
class ImageArgs:
    """Inputs of the image components."""

    plan: Plan
    selection: ImageSelection
    ssh_public_key: str = ""
    host_key: HostKey | None = None


class _Image(pulumi.ComponentResource):
    """What the three cloud components have in common: their outputs."""

    address: pulumi.Output[str] | None = None
    source: pulumi.Output[str] | None = None
    ref: pulumi.Output[str] | None = None
    name: str = ""

    def _source(self, wired: pulumi.Input[str] | None, selection: ImageSelection) -> pulumi.Input[str]:
        """The capture's source: wired to the builder (capture), or the id the capture recorded (done)."""
        if selection.phase == PHASE_DONE:
            if not selection.source:
                raise ValueError(
                    f"phase done keeps the image and deletes the builder: it needs `{CONFIG_NAMESPACE}:{SOURCE_KEY}`, "
                    "the imageSource output of the capture phase"
                )
            return selection.source
        assert wired is not None
        return wired

    def _finish(self) -> None:
        outputs: dict[str, Any] = {}
        for key, value in (("address", self.address), ("source", self.source), ("ref", self.ref)):
            if value is not None:
                outputs[key] = value
        self.register_outputs(outputs)


# --- AWS ------------------------------------------------------------------------------------


class AwsImage(_Image):
    """AWS: a VPC with one public subnet, the builder (encrypted gp3 root, IMDSv2), an AMI from it."""

    def __init__(self, name: str, args: ImageArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterctl:image:AwsImage", name, None, opts)
        import pulumi_aws as aws

        mod = cloud_module("aws")
        plan, sel = args.plan, args.selection
        cloud = profile_cloud(plan, sel.profile)
        child = mod.provider_options(name, cloud, self)
        self.name = image_name(plan, sel)
        wired: pulumi.Input[str] | None = None
        builder = None
        if sel.phase != PHASE_DONE:
            builder = self._builder(name, args, cloud, child, aws, mod)
            self.address = builder.public_ip
            wired = builder.id
        source = self._source(wired, sel)
        self.source = pulumi.Output.from_input(source)
        if sel.phase != PHASE_BUILD:
            # CreateImage without NoReboot: EC2 stops the instance, snapshots its (encrypted)
            # root volume -- the AMI's snapshot is encrypted with the same key -- and the AMI
            # keeps the builder's ENA support and volume size (the plan's root_volume_gib).
            ami = aws.ec2.AmiFromInstance(
                f"{name}-ami",
                name=self.name,
                description=f"clusterctl node image {self.name} (profile {sel.profile}, sha256 {sel.digest})",
                source_instance_id=source,
                snapshot_without_reboot=False,
                tags={**cloud.labels, **image_tags(plan, sel), "Name": self.name},
                opts=pulumi.ResourceOptions.merge(
                    child, pulumi.ResourceOptions(retain_on_delete=True, depends_on=[builder] if builder else [])
                ),
            )
            self.ref = ami.id
        self._finish()

    def _builder(
        self, name: str, args: ImageArgs, cloud: CloudPlan, child: pulumi.ResourceOptions, aws: Any, mod: ModuleType
    ) -> Any:
        bname = builder_name(cloud, args.selection)
        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=BUILDER_CIDR,
            enable_dns_support=True,
            enable_dns_hostnames=True,
            tags=_tags(cloud, bname),
            opts=child,
        )
        subnet = aws.ec2.Subnet(
            f"{name}-subnet",
            vpc_id=vpc.id,
            cidr_block=BUILDER_CIDR,
            availability_zone=cloud.zone,
            map_public_ip_on_launch=False,
            tags=_tags(cloud, bname),
            opts=child,
        )
        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags=_tags(cloud, bname), opts=child)
        table = aws.ec2.RouteTable(
            f"{name}-rt",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id)],
            tags=_tags(cloud, bname),
            opts=child,
        )
        aws.ec2.RouteTableAssociation(f"{name}-rta", subnet_id=subnet.id, route_table_id=table.id, opts=child)
        sg = aws.ec2.SecurityGroup(
            f"{name}-sg",
            vpc_id=vpc.id,
            description=f"clusterctl image builder of {cloud.cluster}: SSH from allowed_ssh_cidrs only",
            tags=_tags(cloud, bname),
            opts=child,
        )
        for i, cidr in enumerate(builder_sources(cloud)):
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-ssh-{i}",
                security_group_id=sg.id,
                ip_protocol="tcp",
                from_port=SSH_PORT,
                to_port=SSH_PORT,
                cidr_ipv4=cidr,
                description="SSH from a network listed in provider.allowed_ssh_cidrs (clusterctl)",
                tags=_tags(cloud),
                opts=child,
            )
        aws.vpc.SecurityGroupEgressRule(
            f"{name}-out",
            security_group_id=sg.id,
            ip_protocol="-1",
            cidr_ipv4="0.0.0.0/0",
            description="packages and installers the install stage downloads",
            tags=_tags(cloud),
            opts=child,
        )
        return aws.ec2.Instance(
            f"{name}-builder",
            ami=cloud.image,
            instance_type=BUILDER_TYPES["aws"],
            availability_zone=cloud.zone,
            subnet_id=subnet.id,
            associate_public_ip_address=True,
            vpc_security_group_ids=[sg.id],
            # The builder powers itself off when sealed; it must stay, stopped, for CreateImage.
            instance_initiated_shutdown_behavior="stop",
            user_data=pulumi.Output.secret(builder_user_data(cloud, bname, args.ssh_public_key, args.host_key)),
            root_block_device=aws.ec2.InstanceRootBlockDeviceArgs(
                volume_size=cloud.root_volume_gib, volume_type="gp3", encrypted=True, tags=_tags(cloud, bname)
            ),
            metadata_options=aws.ec2.InstanceMetadataOptionsArgs(http_tokens="required"),
            tags=_tags(cloud, bname),
            opts=child,
        )


# --- GCP ------------------------------------------------------------------------------------


class GcpImage(_Image):
    """Google Cloud: a network and subnetwork, SSH firewall, the builder, an image from its stopped boot disk."""

    def __init__(self, name: str, args: ImageArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterctl:image:GcpImage", name, None, opts)
        import pulumi_gcp as gcp

        mod = cloud_module("gcp")
        plan, sel = args.plan, args.selection
        cloud = profile_cloud(plan, sel.profile)
        child = mod.provider_options(name, cloud, self)
        self.name = image_name(plan, sel)
        wired: pulumi.Input[str] | None = None
        builder = None
        if sel.phase != PHASE_DONE:
            builder = self._builder(name, args, cloud, child, gcp, mod)
            self.address = builder.network_interfaces.apply(
                lambda n: (
                    (n[0].access_configs or [gcp.compute.outputs.InstanceNetworkInterfaceAccessConfig()])[0].nat_ip
                    or ""
                )
            )
            wired = builder.boot_disk.apply(lambda d: d.source or "")
        source = self._source(wired, sel)
        self.source = pulumi.Output.from_input(source)
        if sel.phase != PHASE_BUILD:
            # From the boot disk of the builder, stopped by then (desired_status TERMINATED
            # below): GCP refuses an image of a disk in use by a running VM without --force.
            image = gcp.compute.Image(
                f"{name}-image",
                name=self.name,
                family=f"clusterctl-{os_slug(plan.cluster.os)}-{sel.profile}"[:63],
                description=f"clusterctl node image {self.name} (profile {sel.profile}, sha256 {sel.digest})",
                source_disk=source,
                guest_os_features=[gcp.compute.ImageGuestOsFeatureArgs(type=f) for f in GCP_GUEST_OS_FEATURES],
                labels={**cloud.labels, **image_tags(plan, sel, label_max=GCP_LABEL_MAX)},
                opts=pulumi.ResourceOptions.merge(
                    child, pulumi.ResourceOptions(retain_on_delete=True, depends_on=[builder] if builder else [])
                ),
            )
            self.ref = image.self_link
        self._finish()

    def _builder(
        self, name: str, args: ImageArgs, cloud: CloudPlan, child: pulumi.ResourceOptions, gcp: Any, mod: ModuleType
    ) -> Any:
        sel = args.selection
        bname = builder_name(cloud, sel)
        network = gcp.compute.Network(f"{name}-net", name=bname, auto_create_subnetworks=False, opts=child)
        subnet = gcp.compute.Subnetwork(
            f"{name}-subnet",
            name=bname,
            network=network.id,
            region=cloud.region,
            ip_cidr_range=BUILDER_CIDR,
            private_ip_google_access=True,
            opts=child,
        )
        gcp.compute.Firewall(
            f"{name}-ssh",
            name=f"{bname}-ssh",
            network=network.id,
            direction="INGRESS",
            source_ranges=mod.ingress_sources(cloud, builder_sources(cloud), f"{bname}-ssh"),
            target_tags=[bname],
            allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=[str(SSH_PORT)])],
            description="SSH to the image builder from provider.allowed_ssh_cidrs only (clusterctl)",
            opts=child,
        )
        labels = dict(cloud.labels)
        return gcp.compute.Instance(
            f"{name}-builder",
            name=bname,
            hostname=f"{bname}.internal",
            machine_type=BUILDER_TYPES["gcp"],
            zone=cloud.zone,
            boot_disk=gcp.compute.InstanceBootDiskArgs(
                auto_delete=True,
                initialize_params=gcp.compute.InstanceBootDiskInitializeParamsArgs(
                    image=cloud.image, size=cloud.root_volume_gib, type="pd-ssd", labels=labels
                ),
            ),
            network_interfaces=[
                gcp.compute.InstanceNetworkInterfaceArgs(
                    subnetwork=subnet.id,
                    nic_type="GVNIC",
                    access_configs=[gcp.compute.InstanceNetworkInterfaceAccessConfigArgs()],
                )
            ],
            # Stopped for the capture: the provider stops the VM before the image reads its disk.
            desired_status="TERMINATED" if sel.phase == PHASE_CAPTURE else "RUNNING",
            scheduling=gcp.compute.InstanceSchedulingArgs(on_host_maintenance="MIGRATE", automatic_restart=True),
            metadata=mod.instance_metadata(
                mod.node_user_data(
                    hostname=bname,
                    fqdn=f"{bname}.internal",
                    user=cloud.ssh_user,
                    authorized_keys=[args.ssh_public_key],
                    host_key=args.host_key,
                )
            ),
            labels=labels,
            tags=[bname],
            opts=child,
        )


# --- Azure ----------------------------------------------------------------------------------


def azure_resource_group(plan: Plan, selection: ImageSelection) -> str:
    """The image's own resource group (gallery and image; the builder while it lives)."""
    return f"clusterctl-image-{os_slug(plan.cluster.os)}-{selection.short}"


class AzureImage(_Image):
    """Azure: the builder VM (encryption at host), a snapshot of its OS disk, a gallery image version."""

    def __init__(self, name: str, args: ImageArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterctl:image:AzureImage", name, None, opts)
        import pulumi_azure_native as azure

        mod = cloud_module("azure")
        plan, sel = args.plan, args.selection
        cloud = profile_cloud(plan, sel.profile)
        self.name = image_name(plan, sel)
        child = pulumi.ResourceOptions(parent=self)
        keep = pulumi.ResourceOptions(parent=self, retain_on_delete=True)
        tags = {**cloud.labels, **image_tags(plan, sel)}
        # The resource group holds the gallery, so it outlives the builder and is never deleted.
        rg = azure.resources.ResourceGroup(
            f"{name}-rg",
            resource_group_name=azure_resource_group(plan, sel),
            location=cloud.region,
            tags=tags,
            opts=keep,
        )
        builder = None
        wired: pulumi.Input[str] | None = None
        if sel.phase != PHASE_DONE:
            builder, self.address = self._builder(name, args, cloud, rg.name, azure, mod, child)
            if sel.phase == PHASE_CAPTURE:
                # Taken after the guest ran `waagent -deprovision+user` and powered off.
                os_disk = builder.storage_profile.apply(lambda p: p.os_disk.managed_disk.id if p else "")
                snapshot = azure.compute.Snapshot(
                    f"{name}-snapshot",
                    snapshot_name=f"{self.name}-os",
                    resource_group_name=rg.name,
                    location=cloud.region,
                    creation_data={"create_option": "Copy", "source_resource_id": os_disk},
                    incremental=False,
                    hyper_v_generation="V2",
                    os_type="Linux",
                    # Never exported through a SAS URL; encrypted at rest by the platform.
                    network_access_policy="DenyAll",
                    public_network_access="Disabled",
                    tags=tags,
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[builder]),
                )
                wired = snapshot.id
            else:
                wired = builder.storage_profile.apply(lambda p: p.os_disk.managed_disk.id if p else "")
        source = self._source(wired, sel)
        self.source = pulumi.Output.from_input(source)
        if sel.phase != PHASE_BUILD:
            gallery = azure.compute.Gallery(
                f"{name}-gallery",
                gallery_name=AZURE_GALLERY,
                resource_group_name=rg.name,
                location=cloud.region,
                description="clusterctl node images",
                tags=tags,
                opts=keep,
            )
            definition = azure.compute.GalleryImage(
                f"{name}-definition",
                gallery_image_name=self.name,
                gallery_name=AZURE_GALLERY,
                resource_group_name=rg.name,
                location=cloud.region,
                os_type="Linux",
                os_state="Generalized",
                # ND-series sizes boot Gen2 images only (as plan.cloud's Azure base images).
                hyper_v_generation="V2",
                architecture="x64",
                identifier={"publisher": AZURE_PUBLISHER, "offer": os_slug(plan.cluster.os), "sku": sel.short},
                features=[{"name": "IsAcceleratedNetworkSupported", "value": "True"}],
                description=f"clusterctl node image (profile {sel.profile}, sha256 {sel.digest})",
                tags=tags,
                opts=pulumi.ResourceOptions.merge(keep, pulumi.ResourceOptions(depends_on=[gallery])),
            )
            version = azure.compute.GalleryImageVersion(
                f"{name}-version",
                gallery_image_version_name=AZURE_VERSION,
                gallery_image_name=self.name,
                gallery_name=AZURE_GALLERY,
                resource_group_name=rg.name,
                location=cloud.region,
                storage_profile={"os_disk_image": {"source": {"id": source}}},
                publishing_profile={
                    "target_regions": [{"name": cloud.region, "regional_replica_count": 1}],
                    "replica_count": 1,
                    "storage_account_type": "Standard_LRS",
                },
                tags=tags,
                opts=pulumi.ResourceOptions.merge(
                    keep, pulumi.ResourceOptions(depends_on=[definition, *([builder] if builder else [])])
                ),
            )
            self.ref = version.id
        self._finish()

    def _builder(
        self,
        name: str,
        args: ImageArgs,
        cloud: CloudPlan,
        rg: pulumi.Input[str],
        azure: Any,
        mod: ModuleType,
        child: pulumi.ResourceOptions,
    ) -> tuple[Any, pulumi.Output[str]]:
        bname = builder_name(cloud, args.selection)
        tags = dict(cloud.labels)
        nsg = azure.network.NetworkSecurityGroup(
            f"{name}-nsg",
            network_security_group_name=bname,
            resource_group_name=rg,
            location=cloud.region,
            security_rules=[
                {
                    "name": "ssh-from-allowed",
                    "priority": mod.SSH_PRIORITY,
                    "direction": "Inbound",
                    "access": "Allow",
                    "protocol": "Tcp",
                    "source_address_prefixes": builder_sources(cloud),
                    "source_port_range": "*",
                    "destination_address_prefix": "*",
                    "destination_port_range": str(SSH_PORT),
                    "description": "SSH to the image builder from provider.allowed_ssh_cidrs only (clusterctl)",
                }
            ],
            tags=tags,
            opts=child,
        )
        vnet = azure.network.VirtualNetwork(
            f"{name}-vnet",
            virtual_network_name=bname,
            resource_group_name=rg,
            location=cloud.region,
            address_space={"address_prefixes": [BUILDER_CIDR]},
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["subnets"]),
        )
        subnet = azure.network.Subnet(
            f"{name}-subnet",
            subnet_name="builder",
            resource_group_name=rg,
            virtual_network_name=vnet.name,
            address_prefix=BUILDER_CIDR,
            network_security_group={"id": nsg.id},
            opts=child,
        )
        public_ip = azure.network.PublicIPAddress(
            f"{name}-ip",
            public_ip_address_name=bname,
            resource_group_name=rg,
            location=cloud.region,
            sku={"name": "Standard"},
            public_ip_allocation_method="Static",
            tags=tags,
            opts=child,
        )
        nic = azure.network.NetworkInterface(
            f"{name}-nic",
            network_interface_name=bname,
            resource_group_name=rg,
            location=cloud.region,
            ip_configurations=[
                {
                    "name": "primary",
                    "primary": True,
                    "subnet": {"id": subnet.id},
                    "private_ip_allocation_method": "Dynamic",
                    "public_ip_address": {"id": public_ip.id},
                }
            ],
            tags=tags,
            opts=child,
        )
        vm = mod._vm(
            f"{name}-builder",
            cloud=cloud,
            rg=rg,
            vm_name=bname,
            size=BUILDER_TYPES["azure"],
            nic_id=nic.id,
            user_data=builder_user_data(cloud, bname, args.ssh_public_key, args.host_key),
            ssh_public_key=args.ssh_public_key,
            parent=self,
        )
        return vm, public_ip.ip_address.apply(lambda ip: ip or "")


COMPONENTS: dict[str, type[AwsImage] | type[GcpImage] | type[AzureImage]] = {
    "aws": AwsImage,
    "gcp": GcpImage,
    "azure": AzureImage,
}


def image_component(args: ImageArgs, opts: pulumi.ResourceOptions | None = None) -> _Image:
    """The component for the plan's cloud, named ``<cluster>-image-<profile>`` (stable across phases and hashes)."""
    cloud = profile_cloud(args.plan, args.selection.profile)
    return COMPONENTS[cloud.provider](f"{cloud.cluster}-image-{args.selection.profile}", args, opts)


def deploy(inputs: StackInputs, selection: ImageSelection | None = None) -> _Image:
    """The program: the phase's resources, and the outputs clusterctl reads.

    ``selection`` defaults to the stack configuration (``clusterctl:imageProfile``,
    ``clusterctl:imageHash``, ``clusterctl:imagePhase``, ``clusterctl:imageSource``).
    """
    chosen = selection or load_selection()
    plan = inputs.plan
    cloud = profile_cloud(plan, chosen.profile)
    key = inputs.host_keys.get(BUILDER)
    component = image_component(
        ImageArgs(plan=plan, selection=chosen, ssh_public_key=inputs.ssh_public_key, host_key=key)
    )
    outputs: dict[str, Any] = {OUT_PHASE: chosen.phase, OUT_SSH_USER: cloud.ssh_user}
    if component.address is not None:
        outputs[OUT_NODES] = {BUILDER: component.address}
        outputs[OUT_HOST_KEYS] = {BUILDER: key.public} if key is not None else {}
    if component.source is not None:
        outputs[OUT_IMAGE_SOURCE] = component.source
    if component.ref is not None:
        outputs[OUT_IMAGE] = {
            "ref": component.ref,
            "name": component.name,
            "hash": chosen.digest,
            "profile": chosen.profile,
            "os": plan.cluster.os,
            "target": cloud.provider,
        }
    for name, value in outputs.items():
        pulumi.export(name, value)
    return component
