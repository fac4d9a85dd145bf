"""The image program (stacks/image) under Pulumi's mocks: one baked image per cloud, three phases.

``build`` makes the builder (instance type, disk, network, the cloud defaults of the cluster
stacks), ``capture`` makes the image from it (wired to the builder), ``done`` keeps the image
with the same inputs and drops the builder: Pulumi deletes a resource registered before and not
now, so "the builder is deleted after capture" is asserted as "done registers no builder
resource and the image's inputs are unchanged". Names and tags carry the content hash; a
cluster stack boots the nodes of a profile from the locked image.
"""

from __future__ import annotations

import base64
import sys
from collections.abc import Callable
from typing import Any

import pulumi
import pytest
import yaml

from clusterctl.plan import Plan
from clusterctl.run.providers.images import apply_locked_images
from tests.plan_edits import replaced
from tests.stacks.conftest import STACKS, RecordingMocks, example_plan, run, unsecret
from tests.stacks.test_cloud_defaults import _world_open

if str(STACKS / "image") not in sys.path:
    sys.path.insert(0, str(STACKS / "image"))

from clusterctl_aws import AwsCluster, AwsClusterArgs  # isort: skip
from clusterctl_azure import AzureCluster, AzureClusterArgs  # isort: skip
from clusterctl_gcp import GcpCluster, GcpClusterArgs  # isort: skip
from clusterctl_image import (  # isort: skip
    BUILDER,
    BUILDER_CIDR,
    BUILDER_TYPES,
    HASH_KEY,
    PHASE_KEY,
    PROFILE_KEY,
    ImageArgs,
    ImageSelection,
    deploy,
    image_component,
    load_selection,
)
from clusterctl_stack import HostKey, StackInputs, WorldOpenSshError  # isort: skip

DIGEST = "0123456789abcdef" * 4  # a sha256 hex digest
SHORT = DIGEST[:12]
KEY = HostKey(private="PRIVATE-builder", public="ssh-ed25519 AAAAbuilder")
EXAMPLES = {"aws": ("aws-p5.yaml", "p5"), "gcp": ("gcp-a3mega.yaml", "a3mega"), "azure": ("azure-ndv5.yaml", "ndv5")}
AWS_INSTANCE = "aws:ec2/instance:Instance"
AWS_AMI = "aws:ec2/amiFromInstance:AmiFromInstance"
GCP_INSTANCE = "gcp:compute/instance:Instance"
GCP_IMAGE = "gcp:compute/image:Image"
AZURE_VM = "azure-native:compute:VirtualMachine"
AZURE_SNAPSHOT = "azure-native:compute:Snapshot"
AZURE_DEFINITION = "azure-native:compute:GalleryImage"
AZURE_VERSION = "azure-native:compute:GalleryImageVersion"
IMAGE_TYPES = {"aws": [AWS_AMI], "gcp": [GCP_IMAGE], "azure": [AZURE_DEFINITION, AZURE_VERSION]}
GCP_DISK = "projects/my-gpu-project/zones/us-central1-a/disks/"
AZURE_DISK = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/"


class ImageMocks(RecordingMocks):
    """RecordingMocks that also answer what the cloud fills in: a builder's boot/OS disk, an instance's AMI."""

    def __init__(self) -> None:
        super().__init__()
        self._template_images: dict[str, str] = {}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        rid, outputs = super().new_resource(args)
        if args.typ == "aws:ec2/launchTemplate:LaunchTemplate":
            self._template_images[rid] = args.inputs["imageId"]
        if args.typ == AWS_INSTANCE and "launchTemplate" in args.inputs:
            # EC2 launches it from the template's AMI and reports that AMI.
            outputs["ami"] = self._template_images[args.inputs["launchTemplate"]["id"]]
        if args.typ == GCP_INSTANCE:
            outputs["bootDisk"] = {**outputs.get("bootDisk", {}), "source": GCP_DISK + args.inputs["name"]}
            nics = outputs["networkInterfaces"]
            outputs["networkInterfaces"] = [{**nics[0], "accessConfigs": [{"natIp": "198.51.100.20"}]}]
        if args.typ == AZURE_VM:
            profile = dict(outputs["storageProfile"])
            profile["osDisk"] = {**profile["osDisk"], "managedDisk": {"id": AZURE_DISK + args.inputs["vmName"]}}
            outputs["storageProfile"] = profile
        return rid, outputs


def _profile(kind: str) -> str:
    return EXAMPLES[kind][1]


