"""The bare-metal target: the local image, made bootable, as a root filesystem archive for the PXE server.

:meth:`BaremetalImageTarget.build`:

1. the install stage runs into a Docker image exactly as for the local target
   (:class:`clusterctl.image.local.LocalImageTarget`: same builder, same cleanup);
2. a container of that image gets what a machine needs and a container does not: a kernel,
   initramfs-tools with clusterctl's ``boot=clusterctl`` script, hook and settings
   (templates/pxe/image/), GRUB for EFI and BIOS, the disk tools the installer uses, an SSH
   server, systemd-networkd (DHCP) and systemd-resolved; with DKMS in the image, the kernel
   headers too, so its modules are built for the image's kernel;
3. ``docker export`` of that container goes through :func:`clusterctl.image.rootfs.write_archive`
   (cleaned like a sealed cloud builder, ``/etc/fstab`` written) into
   ``<build>/pxe/http/images/clusterctl-<os>-<hash12>.tar.zst`` with its ``.sha256``; its kernel
   and initramfs go to ``pxe/http/images/<name>/`` (iPXE) and ``pxe/tftp/images/<name>/`` (GRUB);
4. :func:`clusterctl.image.rootfs.check_archive` must find nothing wrong with it.

The lock's entry: target ``baremetal``, ``ref`` ``sha256:<archive digest>``, ``tag`` the archive's
file name. With it, :func:`with_archives` gives the plan ``baremetal.images`` and the render writes
each machine's PXE entries for it (render/pxe_image.py).

Why a Docker image first: the install stage, its cleanup and the package list are the local
target's, byte for byte; an archive only adds what booting needs, in a layer of its own.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from clusterctl.bounded import json_document
from clusterctl.environ import Env
from clusterctl.image.build import BuildJob, FoundImage, ImageBuildError, InstallRunner
from clusterctl.image.drift import DPKG_QUERY, PackageListError, parse_packages
from clusterctl.image.hash import ImageHash, host_arch
from clusterctl.image.local import LocalImageTarget
from clusterctl.image.lock import LockedImage
from clusterctl.image.rootfs import Archive, RootfsError, archive_suffix, check_archive, read_checksum, write_archive
from clusterctl.paths import templates_dir
from clusterctl.plan.models import BaremetalImagePlan, Plan
from clusterctl.render.builddir import BuildDirError, write_run_file
from clusterctl.run.docker import DockerError, docker
from clusterctl.run.events import EventBus
from clusterctl.run.providers.local import DEFAULT_IMAGE

NAME = "baremetal"
BASE_IMAGE_ENV = Env.BASE_IMAGE
PHASE = "image"
IMAGES = "pxe/http/images"
TFTP_IMAGES = "pxe/tftp/images"
MANIFEST = "manifest.json"
KERNEL, INITRD = "vmlinuz", "initrd.img"
# What booting needs, per OS family (Debian and Ubuntu name them alike except the kernel).
KERNEL_PACKAGES = {
    "debian": ("linux-image-amd64", "linux-headers-amd64"),
    "ubuntu": ("linux-image-generic", "linux-headers-generic"),
}
BOOT_PACKAGES = (
    "initramfs-tools",
    "busybox",
    "zstd",
    "tar",
    "gzip",
    "fdisk",
    "dosfstools",
    "e2fsprogs",
    "udev",
    "kmod",
    "grub2-common",
    "grub-efi-amd64-bin",
    "grub-pc-bin",
    "efibootmgr",
    "openssh-server",
    "systemd-resolved",
)
# Where the files of templates/pxe/image go in the image.
INITRAMFS_FILES = {
    "initramfs-boot.sh": ("/etc/initramfs-tools/scripts/clusterctl", "0644"),
    "initramfs-hook.sh": ("/etc/initramfs-tools/hooks/clusterctl", "0755"),
    "initramfs.conf": ("/etc/initramfs-tools/conf.d/clusterctl.conf", "0644"),
}
# What the boot script runs in the initramfs that busybox also has (busybox's would not do).
INITRAMFS_TOOLS = ("tar", "gzip", "zstd", "sfdisk", "mke2fs", "mkfs.fat", "blkid")
# And the modules it loads for an installed UEFI machine (its EFI system partition, GRUB's boot entry).
INITRAMFS_MODULES = ("vfat", "efivarfs")
NETWORK_UNIT = "/etc/systemd/network/20-clusterctl-dhcp.network"
NETWORK = "[Match]\nType=ether\n\n[Network]\nDHCP=yes\n"
_APT_TIMEOUT_S = 1800
_EXPORT_TIMEOUT_S = 3600


def boot_layer_digest(os: str) -> str:
    """The first 12 hex digits of a sha256 over what the bootable layer adds for ``os``.

    Why: the content hash covers the roles' install stage and the base image, not the boot layer;
    a changed initramfs script or boot package list must make a new archive, so the target's
    ``base`` (an input of the hash) names this digest too.
    """
    digest = hashlib.sha256()
    for source in sorted(INITRAMFS_FILES):
        digest.update(source.encode() + b"\0" + (templates_dir() / "pxe" / "image" / source).read_bytes() + b"\0")
    digest.update(boot_layer_script(os, with_headers=False).encode())
    digest.update(json.dumps(INITRAMFS_FILES, sort_keys=True).encode())
    return digest.hexdigest()[:12]


def default_base() -> str:
    """The base image bare-metal images start from: ``CLUSTERCTL_BASE_IMAGE``, else the local provider's."""
    return os.environ.get(BASE_IMAGE_ENV) or DEFAULT_IMAGE


