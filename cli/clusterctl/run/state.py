"""The state directory ``.clusterctl/<cluster>/``: state.json, a lock, and secrets.

The state directory is trusted: it holds the cluster's secrets and decides what ``down``
removes. So clusterctl only uses it when nobody else can change it:

- it is created 0700 (and ``.clusterctl/`` too when clusterctl creates that), and refused
  when it is a link, owned by another user, or writable by group or others;
- the lock file is opened with ``O_NOFOLLOW``: a link planted there is never followed;
- secrets and state.json are written atomically: an exclusively created temporary file in the
  same directory, synced, given its mode, then renamed (or linked) into place, so a crash
  never leaves a half-written file;
- a secret that is reused is checked first: a regular file (not a link), owned by the current
  user, unreadable by group and others; anything else is refused with the fix.

Why refuse instead of repair: a secret that others could read may already be known to them,
and a directory someone else controls may have been changed; only the operator can tell.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import secrets
import shutil
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from clusterctl.bounded import json_document
from clusterctl.paths import owner_name
from clusterctl.render.builddir import write_synced

DEFAULT_ROOT = Path(".clusterctl")

_NOFOLLOW_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class StateDirError(Exception):
    """The state directory or a file in it is not safe to use; the message says why and how to fix it."""


class LockedError(Exception):
    """Another clusterctl process holds the cluster's lock."""


def _foreign(info: os.stat_result) -> str:
    """``owned by uid N (name), not by you (...)`` when another user owns the file; empty when you do."""
    me = os.geteuid()
    return "" if info.st_uid == me else f"owned by {owner_name(info.st_uid)}, not by you ({owner_name(me)})"


def check_private_dir(path: Path, *, what: str = "state directory", tighten: bool = False) -> None:
    """Refuse ``path`` unless it is a real directory of the current user that only it can change.

    Args:
        path: the directory (must exist).
        what: how to call it in messages.
        tighten: also take away group and other permissions (for directories clusterctl made).

    Raises:
        StateDirError: a link, not a directory, another owner, or group/world writable.
    """
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise StateDirError(
            f"the {what} {path} is a symbolic link; clusterctl keeps secrets there and never follows links. "
            f"Replace the link with a real directory (mv the target to {path}) or pass the real path with --state-dir."
        )
    if not stat.S_ISDIR(info.st_mode):
        raise StateDirError(f"the {what} {path} is not a directory. Move it away or choose another --state-dir.")
    if owned := _foreign(info):
        raise StateDirError(
            f"the {what} {path} is {owned}; clusterctl keeps secrets there and does not use a directory another "
            f"user controls. Run clusterctl as that user, or check its contents and take it over with "
            f"`chown -R {os.geteuid()} {path}`, or choose another --state-dir."
        )
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o022:
        raise StateDirError(
            f"the {what} {path} is writable by group or others (mode {mode:04o}), so they could change "
            f"clusterctl's state and secrets. Check its contents, then fix with `chmod 700 {path}`."
        )
    if tighten and mode & 0o077:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.fchmod(fd, 0o700)
        finally:
            os.close(fd)


def _check_root(root: Path) -> None:
    """``.clusterctl/`` (or ``--state-dir``): whoever can write it can swap the cluster directories in it."""
    info = root.stat()
    mode = stat.S_IMODE(info.st_mode)
    if not stat.S_ISDIR(info.st_mode):
        raise StateDirError(f"the state directory root {root} is not a directory; choose another --state-dir.")
    if info.st_uid not in (os.geteuid(), 0):
        raise StateDirError(
            f"the state directory root {root} is owned by {owner_name(info.st_uid)}, who could replace the cluster "
            "directories in it. Choose a --state-dir of your own."
        )
    # World-writable with the sticky bit (like /tmp) is fine: others cannot rename or delete our entries.
    if mode & 0o022 and not mode & stat.S_ISVTX:
        raise StateDirError(
            f"the state directory root {root} is writable by group or others (mode {mode:04o}), so they could "
            f"replace the cluster directories in it. Fix with `chmod go-w {root}` or choose another --state-dir."
        )


