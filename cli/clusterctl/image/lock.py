"""``clusterctl.lock``: the images ``image build`` made for a spec, written beside it, meant to be committed.

The plan says what should be, the lock what was built, the node what is. The file is JSON with
sorted keys and two-space indentation, so the same images always give the same text and every
package sits on a line of its own (a diff names the packages that changed)::

    {
      "cluster": "local",
      "clusterctl": "0.1.0",
      "collections_hash": "<sha256 of the Ansible collections the roles use>",
      "images": {
        "small": {
          "arch": "amd64",
          "hash": "<the profile's content hash, clusterctl.image.hash>",
          "inputs": {"...": "what the hash covers, so a mismatch can say what changed"},
          "os": "debian-12",
          "packages": {"adduser": "3.134", "...": "..."},
          "ref": "sha256:<image ID or digest>",
          "tag": "clusterctl/node:debian-12-<hash12>",
          "target": "local"
        }
      },
      "lock_version": 1,
      "roles_hash": "<sha256 of roles/ and site.yml>"
    }

``packages`` is every package the package manager reports installed in the image
(``dpkg-query``: name with its architecture where Debian adds it, and version). ``cluster``
ties the lock to one spec's cluster: two specs in one directory each need their own (``--lock``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from clusterctl.bounded import json_document
from clusterctl.image.hash import ImageHash, explain
from clusterctl.run.state import write_atomic

LOCK_NAME = "clusterctl.lock"
LOCK_VERSION = 1
TARGETS = ("local", "aws", "gcp", "azure", "baremetal")
_MAX_BYTES = 64 * 1024 * 1024


class LockError(Exception):
    """The lock file cannot be used; the message names the file, what is wrong and what to do."""


@dataclass(frozen=True)
class LockedImage:
    """One profile's image as the lock records it."""

    profile: str
    hash: str
    target: str
    ref: str
    os: str
    arch: str
    packages: dict[str, str] = field(default_factory=dict)
    tag: str = ""
    inputs: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The lock's entry (without the profile, which is its key)."""
        data: dict[str, Any] = {
            "hash": self.hash,
            "target": self.target,
            "ref": self.ref,
            "os": self.os,
            "arch": self.arch,
            "packages": dict(self.packages),
        }
        if self.tag:
            data["tag"] = self.tag
        if self.inputs:
            data["inputs"] = self.inputs
        return data


