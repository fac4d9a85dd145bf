"""The bare-metal image target on real Docker: install stage, bootable layer, archive, PXE entries.

Rendered and checked, not booted. The spec is Debian (the only base image this machine can make:
local/debian:bookworm), so rule CLD009 (bare metal is installed by Ubuntu's autoinstall) is
skipped: an archive needs no installer. The roles tree is the small one of test_image_build.py.
What is checked: the lock's entry (target baremetal, ``sha256:`` of the archive, its packages),
the archive's checksum file, what a bootable root needs (``/sbin/init`` -> systemd, clusterctl's
``/etc/fstab``, an empty machine id, no SSH host key, a kernel and its initramfs), the initramfs
holding the ``boot=clusterctl`` script, the kernel and initramfs beside the archive for iPXE and
GRUB, a second build reusing it, and the PXE entries rendered from the lock pointing at it.
"""

from __future__ import annotations

import gzip
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterctl.image.baremetal import BaremetalImageTarget, with_archives
from clusterctl.image.build import build_images
from clusterctl.image.lock import read_lock
from clusterctl.image.rootfs import check_archive, read_checksum, sha256_file
from clusterctl.pipeline import load_and_validate
from clusterctl.render.pxe_image import mac_file
from clusterctl.render.tree import render_files
from clusterctl.run.events import EventBus
from clusterctl.run.state import StateDir
from tests.docker_helpers import BASE_IMAGE, docker
from tests.integration.test_image_build import SITE, TINY_CONFIGURE, TINY_INSTALL, TINY_MAIN

pytestmark = [pytest.mark.integration, pytest.mark.docker, pytest.mark.slow]

SPEC = """\
version: 1
name: bmimg
provider: {kind: baremetal, machines: machines.csv}
network: {management_cidr: 10.44.0.0/24, domain: bmimg.internal}
os: debian-12
versions: {nvidia_driver: "570.133.20", cuda: "12.8", nccl: "2.26.2", slurm: "22.05", dcgm: "3.3.9",
           enroot: "3.5.0", pyxis: "0.20.0"}
container_runtime: enroot
hardware:
  small:
    cpus: {sockets: 1, cores_per_socket: 1, threads_per_core: 1}
    memory_gib: 1
nodes:
  - {group: ctl, role: controller, hardware: small, count: 1}
  - {group: cpu, role: compute, hardware: small, count: 1}
fabric: {kind: ethernet, speed_gbps: 100}
slurm:
  partitions:
    - {name: cpu, groups: [cpu], default: true}
  accounting: false
  topology: none
monitoring: {prometheus: false, node_exporter: false, dcgm_exporter: false}
"""
MACHINES = "hostname,bmc,mac,rack\nctl001,10.10.0.11,3c:ec:ef:20:00:01,r00\ncpu001,10.10.0.12,3c:ec:ef:20:00:02,r00\n"


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, docker_ready: None) -> Iterator[Path]:
    roles = tmp_path / "roles"
    for rel, text in {
        "site.yml": SITE,
        "tiny/tasks/main.yml": TINY_MAIN,
        "tiny/tasks/install.yml": TINY_INSTALL,
        "tiny/tasks/configure.yml": TINY_CONFIGURE,
    }.items():
        (roles / rel).parent.mkdir(parents=True, exist_ok=True)
        (roles / rel).write_text(text)
    (tmp_path / "spec.yaml").write_text(SPEC)
    (tmp_path / "machines.csv").write_text(MACHINES)
    monkeypatch.setattr("clusterctl.image.hash.roles_dir", lambda: roles)
    monkeypatch.setattr("clusterctl.image.build.roles_dir", lambda: roles)
    monkeypatch.chdir(tmp_path)
    try:
        yield tmp_path
    finally:
        lock = read_lock(tmp_path / "clusterctl.lock") if (tmp_path / "clusterctl.lock").exists() else None
        for image in lock.images.values() if lock else []:
            docker("image", "rm", "-f", f"clusterctl/node:debian-12-{image.hash[:12]}", check=False)


