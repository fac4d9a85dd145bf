"""A node image as a root filesystem archive: what a bare-metal machine boots or writes to its disk.

:func:`write_archive` turns the tar stream of a container (``docker export``) into
``<name>.tar.zst`` (``.tar.gz`` where no ``zstd`` is installed) with a ``<name>.tar.zst.sha256``
in sha256sum's format beside it, and copies the kernel and initramfs out of ``/boot`` for the PXE
server. On the way every entry passes :func:`clean_member`, which does to the archive what
roles/image_seal.yml does to a cloud builder: no machine id, no SSH host keys, no cloud-init or
DHCP state, no login keys, no caches, no logs, no Docker leftovers; and it writes what a machine
needs that a container never has: ``/etc/fstab``, ``/etc/hosts``, ``/etc/hostname`` and
``/etc/resolv.conf`` (systemd-resolved's stub).

:func:`check_archive` reads an archive back and lists what would keep it from booting: no
``/sbin/init`` leading to systemd, no fstab, a machine id, a host key, no kernel or initramfs.
``image build`` runs it on every archive it writes; the tests run it too.
"""

from __future__ import annotations

import contextlib
import fnmatch
import gzip
import hashlib
import io
import os
import posixpath
import re
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

ZSTD_LEVEL = 6
# Fully deleted: files that make a machine one machine, or that only a container has.
DROPPED = (
    ".dockerenv",
    "etc/ssh/ssh_host_*",
    "var/lib/dbus/machine-id",
    "var/lib/systemd/random-seed",
    "var/lib/systemd/credential.secret",
    "var/lib/cloud/*",
    "var/lib/dhcp/*",
    "var/lib/NetworkManager/*",
    "var/cache/apt/archives/*.deb",
    "var/cache/apt/*.bin",
    "var/lib/apt/lists/*",
    "var/lib/apt/periodic/update-success-stamp",
    "var/log/*",
    "var/tmp/*",
    "tmp/*",
    "root/.ssh",
    "root/.ssh/*",
    "root/.ansible",
    "root/.ansible/*",
    "root/.cache",
    "root/.cache/*",
    "root/.bash_history",
    "home/*/.ssh/authorized_keys",
    "home/*/.bash_history",
    "etc/sudoers.d/90-cloud-init-users",
)
# Folders whose files go but whose sub-folders stay.
FILES_ONLY = ("var/log/",)
# Kept as directories (their contents go): the system expects them to exist.
KEPT_DIRS = frozenset({"var/log", "var/tmp", "tmp", "var/lib/apt/lists", "var/lib/cloud"})
FSTAB = """\
# /etc/fstab of a clusterctl node image (written by `clusterctl image build`).
# Booted stateless, / is a tmpfs the initramfs filled from the image archive: nothing to mount.
# Installed to a disk (boot=clusterctl clusterctl.mode=install), the installer replaces this file
# with the root (and EFI) partitions by UUID.
"""
HOSTS = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
# Written fresh: a container's copies are Docker's bind-mount placeholders (empty files).
WRITTEN = {
    "etc/fstab": (FSTAB, 0o644),
    "etc/hosts": (HOSTS, 0o644),
    "etc/hostname": ("localhost\n", 0o644),
    # systemd creates a new machine id at the first boot when the file is empty.
    "etc/machine-id": ("", 0o444),
}
RESOLV_CONF = "etc/resolv.conf"
RESOLV_STUB = "../run/systemd/resolve/stub-resolv.conf"
KERNEL_RE = re.compile(r"\Aboot/vmlinuz-(?P<version>[^/]+)\Z")
INITRD_RE = re.compile(r"\Aboot/initrd\.img-(?P<version>[^/]+)\Z")
_CHUNK = 1 << 20


class RootfsError(Exception):
    """The archive could not be written or read; the message says why."""


def normalize(name: str) -> str:
    """A tar member's path without ``./`` or ``/`` in front (``docker export`` writes both forms)."""
    while name.startswith(("./", "/")):
        name = name[2:] if name.startswith("./") else name[1:]
    return name.rstrip("/") if name not in ("", ".") else ""