class BootLayerError(ImageBuildError):
    """The bootable layer could not be added; the message has apt's or update-initramfs's words."""


def image_name(os: str, image: ImageHash | str) -> str:
    """``clusterctl-<os>-<hash12>`` (the same as the cloud images')."""
    short = image.short if isinstance(image, ImageHash) else image[:12]
    return f"clusterctl-{os.replace('.', '')}-{short}"


def os_family(os: str) -> str:
    """``debian`` or ``ubuntu`` from ``debian-12`` / ``ubuntu-24.04``."""
    family = os.split("-", 1)[0]
    if family not in KERNEL_PACKAGES:
        raise ImageBuildError(f"bare-metal images are made for Debian and Ubuntu, not {os}")
    return family


def boot_layer_script(os: str, with_headers: bool) -> str:
    """The shell run in the image's container to make it bootable (see the module docstring)."""
    kernel, headers = KERNEL_PACKAGES[os_family(os)]
    packages = [kernel, *([headers] if with_headers else []), *BOOT_PACKAGES]
    network = shlex.quote(NETWORK)
    folder = NETWORK_UNIT.rsplit("/", 1)[0]
    return (
        "set -eu\n"
        "export DEBIAN_FRONTEND=noninteractive\n"
        "apt-get update -qq\n"
        f"apt-get install -y -qq --no-install-recommends {' '.join(packages)}\n"
        "update-initramfs -u -k all\n"
        "for initrd in /boot/initrd.img-*; do\n"
        "  lsinitramfs \"$initrd\" | grep -qx 'scripts/clusterctl' ||\n"
        '    { echo "clusterctl: $initrd lacks scripts/clusterctl" >&2; exit 1; }\n'
        # The boot script needs the real programs, not busybox's applets of the same name.
        '  unpacked="$(mktemp -d)"\n'
        '  unmkinitramfs "$initrd" "$unpacked"\n'
        '  root="$unpacked"; [ ! -d "$unpacked/main" ] || root="$unpacked/main"\n'
        f"  for tool in {' '.join(INITRAMFS_TOOLS)}; do\n"
        '    real="$(readlink -f "$(command -v "$tool")")"\n'
        '    if [ ! -f "$root$real" ] || cmp -s "$root$real" "$root/usr/bin/busybox"; then\n'
        '      echo "clusterctl: $initrd has no $tool of its own (busybox\'s or none)" >&2; exit 1\n'
        "    fi\n"
        "  done\n"
        f"  for module in {' '.join(INITRAMFS_MODULES)}; do\n"
        '    find "$root/usr/lib/modules" -name "$module.ko*" | grep -q . ||\n'
        '      { echo "clusterctl: $initrd lacks the $module module" >&2; exit 1; }\n'
        "  done\n"
        '  rm -rf "$unpacked"\n'
        "done\n"
        f"mkdir -p {folder}\n"
        f"printf '%s' {network} > {NETWORK_UNIT}\n"
        "systemctl enable systemd-networkd.service systemd-resolved.service ssh.service\n"
        "apt-get clean\n"
        "rm -rf /var/lib/apt/lists/* /var/lib/apt/periodic/update-success-stamp\n"
        "touch -d @0 /var/lib/apt/lists\n"
    )


@dataclass(frozen=True)
class ArchiveRecord:
    """The manifest beside an archive (``pxe/http/images/<name>/manifest.json``)."""

    hash: str
    archive: str
    sha256: str
    kernel_version: str
    packages: dict[str, str]