@pytest.fixture(scope="module")
def plans() -> dict[str, Plan]:
    return {kind: example_plan(example) for kind, (example, _) in EXAMPLES.items()}


def _run(plan: Plan, profile: str, phase: str, source: str | None = None) -> RecordingMocks:
    selection = ImageSelection(profile=profile, hash=DIGEST, phase=phase, source=source)
    args = ImageArgs(plan=plan, selection=selection, ssh_public_key="ssh-ed25519 AAAAclusterctl", host_key=KEY)
    return run(lambda: image_component(args), ImageMocks())


def _exports(plan: Plan, selection: ImageSelection) -> tuple[dict[str, Any], RecordingMocks]:
    """What deploy exports, with every output resolved."""
    exported: dict[str, Any] = {}
    resolved: dict[str, Any] = {}

    def program() -> Any:
        original = pulumi.export
        try:
            pulumi.export = lambda key, value: exported.__setitem__(key, value)  # type: ignore[assignment]
            deploy(StackInputs(plan=plan, ssh_public_key="k", host_keys={BUILDER: KEY}), selection)
        finally:
            pulumi.export = original
        return pulumi.Output.from_input(exported).apply(resolved.update)

    mocks = run(program, ImageMocks())
    return resolved, mocks


@pytest.fixture(scope="module")
def phases(plans: dict[str, Plan]) -> dict[tuple[str, str], RecordingMocks]:
    """Every cloud in every phase (done with the source the capture phase exported)."""
    out: dict[tuple[str, str], RecordingMocks] = {}
    for kind, plan in plans.items():
        out[kind, "build"] = _run(plan, _profile(kind), "build")
        out[kind, "capture"] = _run(plan, _profile(kind), "capture")
        captured, _ = _exports(plan, ImageSelection(profile=_profile(kind), hash=DIGEST, phase="capture"))
        out[kind, "done"] = _run(plan, _profile(kind), "done", source=captured["imageSource"])
    return out


# --- the builder ---------------------------------------------------------------------------------


def test_aws_builder_instance_disk_and_network(phases, plans) -> None:
    created = phases["aws", "build"]
    (builder,) = created.of_type(AWS_INSTANCE)
    assert builder.inputs["instanceType"] == BUILDER_TYPES["aws"]
    # Booted from the same OS image the cluster's nodes use (the plan's resolution of the spec's OS).
    assert builder.inputs["ami"] == plans["aws"].cloud.image
    assert builder.inputs["ami"].startswith("resolve:ssm:/aws/service/canonical/ubuntu/server/24.04/")
    root = builder.inputs["rootBlockDevice"]
    assert root == {**root, "encrypted": True, "volumeType": "gp3", "volumeSize": plans["aws"].cloud.root_volume_gib}
    assert builder.inputs["metadataOptions"]["httpTokens"] == "required"
    assert builder.inputs["instanceInitiatedShutdownBehavior"] == "stop"  # sealed builder powers off, kept
    assert builder.inputs["associatePublicIpAddress"] is True
    (vpc,) = created.of_type("aws:ec2/vpc:Vpc")
    assert vpc.inputs["cidrBlock"] == BUILDER_CIDR
    (subnet,) = created.of_type("aws:ec2/subnet:Subnet")
    assert builder.inputs["subnetId"] == f"{subnet.name}-id"
    assert not created.of_type(AWS_AMI)  # nothing captured before the install stage ran


def test_gcp_builder_instance_disk_network_and_os_login(phases, plans) -> None:
    created = phases["gcp", "build"]
    (builder,) = created.of_type(GCP_INSTANCE)
    cloud = plans["gcp"].cloud
    assert builder.inputs["machineType"] == BUILDER_TYPES["gcp"]
    params = builder.inputs["bootDisk"]["initializeParams"]
    assert params["image"] == cloud.image == "projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64"
    assert params["size"] == cloud.root_volume_gib
    assert params["type"] == "pd-ssd"
    assert builder.inputs["desiredStatus"] == "RUNNING"
    (nic,) = builder.inputs["networkInterfaces"]
    assert nic["nicType"] == "GVNIC"
    assert nic["accessConfigs"] == [{}]  # an external address: the builder is reached directly
    (subnet,) = created.of_type("gcp:compute/subnetwork:Subnetwork")
    assert subnet.inputs["ipCidrRange"] == BUILDER_CIDR
    secret, metadata = unsecret(builder.inputs["metadata"])
    assert secret
    assert metadata["enable-oslogin"] == "TRUE"
    assert metadata["block-project-ssh-keys"] == "TRUE"
    assert "ssh-keys" not in metadata
    config = yaml.safe_load(metadata["user-data"].removeprefix("#cloud-config\n"))
    (agent,) = [f for f in config["write_files"] if f["path"] == "/etc/default/instance_configs.cfg"]
    assert "set_host_keys = false" in agent["content"]
    assert not created.of_type(GCP_IMAGE)


