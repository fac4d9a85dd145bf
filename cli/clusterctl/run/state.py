"""The state directory ``.clusterctl/<cluster>/``: state.json, a lock, and secrets.

state.json is written atomically (temp file + rename) so an interrupted run never leaves
it half-written; the lock keeps a second ``up``/``down`` of the same cluster out.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DEFAULT_ROOT = Path(".clusterctl")


class LockedError(Exception):
    """Another clusterctl process holds the cluster's lock."""


class StateDir:
    """``<root>/<cluster>/`` and what lives in it."""

    def __init__(self, root: Path, cluster: str) -> None:
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

    def exists(self) -> bool:
        """Whether anything was recorded for this cluster."""
        return self.state_file.exists()

    def read(self) -> dict[str, Any]:
        """The recorded state (empty when none)."""
        if not self.state_file.exists():
            return {}
        return dict(json.loads(self.state_file.read_text()))

    def write(self, state: dict[str, Any]) -> None:
        """Replace state.json atomically."""
        self.path.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_name(f".state.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
        tmp.replace(self.state_file)

    def update(self, **changes: Any) -> dict[str, Any]:
        """Merge ``changes`` into state.json."""
        state = self.read()
        state.update(changes)
        state["updated_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        self.write(state)
        return state

    @contextlib.contextmanager
    def lock(self, command: str) -> Iterator[None]:
        """Hold the cluster's lock for the duration; raise ``LockedError`` if it is taken."""
        self.path.mkdir(parents=True, exist_ok=True)
        lock_path = self.path / "lock"
        handle = lock_path.open("a+")
        try:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read().strip() or "another process"
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
        """Path of a secret, generated once (random ``nbytes``) with ``mode``; never printed."""
        self.secrets_dir.mkdir(parents=True, exist_ok=True)
        self.secrets_dir.chmod(0o700)
        path = self.secrets_dir / name
        if not path.exists():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(secrets.token_bytes(nbytes) if binary else secrets.token_urlsafe(nbytes).encode())
        path.chmod(mode)
        return path

    def remove(self) -> None:
        """Delete the state directory (after ``down``)."""
        if not self.path.exists():
            return
        for child in sorted(self.path.rglob("*"), key=lambda p: len(p.parts), reverse=True):
            if child.is_dir() and not child.is_symlink():
                child.rmdir()
            else:
                child.chmod(0o600) if not child.is_symlink() else None
                child.unlink()
        self.path.rmdir()
