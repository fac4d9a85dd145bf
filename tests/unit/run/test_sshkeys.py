"""SSH keys in the state directory: half-written pairs repaired, unsafe keys refused."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from clusterctl.run.sshkeys import CLIENT_KEY, ensure_client_key, ensure_host_keys, generate_ed25519, public_of
from clusterctl.run.state import StateDirError


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    path = tmp_path / "demo"
    path.mkdir(mode=0o700)
    return path


def _pub(path: Path) -> Path:
    return path.with_name(path.name + ".pub")


def _matches(private: Path) -> bool:
    derived = public_of(private.read_text())
    return derived is not None and _pub(private).read_text().split()[:2] == derived.split()[:2]


def test_client_key_is_made_once_with_private_modes(state_dir: Path) -> None:
    path, pair = ensure_client_key(state_dir, "demo")
    assert path == state_dir / "secrets" / CLIENT_KEY
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for folder in (state_dir / "secrets", path.parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert pair.public.endswith("clusterctl@demo")
    assert _matches(path)
    assert ensure_client_key(state_dir, "demo")[1] == pair


def test_private_without_public_gets_its_public_half_back(state_dir: Path) -> None:
    path, pair = ensure_client_key(state_dir, "demo")
    _pub(path).unlink()
    again = ensure_client_key(state_dir, "demo")[1]
    assert again.private == pair.private, "a good private key was thrown away"
    assert again.public == pair.public
    assert _matches(path)


def test_public_without_private_gives_a_new_pair(state_dir: Path) -> None:
    path, pair = ensure_client_key(state_dir, "demo")
    path.unlink()
    again = ensure_client_key(state_dir, "demo")[1]
    assert again.public != pair.public
    assert _matches(path)


@pytest.mark.parametrize(
    "content",
    [
        "",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n",
        "garbage\x00\xff",
    ],
    ids=["empty", "truncated", "garbage"],
)
def test_empty_or_unparsable_private_key_gives_a_new_pair(state_dir: Path, content: str) -> None:
    path, pair = ensure_client_key(state_dir, "demo")
    path.write_text(content)
    again = ensure_client_key(state_dir, "demo")[1]
    assert again.public != pair.public
    assert public_of(path.read_text()) is not None
    assert _matches(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_public_not_matching_the_private_is_written_again(state_dir: Path) -> None:
    path, pair = ensure_client_key(state_dir, "demo")
    _pub(path).write_text(generate_ed25519("other").public + "\n")
    again = ensure_client_key(state_dir, "demo")[1]
    assert again == pair
    assert _matches(path)


def test_host_keys_are_kept_and_repaired_per_host(state_dir: Path) -> None:
    first = ensure_host_keys(state_dir, ["gpu001", "gpu002"])
    folder = state_dir / "secrets" / "ssh" / "host_keys"
    (folder / "gpu002").write_text("")
    again = ensure_host_keys(state_dir, ["gpu001", "gpu002"])
    assert again["gpu001"] == first["gpu001"]
    assert again["gpu002"].public != first["gpu002"].public
    assert _matches(folder / "gpu002")


@pytest.mark.parametrize("name", ["../escape", ".hidden", "", "a/b"])
def test_host_key_names_must_be_plain(state_dir: Path, name: str) -> None:
    with pytest.raises(StateDirError, match="not a plain file name"):
        ensure_host_keys(state_dir, [name])


def test_symlinked_private_key_is_refused(state_dir: Path, tmp_path: Path) -> None:
    path, _ = ensure_client_key(state_dir, "demo")
    stolen = tmp_path / "attacker-key"
    stolen.write_text(generate_ed25519().private)
    path.unlink()
    path.symlink_to(stolen)
    with pytest.raises(StateDirError, match="is a symbolic link"):
        ensure_client_key(state_dir, "demo")


def test_symlinked_public_key_is_refused(state_dir: Path, tmp_path: Path) -> None:
    path, _ = ensure_client_key(state_dir, "demo")
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    _pub(path).unlink()
    _pub(path).symlink_to(victim)
    with pytest.raises(StateDirError, match="is a symbolic link"):
        ensure_client_key(state_dir, "demo")
    assert victim.read_text() == "keep me\n"


def test_private_key_readable_by_others_is_refused(state_dir: Path) -> None:
    path, _ = ensure_client_key(state_dir, "demo")
    path.chmod(0o644)
    with pytest.raises(StateDirError, match=r"mode 0644.*chmod 600"):
        ensure_client_key(state_dir, "demo")


def test_private_key_of_another_user_is_refused(state_dir: Path) -> None:
    path, _ = ensure_client_key(state_dir, "demo")
    os.chown(path, 4242, -1)
    with pytest.raises(StateDirError, match="owned by uid 4242"):
        ensure_client_key(state_dir, "demo")


def test_state_dir_writable_by_others_is_refused(state_dir: Path) -> None:
    state_dir.chmod(0o777)
    with pytest.raises(StateDirError, match="writable by group or others"):
        ensure_client_key(state_dir, "demo")
    assert not (state_dir / "secrets").exists()


def test_symlinked_key_folder_is_refused(state_dir: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (state_dir / "secrets").mkdir(mode=0o700)
    (state_dir / "secrets" / "ssh").symlink_to(elsewhere)
    with pytest.raises(StateDirError, match="is a symbolic link"):
        ensure_client_key(state_dir, "demo")
    assert list(elsewhere.iterdir()) == []


def test_a_missing_state_dir_is_created_0700(tmp_path: Path) -> None:
    target = tmp_path / "new" / "demo"
    ensure_client_key(target, "demo")
    assert stat.S_IMODE(target.stat().st_mode) == 0o700
