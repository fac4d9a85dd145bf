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

import re
from dataclasses import dataclass
from typing import Any, ClassVar

import pulumi
from clusterctl_stack import (
    CONFIG_NAMESPACE,
    OUT_HOST_KEYS,
    OUT_NODES,
    OUT_SSH_USER,
    HostKey,
    StackInputs,
    base_image,
    cloud_module,
    machine_user_data,
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


def image_description(name: str, selection: ImageSelection) -> str:
    """What the AMI or GCP image says it is."""
    return f"clusterctl node image {name} (profile {selection.profile}, sha256 {selection.digest})"


@dataclass
class ImageArgs:
    """Inputs of the image components."""

    plan: Plan
    selection: ImageSelection
    ssh_public_key: str = ""
    host_key: HostKey | None = None

    def user_data(
        self, cloud: CloudPlan, name: str, fqdn: str | None = None, host_key_files: list[dict[str, str]] | None = None
    ) -> str:
        """cloud-init of the builder: clusterctl's user and key, and the host key clusterctl pinned."""
        return machine_user_data(
            cloud,
            name,
            fqdn=fqdn or name,
            ssh_public_key=self.ssh_public_key,
            host_key=self.host_key,
            host_key_files=host_key_files,
        )


@dataclass
class Builder:
    """The builder instance, as the phases after ``build`` see it."""

    instance: pulumi.Resource
    address: pulumi.Output[str]
    # What the image is made from while the builder lives (instance, boot disk, OS disk snapshot).
    source: pulumi.Input[str]


class _Image(pulumi.ComponentResource):
    """The three phases every cloud's image component goes through; each cloud makes its builder and image."""

    TYPE: ClassVar[str]  # the component's type token

    address: pulumi.Output[str] | None = None
    source: pulumi.Output[str] | None = None
    ref: pulumi.Output[str] | None = None
    name: str = ""
    builder: pulumi.Resource | None = None  # the builder instance, while it lives

    def __init__(self, name: str, args: ImageArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        sel = args.selection
        self.cloud = profile_cloud(args.plan, sel.profile)
        self.mod = cloud_module(self.cloud.provider)
        self._child = self._children(name, args)
        self.name = image_name(args.plan, sel)
        self.bname = builder_name(self.cloud, sel)
        builder = self._builder(name, args) if sel.phase != PHASE_DONE else None
        if builder is not None:
            self.builder, self.address = builder.instance, builder.address
        source = self._source(builder.source if builder else None, sel)
        self.source = pulumi.Output.from_input(source)
        if sel.phase != PHASE_BUILD:
            self.ref = self._capture(name, args, source)
        self._finish()

    def _children(self, name: str, args: ImageArgs) -> pulumi.ResourceOptions:
        """Options for the component's children, once what every phase shares is made (here: the provider)."""
        return self.mod.provider_options(name, self.cloud, self)

    def _builder(self, name: str, args: ImageArgs) -> Builder:
        """The builder instance ``self.bname`` and what it needs (network, SSH from the allowed networks)."""
        raise NotImplementedError

    def _capture(self, name: str, args: ImageArgs, source: pulumi.Input[str]) -> pulumi.Output[str]:
        """The image made from ``source``; its reference."""
        raise NotImplementedError

    def _kept(self, *depends_on: pulumi.Resource | None) -> pulumi.ResourceOptions:
        """Options for what outlives the builder: never deleted by Pulumi, made after ``depends_on``."""
        after = [resource for resource in depends_on if resource is not None]
        return pulumi.ResourceOptions.merge(
            self._child, pulumi.ResourceOptions(retain_on_delete=True, depends_on=after)
        )

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

    TYPE = "clusterctl:image:AwsImage"

    def _builder(self, name: str, args: ImageArgs) -> Builder:
        import pulumi_aws as aws

        mod, cloud, bname, child = self.mod, self.cloud, self.bname, self._child
        vpc = mod.vpc(f"{name}-vpc", cloud, BUILDER_CIDR, bname, child)
        subnet = mod.subnet(f"{name}-subnet", cloud, vpc.id, BUILDER_CIDR, bname, child)
        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags=mod.tags(cloud, bname), opts=child)
        internet = aws.ec2.RouteTableRouteArgs(cidr_block=mod.WORLD, gateway_id=igw.id)
        mod.default_route(f"{name}-rt", cloud, vpc.id, internet, bname, {f"{name}-rta": subnet.id}, child)
        why = f"clusterctl image builder of {cloud.cluster}: SSH from allowed_ssh_cidrs only"
        sg = mod.security_group(f"{name}-sg", cloud, vpc.id, why, bname, child)
        ssh_why = "SSH from a network listed in provider.allowed_ssh_cidrs (clusterctl)"
        mod.ssh_ingress(f"{name}-ssh", cloud, sg.id, builder_sources(cloud), ssh_why, child)
        out_why = "packages and installers the install stage downloads"
        mod.rule("out", f"{name}-out", cloud, sg.id, out_why, {"ip_protocol": "-1", "cidr_ipv4": mod.WORLD}, child)
        instance = mod.instance(
            f"{name}-builder",
            cloud,
            ami=cloud.image,
            instance_type=BUILDER_TYPES["aws"],
            subnet_id=subnet.id,
            security_group_id=sg.id,
            user_data=args.user_data(cloud, bname),
            tag_name=bname,
            opts=child,
            volume_gib=cloud.root_volume_gib,
            public=True,
            # The builder powers itself off when sealed; it must stay, stopped, for CreateImage.
            shutdown="stop",
        )
        return Builder(instance, instance.public_ip, instance.id)

    def _capture(self, name: str, args: ImageArgs, source: pulumi.Input[str]) -> pulumi.Output[str]:
        import pulumi_aws as aws

        # CreateImage without NoReboot: EC2 stops the instance, snapshots its (encrypted)
        # root volume -- the AMI's snapshot is encrypted with the same key -- and the AMI
        # keeps the builder's ENA support and volume size (the plan's root_volume_gib).
        ami = aws.ec2.AmiFromInstance(
            f"{name}-ami",
            name=self.name,
            description=image_description(self.name, args.selection),
            source_instance_id=source,
            snapshot_without_reboot=False,
            tags={**self.cloud.labels, **image_tags(args.plan, args.selection), "Name": self.name},
            opts=self._kept(self.builder),
        )
        return ami.id


# --- GCP ------------------------------------------------------------------------------------


class GcpImage(_Image):
    """Google Cloud: a network and subnetwork, SSH firewall, the builder, an image from its stopped boot disk."""

    TYPE = "clusterctl:image:GcpImage"

    def _builder(self, name: str, args: ImageArgs) -> Builder:
        import pulumi_gcp as gcp

        mod, cloud, bname, child = self.mod, self.cloud, self.bname, self._child
        network = gcp.compute.Network(f"{name}-net", name=bname, auto_create_subnetworks=False, opts=child)
        subnet = mod.subnetwork(f"{name}-subnet", bname, network.id, cloud, BUILDER_CIDR, child, google_access=True)
        why = "SSH to the image builder from provider.allowed_ssh_cidrs only (clusterctl)"
        mod.ingress_firewall(
            f"{name}-ssh", f"{bname}-ssh", cloud, network.id, builder_sources(cloud), why, child, ssh_to=[bname]
        )
        labels = dict(cloud.labels)
        fqdn = f"{bname}.internal"
        instance = gcp.compute.Instance(
            f"{name}-builder",
            name=bname,
            hostname=fqdn,
            machine_type=BUILDER_TYPES["gcp"],
            zone=cloud.zone,
            boot_disk=mod.boot_disk(
                base_image(cloud, args.selection.profile), labels, cloud.root_volume_gib, "pd-ssd", auto_delete=True
            ),
            network_interfaces=[mod.public_interface(subnet.id, "GVNIC")],
            # Stopped for the capture: the provider stops the VM before the image reads its disk.
            desired_status="TERMINATED" if args.selection.phase == PHASE_CAPTURE else "RUNNING",
            scheduling=gcp.compute.InstanceSchedulingArgs(on_host_maintenance="MIGRATE", automatic_restart=True),
            metadata=mod.instance_metadata(args.user_data(cloud, bname, fqdn, mod.GUEST_AGENT_FILES)),
            labels=labels,
            tags=[bname],
            opts=child,
        )
        return Builder(instance, mod.public_address(instance), instance.boot_disk.apply(lambda d: d.source or ""))

    def _capture(self, name: str, args: ImageArgs, source: pulumi.Input[str]) -> pulumi.Output[str]:
        import pulumi_gcp as gcp

        plan, sel = args.plan, args.selection
        # From the boot disk of the builder, stopped by then (desired_status TERMINATED in
        # _builder): GCP refuses an image of a disk in use by a running VM without --force.
        image = gcp.compute.Image(
            f"{name}-image",
            name=self.name,
            family=f"clusterctl-{os_slug(plan.cluster.os)}-{sel.profile}"[:63],
            description=image_description(self.name, sel),
            source_disk=source,
            guest_os_features=[gcp.compute.ImageGuestOsFeatureArgs(type=f) for f in GCP_GUEST_OS_FEATURES],
            labels={**self.cloud.labels, **image_tags(plan, sel, label_max=GCP_LABEL_MAX)},
            opts=self._kept(self.builder),
        )
        return image.self_link


# --- Azure ----------------------------------------------------------------------------------


def azure_resource_group(plan: Plan, selection: ImageSelection) -> str:
    """The image's own resource group (gallery and image; the builder while it lives)."""
    return f"clusterctl-image-{os_slug(plan.cluster.os)}-{selection.short}"


class AzureImage(_Image):
    """Azure: the builder VM (encryption at host), a snapshot of its OS disk, a gallery image version."""

    TYPE = "clusterctl:image:AzureImage"
    _rg: Any  # the image's resource group (azure.resources.ResourceGroup)

    def _tags(self, args: ImageArgs) -> dict[str, str]:
        return {**self.cloud.labels, **image_tags(args.plan, args.selection)}

    def _children(self, name: str, args: ImageArgs) -> pulumi.ResourceOptions:
        """Options for the children, once the image's resource group is made."""
        import pulumi_azure_native as azure

        child = pulumi.ResourceOptions(parent=self)
        # The resource group holds the gallery, so it outlives the builder and is never deleted.
        self._rg = azure.resources.ResourceGroup(
            f"{name}-rg",
            resource_group_name=azure_resource_group(args.plan, args.selection),
            location=self.cloud.region,
            tags=self._tags(args),
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=True),
        )
        return child

    def _builder(self, name: str, args: ImageArgs) -> Builder:
        import pulumi_azure_native as azure

        mod, cloud, rg, bname, child = self.mod, self.cloud, self._rg.name, self.bname, self._child
        why = "SSH to the image builder from provider.allowed_ssh_cidrs only (clusterctl)"
        allowed = mod.ssh_rule("ssh-from-allowed", why)
        allowed["source_address_prefixes"] = builder_sources(cloud)
        nsg = mod.ssh_security_group(f"{name}-nsg", bname, cloud, rg, allowed, child)
        vnet = mod.virtual_network(f"{name}-vnet", bname, cloud, rg, BUILDER_CIDR, self)
        subnet = azure.network.Subnet(
            f"{name}-subnet",
            subnet_name="builder",
            resource_group_name=rg,
            virtual_network_name=vnet.name,
            address_prefix=BUILDER_CIDR,
            network_security_group={"id": nsg.id},
            opts=child,
        )
        ip = mod.public_ip(f"{name}-ip", bname, cloud, rg, child)
        nic = mod.network_interface(f"{name}-nic", bname, cloud, rg, subnet.id, child, public_ip_id=ip.id)
        vm = mod.virtual_machine(
            f"{name}-builder",
            cloud=cloud,
            rg=rg,
            vm_name=bname,
            size=BUILDER_TYPES["azure"],
            nic_id=nic.id,
            user_data=args.user_data(cloud, bname),
            ssh_public_key=args.ssh_public_key,
            parent=self,
        )
        source = vm.storage_profile.apply(lambda p: p.os_disk.managed_disk.id if p else "")
        if args.selection.phase == PHASE_CAPTURE:
            # Taken after the guest ran `waagent -deprovision+user` and powered off.
            snapshot = azure.compute.Snapshot(
                f"{name}-snapshot",
                snapshot_name=f"{self.name}-os",
                resource_group_name=rg,
                location=cloud.region,
                creation_data={"create_option": "Copy", "source_resource_id": source},
                incremental=False,
                hyper_v_generation="V2",
                os_type="Linux",
                # Never exported through a SAS URL; encrypted at rest by the platform.
                network_access_policy="DenyAll",
                public_network_access="Disabled",
                tags=self._tags(args),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[vm]),
            )
            source = snapshot.id
        return Builder(vm, mod.address_of(ip), source)

    def _capture(self, name: str, args: ImageArgs, source: pulumi.Input[str]) -> pulumi.Output[str]:
        import pulumi_azure_native as azure

        plan, sel, cloud, rg = args.plan, args.selection, self.cloud, self._rg.name
        tags = self._tags(args)
        gallery = azure.compute.Gallery(
            f"{name}-gallery",
            gallery_name=AZURE_GALLERY,
            resource_group_name=rg,
            location=cloud.region,
            description="clusterctl node images",
            tags=tags,
            opts=self._kept(),
        )
        definition = azure.compute.GalleryImage(
            f"{name}-definition",
            gallery_image_name=self.name,
            gallery_name=AZURE_GALLERY,
            resource_group_name=rg,
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
            opts=self._kept(gallery),
        )
        version = azure.compute.GalleryImageVersion(
            f"{name}-version",
            gallery_image_version_name=AZURE_VERSION,
            gallery_image_name=self.name,
            gallery_name=AZURE_GALLERY,
            resource_group_name=rg,
            location=cloud.region,
            storage_profile={"os_disk_image": {"source": {"id": source}}},
            publishing_profile={
                "target_regions": [{"name": cloud.region, "regional_replica_count": 1}],
                "replica_count": 1,
                "storage_account_type": "Standard_LRS",
            },
            tags=tags,
            opts=self._kept(definition, self.builder),
        )
        return version.id


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