def test_azure_builder_vm_disk_and_network(phases, plans) -> None:
    created = phases["azure", "build"]
    (vm,) = created.of_type(AZURE_VM)
    cloud = plans["azure"].cloud
    assert vm.inputs["hardwareProfile"]["vmSize"] == BUILDER_TYPES["azure"]
    assert vm.inputs["securityProfile"]["encryptionAtHost"] is True
    storage = vm.inputs["storageProfile"]
    assert storage["imageReference"] == {
        "publisher": "Canonical",
        "offer": "ubuntu-24_04-lts",
        "sku": "server",
        "version": "latest",
    }
    assert storage["osDisk"]["diskSizeGB"] == cloud.root_volume_gib
    secret, os_profile = unsecret(vm.inputs["osProfile"])
    assert secret
    assert os_profile["linuxConfiguration"]["disablePasswordAuthentication"] is True
    (vnet,) = created.of_type("azure-native:network:VirtualNetwork")
    assert vnet.inputs["addressSpace"]["addressPrefixes"] == [BUILDER_CIDR]
    (rg,) = created.of_type("azure-native:resources:ResourceGroup")
    assert rg.inputs["resourceGroupName"] == f"clusterctl-image-ubuntu-2404-{SHORT}"
    assert not created.of_type(AZURE_VERSION)


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_builder_gets_clusterctl_key_and_the_pinned_host_key(phases, kind: str) -> None:
    created = phases[kind, "build"]
    if kind == "aws":
        secret, text = unsecret(created.of_type(AWS_INSTANCE)[0].inputs["userData"])
    elif kind == "gcp":
        secret, metadata = unsecret(created.of_type(GCP_INSTANCE)[0].inputs["metadata"])
        text = metadata["user-data"]
    else:
        secret, os_profile = unsecret(created.of_type(AZURE_VM)[0].inputs["osProfile"])
        text = base64.b64decode(unsecret(os_profile["customData"])[1]).decode()
    assert secret, "the user data carries the builder's private host key"
    config = yaml.safe_load(text.removeprefix("#cloud-config\n"))
    assert config["ssh_pwauth"] is False
    assert config["ssh_keys"] == {"ed25519_private": "PRIVATE-builder", "ed25519_public": "ssh-ed25519 AAAAbuilder"}
    assert config["ssh_genkeytypes"] == []
    (user,) = config["users"]
    assert user["ssh_authorized_keys"] == ["ssh-ed25519 AAAAclusterctl"]


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_builder_ssh_only_from_allowed_networks(phases, plans, kind: str) -> None:
    created = phases[kind, "build"]
    assert not _world_open(created)
    allowed = set(plans[kind].cloud.bastion.allowed_cidrs)
    sources: list[str] = []
    for rule in created.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"):
        sources.append(rule.inputs["cidrIpv4"])
    for rule in created.of_type("gcp:compute/firewall:Firewall"):
        sources.extend(rule.inputs["sourceRanges"])
    for nsg in created.of_type("azure-native:network:NetworkSecurityGroup"):
        for rule in nsg.inputs["securityRules"]:
            sources.extend(rule["sourceAddressPrefixes"])
    assert sources
    assert set(sources) == allowed


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_world_open_builder_refused_and_no_allowed_network_refused(plans, kind: str) -> None:
    opened = replaced(plans[kind], {"cloud.bastion.allowed_cidrs": ["0.0.0.0/0"]})
    with pytest.raises(WorldOpenSshError, match="allow_world_ssh"):
        _run(opened, _profile(kind), "build")
    closed = replaced(plans[kind], {"cloud.bastion": None})
    with pytest.raises(ValueError, match="allowed_ssh_cidrs"):
        _run(closed, _profile(kind), "build")


