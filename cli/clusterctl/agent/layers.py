"""Layers on the node: each downloaded archive unpacked once into its own directory, by digest.

A layer is a gzip'd tar clusterctl wrote (``clusterctl.render.bundle``): regular files and
directories only, relative names without ``..``. Anything else in an archive (a link, a device,
an absolute or escaping name) refuses the whole layer. A layer no pointer names any more is
removed after the next successful apply, so the node keeps the layers it uses and no others.
"""

from __future__ import annotations

import contextlib
import shutil
import tarfile
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

MAX_MEMBERS = 200_000
MAX_UNPACKED_BYTES = 4 * 1024 * 1024 * 1024


class LayerError(Exception):
    """An archive that is not a layer clusterctl wrote."""


def _members(archive: tarfile.TarFile) -> list[tarfile.TarInfo]:
    members: list[tarfile.TarInfo] = []
    total = 0
    for member in archive:
        members.append(member)
        if len(members) > MAX_MEMBERS:
            raise LayerError(f"more than {MAX_MEMBERS} entries")
        name = PurePosixPath(member.name)
        if name.is_absolute() or ".." in name.parts or not member.name or "\0" in member.name:
            raise LayerError(f"entry {member.name[:80]!r} is not a relative name inside the layer")
        if not (member.isfile() or member.isdir()):
            raise LayerError(f"entry {member.name[:80]!r} is not a regular file or directory")
        total += member.size
        if total > MAX_UNPACKED_BYTES:
            raise LayerError(f"more than {MAX_UNPACKED_BYTES} bytes unpacked")
    return members


def unpack(archive_path: Path, target: Path) -> Path:
    """Unpack ``archive_path`` into ``target`` (made here, atomically); returns ``target``.

    Raises:
        LayerError: The archive is not a layer (nothing is left behind).
    """
    if target.is_dir():
        return target
    staging = target.with_name(f".{target.name}.unpacking")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True, mode=0o755)
    try:
        with tarfile.open(archive_path, "r:gz") as archive:
            members = _members(archive)
            for member in members:
                dest = staging / member.name
                if member.isdir():
                    dest.mkdir(parents=True, exist_ok=True, mode=0o755)
                    continue
                dest.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
                source = archive.extractfile(member)
                if source is None:
                    raise LayerError(f"entry {member.name[:80]!r} has no content")
                with source, open(dest, "wb") as out:
                    shutil.copyfileobj(source, out)
                dest.chmod(0o755 if member.mode & 0o111 else 0o644)
        staging.replace(target)
    except (OSError, tarfile.TarError, EOFError) as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise LayerError(str(exc)[:200]) from None
    except LayerError:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def prune(root: Path, keep: Iterable[str]) -> list[str]:
    """Remove the unpacked layers and archives under ``root`` whose digest is not in ``keep``."""
    wanted = set(keep)
    removed: list[str] = []
    if not root.is_dir():
        return removed
    for entry in root.iterdir():
        digest = entry.name.removesuffix(".tar.gz")
        if digest in wanted or entry.name.startswith("."):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                entry.unlink()
        removed.append(entry.name)
    return removed
