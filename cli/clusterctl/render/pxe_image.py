"""PXE entries that boot a baked node image (``plan.baremetal.images``) instead of the installer.

When the lock names a bare-metal image for a node group's hardware profile, each machine of that
group gets a GRUB file (UEFI firmware) or PXELINUX file (legacy BIOS; the machine's own
``boot_mode`` in machines.csv, else the spec's) and an iPXE script with two
entries, both booting the image's own kernel and initramfs with ``boot=clusterctl``
(templates/pxe/image/initramfs-boot.sh, baked into the initramfs): ``install`` writes the archive
to the group's ``install_disk`` and boots it, ``stateless`` runs it from a tmpfs at every boot.
The group's mode (the spec's ``provider.image``) says which one a machine boots unattended.
Machines of the other groups keep the installer's entries (render/cloud.py). Every kernel
argument comes from :func:`boot_args` and is escaped in the templates with ``bootarg``.

Build-directory layout added here (the files under ``images/`` are written by ``clusterctl image
build``, not rendered)::

    pxe/tftp/grub/grub.cfg-01-<mac>        the image menu (UEFI), instead of the installer's
    pxe/tftp/pxelinux.cfg/01-<mac>         the same for legacy BIOS
    pxe/http/ipxe/boot.ipxe                iPXE: chain the machine's script by MAC
    pxe/http/ipxe/01-<mac>.ipxe            iPXE: the image menu
    pxe/tftp/images/<name>/{vmlinuz,initrd.img}      kernel, initramfs (GRUB, PXELINUX over TFTP)
    pxe/http/images/<name>/{vmlinuz,initrd.img}      the same over HTTP (iPXE)
    pxe/http/images/<archive>, <archive>.sha256      the root filesystem archive
"""

from __future__ import annotations

from typing import Any

from jinja2 import Environment

from clusterctl.plan.models import AutoinstallGroupPlan, BaremetalImagePlan, BaremetalMachinePlan, BaremetalPlan

# (path, text, mode), as render/cloud.py's FileSpec.
FileSpec = tuple[str, str, int]
PUBLIC = 0o644
MODES = ("install", "stateless")


def archive_url(bm: BaremetalPlan, image: BaremetalImagePlan) -> str:
    """Where the PXE server serves the archive."""
    return f"{bm.http_url}/images/{image.archive}"


def boot_args(
    bm: BaremetalPlan, image: BaremetalImagePlan, machine: BaremetalMachinePlan, mode: str, install_disk: str | None
) -> list[str]:
    """The kernel command line (after the kernel) of one machine booting ``image`` in ``mode``.

    Read by the initramfs script (templates/pxe/image/initramfs-boot.sh), whose header lists them.
    """
    if mode not in MODES:
        raise ValueError(f"boot mode {mode!r} is not one of {', '.join(MODES)}")
    args = [
        "ip=dhcp",
        "boot=clusterctl",
        f"clusterctl.mode={mode}",
        f"clusterctl.url={archive_url(bm, image)}",
        f"clusterctl.sha256={image.sha256}",
        f"clusterctl.hostname={machine.hostname}",
        f"clusterctl.hostkey={bm.host_key_url}/clusterctl/host-key/{machine.hostname}",
        f"clusterctl.pubkey={bm.http_url}/autoinstall/clusterctl.pub",
        f"clusterctl.user={bm.ssh_user}",
    ]
    if mode == "install":
        args.append(f"clusterctl.firmware={'uefi' if machine.boot_mode == 'UEFI' else 'bios'}")
        if install_disk:
            args.append(f"clusterctl.disk={install_disk}")
    # The site's own (the serial console, say) last; an installed machine keeps them.
    return [*args, *bm.kernel_args]


def mac_file(mac: str) -> str:
    """``01-<mac with dashes>``: the per-machine file name GRUB, PXELINUX and our iPXE chain look for."""
    return "01-" + mac.lower().replace(":", "-")


def image_pxe_files(bm: BaremetalPlan, env: Environment, ctx: dict[str, Any]) -> tuple[list[FileSpec], set[str]]:
    """The image entries of every machine whose group has an image, and those machines' names."""
    if not bm.images:
        return [], set()
    disks: dict[str, str | None] = {}
    group: AutoinstallGroupPlan
    for group in bm.autoinstall:
        for host in group.hosts:
            disks[host] = group.install_disk
    out: list[FileSpec] = [
        ("pxe/http/ipxe/boot.ipxe", env.get_template("pxe/image/boot.ipxe.j2").render(**ctx, bm=bm), PUBLIC)
    ]
    imaged: set[str] = set()
    for machine in bm.machines:
        image = bm.images.get(machine.group)
        if image is None:
            continue
        imaged.add(machine.hostname)
        disk = disks.get(machine.hostname)
        values = {
            **ctx,
            "bm": bm,
            "image": image,
            "machine": machine,
            "install_disk": disk,
            "install_args": boot_args(bm, image, machine, "install", disk),
            "stateless_args": boot_args(bm, image, machine, "stateless", disk),
        }
        name = mac_file(machine.mac)
        if machine.boot_mode == "UEFI":
            text = env.get_template("pxe/image/grub-host.cfg.j2").render(**values)
            out.append((f"pxe/tftp/grub/grub.cfg-{name}", text, PUBLIC))
        else:
            text = env.get_template("pxe/image/pxelinux-host.cfg.j2").render(**values)
            out.append((f"pxe/tftp/pxelinux.cfg/{name}", text, PUBLIC))
        text = env.get_template("pxe/image/host.ipxe.j2").render(**values)
        out.append((f"pxe/http/ipxe/{name}.ipxe", text, PUBLIC))
    return out, imaged