def test_unknown_profile_and_bad_hash_refused(plans) -> None:
    with pytest.raises(ValueError, match="no node group of forge uses hardware profile nope"):
        _run(plans["aws"], "nope", "build")
    with pytest.raises(ValueError, match="not a sha256 hex digest"):
        run(
            lambda: image_component(
                ImageArgs(plan=plans["aws"], selection=ImageSelection(profile="p5", hash="latest"))
            ),
            ImageMocks(),
        )


# --- the capture, wired to the builder -----------------------------------------------------------


def test_aws_ami_from_the_builder(phases) -> None:
    created = phases["aws", "capture"]
    (builder,) = created.of_type(AWS_INSTANCE)
    (ami,) = created.of_type(AWS_AMI)
    assert ami.inputs["sourceInstanceId"] == f"{builder.name}-id"
    assert ami.inputs["snapshotWithoutReboot"] is False  # EC2 stops it: a consistent snapshot


def test_gcp_image_from_the_stopped_builder_disk(phases) -> None:
    created = phases["gcp", "capture"]
    (builder,) = created.of_type(GCP_INSTANCE)
    (image,) = created.of_type(GCP_IMAGE)
    assert builder.inputs["desiredStatus"] == "TERMINATED"  # the provider stops it before the image reads it
    assert image.inputs["sourceDisk"] == GCP_DISK + builder.inputs["name"]
    assert {f["type"] for f in image.inputs["guestOsFeatures"]} >= {"GVNIC", "UEFI_COMPATIBLE"}


def test_azure_gallery_version_from_a_snapshot_of_the_builder(phases) -> None:
    created = phases["azure", "capture"]
    (vm,) = created.of_type(AZURE_VM)
    (snapshot,) = created.of_type(AZURE_SNAPSHOT)
    (definition,) = created.of_type(AZURE_DEFINITION)
    (version,) = created.of_type(AZURE_VERSION)
    assert snapshot.inputs["creationData"] == {
        "createOption": "Copy",
        "sourceResourceId": AZURE_DISK + vm.inputs["vmName"],
    }
    assert snapshot.inputs["networkAccessPolicy"] == "DenyAll"
    assert version.inputs["storageProfile"]["osDiskImage"]["source"]["id"] == f"{snapshot.name}-id"
    assert definition.inputs["osState"] == "Generalized"
    assert definition.inputs["osType"] == "Linux"
    assert definition.inputs["hyperVGeneration"] == "V2"  # ND-series boot Gen2 only
    assert version.inputs["galleryImageName"] == definition.inputs["galleryImageName"]
    assert version.inputs["galleryName"] == definition.inputs["galleryName"] == "clusterctl_images"


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_names_and_tags_carry_the_hash(phases, plans, kind: str) -> None:
    created = phases[kind, "capture"]
    name = f"clusterctl-ubuntu-2404-{SHORT}"
    cluster = plans[kind].cluster.name
    for typ in IMAGE_TYPES[kind]:
        (image,) = created.of_type(typ)
        tags = image.inputs.get("tags") or image.inputs.get("labels")
        assert tags["clusterctl-image-profile"] == _profile(kind)
        assert tags["clusterctl-image-os"] == "ubuntu-2404"
        assert tags["clusterctl-cluster"] == cluster  # the cluster that built it
        # GCP label values hold 63 characters; AWS and Azure tags the whole digest.
        assert tags["clusterctl-image-hash"] == (DIGEST[:63] if kind == "gcp" else DIGEST)
    field = {"aws": "name", "gcp": "name", "azure": "galleryImageName"}[kind]
    assert created.of_type(IMAGE_TYPES[kind][0])[0].inputs[field] == name
    if kind == "azure":
        (version,) = created.of_type(AZURE_VERSION)
        assert version.inputs["galleryImageName"] == name


def test_same_hash_same_name_whichever_profile_or_cluster(plans) -> None:
    """Content-addressed: the name depends on the OS and the hash, not on who built it."""
    renamed = replaced(plans["aws"], {"cluster.name": "other", "cloud.cluster": "other"})
    (first,) = _run(plans["aws"], "p5", "capture").of_type(AWS_AMI)
    (second,) = _run(renamed, "head", "capture").of_type(AWS_AMI)
    assert first.inputs["name"] == second.inputs["name"] == f"clusterctl-ubuntu-2404-{SHORT}"


# --- done: the builder goes, the image stays -------------------------------------------------------


