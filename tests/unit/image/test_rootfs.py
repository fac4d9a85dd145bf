"""The root filesystem archive of a bare-metal image: cleaned like a sealed builder, checksummed, bootable.

A container's tar stream is made here in memory with what ``docker export`` gives (usrmerge
links, a machine id, host keys, Docker's placeholders, a kernel and initramfs in /boot), then
written and read back as the PXE server would serve it.
"""

from __future__ import annotations

import hashlib
import io
import shutil
import tarfile
from pathlib import Path

import pytest

from clusterctl.image.rootfs import (
    FSTAB,
    RootfsError,
    check_archive,
    clean_member,
    dropped,
    read_checksum,
    resolve,
    write_archive,
)

KERNEL = b"\x7fKERNEL" * 100
INITRD = b"INITRD" * 100


def _add(
    tar: tarfile.TarFile, name: str, data: bytes = b"", *, mode: int = 0o644, link: str = "", kind: bytes = b""
) -> None:
    info = tarfile.TarInfo(name)
    info.mode = mode
    if link:
        info.type = kind or tarfile.SYMTYPE
        info.linkname = link
        tar.addfile(info)
    elif kind == tarfile.DIRTYPE:
        info.type = tarfile.DIRTYPE
        info.mode = 0o755
        tar.addfile(info)
    else:
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