def archive_plan(plan: Plan, locked: LockedImage, default: str = "install") -> BaremetalImagePlan:
    """The render's view of a locked bare-metal archive.

    Raises:
        ImageBuildError: the entry is not a bare-metal archive (target, ``sha256:`` reference, file name).
    """
    digest = locked.ref.removeprefix("sha256:")
    if locked.target != NAME or not locked.ref.startswith("sha256:") or len(digest) != 64 or not locked.tag:
        raise ImageBuildError(
            f"the locked image of {locked.profile} is not a bare-metal archive (target {locked.target}, ref "
            f"{locked.ref[:80]!a}); run `clusterctl image build` for this spec"
        )
    return BaremetalImagePlan(
        name=image_name(plan.cluster.os, locked.hash),
        hash=locked.hash,
        archive=locked.tag,
        sha256=digest,
        default="stateless" if default == "stateless" else "install",
    )


def with_archives(plan: Plan, images: Mapping[str, LockedImage], default: str = "install") -> Plan:
    """The plan whose node groups boot their hardware profile's locked archive (``baremetal.images``).

    ``images``: hardware profile -> its locked image. The render then writes each machine of those
    groups PXE entries for the archive (render/pxe_image.py); the other groups keep the installer.
    Each group boots it as the spec's ``provider.image`` says (``baremetal.image_boot``), else
    ``default``.
    """
    if plan.baremetal is None or not images:
        return plan
    hardware = {g.name: g.hardware for g in plan.groups}
    modes = plan.baremetal.image_boot
    chosen = {
        group.group: archive_plan(plan, images[hardware[group.group]], modes.get(group.group, default))
        for group in plan.baremetal.autoinstall
        if hardware.get(group.group) in images
    }
    return plan.model_copy(update={"baremetal": plan.baremetal.model_copy(update={"images": chosen})})