BUILDER_TYPES_BY_KIND = {
    "aws": ("aws:ec2/instance:Instance", "aws:ec2/vpc:Vpc", "aws:ec2/securityGroup:SecurityGroup"),
    "gcp": ("gcp:compute/instance:Instance", "gcp:compute/network:Network", "gcp:compute/firewall:Firewall"),
    "azure": (
        AZURE_VM,
        AZURE_SNAPSHOT,
        "azure-native:network:NetworkInterface",
        "azure-native:network:PublicIPAddress",
    ),
}


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_done_deletes_the_builder_and_keeps_the_image_unchanged(phases, kind: str) -> None:
    capture, done = phases[kind, "capture"], phases[kind, "done"]
    for typ in BUILDER_TYPES_BY_KIND[kind]:
        assert capture.of_type(typ), typ
        assert not done.of_type(typ), f"{typ} still registered: Pulumi would keep the builder"
    for typ in IMAGE_TYPES[kind]:
        (before,) = capture.of_type(typ)
        (after,) = done.of_type(typ)
        # Same name and inputs: Pulumi keeps the image (no replacement) while it deletes the rest.
        assert (after.name, after.inputs) == (before.name, before.inputs)
    # Everything done registers was registered by capture too: nothing new appears at the end.
    assert {r.name for r in done.resources} <= {r.name for r in capture.resources}


def test_done_needs_the_captured_source(plans) -> None:
    with pytest.raises(ValueError, match="imageSource"):
        _run(plans["aws"], "p5", "done")


@pytest.fixture
def retained(monkeypatch: pytest.MonkeyPatch) -> dict[str, bool]:
    """Resource name -> its retain_on_delete option, for every custom resource registered."""
    seen: dict[str, bool] = {}
    original = pulumi.CustomResource.__init__

    def record(self: Any, t: str, name: str, props: Any = None, opts: Any = None, *args: Any, **kwargs: Any) -> None:
        seen[name] = bool(opts and opts.retain_on_delete)
        original(self, t, name, props, opts, *args, **kwargs)

    monkeypatch.setattr(pulumi.CustomResource, "__init__", record)
    return seen


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_images_are_never_deleted_by_pulumi(plans, retained: dict[str, bool], kind: str) -> None:
    """Other clusters may boot from an image: destroying the stack leaves it (and its gallery)."""
    created = _run(plans[kind], _profile(kind), "capture")
    kept = {"aws": [AWS_AMI], "gcp": [GCP_IMAGE], "azure": [*IMAGE_TYPES["azure"], "azure-native:compute:Gallery"]}
    for typ in kept[kind]:
        (image,) = created.of_type(typ)
        assert retained[image.name] is True, typ
    for typ in BUILDER_TYPES_BY_KIND[kind]:
        for resource in created.of_type(typ):
            assert retained[resource.name] is False, typ


# --- outputs clusterctl reads ------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_outputs_per_phase(plans, kind: str) -> None:
    plan = plans[kind]
    build, _ = _exports(plan, ImageSelection(profile=_profile(kind), hash=DIGEST, phase="build"))
    assert set(build["nodes"]) == {BUILDER}
    assert build["hostKeys"] == {BUILDER: KEY.public}  # pinned: the key clusterctl generated
    assert build["sshUser"] == plan.cloud.ssh_user
    assert build["imageSource"]
    assert "image" not in build
    capture, _ = _exports(plan, ImageSelection(profile=_profile(kind), hash=DIGEST, phase="capture"))
    done, _ = _exports(
        plan, ImageSelection(profile=_profile(kind), hash=DIGEST, phase="done", source=capture["imageSource"])
    )
    assert "nodes" not in done
    assert done["image"] == capture["image"]
    assert done["image"] == {
        "ref": done["image"]["ref"],
        "name": f"clusterctl-ubuntu-2404-{SHORT}",
        "hash": DIGEST,
        "profile": _profile(kind),
        "os": "ubuntu-24.04",
        "target": kind,
    }
    assert done["image"]["ref"]


def test_selection_from_config(monkeypatch: pytest.MonkeyPatch) -> None:
    values = {PROFILE_KEY: "p5", HASH_KEY: "sha256:" + DIGEST, PHASE_KEY: "capture"}
    monkeypatch.setattr(pulumi.Config, "get", lambda self, key, *a, **k: values.get(key))
    selection = load_selection()
    assert (selection.profile, selection.digest, selection.phase, selection.source) == ("p5", DIGEST, "capture", None)
    values[PHASE_KEY] = "bake"
    with pytest.raises(pulumi.RunError, match="must be one of build, capture, done"):
        load_selection()
    del values[HASH_KEY]
    with pytest.raises(pulumi.RunError, match="imageHash"):
        load_selection()