def ensure_private_dir(path: Path, *, base: Path | None = None) -> Path:
    """Create ``path`` 0700 if missing, then check it (and each directory between ``base`` and it).

    Args:
        path: the directory.
        base: an already checked ancestor of ``path``; every directory below it down to
            ``path`` is created 0700 when missing and checked with ``check_private_dir``.

    Raises:
        StateDirError: one of them is a link, owned by someone else or group/world writable.
    """
    chain = [path]
    if base is not None and path != base:
        below = path.relative_to(base).parts
        chain = [base.joinpath(*below[: i + 1]) for i in range(len(below))]
    for folder in chain:
        # Created 0700 here; the umask can only take bits away, and check_private_dir's tighten
        # puts the exact mode back on a directory that is ours.
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=0o700)
        check_private_dir(folder, what="directory", tighten=True)
    return path


def ensure_secrets_dir(state_dir: Path, folder: Path) -> Path:
    """Check ``state_dir`` (created 0700 when missing), then create/check each directory down to ``folder``.

    For code that gets a cluster's state directory as a path (SSH keys, the Pulumi passphrase,
    the burst controller's state). ``state_dir`` itself is not tightened: on the burst
    controller it is a root-owned 0750 directory made by the role.

    Raises:
        StateDirError: one of them is a link, another user's, or group/world writable.
    """
    if not os.path.lexists(state_dir):
        state_dir.parent.mkdir(parents=True, exist_ok=True)
        ensure_private_dir(state_dir)
    check_private_dir(state_dir)
    return ensure_private_dir(folder, base=state_dir)


def _open_nofollow(path: Path, what: str, on_link: str) -> int | None:
    """A read descriptor of ``path`` that never follows a link; None when it is absent.

    Raises:
        StateDirError: ``path`` is a link (the message ends with ``on_link``) or cannot be opened.
    """
    try:
        return os.open(path, _NOFOLLOW_READ)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StateDirError(f"the {what} {path} is a symbolic link; {on_link}") from None
        raise StateDirError(f"cannot open the {what} {path}: {exc.strerror}.") from None


def check_secret(path: Path, mode: int = 0o600) -> bool:
    """Check a secret before it is reused; returns False when it is absent or empty (make a new one).

    The file must be a regular file (not a link) owned by the current user with no group or
    other permission; its owner bits are then set to ``mode`` (0400 for the munge key).

    Raises:
        StateDirError: a link, another owner, or group/world permissions, with the fix.
    """
    fd = _open_nofollow(
        path,
        "secret",
        "clusterctl never follows links for secrets. Remove the link; clusterctl makes a new secret on the next run.",
    )
    if fd is None:
        return False
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise StateDirError(f"the secret {path} is not a regular file. Move it away and run again.")
        if owned := _foreign(info):
            raise StateDirError(
                f"the secret {path} is {owned}. If you trust it, take it over with `chown {os.geteuid()} {path}`; "
                "otherwise delete it and clusterctl makes a new one."
            )
        current = stat.S_IMODE(info.st_mode)
        if current & 0o077:
            raise StateDirError(
                f"the secret {path} can be read or changed by group or others (mode {current:04o}), so it may "
                f"be known. If you are sure it is not, fix with `chmod {mode:o} {path}`; otherwise delete it and "
                "clusterctl makes a new one (the cluster gets it on the next `up`)."
            )
        if info.st_size == 0:
            return False  # an empty secret is a write that never finished: make it again
        if current != mode:
            os.fchmod(fd, mode)
        return True
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, mode: int = 0o600, *, replace: bool = True) -> bool:
    """Write ``data`` to ``path`` atomically with ``mode``.

    A temporary file is created exclusively next to ``path`` (never an existing file or a
    link), written, given ``mode``, synced, and renamed over ``path``. With ``replace=False``
    it is linked into place instead, which fails when ``path`` exists: the first writer wins
    and the others keep what it wrote.

    Returns:
        Whether ``path`` now holds ``data`` (False only with ``replace=False`` when ``path``
        already existed).
    """
    folder = path.parent
    for _ in range(100):
        temp = folder / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(temp, _TEMP_FLAGS, 0o600)
            break
        except FileExistsError:
            continue
    else:  # pragma: no cover
        raise StateDirError(f"could not create a temporary file in {folder}.")
    try:
        write_synced(fd, data, mode)
        if replace:
            temp.replace(path)
            placed = True
        else:
            try:
                os.link(temp, path, follow_symlinks=False)
                placed = True
            except FileExistsError:
                placed = False
            temp.unlink()
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    _sync_dir(folder)
    return placed