def _initrd_files(initrd: Path) -> str:
    """The file list of an initramfs-tools initramfs (a cpio, zstd- or gzip-compressed, maybe after microcode)."""
    if shutil.which("cpio") is None:
        return ""
    data = initrd.read_bytes()
    for magic, command in ((b"\x28\xb5\x2f\xfd", ["zstd", "-dc"]), (b"\x1f\x8b", ["gzip", "-dc"])):
        at = data.find(magic)
        if at >= 0 and shutil.which(command[0]):
            unpacked = subprocess.run(command, input=data[at:], capture_output=True, check=False).stdout
            return subprocess.run(["cpio", "-t"], input=unpacked, capture_output=True, check=False).stdout.decode()
    return gzip.decompress(data).decode(errors="replace") if data[:2] == b"\x1f\x8b" else ""


def test_baremetal_image_archive_and_pxe_entries(workdir: Path) -> None:
    validated = load_and_validate(workdir / "spec.yaml", skip=["CLD009"])
    plan = validated.plan
    build = workdir / "build"
    target = BaremetalImageTarget(plan, build / plan.cluster.name, BASE_IMAGE)
    state = StateDir(workdir / "state", plan.cluster.name)
    report = build_images(
        validated, target, lock_file=workdir / "clusterctl.lock", state=state, events=EventBus(), build_root=build
    )
    assert [r.action for r in report.results] == ["built"]
    lock = read_lock(workdir / "clusterctl.lock")
    assert lock is not None
    entry = lock.images["small"]
    assert entry.target == "baremetal"
    name = f"clusterctl-debian-12-{entry.hash[:12]}"
    images = build / plan.cluster.name / "pxe" / "http" / "images"
    archive = images / entry.tag
    assert entry.tag.startswith(name)
    assert entry.tag.endswith((".tar.zst", ".tar.gz"))

    # The archive, its checksum file, and what a machine needs to boot it.
    assert entry.ref == f"sha256:{sha256_file(archive)}"
    assert read_checksum(archive) == entry.ref.removeprefix("sha256:")
    report_ = check_archive(archive)
    assert report_.ok, report_.problems
    assert report_.init is not None
    assert report_.init.endswith("lib/systemd/systemd")
    # The lock lists what the archive holds: the role's package and the boot layer's.
    for package in ("hello", "systemd", "openssh-server", "initramfs-tools", "busybox", "zstd"):
        assert package in entry.packages, package
    assert any(p.startswith("linux-image-") for p in entry.packages)

    # Kernel and initramfs beside it, for iPXE (HTTP) and GRUB (TFTP); the initramfs can boot=clusterctl.
    tftp = build / plan.cluster.name / "pxe" / "tftp" / "images" / name
    for folder in (images / name, tftp):
        assert (folder / "vmlinuz").stat().st_size > 1_000_000
        assert (folder / "initrd.img").stat().st_size > 1_000_000
    listing = _initrd_files(tftp / "initrd.img")
    if listing:
        assert "scripts/clusterctl" in listing.split()
        assert any(line.endswith("bin/zstd") for line in listing.split())

    # The same spec again: the archive is found, nothing is built.
    again = build_images(
        validated, target, lock_file=workdir / "clusterctl.lock", state=state, events=EventBus(), build_root=build
    )
    assert [r.action for r in again.results] == ["reused"]

    # The PXE entries `up` renders from the lock point at the archive and its checksum.
    files = {f.path: f.text for f in render_files(with_archives(plan, lock.images))}
    for machine in plan.baremetal.machines:
        grub = files[f"pxe/tftp/grub/grub.cfg-{mac_file(machine.mac)}"]
        assert f"clusterctl.url={plan.baremetal.http_url}/images/{entry.tag}" in grub
        assert f"clusterctl.sha256={entry.ref.removeprefix('sha256:')}" in grub
        assert f"linux /images/{name}/vmlinuz" in grub
        if shutil.which("grub-script-check"):
            path = workdir / "grub.cfg"
            path.write_text(grub)
            checked = subprocess.run(["grub-script-check", str(path)], capture_output=True, text=True, check=False)
            assert checked.returncode == 0, checked.stderr
    assert not docker("ps", "-aq", "--filter", f"name=clusterctl-boot-{entry.hash[:12]}").stdout.strip()