# --- the cluster stacks boot the locked image per profile ----------------------------------------


CLUSTERS: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    "aws": (AwsCluster, AwsClusterArgs),
    "gcp": (GcpCluster, GcpClusterArgs),
    "azure": (AzureCluster, AzureClusterArgs),
}
LOCKED = {
    "aws": "ami-0123456789abcdef0",
    "gcp": "https://www.googleapis.com/compute/v1/projects/acme-ml/global/images/clusterctl-ubuntu-2404-0123456789ab",
    "azure": (
        "/subscriptions/s/resourceGroups/clusterctl-image-ubuntu-2404-0123456789ab/providers/Microsoft.Compute/"
        "galleries/clusterctl_images/images/clusterctl-ubuntu-2404-0123456789ab/versions/1.0.0"
    ),
}


def _booted_images(kind: str, created: RecordingMocks) -> dict[str, Any]:
    """Node name (as registered) -> the image it boots."""
    out: dict[str, Any] = {}
    if kind == "aws":
        for template in created.of_type("aws:ec2/launchTemplate:LaunchTemplate"):
            out[template.name] = template.inputs["imageId"]
        for instance in created.of_type(AWS_INSTANCE):
            if "launchTemplate" not in instance.inputs:
                out[instance.name] = instance.inputs["ami"]
    elif kind == "gcp":
        for instance in created.of_type(GCP_INSTANCE):
            out[instance.name] = instance.inputs["bootDisk"]["initializeParams"]["image"]
    else:
        for vm in created.of_type(AZURE_VM):
            out[vm.name] = vm.inputs["storageProfile"]["imageReference"]
    return out


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_cluster_stack_boots_the_locked_image_of_each_profile(plans, kind: str) -> None:
    profile = _profile(kind)
    plan = apply_locked_images(plans[kind], {profile: LOCKED[kind]})
    component, args = CLUSTERS[kind]
    created = run(lambda: component(plan.cluster.name, args(plan=plan, ssh_public_key="k")))
    booted = _booted_images(kind, created)
    locked_nodes = [h for g in plan.cloud.groups if g.hardware == profile for h in g.hosts]
    other_nodes = [h for g in plan.cloud.groups if g.hardware != profile for h in g.hosts]
    assert locked_nodes
    assert other_nodes

    def image_of(host: str) -> Any:
        (value,) = [v for name, v in booted.items() if name.endswith(f"-{host}") or name.endswith(f"-{host}-lt")]
        return value

    expected_locked = {"id": LOCKED[kind]} if kind == "azure" else LOCKED[kind]
    base = plan.cloud.image
    for host in locked_nodes:
        assert image_of(host) == expected_locked, host
    for host in other_nodes:  # the other profile has no image in the lock: the OS image
        assert image_of(host) != expected_locked, host
        if kind != "azure":
            assert image_of(host) == base, host


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_cluster_stack_exports_the_image_each_node_was_made_from(plans, kind: str) -> None:
    """clusterctl runs only the configure stage on a node the cloud says was made from the locked image."""
    from clusterctl_aws import deploy as aws_deploy  # isort: skip
    from clusterctl_azure import deploy as azure_deploy  # isort: skip
    from clusterctl_gcp import deploy as gcp_deploy  # isort: skip

    profile = _profile(kind)
    plan = apply_locked_images(plans[kind], {profile: LOCKED[kind]})
    deploy_cluster = {"aws": aws_deploy, "gcp": gcp_deploy, "azure": azure_deploy}[kind]
    exported: dict[str, Any] = {}
    resolved: dict[str, Any] = {}

    def program() -> Any:
        original = pulumi.export
        try:
            pulumi.export = lambda key, value: exported.__setitem__(key, value)  # type: ignore[assignment]
            deploy_cluster(StackInputs(plan=plan, ssh_public_key="k"))
        finally:
            pulumi.export = original
        return pulumi.Output.from_input(exported["nodeImages"]).apply(resolved.update)

    run(program, ImageMocks())
    hardware = {n.hostname: n.hardware for n in plan.nodes if not n.burst}
    assert set(resolved) == set(hardware)
    base = plan.cloud.image if kind != "azure" else "Canonical:ubuntu-24_04-lts:server:latest"
    for host, hw in hardware.items():
        assert resolved[host] == (LOCKED[kind] if hw == profile else base), host
