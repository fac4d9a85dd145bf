"""The build directory on disk: write the rendered files, keep the manifest, never leave it.

``write_tree`` is the only code that writes what ``render`` produced. Its rules:

- a directory that is not empty and has no manifest was not made by clusterctl: refused;
- every path, rendered or read back from the manifest, is a plain relative path (no ``..``,
  no absolute path, no empty or ``.`` part), so nothing is written or deleted outside the
  directory;
- the directory and every sub-directory must be yours and not writable by group or others (as
  the state directory): another user who could write there could add an Ansible inventory file
  or swap the playbook that the next ``up`` runs as root;
- links are never followed: the directory and each sub-directory are opened with
  ``O_NOFOLLOW`` relative to their parent's descriptor, files are read with ``O_NOFOLLOW``,
  and a link where clusterctl wants a file or a directory is refused, not replaced;
- every file is written atomically (a new temporary file in the same directory, created
  with ``O_EXCL``, synced, given its mode, renamed over the old one), and an unchanged file
  is not rewritten, so a re-render changes nothing on disk.

Why descriptors instead of paths: a check on a path and a later open of the same path are two
lookups, and a link swapped in between would be followed; a lookup relative to a directory
descriptor opened with ``O_NOFOLLOW`` cannot be redirected.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

from clusterctl.paths import owner_name

if TYPE_CHECKING:
    from clusterctl.render.tree import RenderedFile

MANIFEST = ".clusterctl-manifest"

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# A manifest lists a few hundred paths at most; anything much bigger was not written by clusterctl.
_MANIFEST_MAX_BYTES = 4 * 1024 * 1024
_MANIFEST_TEMP = re.compile(r"^" + re.escape(f".{MANIFEST}.") + r"[0-9a-f]{12}\.tmp$")


class BuildDirError(Exception):
    """The build directory cannot be written safely; the message names the path and what to do."""


def split_entry(entry: str) -> tuple[str, ...] | None:
    """The parts of a plain relative path, or None when ``entry`` is not one.

    A plain relative path has no leading ``/``, no empty, ``.`` or ``..`` part and no control
    character, so joining it to the build directory can only name something inside it.
    """
    if not entry or entry.startswith("/") or any(ord(c) < 0x20 or ord(c) == 0x7F for c in entry):
        return None
    parts = tuple(entry.split("/"))
    if any(part in ("", ".", "..") for part in parts):
        return None
    return parts


def _why_not_plain(entry: str) -> str:
    if entry.startswith("/"):
        return "an absolute path"
    if ".." in entry.split("/"):
        return "it climbs out with '..'"
    return "not a plain relative path"


def _writable_parts(entry: str, out_dir: Path, advice: str = "") -> tuple[str, ...]:
    """The parts of ``entry``; one that is not plain or names the manifest is refused, ``advice`` added."""
    parts = split_entry(entry)
    if parts is None or parts[0] == MANIFEST:
        refusal = f"refusing to write {entry!r} into {out_dir}: {_why_not_plain(entry)}."
        raise BuildDirError(f"{refusal} {advice}" if advice else refusal)
    return parts


def write_synced(fd: int, data: bytes, mode: int) -> None:
    """Write ``data`` to the new file open at ``fd``, give it ``mode`` and sync it; closes ``fd``."""
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fchmod(handle.fileno(), mode)
        os.fsync(handle.fileno())


def read_manifest(out_dir: Path) -> list[str] | None:
    """The paths listed in ``out_dir``'s manifest (None when there is none), each checked.

    Raises:
        BuildDirError: the manifest or the directory is a link, or an entry is not a plain
            relative path inside ``out_dir``.
    """
    with _Tree(out_dir, create=False) as tree:
        return tree.read_manifest()


def write_tree(files: Sequence[RenderedFile], out_dir: Path) -> list[str]:
    """Write ``files`` under ``out_dir``; remove files an earlier render made that are gone now.

    Files whose content and mode are unchanged are not rewritten, so a re-render changes
    nothing on disk. The manifest lists every file clusterctl may have written: it is
    extended before new files are written and trimmed after stale ones are removed, so an
    interrupted render still leaves a directory the next render accepts.

    Returns:
        The paths that were written or removed, in that order.

    Raises:
        BuildDirError: the directory is not one clusterctl made, a path would leave it, or a
            link stands where a file or directory is to be written or removed.
    """
    advice = "A value in the spec made a file name; use a plain name (letters, digits, '-', '_', '.')."
    wanted = {item.path: _writable_parts(item.path, out_dir, advice) for item in files}
    with _Tree(out_dir, create=True) as tree:
        previous = tree.own_manifest(
            "nothing was written. Render into a new or empty directory (--out), or move that directory's contents away."
        )
        if previous is None:
            previous = []
        current = sorted(wanted)
        listed = set(previous)
        if not listed.issuperset(current):
            tree.write_manifest(sorted(listed | set(current)))
        changed: list[str] = []
        for stale in sorted(listed - set(current)):
            if tree.remove(stale):
                changed.append(stale)
        for item in files:
            if tree.write(wanted[item.path], item.content(), item.mode):
                changed.append(item.path)
        if previous != current:
            tree.write_manifest(current)
        tree.sync()
    return changed


class _Tree:
    """The build directory, opened without following links, and its sub-directories."""

    def __init__(self, root: Path, *, create: bool) -> None:
        self.root = root
        self.create = create
        self.fds: dict[tuple[str, ...], int] = {}
        self.dirty: set[tuple[str, ...]] = set()

    def __enter__(self) -> _Tree:
        fd = self._open_root()
        if fd is not None:
            self.fds[()] = fd
        return self

    def __exit__(self, *exc: object) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()

    def _show(self, parts: Iterable[str]) -> Path:
        return self.root.joinpath(*parts)

    def _checked(self, parts: tuple[str, ...], fd: int) -> int:
        """``fd`` when its directory is yours and only you may write it; else closed and refused."""
        info = os.fstat(fd)
        me = os.geteuid()
        where = self._show(parts)
        why = ""
        if info.st_uid != me:
            why = f"{where} is owned by {owner_name(info.st_uid)}, not by you ({owner_name(me)})"
        elif info.st_mode & 0o022:
            why = f"{where} is writable by group or others (mode {stat.S_IMODE(info.st_mode):04o})"
        if why:
            os.close(fd)
            fix = f"`chmod go-w {where}`" if info.st_uid == me else "render into a directory of your own (--out)"
            raise BuildDirError(
                f"{why}, so someone else could change what `clusterctl up` runs as root. Check its contents, "
                f"then {fix}."
            )
        return fd

    def _open_root(self) -> int | None:
        try:
            return self._checked((), os.open(self.root, _DIR_FLAGS))
        except FileNotFoundError:
            if not self.create:
                return None
        except OSError as exc:
            raise self._not_a_directory((), exc) from None
        self.root.parent.mkdir(parents=True, exist_ok=True)
        self.root.mkdir(mode=0o755, exist_ok=True)
        try:
            return self._checked((), os.open(self.root, _DIR_FLAGS))
        except OSError as exc:
            raise self._not_a_directory((), exc) from None

    def _not_a_directory(self, parts: tuple[str, ...], exc: OSError) -> BuildDirError:
        where = self._show(parts)
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and self._is_link(parts):
            return BuildDirError(
                f"{where} is a symbolic link; clusterctl never follows links in the build directory. "
                + (
                    "Pass the real directory with --out."
                    if not parts
                    else "Remove the link (it was not made by clusterctl) and render again."
                )
            )
        if exc.errno == errno.ENOTDIR:
            return BuildDirError(
                f"{where} is not a directory, but clusterctl needs one there. Move it away and render again."
            )
        return BuildDirError(f"cannot open {where}: {exc.strerror}.")

    def _is_link(self, parts: tuple[str, ...]) -> bool:
        if not parts:
            return self.root.is_symlink()
        parent = self.fds.get(parts[:-1])
        if parent is None:
            return False
        try:
            return stat.S_ISLNK(os.stat(parts[-1], dir_fd=parent, follow_symlinks=False).st_mode)
        except OSError:
            return False

    def _dir(self, parts: tuple[str, ...], *, create: bool) -> int | None:
        """Descriptor of the sub-directory ``parts`` (None when absent and not ``create``)."""
        if parts in self.fds or not parts:
            return self.fds.get(parts)
        parent = self._dir(parts[:-1], create=create)
        if parent is None:
            return None
        if create:
            # mkdir never follows a link: one standing there is refused by the open below.
            with contextlib.suppress(FileExistsError):
                os.mkdir(parts[-1], 0o755, dir_fd=parent)
        try:
            fd = os.open(parts[-1], _DIR_FLAGS, dir_fd=parent)
        except OSError as exc:
            if isinstance(exc, FileNotFoundError) and not create:
                return None
            raise self._not_a_directory(parts, exc) from None
        self.fds[parts] = self._checked(parts, fd)
        return fd

    def has_entries(self) -> bool:
        """Whether the directory holds anything but a temporary manifest an interrupted render left."""
        with os.scandir(self.fds[()]) as entries:
            return any(not _MANIFEST_TEMP.match(entry.name) for entry in entries)

    def own_manifest(self, refused: str) -> list[str] | None:
        """The manifest's entries; None when the directory has none and is empty.

        Raises:
            BuildDirError: the directory holds files but no manifest, so clusterctl did not make
                it; ``refused`` says what was not done and what to do.
        """
        listed = self.read_manifest()
        if listed is None and self.has_entries():
            raise BuildDirError(
                f"{self.root} is not empty and has no {MANIFEST}, so clusterctl did not make it; {refused}"
            )
        return listed

    def _read(self, parts: tuple[str, ...], limit: int | None = None) -> bytes | None:
        """Content of the regular file ``parts`` (None when absent); links and others refused."""
        parent = self._dir(parts[:-1], create=False)
        if parent is None:
            return None
        try:
            fd = os.open(parts[-1], _READ_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise self._not_a_file(parts, exc.errno) from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise self._not_a_file(parts, None)
            if limit is not None and info.st_size > limit:
                raise BuildDirError(
                    f"{self._show(parts)} is {info.st_size} bytes, far more than any manifest clusterctl "
                    "writes; it was not made by clusterctl. Render into a new directory (--out)."
                )
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def _not_a_file(self, parts: tuple[str, ...], code: int | None) -> BuildDirError:
        where = self._show(parts)
        if code == errno.ELOOP or self._is_link(parts):
            return BuildDirError(
                f"{where} is a symbolic link; clusterctl never follows links in the build directory. "
                "Remove the link (it was not made by clusterctl) and render again."
            )
        return BuildDirError(
            f"{where} is not a regular file, but clusterctl writes a file there. Move it away and render again."
        )

    def read_manifest(self) -> list[str] | None:
        """The manifest's entries, each a plain relative path (None when there is no manifest)."""
        if () not in self.fds:
            return None
        manifest = (MANIFEST,)
        raw = self._read(manifest, limit=_MANIFEST_MAX_BYTES)
        if raw is None:
            return None
        where = self._show(manifest)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise BuildDirError(
                f"{where} is not text, so clusterctl did not write it. Render into a new directory (--out)."
            ) from None
        entries = [line for line in text.split("\n") if line]
        for entry in entries:
            parts = split_entry(entry)
            if parts is None or parts[0] == MANIFEST:
                raise BuildDirError(
                    f"{where} lists {entry!r}, which is not a file inside {self.root} ({_why_not_plain(entry)}); "
                    "clusterctl never writes such an entry, so nothing was written or removed. Check who changed "
                    f"{self.root}, then render into a new directory (--out) or delete the manifest and the files."
                )
        return sorted(set(entries))

    def write_manifest(self, entries: list[str]) -> None:
        """Replace the manifest (one path per line)."""
        self.write((MANIFEST,), ("\n".join(entries) + "\n").encode(), 0o644)

    def remove(self, entry: str) -> bool:
        """Delete the regular file ``entry`` if it is there; returns whether it was."""
        parts = split_entry(entry)
        assert parts is not None  # read_manifest checked every entry
        parent = self._dir(parts[:-1], create=False)
        if parent is None:
            return False
        try:
            info = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return False
        if stat.S_ISLNK(info.st_mode):
            raise self._not_a_file(parts, errno.ELOOP)
        if not stat.S_ISREG(info.st_mode):
            # Not what clusterctl wrote there; not clusterctl's to delete either.
            return False
        os.unlink(parts[-1], dir_fd=parent)
        self.dirty.add(parts[:-1])
        return True

    def write(self, parts: tuple[str, ...], data: bytes, mode: int) -> bool:
        """Write ``data`` to ``parts`` atomically unless it already holds it; returns whether it wrote."""
        parent = self._dir(parts[:-1], create=True)
        assert parent is not None  # created when missing
        name = parts[-1]
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise self._not_a_file(parts, exc.errno) from None
        else:
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode):
                    raise self._not_a_file(parts, None)
                if stat.S_IMODE(info.st_mode) == mode and info.st_size == len(data):
                    current = b""
                    while chunk := os.read(fd, 1 << 20):
                        current += chunk
                    if current == data:
                        return False
            finally:
                os.close(fd)
        temp, fd = self._temp(parent, name)
        try:
            write_synced(fd, data, mode)
            os.rename(temp, name, src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=parent)
            raise
        self.dirty.add(parts[:-1])
        return True

    @staticmethod
    def _temp(parent: int, name: str) -> tuple[str, int]:
        """A new temporary file next to ``name``, created exclusively (never an existing file or link)."""
        for _ in range(100):
            temp = f".{name}.{secrets.token_hex(6)}.tmp"
            try:
                return temp, os.open(temp, _TEMP_FLAGS, 0o600, dir_fd=parent)
            except FileExistsError:
                continue
        raise BuildDirError(f"could not create a temporary file next to {name}.")  # pragma: no cover

    def sync(self) -> None:
        """Make the renames and removals durable (fsync of each directory that changed)."""
        for parts in sorted(self.dirty):
            fd = self.fds.get(parts)
            if fd is not None:
                os.fsync(fd)
        self.dirty.clear()


