"""The cluster's secrets never appear in the build directory, the Ansible log or a converge's output.

Runs against the artifacts of the Molecule ``cluster`` scenario (roles/slurm/molecule/cluster),
which scripts/molecule-all.sh collects under test-artifacts/molecule-cluster/:

    secrets/munge.key, secrets/slurmdbd.password   the secrets, on the control machine
    build/                                         the rendered build directory
    ansible.log                                    ANSIBLE_LOG_PATH of every playbook run
    process-output.log                             what `molecule test` printed (converge,
                                                   idempotence, verify)

The munge key is looked for raw, in hex (both cases) and in base64 (standard and URL-safe, at all
three byte alignments, so it is also found inside a longer encoded blob), in whole and by chunks;
the database password raw, in hex and in base64. Without artifacts the test skips, unless
CLUSTERCTL_REQUIRE_CLUSTER_ARTIFACTS=1 (set by scripts/molecule-all.sh), when it fails.
"""

from __future__ import annotations

import base64
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("CLUSTERCTL_CLUSTER_ARTIFACTS", ROOT / "test-artifacts" / "molecule-cluster"))
# Chunks of the key searched for on their own, so a partial leak (a truncated dump) is found too:
# any run of 2 * CHUNK - 1 consecutive key bytes contains one whole chunk.
CHUNK = 24

pytestmark = pytest.mark.integration


def encodings(secret: bytes) -> set[bytes]:
    """Byte strings that would show ``secret`` (or a CHUNK-byte piece of it) in a file."""
    pieces = {secret}
    if len(secret) > 2 * CHUNK:
        pieces |= {secret[i : i + CHUNK] for i in range(0, len(secret) - CHUNK + 1, CHUNK)}
    found: set[bytes] = set()
    for piece in pieces:
        found |= {piece, piece.hex().encode(), piece.hex().upper().encode()}
        for shift in range(3):
            # Inside a longer base64 text the piece starts at any byte offset: encode from a
            # 3-byte boundary and keep only the characters that depend on the piece alone.
            shifted = piece[shift:]
            usable = len(shifted) - len(shifted) % 3
            if usable >= 12:
                for encode in (base64.b64encode, base64.urlsafe_b64encode):
                    found.add(encode(shifted[:usable]))
    return found


def files_under(*paths: Path) -> Iterator[Path]:
    """Every regular file of ``paths`` (files, or directories walked recursively)."""
    for path in paths:
        if path.is_file():
            yield path
        elif path.is_dir():
            yield from (p for p in sorted(path.rglob("*")) if p.is_file() and not p.is_symlink())


def leaks(needles: set[bytes], paths: list[Path]) -> list[str]:
    """``file: encoding`` for every needle found in a file."""
    hits = []
    for path in files_under(*paths):
        data = path.read_bytes()
        hits += [f"{path}: {needle[:12]!r}..." for needle in needles if needle in data]
    return hits


@pytest.fixture(scope="module")
def artifacts() -> Path:
    wanted = [ARTIFACTS / p for p in ("secrets/munge.key", "secrets/slurmdbd.password", "build", "ansible.log")]
    missing = [str(p) for p in wanted if not p.exists()]
    if missing:
        message = f"no cluster-scenario artifacts ({', '.join(missing)}): run scripts/molecule-all.sh slurm/cluster"
        if os.environ.get("CLUSTERCTL_REQUIRE_CLUSTER_ARTIFACTS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return ARTIFACTS


def scanned(artifacts: Path) -> list[Path]:
    logs = sorted(artifacts.glob("*.log"))
    assert artifacts / "ansible.log" in logs
    return [artifacts / "build", *logs]


def test_the_scan_finds_a_planted_secret(tmp_path: Path) -> None:
    key = os.urandom(1024)
    (tmp_path / "raw").write_bytes(b"x" + key[101 : 101 + 2 * CHUNK - 1] + b"y")
    (tmp_path / "b64").write_bytes(base64.b64encode(b"prefix!" + key))
    (tmp_path / "hex").write_text("log: " + key[500:600].hex().upper())
    (tmp_path / "clean").write_bytes(os.urandom(4096))
    hit_files = {hit.split(":")[0] for hit in leaks(encodings(key), [tmp_path])}
    assert hit_files == {str(tmp_path / name) for name in ("raw", "b64", "hex")}


def test_secrets_are_private_files_outside_the_build_dir(artifacts: Path) -> None:
    secrets = artifacts / "secrets"
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o700
    assert stat.S_IMODE((secrets / "munge.key").stat().st_mode) == 0o400
    assert stat.S_IMODE((secrets / "slurmdbd.password").stat().st_mode) == 0o600
    build = (artifacts / "build").resolve()
    assert not any(build in p.resolve().parents for p in secrets.iterdir())
    assert (secrets / "munge.key").stat().st_size >= 32


def test_munge_key_is_not_leaked(artifacts: Path) -> None:
    key = (artifacts / "secrets" / "munge.key").read_bytes()
    paths = scanned(artifacts)
    assert any(p.is_file() and p.stat().st_size > 0 for p in files_under(*paths)), "nothing to scan"
    assert leaks(encodings(key), paths) == []


def test_database_password_is_not_leaked(artifacts: Path) -> None:
    password = (artifacts / "secrets" / "slurmdbd.password").read_bytes().strip()
    assert len(password) >= 16
    needles = {password, password.hex().encode(), base64.b64encode(password), base64.b64encode(password).rstrip(b"=")}
    assert leaks(needles, scanned(artifacts)) == []