def dropped(path: str, is_dir: bool = False) -> bool:
    """Whether the entry ``path`` (normalized) leaves the archive.

    Under /var/log only files go: packages expect their log folders (``/var/log/apt``) to exist.
    """
    if path in KEPT_DIRS or (is_dir and path.startswith(FILES_ONLY)):
        return False
    return any(fnmatch.fnmatchcase(path, pattern) for pattern in DROPPED) or any(
        path.startswith(f"{pattern}/") for pattern in DROPPED if "*" not in pattern
    )


def _version_key(version: str) -> list[tuple[int, str]]:
    return [(int(part), "") if part.isdigit() else (-1, part) for part in re.split(r"(\d+)", version) if part]


@dataclass
class Archive:
    """An archive :func:`write_archive` wrote.

    Attributes:
        path: the archive (``.tar.zst`` or ``.tar.gz``).
        sha256: its digest (hex).
        size: its size in bytes.
        kernel: the kernel copied out of it (None when the root has none).
        initrd: the initramfs copied out of it.
        kernel_version: the version both belong to.
        entries: members written.
    """

    path: Path
    sha256: str
    size: int
    kernel: Path | None = None
    initrd: Path | None = None
    kernel_version: str = ""
    entries: int = 0
    removed: list[str] = field(default_factory=list)

    @property
    def checksum_file(self) -> Path:
        """``<archive>.sha256``, as sha256sum writes it."""
        return self.path.with_name(self.path.name + ".sha256")


def _regular(name: str, text: str, mode: int, like: tarfile.TarInfo | None) -> tuple[tarfile.TarInfo, bytes]:
    data = text.encode()
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    info.mtime = like.mtime if like is not None else 0
    return info, data


def clean_member(member: tarfile.TarInfo) -> tuple[tarfile.TarInfo, bytes | None] | str | None:
    """What becomes of one entry: None (dropped), ``"copy"`` (kept as is), or a replacement (info, data)."""
    path = normalize(member.name)
    if not path:
        return "copy"
    if path in WRITTEN:
        text, mode = WRITTEN[path]
        return _regular(member.name, text, mode, member)
    if path == RESOLV_CONF:
        info = tarfile.TarInfo(member.name)
        info.type = tarfile.SYMTYPE
        info.linkname = RESOLV_STUB
        info.mode = 0o777
        info.mtime = member.mtime
        return info, None
    if dropped(path, member.isdir()):
        return None
    return "copy"


def _members(stream: IO[bytes]) -> Iterator[tuple[tarfile.TarInfo, tarfile.TarFile]]:
    with tarfile.open(fileobj=stream, mode="r|*") as source:
        for member in source:
            yield member, source


def filter_stream(
    stream: IO[bytes], out: IO[bytes], *, boot_dir: Path | None = None
) -> tuple[int, list[str], dict[str, Path]]:
    """Copy the tar ``stream`` to ``out`` (an uncompressed tar), cleaned; copy kernels and initrds to ``boot_dir``.

    Returns:
        (entries written, paths removed, {"vmlinuz-<v>"|"initrd.img-<v>": copied file}).
    """
    written = 0
    removed: list[str] = []
    boot: dict[str, Path] = {}
    seen: set[str] = set()
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as target:
        for member, source in _members(stream):
            path = normalize(member.name)
            outcome = clean_member(member)
            if outcome is None:
                removed.append(path)
                continue
            if outcome == "copy":
                data = source.extractfile(member) if member.isreg() else None
                if boot_dir is not None and member.isreg() and (KERNEL_RE.match(path) or INITRD_RE.match(path)):
                    copy = boot_dir / posixpath.basename(path)
                    boot_dir.mkdir(parents=True, exist_ok=True)
                    assert data is not None
                    with copy.open("wb") as handle:
                        shutil.copyfileobj(data, handle, _CHUNK)
                    boot[copy.name] = copy
                    data = copy.open("rb")
                    try:
                        target.addfile(member, data)
                    finally:
                        data.close()
                else:
                    target.addfile(member, data)
            else:
                assert not isinstance(outcome, str)
                info, content = outcome
                target.addfile(info, io.BytesIO(content) if content is not None else None)
            seen.add(path)
            written += 1
        # A root without one of the written files still gets it (a container may lack /etc/fstab).
        for path, (text, mode) in sorted(WRITTEN.items()):
            if path not in seen:
                info, content = _regular(path, text, mode, None)
                target.addfile(info, io.BytesIO(content))
                written += 1
    return written, removed, boot