@dataclass(frozen=True)
class Lock:
    """The whole lock file."""

    cluster: str
    clusterctl: str
    collections_hash: str
    roles_hash: str
    images: dict[str, LockedImage] = field(default_factory=dict)
    lock_version: int = LOCK_VERSION

    def to_json(self) -> dict[str, Any]:
        """The file's data."""
        return {**asdict(self), "images": {name: image.to_json() for name, image in self.images.items()}}

    def text(self) -> str:
        """The file's text: sorted keys, one value a line, a final newline (deterministic)."""
        return json.dumps(self.to_json(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def lock_path(spec: str | Path, override: str | Path | None = None) -> Path:
    """``clusterctl.lock`` beside ``spec`` (or ``override``)."""
    return Path(override) if override else Path(spec).parent / LOCK_NAME


def _fail(path: Path, what: str) -> LockError:
    return LockError(
        f"{path}: {what}. The lock is written by `clusterctl image build`: restore it from version "
        "control, or delete it and run `clusterctl image build` again."
    )


def _text(data: Mapping[str, Any], key: str, path: Path, where: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise _fail(path, f"{where}{key} must be a non-empty string")
    return value


def _image(name: str, data: Any, path: Path) -> LockedImage:
    where = f"images.{name}."
    if not isinstance(data, dict):
        raise _fail(path, f"images.{name} must be an object")
    target = _text(data, "target", path, where)
    if target not in TARGETS:
        raise _fail(path, f"{where}target is {target!r}, not one of {', '.join(TARGETS)}")
    packages = data.get("packages", {})
    if not isinstance(packages, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in packages.items()
    ):
        raise _fail(path, f"{where}packages must map package names to version strings")
    inputs = data.get("inputs", {})
    tag = data.get("tag", "")
    if not isinstance(inputs, dict) or not isinstance(tag, str):
        raise _fail(path, f"{where}inputs must be an object and {where}tag a string")
    return LockedImage(
        profile=name,
        hash=_text(data, "hash", path, where),
        target=target,
        ref=_text(data, "ref", path, where),
        os=_text(data, "os", path, where),
        arch=_text(data, "arch", path, where),
        packages=dict(packages),
        tag=tag,
        inputs=inputs,
    )


def parse_lock(text: str, path: Path) -> Lock:
    """The lock in ``text`` (read from ``path``, which messages name).

    Raises:
        LockError: not JSON, another lock version, or a field of the wrong shape.
    """
    try:
        data = json_document(text, "lock")
    except ValueError as exc:
        raise _fail(path, f"not valid JSON ({exc}); a merge conflict left in it?") from None
    if not isinstance(data, dict):
        raise _fail(path, "not a JSON object")
    version = data.get("lock_version")
    if version != LOCK_VERSION:
        raise LockError(
            f"{path}: lock_version {version!r}; this clusterctl reads version {LOCK_VERSION}. "
            "Run `clusterctl image build` with this clusterctl to write it again."
        )
    images = data.get("images", {})
    if not isinstance(images, dict):
        raise _fail(path, "images must be an object")
    return Lock(
        cluster=_text(data, "cluster", path, ""),
        clusterctl=_text(data, "clusterctl", path, ""),
        collections_hash=str(data.get("collections_hash", "")),
        roles_hash=str(data.get("roles_hash", "")),
        images={name: _image(name, entry, path) for name, entry in sorted(images.items())},
    )


def read_lock(path: Path) -> Lock | None:
    """The lock at ``path``, or None when there is none.

    Raises:
        LockError: it cannot be read or is not a lock (see :func:`parse_lock`).
    """
    if not path.exists() and not path.is_symlink():
        return None
    if not path.is_file():
        raise LockError(f"{path} is not a regular file; move it away and run `clusterctl image build`.")
    try:
        size = path.stat().st_size
        if size > _MAX_BYTES:
            raise _fail(path, f"{size} bytes, more than a lock ever holds")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LockError(f"{path} cannot be read: {exc}") from None
    return parse_lock(text, path)


def write_lock(path: Path, lock: Lock) -> bool:
    """Write ``lock`` to ``path`` atomically (0644: it is meant to be committed); False when unchanged."""
    text = lock.text()
    try:
        if path.is_file() and not path.is_symlink() and path.read_text(encoding="utf-8") == text:
            return False
    except (OSError, UnicodeDecodeError):
        pass
    write_atomic(path, text.encode(), 0o644)
    return True


# --- the lock against a plan ------------------------------------------------------------------


@dataclass(frozen=True)
class LockCheck:
    """Whether a profile's locked image is the one the spec wants now.

    Attributes:
        profile: The hardware profile.
        image: Its locked image (None when the lock has none).
        problem: Why it cannot be used ('' when it can).
    """

    profile: str
    image: LockedImage | None
    problem: str = ""

    @property
    def usable(self) -> bool:
        """The locked image is there and matches the spec."""
        return self.image is not None and not self.problem


def check_lock(
    lock: Lock,
    cluster: str,
    current: Mapping[str, ImageHash],
    target: str,
    present: Callable[[LockedImage], bool],
    *,
    path: Path,
) -> dict[str, LockCheck]:
    """Each profile of ``current`` (profile -> its hash now) against ``lock``.

    Args:
        lock: The lock read from ``path``.
        cluster: The plan's cluster name.
        current: The content hash of every profile the plan uses, computed now.
        target: The target the cluster runs on (the provider kind).
        present: Whether a locked image still exists on the target.
        path: The lock file (messages name it).
    """
    out: dict[str, LockCheck] = {}
    for profile, now in sorted(current.items()):
        image = lock.images.get(profile)
        if lock.cluster != cluster:
            problem = f"{path} is the lock of cluster {lock.cluster}, not {cluster}; give this spec its own (--lock)"
        elif image is None:
            problem = f"hardware profile {profile} has no image in {path}"
        elif image.target != target:
            problem = f"the locked image of {profile} is for {image.target}; this cluster runs on {target}"
        elif image.hash != now.hash:
            changes = explain(image.inputs, now.inputs) if image.inputs else []
            why = f": {'; '.join(changes)}" if changes else ""
            problem = (
                f"the spec or the roles changed since {profile}'s image was built "
                f"(locked {image.hash[:12]}, now {now.short}){why}"
            )
        elif not present(image):
            problem = f"the locked image of {profile} ({image.tag or image.ref}) is not on {target}"
        else:
            problem = ""
        out[profile] = LockCheck(profile, image, problem)
    return out


def expected_packages(lock: Lock | None, cluster: str) -> dict[str, LockedImage]:
    """The locked image of each profile, for drift checks (empty without a lock of this cluster)."""
    if lock is None or lock.cluster != cluster:
        return {}
    return dict(lock.images)
