"""The lab's machines as libvirt domains, powered off until their BMC powers them on.

Each domain has machines.csv's MAC on the management bridge, one vCPU, its profile's memory, a
serial console written to ``<build>/lab/<machine>.console.log`` (appended across boots), and:

- UEFI machines OVMF (libvirt picks it, secure boot off) and no iPXE option ROM, so the firmware's
  own PXE client boots shim and GRUB over TFTP, as a server's UEFI does; BIOS machines SeaBIOS
  (its output on the serial console too) and the NIC's iPXE ROM, which gets the iPXE entry;
- a virtual disk only where the machine installs the image; a stateless machine has none.

Network boot comes first; the emulated BMC changes the order (Redfish boot override) from then on.
KVM where this machine's KVM boots a Linux kernel, else qemu's TCG (:func:`accelerator`).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from lab.config import ACCEL_ENV, DISK_GIB, SEABIOS, Lab, LabError, LabMachine
from lab.host import run, virsh

KVM_PROBE_S = 15.0


def accelerator(kernel: Path) -> str:
    """``kvm`` when a Linux kernel boots under this KVM, else ``tcg``; ``CLUSTERCTL_LAB_ACCEL`` decides if set.

    Why a probe: /dev/kvm can exist and still not run a stock kernel (a nested KVM that only runs
    guests built for it: firmware starts, the kernel never prints a line). The probe boots the
    image's kernel without a disk for at most ``KVM_PROBE_S`` seconds and looks for its banner.
    """
    forced = os.environ.get(ACCEL_ENV, "").lower()
    if forced in ("kvm", "tcg"):
        return forced
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "tcg"
    argv = [
        "qemu-system-x86_64", "-accel", "kvm", "-m", "256", "-nographic", "-no-reboot", "-nodefaults",
        "-serial", "stdio", "-net", "none", "-kernel", str(kernel), "-append", "console=ttyS0 panic=-1",
    ]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    assert proc.stdout is not None
    os.set_blocking(proc.stdout.fileno(), False)
    seen = b""
    deadline = time.monotonic() + KVM_PROBE_S
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            with contextlib.suppress(BlockingIOError, TypeError):
                seen += proc.stdout.read() or b""
            if b"Linux version" in seen:
                return "kvm"
            time.sleep(0.2)
        return "kvm" if b"Linux version" in seen else "tcg"
    finally:
        proc.kill()
        proc.wait()


def disk_path(lab: Lab, machine: LabMachine) -> Path:
    """The virtual disk of a machine that installs the image."""
    return lab.work / "disks" / f"{machine.hostname}.qcow2"


def domain_xml(lab: Lab, machine: LabMachine, accel: str) -> str:
    """The libvirt domain of ``machine`` (see the module docstring)."""
    domain = ET.Element("domain", type="kvm" if accel == "kvm" else "qemu")
    ET.SubElement(domain, "name").text = machine.domain
    ET.SubElement(domain, "description").text = f"clusterctl bare-metal lab: {machine.hostname} of {lab.name}"
    ET.SubElement(domain, "memory", unit="MiB").text = str(machine.memory_mib)
    ET.SubElement(domain, "vcpu").text = "1"
    uefi = machine.firmware == "UEFI"
    os_element = ET.SubElement(domain, "os", firmware="efi") if uefi else ET.SubElement(domain, "os")
    ET.SubElement(os_element, "type", arch="x86_64", machine="q35").text = "hvm"
    if uefi:
        firmware = ET.SubElement(os_element, "firmware")
        ET.SubElement(firmware, "feature", enabled="no", name="secure-boot")
    else:
        # SeaBIOS named as the loader (libvirt has no firmware descriptor to pick it by): the BMC
        # emulator then reads the machine's boot mode as Legacy and keeps it.
        ET.SubElement(os_element, "loader", type="rom").text = SEABIOS
        ET.SubElement(os_element, "bios", useserial="yes")
    features = ET.SubElement(domain, "features")
    ET.SubElement(features, "acpi")
    ET.SubElement(features, "apic")
    ET.SubElement(domain, "on_poweroff").text = "destroy"
    ET.SubElement(domain, "on_reboot").text = "restart"
    ET.SubElement(domain, "on_crash").text = "destroy"
    devices = ET.SubElement(domain, "devices")
    if not machine.stateless:
        disk = ET.SubElement(devices, "disk", type="file", device="disk")
        ET.SubElement(disk, "driver", name="qemu", type="qcow2", cache="unsafe")
        ET.SubElement(disk, "source", file=str(disk_path(lab, machine).resolve()))
        ET.SubElement(disk, "target", dev="vda", bus="virtio")
        ET.SubElement(disk, "boot", order="2")
    nic = ET.SubElement(devices, "interface", type="bridge")
    ET.SubElement(nic, "source", bridge=lab.bridge)
    ET.SubElement(nic, "mac", address=machine.mac)
    ET.SubElement(nic, "model", type="virtio")
    if uefi:
        ET.SubElement(nic, "rom", enabled="no")
    ET.SubElement(nic, "boot", order="1")
    serial = ET.SubElement(devices, "serial", type="file")
    ET.SubElement(serial, "source", path=str(lab.console(machine.hostname).resolve()), append="on")
    ET.SubElement(serial, "target", port="0")
    rng = ET.SubElement(devices, "rng", model="virtio")
    ET.SubElement(rng, "backend", model="random").text = "/dev/urandom"
    ET.SubElement(devices, "memballoon", model="none")
    ET.indent(domain)
    return ET.tostring(domain, encoding="unicode") + "\n"


def defined() -> set[str]:
    """The names of every defined domain."""
    return set(virsh("list", "--all", "--name").stdout.split())


def define(lab: Lab, accel: str) -> None:
    """Define every machine's domain, powered off (a defined one is kept as the BMC left it)."""
    have = defined()
    folder = lab.work / "domains"
    folder.mkdir(parents=True, exist_ok=True)
    for machine in lab.machines:
        if machine.domain in have:
            continue
        if not machine.stateless:
            disk = disk_path(lab, machine)
            disk.parent.mkdir(parents=True, exist_ok=True)
            disk.unlink(missing_ok=True)
            run("qemu-img", "create", "-q", "-f", "qcow2", str(disk), f"{DISK_GIB}G")
        lab.console(machine.hostname).touch()
        xml = folder / f"{machine.hostname}.xml"
        xml.write_text(domain_xml(lab, machine, accel))
        virsh("define", str(xml))
    names = sorted({*(m.domain for m in lab.machines), *_listed(lab)})
    (lab.work / "domains.list").write_text("".join(f"{n}\n" for n in names))


def _listed(lab: Lab) -> list[str]:
    try:
        return (lab.work / "domains.list").read_text().split()
    except OSError:
        return []


def undefine(lab: Lab) -> list[str]:
    """Power off and remove every domain the lab defined (and their disks and UEFI variables)."""
    have = defined()
    gone = []
    for name in sorted({*(m.domain for m in lab.machines), *_listed(lab)}):
        if name not in have:
            continue
        virsh("destroy", name, check=False)
        virsh("undefine", name, "--nvram", check=False)
        if name in defined():
            raise LabError(f"libvirt kept the domain {name}; remove it with virsh undefine {name} --nvram")
        gone.append(name)
    for disk in (lab.work / "disks").glob("*.qcow2") if (lab.work / "disks").is_dir() else []:
        disk.unlink()
    (lab.work / "domains.list").unlink(missing_ok=True)
    return gone


def states(lab: Lab) -> dict[str, str]:
    """machine -> its domain's state (``running``, ``shut off``, ... or ``missing``)."""
    out = {}
    for machine in lab.machines:
        done = virsh("domstate", machine.domain, check=False)
        out[machine.hostname] = done.stdout.strip() if done.returncode == 0 else "missing"
    return out