def _compressor(path: Path) -> tuple[list[str] | None, str]:
    if path.name.endswith(".tar.zst"):
        zstd = shutil.which("zstd")
        if zstd is None:
            raise RootfsError("zstd is not installed; install it (apt-get install zstd) or write a .tar.gz")
        return [zstd, "-q", f"-{ZSTD_LEVEL}", "-T0", "-c", "-"], "zstd"
    if path.name.endswith(".tar.gz"):
        return None, "gzip"
    raise RootfsError(f"{path.name}: an image archive ends in .tar.zst or .tar.gz")


def archive_suffix() -> str:
    """``.tar.zst`` where zstd is installed, else ``.tar.gz``."""
    return ".tar.zst" if shutil.which("zstd") else ".tar.gz"


def sha256_file(path: Path) -> str:
    """The sha256 (hex) of the file ``path``."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_archive(stream: IO[bytes], path: Path, *, boot_dir: Path | None = None) -> Archive:
    """Write the cleaned root filesystem of the tar ``stream`` to ``path`` and its ``.sha256`` beside it.

    Written to a temporary file in the same folder and renamed into place, so a PXE server never
    serves half an archive; the checksum file is written last.

    Raises:
        RootfsError: the stream is not a tar, the compressor failed, or ``path`` has another suffix.
    """
    command, kind = _compressor(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with temp.open("wb") as raw:
            if command is None:
                with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as packed:
                    entries, removed, boot = filter_stream(stream, packed, boot_dir=boot_dir)  # type: ignore[arg-type]
            else:
                proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=raw, stderr=subprocess.PIPE)
                assert proc.stdin is not None
                try:
                    entries, removed, boot = filter_stream(stream, proc.stdin, boot_dir=boot_dir)
                except BaseException:
                    proc.kill()
                    proc.communicate()
                    raise
                # Closes zstd's input, waits for it, reads what it said.
                _, err = proc.communicate()
                if proc.returncode != 0:
                    raise RootfsError(f"{kind} failed ({proc.returncode}): {err.decode(errors='replace')[:300]}")
        digest = sha256_file(temp)
        temp.replace(path)
    except tarfile.TarError as exc:
        raise RootfsError(f"the root filesystem stream is not a tar archive ({exc})") from None
    finally:
        temp.unlink(missing_ok=True)
    archive = Archive(path=path, sha256=digest, size=path.stat().st_size, entries=entries, removed=removed)
    archive.checksum_file.write_text(f"{digest}  {path.name}\n")
    kernels = sorted(
        ((m["version"], p) for name, p in boot.items() if (m := KERNEL_RE.match(f"boot/{name}"))),
        key=lambda item: _version_key(item[0]),
    )
    if kernels:
        version, kernel = kernels[-1]
        archive.kernel, archive.kernel_version = kernel, version
        archive.initrd = boot.get(f"initrd.img-{version}")
    return archive


def read_checksum(path: Path) -> str | None:
    """The digest in ``<archive>.sha256`` when it names this archive (None otherwise)."""
    checksum = path.with_name(path.name + ".sha256")
    try:
        fields = checksum.read_text().split()
    except OSError:
        return None
    if len(fields) == 2 and fields[1] == path.name and re.fullmatch(r"[0-9a-f]{64}", fields[0]):
        return fields[0]
    return None


# --- reading an archive back ------------------------------------------------------------------------


@contextlib.contextmanager
def _stream(path: Path) -> Iterator[IO[bytes]]:
    """The uncompressed tar stream of ``path`` (zstd through its CLI, gzip in process)."""
    if path.name.endswith(".tar.zst"):
        zstd = shutil.which("zstd")
        if zstd is None:
            raise RootfsError("zstd is not installed; it is needed to read a .tar.zst")
        proc = subprocess.Popen([zstd, "-dc", str(path)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert proc.stdout is not None
        try:
            yield proc.stdout
        finally:
            proc.stdout.close()
            proc.kill()
            proc.wait()
    else:
        with path.open("rb") as raw:
            yield raw


@dataclass(frozen=True)
class RootfsReport:
    """What :func:`check_archive` found."""

    problems: tuple[str, ...]
    init: str | None
    members: int

    @property
    def ok(self) -> bool:
        """Nothing keeps the archive from booting."""
        return not self.problems


def resolve(members: dict[str, tarfile.TarInfo], path: str, limit: int = 40) -> str | None:
    """Where ``path`` leads inside the archive, following symbolic links (None: nowhere)."""
    parts = [p for p in path.split("/") if p]
    done: list[str] = []
    hops = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            if done:
                done.pop()
            continue
        if part == ".":
            continue
        current = "/".join([*done, part])
        member = members.get(current)
        if member is None:
            return None
        if member.issym():
            hops += 1
            if hops > limit:
                return None
            target = member.linkname
            base = [] if target.startswith("/") else done
            parts = [p for p in target.split("/") if p] + parts
            done = list(base)
            continue
        done.append(part)
    return "/".join(done)


def check_archive(path: Path, *, need_kernel: bool = True) -> RootfsReport:
    """What in the archive ``path`` would keep a machine from booting it as a clusterctl node.

    Checked: ``/sbin/init`` leads to systemd; ``/etc/fstab`` is clusterctl's; ``/etc/machine-id`` is
    empty and D-Bus has none of its own; no SSH host key; no login keys of the builder; a kernel
    and its initramfs in /boot (``need_kernel``).
    """
    problems: list[str] = []
    members: dict[str, tarfile.TarInfo] = {}
    text = ""
    try:
        with _stream(path) as raw, tarfile.open(fileobj=raw, mode="r|*") as archive:
            for member in archive:
                name = normalize(member.name)
                members[name] = member
                if name == "etc/fstab" and member.isreg():
                    handle = archive.extractfile(member)
                    text = handle.read().decode(errors="replace") if handle else ""
    except tarfile.TarError as exc:
        raise RootfsError(f"{path} is not a readable tar archive ({exc})") from None
    init = resolve(members, "sbin/init")
    if init is None or posixpath.basename(init) != "systemd" or not members[init].isreg():
        problems.append(f"/sbin/init does not lead to systemd (it leads to {init or 'nothing'})")
    if not text.startswith("# /etc/fstab of a clusterctl node image"):
        problems.append("/etc/fstab is missing or not the one clusterctl writes")
    machine_id = members.get("etc/machine-id")
    if machine_id is None or not machine_id.isreg() or machine_id.size != 0:
        problems.append("/etc/machine-id must be an empty file (systemd makes a new one at the first boot)")
    if "var/lib/dbus/machine-id" in members and not members["var/lib/dbus/machine-id"].issym():
        problems.append("/var/lib/dbus/machine-id is a machine id of the builder")
    keys = sorted(p for p in members if fnmatch.fnmatchcase(p, "etc/ssh/ssh_host_*"))
    if keys:
        problems.append(f"SSH host keys of the builder: {', '.join('/' + k for k in keys)}")
    logins = sorted(p for p in members if fnmatch.fnmatchcase(p, "home/*/.ssh/authorized_keys") or p == "root/.ssh")
    if logins:
        problems.append(f"login keys of the builder: {', '.join('/' + p for p in logins)}")
    if ".dockerenv" in members:
        problems.append("/.dockerenv: the archive says it is a container")
    if need_kernel:
        kernels = [m["version"] for p in members if (m := KERNEL_RE.match(p))]
        if not kernels:
            problems.append("no kernel in /boot (vmlinuz-*)")
        elif not any(f"boot/initrd.img-{v}" in members for v in kernels):
            problems.append("no initramfs in /boot for its kernel (initrd.img-*)")
    return RootfsReport(problems=tuple(problems), init=init, members=len(members))