def _sync_dir(folder: Path) -> None:
    """fsync a directory so a rename in it survives a crash."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def ensure_secret(path: Path, data: bytes, mode: int = 0o600) -> Path:
    """The secret at ``path``: checked and kept when it exists, else created atomically with ``data``.

    The caller has checked ``path.parent`` (``ensure_private_dir``).
    """
    if check_secret(path, mode):
        return path
    if not write_atomic(path, data, mode, replace=os.path.lexists(path)) and not check_secret(path, mode):
        raise StateDirError(f"the secret {path} appeared while it was being made, empty. Run again.")
    return path


def read_text_nofollow(path: Path, what: str) -> str | None:
    """Text of the regular file ``path`` without following a link (None when absent).

    Raises:
        StateDirError: ``path`` is a link or not a regular file.
    """
    fd = _open_nofollow(
        path, what, "clusterctl never follows links in its state directory. Remove the link and run again."
    )
    if fd is None:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise StateDirError(f"the {what} {path} is not a regular file. Move it away and run again.")
        with os.fdopen(os.dup(fd), "rb") as handle:
            raw = handle.read()
    finally:
        os.close(fd)
    # Bytes that are not UTF-8 become U+FFFD: the caller's parser then rejects the text.
    return raw.decode("utf-8", errors="replace")


def open_lock(path: Path) -> IO[str]:
    """Open (creating it 0600) the lock file ``path`` for ``fcntl.flock``, never following a link.

    Raises:
        StateDirError: ``path`` is a link, not a regular file, or another user's.
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StateDirError(
                f"the lock file {path} is a symbolic link; clusterctl never follows it. Remove the link and run again."
            ) from None
        raise StateDirError(f"cannot open the lock file {path}: {exc.strerror}.") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
        os.close(fd)
        raise StateDirError(f"the lock file {path} is not a regular file of yours. Remove it and run again.")
    return os.fdopen(fd, "r+")


SWAPS_KEY = "spares"
"""state.json's list of spares put in service (plan/service.py)."""


# The cluster's munge key: 1024 random bytes (mungekey's default), 0400.
MUNGE_KEY = ("munge.key", 1024, True, 0o400)