# --- files a run writes next to the rendered ones ----------------------------------------------
# `up` (the Ansible log, clusterctl's public key for the PXE installer) and `verify` (its
# report) write into the build directory after the render. They follow the same rules as
# `write_tree` -- plain relative paths only, links never followed, files replaced atomically,
# a directory clusterctl did not make refused -- but stay out of the manifest: a re-render
# neither deletes them nor refuses the directory because of them.


def _run_tree(tree: _Tree, entry: str) -> tuple[str, ...]:
    """Check that a run may write ``entry`` in the opened build directory; returns its parts."""
    parts = _writable_parts(entry, tree.root)
    listed = tree.own_manifest(
        f"{entry} was not written. Use the build directory `clusterctl render` made (--out), or a new one."
    )
    if listed is None:
        # An empty manifest marks the directory as clusterctl's: a later render into it is accepted.
        tree.write_manifest([])
    elif entry in listed:
        raise BuildDirError(
            f"{tree.root / entry} is a rendered file; a run never overwrites one. Render into a new directory (--out)."
        )
    return parts


def write_run_file(out_dir: Path, entry: str, data: bytes, mode: int = 0o644) -> Path:
    """Write ``entry`` (a plain relative path) under ``out_dir`` atomically, outside the manifest.

    Returns:
        The path written.

    Raises:
        BuildDirError: ``entry`` is not a plain relative path or is a rendered file, a link stands
            at it or at one of its directories, or ``out_dir`` is not a directory clusterctl made.
    """
    with _Tree(out_dir, create=True) as tree:
        parts = _run_tree(tree, entry)
        tree.write(parts, data, mode)
        tree.sync()
    return out_dir.joinpath(*parts)


_APPEND_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


@contextlib.contextmanager
def open_run_log(out_dir: Path, entry: str, mode: int = 0o644) -> Iterator[IO[str]]:
    """Open the log ``entry`` under ``out_dir`` for appending text, outside the manifest.

    The file is opened relative to its directory's descriptor with ``O_NOFOLLOW``: a link planted
    at it (or at a directory above it) is refused, never followed, and so is anything but a
    regular file of the current user.

    Raises:
        BuildDirError: as ``write_run_file``.
    """
    with _Tree(out_dir, create=True) as tree:
        parts = _run_tree(tree, entry)
        parent = tree._dir(parts[:-1], create=True)
        assert parent is not None  # created when missing
        try:
            fd = os.open(parts[-1], _APPEND_FLAGS, mode, dir_fd=parent)
        except OSError as exc:
            raise tree._not_a_file(parts, exc.errno) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            raise BuildDirError(
                f"{out_dir.joinpath(*parts)} is not a regular file of yours; clusterctl does not append to it. "
                "Move it away and run again."
            )
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "a", encoding="utf-8", errors="replace") as handle:
        yield handle
