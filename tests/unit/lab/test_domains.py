"""The lab's machines as libvirt domains follow the spec: machines.csv's MAC and firmware, the
group's install or stateless mode, the profile's memory, and the consoles where `up` reads them."""

from __future__ import annotations

import shutil
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from lab.config import KERNEL_RESERVE_MIB, SEABIOS, load_lab
from lab.domains import domain_xml

from tests.conftest import EXAMPLES
from tests.integration.redfish_servers import make_tls

SPEC = EXAMPLES / "baremetal-lab.yaml"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory):
    """The example's lab, with a stand-in for the CA `make lab` writes beside the spec."""
    folder = tmp_path_factory.mktemp("lab")
    for name in ("baremetal-lab.yaml", "baremetal-lab-machines.csv"):
        shutil.copy(EXAMPLES / name, folder / name)
    (folder / "tls").mkdir()
    (folder / "baremetal-lab-bmc-ca.pem").write_text(make_tls(folder / "tls", "lab").ca_pem)
    return load_lab(folder / SPEC.name, build_dir=folder / "build" / "baremetal-lab", state_root=folder / "state")


def _domain(lab, hostname: str, accel: str = "tcg") -> ET.Element:
    return ET.fromstring(domain_xml(lab, lab.machine(hostname), accel))


def test_each_machine_is_its_row_of_machines_csv(lab) -> None:
    assert [(m.hostname, m.domain, m.firmware, m.stateless) for m in lab.machines] == [
        ("ctl001", "clusterctl-lab-ctl001", "Legacy", False),
        ("disk001", "clusterctl-lab-disk001", "UEFI", False),
        ("ram001", "clusterctl-lab-ram001", "Legacy", True),
        ("ram002", "clusterctl-lab-ram002", "UEFI", True),
    ]
    assert lab.bmc_endpoint == ("10.231.0.1", 18443)
    assert (lab.bridge, lab.address, lab.prefix) == ("cclab0", "10.231.0.1", 24)
    for hostname in ("ctl001", "ram002"):
        domain = _domain(lab, hostname)
        assert domain.find("devices/interface/mac").get("address") == lab.machine(hostname).mac
        assert domain.find("devices/interface/source").get("bridge") == "cclab0"
        assert domain.find("vcpu").text == "1"
        assert int(domain.find("memory").text) == 2 * 1024 + KERNEL_RESERVE_MIB  # memory_gib: 2
        console = domain.find("devices/serial/source")
        assert console.get("path") == str(lab.console(hostname).resolve())
        assert console.get("append") == "on"


def test_uefi_machines_pxe_boot_from_ovmf_and_bios_machines_from_ipxe(lab) -> None:
    uefi, bios = _domain(lab, "disk001"), _domain(lab, "ctl001")
    assert uefi.find("os").get("firmware") == "efi"
    assert uefi.find("os/firmware/feature").attrib == {"enabled": "no", "name": "secure-boot"}
    assert uefi.find("devices/interface/rom").get("enabled") == "no"  # OVMF's own PXE client
    assert bios.find("os").get("firmware") is None
    assert bios.find("os/loader").text == SEABIOS
    assert bios.find("os/bios").get("useserial") == "yes"
    assert bios.find("devices/interface/rom") is None  # the NIC's iPXE ROM


def test_only_machines_that_install_the_image_have_a_disk_and_the_network_boots_first(lab) -> None:
    installed, stateless = _domain(lab, "disk001"), _domain(lab, "ram001")
    disk = installed.find("devices/disk")
    assert disk.find("source").get("file").endswith("/lab/disks/disk001.qcow2")
    assert disk.find("boot").get("order") == "2"
    assert installed.find("devices/interface/boot").get("order") == "1"
    assert stateless.find("devices/disk") is None


def test_the_accelerator_decides_the_domain_type(lab) -> None:
    assert _domain(lab, "ram001", "kvm").get("type") == "kvm"
    assert _domain(lab, "ram001", "tcg").get("type") == "qemu"


def test_the_lab_keeps_its_bmc_secrets_out_of_the_build_directory(lab) -> None:
    assert lab.secrets == lab.state_root / "baremetal-lab.lab"
    assert not lab.secrets.is_relative_to(lab.build_dir)
    assert Path(lab.work) == lab.build_dir / "lab"


def test_a_build_directory_other_users_cannot_reach_is_named() -> None:
    """dnsmasq and qemu run as their own users: a 0700 folder on the way is named before anything starts."""
    from lab.host import closed_folder

    with tempfile.TemporaryDirectory() as name:  # not pytest's tmp_path: its own parents are 0700
        root = Path(name)
        root.chmod(0o711)
        inner = root / "closed" / "build" / "pxe"
        inner.mkdir(parents=True)
        (root / "closed").chmod(0o700)
        assert closed_folder(inner) == root / "closed"
        (root / "closed").chmod(0o711)
        assert closed_folder(inner) is None
