"""SSH keys clusterctl generates once and keeps under ``.clusterctl/<cluster>/secrets/``.

- clusterctl's own client key (ed25519): authorized on every node it creates.
- One host key per cloud node (and the bastion): injected through cloud-init, so the
  known_hosts clusterctl writes is right before the first connection and SSH runs with
  ``StrictHostKeyChecking yes`` from the start -- no trust-on-first-use.

Private keys are written 0600 in a 0700 directory, never printed, and only reach Pulumi as
secret config (encrypted in the state with the stack's passphrase).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

CLIENT_KEY = "ssh/id_ed25519"
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


def _secure_dir(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


def _load_or_create(private_path: Path, comment: str) -> KeyPair:
    public_path = private_path.with_name(private_path.name + ".pub")
    if private_path.exists() and public_path.exists():
        return KeyPair(private=private_path.read_text(), public=public_path.read_text().strip())
    _secure_dir(private_path.parent)
    pair = generate_ed25519(comment)
    _write_private(private_path, pair.private)
    public_path.write_text(pair.public + "\n")
    return pair


def ensure_client_key(state_dir: Path, cluster: str) -> tuple[Path, KeyPair]:
    """clusterctl's SSH key for ``cluster`` (generated once); returns its path and the pair."""
    secrets = state_dir / "secrets"
    _secure_dir(secrets)
    path = secrets / CLIENT_KEY
    return path, _load_or_create(path, f"clusterctl@{cluster}")


def ensure_host_keys(state_dir: Path, names: list[str]) -> dict[str, KeyPair]:
    """A host key pair for each name (generated once, kept across runs so nodes keep their key)."""
    secrets = state_dir / "secrets"
    _secure_dir(secrets)
    folder = secrets / HOST_KEYS_DIR
    return {name: _load_or_create(folder / name, f"root@{name}") for name in names}
