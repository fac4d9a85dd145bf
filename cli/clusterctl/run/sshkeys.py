"""SSH keys clusterctl generates once and keeps under ``.clusterctl/<cluster>/secrets/``.

- clusterctl's own client key (ed25519): authorized on every node it creates.
- The controller's heal key (ed25519): the controller's heal timer runs the nodes' health check
  with it; on the nodes it can run nothing else (a forced command in root's authorized_keys).
- One host key per cloud node (and the bastion): injected through cloud-init, so the
  known_hosts clusterctl writes is right before the first connection and SSH runs with
  ``StrictHostKeyChecking yes`` from the start -- no trust-on-first-use.

Private keys are written atomically 0600 in 0700 directories (see ``run.state``), never
printed, and only reach Pulumi as secret config (encrypted in the state with the stack's
passphrase). A reused private key is checked like any secret (no link, owner, mode).

A pair a crash left half-written is repaired on the next run: a private key that is missing,
empty or does not parse gives a new pair; a valid private key whose public half is missing,
unreadable or different gets its public half written again from it (the key a node may
already trust stays the same).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from clusterctl.run.state import (
    StateDirError,
    check_secret,
    ensure_secrets_dir,
    read_text_nofollow,
    write_atomic,
)

CLIENT_KEY = "ssh/id_ed25519"
HEAL_KEY = "ssh/heal_ed25519"
HEAL_KEY_COMMENT = "clusterctl-heal"
HOST_KEYS_DIR = "ssh/host_keys"


@dataclass(frozen=True)
class KeyPair:
    """An OpenSSH key pair: the private key (PEM) and the public line (``ssh-ed25519 AAAA...``)."""

    private: str
    public: str

    def __repr__(self) -> str:  # keep private keys out of logs and tracebacks
        return f"KeyPair(public={self.public!r}, private=***)"


def generate_ed25519(comment: str = "") -> KeyPair:
    """A new ed25519 key pair in OpenSSH formats."""
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    ).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    return KeyPair(private=private, public=f"{public} {comment}".strip())


def public_of(private: str) -> str | None:
    """The OpenSSH public line (type and key, no comment) of ``private``; None when it does not parse."""
    if not private.strip():
        return None
    try:
        key = serialization.load_ssh_private_key(private.encode(), password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        return None
    return key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()


def _load_or_create(private_path: Path, comment: str, *, retry: bool = True) -> KeyPair:
    public_path = private_path.with_name(private_path.name + ".pub")
    private = read_text_nofollow(private_path, "private key") if check_secret(private_path) else None
    derived = public_of(private) if private is not None else None
    if private is not None and derived is not None:
        public = read_text_nofollow(public_path, "public key")
        fields = public.split() if public else []
        if fields[:2] == derived.split()[:2]:
            return KeyPair(private=private, public=public.strip() if public else "")
        # The private key is good; its public half was not written (or not completely): write it again.
        line = f"{derived} {comment}".strip()
        write_atomic(public_path, (line + "\n").encode(), 0o644)
        return KeyPair(private=private, public=line)
    pair = generate_ed25519(comment)
    # A broken private key is replaced; a missing one is linked into place, so when two runs
    # make the first key at once, one wins and the other reads the winner's key.
    if not write_atomic(private_path, pair.private.encode(), 0o600, replace=os.path.lexists(private_path)):
        if retry:
            return _load_or_create(private_path, comment, retry=False)
        raise StateDirError(f"the private key {private_path} keeps changing under clusterctl; run again.")
    write_atomic(public_path, (pair.public + "\n").encode(), 0o644)
    return pair


def ensure_client_key(state_dir: Path, cluster: str) -> tuple[Path, KeyPair]:
    """clusterctl's SSH key for ``cluster`` (generated once); returns its path and the pair.

    Raises:
        StateDirError: the state directory, a key folder or the key is a link, another user's,
            or open to group/others.
    """
    path = state_dir / "secrets" / CLIENT_KEY
    ensure_secrets_dir(state_dir, path.parent)
    return path, _load_or_create(path, f"clusterctl@{cluster}")


def ensure_heal_key(state_dir: Path) -> Path:
    """The controller's heal key (generated once); returns the private key's path (``.pub`` beside it).

    Raises:
        StateDirError: as ``ensure_client_key``.
    """
    path = state_dir / "secrets" / HEAL_KEY
    ensure_secrets_dir(state_dir, path.parent)
    _load_or_create(path, HEAL_KEY_COMMENT)
    return path


def ensure_host_keys(state_dir: Path, names: list[str]) -> dict[str, KeyPair]:
    """A host key pair for each name (generated once, kept across runs so nodes keep their key).

    Raises:
        StateDirError: as ``ensure_client_key``, or a name that is not a plain file name.
    """
    folder = state_dir / "secrets" / HOST_KEYS_DIR
    ensure_secrets_dir(state_dir, folder)
    for name in names:
        if not name or name.startswith(".") or "/" in name or "\0" in name:
            raise StateDirError(f"refusing to keep a host key named {name!r}: not a plain file name.")
    return {name: _load_or_create(folder / name, f"root@{name}") for name in names}