class BaremetalImageTarget:
    """Root filesystem archives for bare-metal machines (see the module docstring).

    Args:
        plan: the plan (its OS names the image's).
        build_dir: the cluster's build directory; the PXE server serves its ``pxe/``.
        base: the Docker image the builder starts from; its OS must be the spec's.
    """

    name = NAME

    def __init__(self, plan: Plan, build_dir: Path, base: str = DEFAULT_IMAGE) -> None:
        self.plan = plan
        self.build_dir = build_dir
        self.base_image = base
        # What the content hash reads as the base: the Docker image and the boot layer's digest.
        self.base = f"{base} boot:{boot_layer_digest(plan.cluster.os)}"
        self.local = LocalImageTarget(base)

    def arch(self) -> str:
        """This machine's architecture: the image is built in its Docker engine."""
        return host_arch()

    def folder(self, name: str) -> Path:
        """``<build>/pxe/http/images/<name>``: the kernel, initramfs and manifest of image ``name``."""
        return self.build_dir / IMAGES / name

    def read_record(self, name: str) -> ArchiveRecord | None:
        """The manifest of image ``name`` when it and its archive are intact."""
        try:
            data = json_document((self.folder(name) / MANIFEST).read_text(), "archive manifest")
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or not isinstance(data.get("packages"), dict):
            return None
        archive = self.build_dir / IMAGES / str(data.get("archive", ""))
        if not archive.is_file() or read_checksum(archive) != data.get("sha256"):
            return None
        return ArchiveRecord(
            hash=str(data.get("hash", "")),
            archive=archive.name,
            sha256=str(data["sha256"]),
            kernel_version=str(data.get("kernel_version", "")),
            packages={str(k): str(v) for k, v in data["packages"].items()},
        )

    def find(self, image: ImageHash, os: str) -> FoundImage | None:
        """The archive of this content hash when the build directory has it, intact."""
        record = self.read_record(image_name(os, image))
        if record is None or record.hash != image.hash:
            return None
        return FoundImage(ref=f"sha256:{record.sha256}", tag=record.archive, packages=record.packages)

    def present(self, locked: LockedImage) -> bool:
        """Whether the locked archive is in the build directory with the locked checksum."""
        archive = self.build_dir / IMAGES / locked.tag
        return bool(locked.tag) and read_checksum(archive) == locked.ref.removeprefix("sha256:")

    def packages(self, ref: str) -> dict[str, str]:
        """The packages of the archive with reference ``ref`` (from its manifest)."""
        folder = self.build_dir / IMAGES
        for manifest in sorted(folder.glob(f"*/{MANIFEST}")) if folder.is_dir() else []:
            record = self.read_record(manifest.parent.name)
            if record is not None and f"sha256:{record.sha256}" == ref:
                return record.packages
        raise ImageBuildError(f"no archive with {ref} in {folder}; run `clusterctl image build` again")

    def base_os(self) -> str:
        """The OS of the base image (``debian-12``, ``ubuntu-24.04``), from its /etc/os-release."""
        result = docker("run", "--rm", "--network", "none", "--entrypoint", "cat", self.base_image, "/etc/os-release")
        fields = dict(
            line.split("=", 1) for line in result.stdout.splitlines() if "=" in line and not line.startswith("#")
        )
        return f"{fields.get('ID', '').strip(chr(34))}-{fields.get('VERSION_ID', '').strip(chr(34))}"

    def build(self, job: BuildJob, install: InstallRunner, events: EventBus) -> FoundImage:
        """Local image, bootable layer, archive, checks (see the module docstring).

        Raises:
            ImageBuildError: the base image is of another OS, a step failed, or the archive would not boot.
        """
        os = job.plan.cluster.os
        os_family(os)
        have = self.base_os()
        if have != os:
            raise ImageBuildError(
                f"the spec's nodes run {os} but the base image {self.base_image} is {have or 'unknown'}; build a base "
                f"image of {os} (debootstrap, as scripts/docker-bootstrap.sh does for Debian) and give it with "
                "CLUSTERCTL_BASE_IMAGE"
            )
        baked = self.local.build(job, install, events)
        name = image_name(os, job.image)
        container = f"clusterctl-boot-{job.image.short}"
        docker("rm", "-f", "-v", container, check=False)
        events.host(PHASE, job.builder.profile, "running", f"adding kernel and boot tools to {baked.tag}")
        docker("run", "-d", "--name", container, "--entrypoint", "sleep", baked.tag, "infinity")
        try:
            packages = self._boot_layer(container, os)
            docker("kill", container, check=False)
            archive = self._export(container, name, job, events, packages)
        finally:
            docker("rm", "-f", "-v", container, check=False)
        return FoundImage(ref=f"sha256:{archive.sha256}", tag=archive.path.name, packages=packages)

    def _boot_layer(self, container: str, os: str) -> dict[str, str]:
        for source, (target, mode) in INITRAMFS_FILES.items():
            docker("exec", container, "mkdir", "-p", target.rsplit("/", 1)[0])
            docker("cp", str(templates_dir() / "pxe" / "image" / source), f"{container}:{target}")
            docker("exec", container, "chmod", mode, target)
        dkms = docker("exec", container, "sh", "-c", "command -v dkms", check=False).returncode == 0
        try:
            docker("exec", container, "bash", "-c", boot_layer_script(os, dkms), timeout=_APT_TIMEOUT_S)
        except DockerError as exc:
            raise BootLayerError(f"the bootable layer could not be added: {exc}") from None
        listed = docker("exec", container, "bash", "-c", DPKG_QUERY, timeout=120).stdout
        try:
            return parse_packages(listed)
        except PackageListError as exc:
            raise ImageBuildError(f"the package list of the bootable image could not be read: {exc}") from None

    def _export(self, container: str, name: str, job: BuildJob, events: EventBus, packages: dict[str, str]) -> Archive:
        folder = self.folder(name)
        # Through the build-dir writer: the folders are clusterctl's, none is a link.
        try:
            write_run_file(self.build_dir, f"{IMAGES}/{name}/.building", b"", 0o644)
        except BuildDirError as exc:
            raise ImageBuildError(str(exc)) from None
        path = self.build_dir / IMAGES / f"{name}{archive_suffix()}"
        events.host(PHASE, job.builder.profile, "running", f"exporting the root filesystem to {path}")
        proc = subprocess.Popen(["docker", "export", container], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdout is not None
        try:
            archive = write_archive(proc.stdout, path, boot_dir=folder / ".boot")
        except RootfsError as exc:
            proc.kill()
            raise ImageBuildError(f"the root filesystem of {name} could not be written: {exc}") from None
        finally:
            proc.stdout.close()
            _, err = proc.communicate(timeout=_EXPORT_TIMEOUT_S)
        if proc.returncode != 0:
            raise ImageBuildError(f"docker export {container} failed: {err.decode(errors='replace').strip()[:300]}")
        report = check_archive(path)
        if not report.ok:
            raise ImageBuildError(f"{path.name} would not boot: " + "; ".join(report.problems))
        if archive.kernel is None or archive.initrd is None:
            raise ImageBuildError(f"{path.name}: no kernel and initramfs to copy out of /boot")
        for where in (f"{IMAGES}/{name}", f"{TFTP_IMAGES}/{name}"):
            write_run_file(self.build_dir, f"{where}/{KERNEL}", archive.kernel.read_bytes())
            write_run_file(self.build_dir, f"{where}/{INITRD}", archive.initrd.read_bytes())
        record = {
            "archive": path.name,
            "hash": job.image.hash,
            "kernel_version": archive.kernel_version,
            "packages": dict(sorted(packages.items())),
            "profile": job.builder.profile,
            "sha256": archive.sha256,
        }
        write_run_file(self.build_dir, f"{IMAGES}/{name}/{MANIFEST}", (json.dumps(record, indent=2) + "\n").encode())
        shutil.rmtree(folder / ".boot", ignore_errors=True)
        (folder / ".building").unlink(missing_ok=True)
        return archive