class StateDir:
    """``<root>/<cluster>/`` and what lives in it."""

    def __init__(self, root: Path, cluster: str) -> None:
        self.root = root
        self.path = root / cluster
        self.cluster = cluster

    @property
    def secrets_dir(self) -> Path:
        """Secrets (0700)."""
        return self.path / "secrets"

    @property
    def state_file(self) -> Path:
        """state.json."""
        return self.path / "state.json"

    def ensure(self) -> Path:
        """Create the state directory 0700 (and its root, 0700, when missing), or check the existing one.

        Raises:
            StateDirError: the root or the directory is not safe (see ``check_private_dir``).
        """
        if not self.root.exists():
            self.root.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileExistsError):
                self.root.mkdir(mode=0o700)
                self.root.chmod(0o700)  # exactly 0700 whatever the umask
                # It sits beside the spec, often in a git checkout: secrets must never be committed.
                write_atomic(self.root / ".gitignore", b"# clusterctl state and secrets: never commit\n*\n", 0o600)
        _check_root(self.root)
        return ensure_private_dir(self.path)

    def exists(self) -> bool:
        """Whether anything was recorded for this cluster."""
        return self.state_file.exists()

    def read(self) -> dict[str, Any]:
        """The recorded state (empty when none).

        Raises:
            StateDirError: the directory or state.json is not safe, or state.json is not JSON.
        """
        if not os.path.lexists(self.path):
            return {}
        check_private_dir(self.path)
        text = read_text_nofollow(self.state_file, "state file")
        if text is None:
            return {}
        try:
            data = json_document(text, "state file")
        except ValueError as exc:
            raise StateDirError(
                f"the state file {self.state_file} is not valid JSON ({exc}). It is written atomically, so "
                "something else changed it: restore it, or delete it if the cluster no longer exists."
            ) from None
        if not isinstance(data, dict):
            raise StateDirError(f"the state file {self.state_file} does not hold a JSON object; restore or delete it.")
        return data

    def write(self, state: dict[str, Any]) -> None:
        """Replace state.json atomically."""
        self.ensure()
        write_atomic(self.state_file, (json.dumps(state, indent=2, sort_keys=True) + "\n").encode(), 0o600)

    def update(self, **changes: Any) -> dict[str, Any]:
        """Merge ``changes`` into state.json."""
        state = self.read()
        state.update(changes)
        state["updated_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        self.write(state)
        return state

    @contextlib.contextmanager
    def lock(self, command: str) -> Iterator[None]:
        """Hold the cluster's lock for the duration; raise ``LockedError`` if it is taken.

        Raises:
            LockedError: another clusterctl process holds it.
            StateDirError: the state directory or the lock file is not safe.
        """
        self.ensure()
        handle = open_lock(self.path / "lock")
        try:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read(200).strip() or "another process"
                raise LockedError(
                    f"cluster {self.cluster} is busy: {holder}. Wait for it to finish (or stop it) and run again."
                ) from None
            handle.seek(0)
            handle.truncate()
            handle.write(f"clusterctl {command} (pid {os.getpid()}, started {time.strftime('%H:%M:%S')})")
            handle.flush()
            yield
        finally:
            with contextlib.suppress(OSError):
                handle.seek(0)
                handle.truncate()
            handle.close()

    def secret_file(self, name: str, nbytes: int = 32, binary: bool = False, mode: int = 0o600) -> Path:
        """Path of a secret, generated once (random ``nbytes``) with ``mode``; never printed.

        Raises:
            StateDirError: the secret or its directory is a link, another user's, or readable by others.
        """
        self.ensure()
        ensure_private_dir(self.secrets_dir, base=self.path)
        data = secrets.token_bytes(nbytes) if binary else secrets.token_urlsafe(nbytes).encode()
        return ensure_secret(self.secrets_dir / name, data, mode)

    def munge_key(self) -> Path:
        """The cluster's munge key (generated once).

        Raises:
            StateDirError: as :meth:`secret_file`.
        """
        name, size, binary, mode = MUNGE_KEY
        return self.secret_file(name, size, binary=binary, mode=mode)

    @classmethod
    def at(cls, path: Path) -> StateDir:
        """The state directory whose path (``<root>/<cluster>``) is ``path``."""
        return cls(path.parent, path.name)

    def remove(self) -> None:
        """Delete the state directory (after ``down``), never following a link out of it.

        Raises:
            StateDirError: the state directory itself is a link or not the current user's.
        """
        if not os.path.lexists(self.path):
            return
        check_private_dir(self.path)
        # shutil.rmtree walks with directory descriptors and O_NOFOLLOW on Linux: a link inside
        # is removed as a link, its target is never touched.
        if not shutil.rmtree.avoids_symlink_attacks:  # pragma: no cover - Linux has it
            raise StateDirError(f"this platform cannot remove {self.path} without following links; remove it by hand.")
        shutil.rmtree(self.path)