def container_export(*, kernel: bool = True) -> bytes:
    """A small root filesystem as ``docker export`` streams it."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for folder in ("etc", "etc/ssh", "usr", "usr/lib", "usr/lib/systemd", "usr/sbin", "var", "var/log",
                       "var/log/apt", "var/lib", "var/lib/cloud", "var/lib/cloud/instance", "home", "home/ubuntu",
                       "home/ubuntu/.ssh", "root", "root/.ssh", "tmp", "boot", "var/lib/dbus"):  # fmt: skip
            _add(tar, folder, kind=tarfile.DIRTYPE)
        _add(tar, ".dockerenv")
        _add(tar, "sbin", link="usr/sbin")
        _add(tar, "usr/lib/systemd/systemd", b"\x7fELF systemd", mode=0o755)
        _add(tar, "usr/sbin/init", link="../lib/systemd/systemd")
        _add(tar, "etc/machine-id", b"0123456789abcdef0123456789abcdef\n", mode=0o444)
        _add(tar, "var/lib/dbus/machine-id", b"0123456789abcdef0123456789abcdef\n")
        _add(tar, "etc/hostname")  # Docker's placeholders: empty files
        _add(tar, "etc/hosts")
        _add(tar, "etc/resolv.conf")
        _add(tar, "etc/ssh/ssh_host_ed25519_key", b"PRIVATE", mode=0o600)
        _add(tar, "etc/ssh/ssh_host_ed25519_key.pub", b"ssh-ed25519 AAAA builder")
        _add(tar, "etc/ssh/sshd_config", b"# sshd\n")
        _add(tar, "home/ubuntu/.ssh/authorized_keys", b"ssh-ed25519 AAAA clusterctl@builder")
        _add(tar, "home/ubuntu/.profile", b"# profile\n")
        _add(tar, "root/.ssh/authorized_keys", b"ssh-ed25519 AAAA")
        _add(tar, "var/lib/cloud/instance/boot-finished", b"1")
        _add(tar, "var/log/apt/history.log", b"Start-Date: ...")
        _add(tar, "var/log/dpkg.log", b"...")
        _add(tar, "tmp/ansible-tmp", b"x")
        _add(tar, "usr/bin/ping", b"\x7fELF ping", mode=0o755)
        _add(tar, "usr/bin/ping.hard", link="usr/bin/ping", kind=tarfile.LNKTYPE)
        if kernel:
            _add(tar, "boot/vmlinuz-6.1.0-9-amd64", b"old kernel")
            _add(tar, "boot/initrd.img-6.1.0-9-amd64", b"old initrd")
            _add(tar, "boot/vmlinuz-6.1.0-18-amd64", KERNEL)
            _add(tar, "boot/initrd.img-6.1.0-18-amd64", INITRD)
    return buf.getvalue()


def _members(path: Path) -> dict[str, tarfile.TarInfo]:
    import subprocess

    data = path.read_bytes()
    if path.name.endswith(".zst"):
        data = subprocess.run(["zstd", "-dc"], input=data, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
        return {m.name: m for m in tar.getmembers()}


@pytest.fixture(params=[".tar.gz", ".tar.zst"])
def suffix(request: pytest.FixtureRequest) -> str:
    if request.param == ".tar.zst" and shutil.which("zstd") is None:
        pytest.skip("zstd is not installed")
    return request.param


def test_archive_checksum_file_matches(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"clusterctl-debian-12-0123456789ab{suffix}"
    archive = write_archive(io.BytesIO(container_export()), path, boot_dir=tmp_path / "boot")
    assert archive.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    # sha256sum's own format, so `sha256sum -c` on the PXE server checks it too.
    assert archive.checksum_file.read_text() == f"{archive.sha256}  {path.name}\n"
    assert read_checksum(path) == archive.sha256
    assert not list(tmp_path.glob(".*.tmp"))  # written to a temporary file, renamed into place


def test_archive_holds_what_a_machine_boots_and_nothing_of_the_builder(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"rootfs{suffix}"
    write_archive(io.BytesIO(container_export()), path, boot_dir=tmp_path / "boot")
    report = check_archive(path)
    assert report.ok, report.problems
    assert report.init == "usr/lib/systemd/systemd"  # /sbin -> usr/sbin, init -> ../lib/systemd/systemd
    members = _members(path)
    assert members["etc/machine-id"].size == 0
    assert members["etc/resolv.conf"].issym()
    assert members["etc/resolv.conf"].linkname == "../run/systemd/resolve/stub-resolv.conf"
    for gone in (
        ".dockerenv",
        "etc/ssh/ssh_host_ed25519_key",
        "etc/ssh/ssh_host_ed25519_key.pub",
        "var/lib/dbus/machine-id",
        "home/ubuntu/.ssh/authorized_keys",
        "root/.ssh",
        "root/.ssh/authorized_keys",
        "var/lib/cloud/instance",
        "var/log/dpkg.log",
        "var/log/apt/history.log",
        "tmp/ansible-tmp",
    ):
        assert gone not in members, gone
    for kept in ("var/log", "var/log/apt", "var/lib/cloud", "tmp", "home/ubuntu/.profile", "etc/ssh/sshd_config"):
        assert kept in members, kept
    assert members["usr/bin/ping.hard"].islnk()


def test_fstab_hosts_and_hostname_are_written(tmp_path: Path) -> None:
    path = tmp_path / "rootfs.tar.gz"
    write_archive(io.BytesIO(container_export()), path)
    with tarfile.open(path) as tar:
        assert tar.extractfile("etc/fstab").read().decode() == FSTAB
        assert b"localhost" in tar.extractfile("etc/hosts").read()
        assert tar.extractfile("etc/hostname").read() == b"localhost\n"


def test_newest_kernel_and_its_initramfs_are_copied_out(tmp_path: Path) -> None:
    archive = write_archive(io.BytesIO(container_export()), tmp_path / "r.tar.gz", boot_dir=tmp_path / "boot")
    assert archive.kernel_version == "6.1.0-18-amd64"  # 18 > 9: versions sort as numbers
    assert archive.kernel is not None
    assert archive.kernel.read_bytes() == KERNEL
    assert archive.initrd is not None
    assert archive.initrd.read_bytes() == INITRD


def test_check_names_what_would_not_boot(tmp_path: Path) -> None:
    """The check can fail: an export written without cleaning, and a root without a kernel."""
    raw = tmp_path / "raw.tar.gz"
    raw.write_bytes(__import__("gzip").compress(container_export()))
    problems = " | ".join(check_archive(raw).problems)
    assert "/etc/fstab is missing" in problems
    assert "/etc/machine-id must be an empty file" in problems
    assert "SSH host keys of the builder: /etc/ssh/ssh_host_ed25519_key, /etc/ssh/ssh_host_ed25519_key.pub" in problems
    assert "login keys of the builder" in problems
    assert "/.dockerenv" in problems
    no_kernel = tmp_path / "nokernel.tar.gz"
    write_archive(io.BytesIO(container_export(kernel=False)), no_kernel)
    assert check_archive(no_kernel).problems == ("no kernel in /boot (vmlinuz-*)",)
    assert check_archive(no_kernel, need_kernel=False).ok


def test_init_that_is_not_systemd_is_refused(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        _add(tar, "sbin", kind=tarfile.DIRTYPE)
        _add(tar, "sbin/init", b"#!/bin/sh\nexec /bin/sh\n", mode=0o755)
    path = tmp_path / "r.tar.gz"
    write_archive(io.BytesIO(buf.getvalue()), path)
    report = check_archive(path, need_kernel=False)
    assert report.problems == ("/sbin/init does not lead to systemd (it leads to sbin/init)",)


def test_resolve_follows_links_and_stops_at_loops() -> None:
    def member(name: str, link: str = "") -> tarfile.TarInfo:
        info = tarfile.TarInfo(name)
        if link:
            info.type, info.linkname = tarfile.SYMTYPE, link
        return info

    members = {m.name: m for m in (member("sbin", "usr/sbin"), member("usr"), member("usr/sbin"),
                                   member("usr/sbin/init", "/usr/lib/systemd/systemd"), member("usr/lib"),
                                   member("usr/lib/systemd"), member("usr/lib/systemd/systemd"),
                                   member("a", "b"), member("b", "a"))}  # fmt: skip
    assert resolve(members, "sbin/init") == "usr/lib/systemd/systemd"
    assert resolve(members, "a") is None
    assert resolve(members, "nothing/here") is None


@pytest.mark.parametrize(
    ("path", "gone"),
    [
        ("etc/ssh/ssh_host_rsa_key", True),
        ("var/lib/cloud/instances/i-1/user-data.txt", True),
        ("var/log/syslog", True),
        ("var/log", False),
        ("etc/ssh/ssh_config", False),
        ("home/ubuntu/.ssh/config", False),
        ("var/cache/apt/archives/nvidia-driver.deb", True),
    ],
)
def test_dropped(path: str, gone: bool) -> None:
    assert dropped(path) is gone


def test_clean_member_keeps_log_folders() -> None:
    folder = tarfile.TarInfo("var/log/apt")
    folder.type = tarfile.DIRTYPE
    assert clean_member(folder) == "copy"


def test_not_a_tar_stream_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(RootfsError, match="not a tar archive"):
        write_archive(io.BytesIO(b"this is no tar" * 100), tmp_path / "r.tar.gz")
    assert not (tmp_path / "r.tar.gz").exists()
    with pytest.raises(RootfsError, match=r"ends in \.tar\.zst or \.tar\.gz"):
        write_archive(io.BytesIO(container_export()), tmp_path / "r.tar")
