"""The state directory: 0700, refused when someone else could change it, no links, atomic secrets."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from clusterctl.commands import cli
from clusterctl.run.state import LockedError, StateDir, StateDirError, check_secret, open_lock
from tests.conftest import EXAMPLES

OTHER_UID = 4242  # no such user here; the tests run as root, so chown to it works


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def state(tmp_path: Path) -> StateDir:
    return StateDir(tmp_path / ".clusterctl", "demo")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    return victim


def test_state_dir_and_its_root_are_created_0700(state: StateDir) -> None:
    old = os.umask(0o022)
    try:
        state.write({"status": "new"})
    finally:
        os.umask(old)
    assert _mode(state.root) == 0o700
    assert _mode(state.path) == 0o700
    assert _mode(state.state_file) == 0o600
    assert state.read() == {"status": "new"}


def test_an_existing_root_keeps_its_mode(tmp_path: Path) -> None:
    root = tmp_path / "shared"
    root.mkdir(mode=0o755)
    root.chmod(0o755)
    StateDir(root, "demo").ensure()
    assert _mode(root) == 0o755
    assert _mode(root / "demo") == 0o700


def test_an_existing_readable_state_dir_is_tightened_to_0700(state: StateDir) -> None:
    state.path.mkdir(parents=True)
    state.path.chmod(0o755)
    state.ensure()
    assert _mode(state.path) == 0o700


@pytest.mark.parametrize("mode", [0o770, 0o707, 0o777, 0o720])
def test_group_or_world_writable_state_dir_is_refused(state: StateDir, mode: int) -> None:
    state.path.mkdir(parents=True)
    state.path.chmod(mode)
    for action in (lambda: state.lock("up").__enter__(), lambda: state.write({}), lambda: state.secret_file("x")):
        with pytest.raises(StateDirError, match=r"writable by group or others .*chmod 700"):
            action()
    with pytest.raises(StateDirError):
        state.read()
    assert not (state.path / "secrets").exists()


def test_state_dir_owned_by_another_user_is_refused(state: StateDir) -> None:
    state.path.mkdir(parents=True, mode=0o700)
    os.chown(state.path, OTHER_UID, -1)
    with pytest.raises(StateDirError, match=rf"owned by uid {OTHER_UID}.*chown -R {os.geteuid()}"):
        state.secret_file("munge.key")
    with pytest.raises(StateDirError, match="owned by"), state.lock("up"):
        pass
    assert not (state.path / "lock").exists()


def test_world_writable_root_without_sticky_bit_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "open"
    root.mkdir()
    root.chmod(0o777)
    with pytest.raises(StateDirError, match=r"root .* writable by group or others"):
        StateDir(root, "demo").ensure()
    root.chmod(0o1777)  # like /tmp: others cannot rename our entries
    StateDir(root, "demo").ensure()


def test_symlinked_state_dir_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    root = tmp_path / ".clusterctl"
    root.mkdir(mode=0o700)
    (root / "demo").symlink_to(real)
    state = StateDir(root, "demo")
    with pytest.raises(StateDirError, match="is a symbolic link"):
        state.secret_file("munge.key")
    with pytest.raises(StateDirError, match="is a symbolic link"):
        state.read()
    assert list(real.iterdir()) == []


def test_symlinked_lock_file_is_not_followed(state: StateDir, outside: Path) -> None:
    state.ensure()
    (state.path / "lock").symlink_to(outside)
    with pytest.raises(StateDirError, match=r"lock file .* is a symbolic link"), state.lock("up"):
        pass
    assert outside.read_text() == "keep me\n", "the lock truncated a file through a link"


def test_dangling_symlinked_lock_file_creates_nothing(state: StateDir, tmp_path: Path) -> None:
    state.ensure()
    (state.path / "lock").symlink_to(tmp_path / "created-through-link")
    with pytest.raises(StateDirError, match="symbolic link"):
        open_lock(state.path / "lock")
    assert not (tmp_path / "created-through-link").exists()


def test_lock_keeps_a_second_command_out(state: StateDir) -> None:
    second = StateDir(state.root, "demo")
    with state.lock("up"), pytest.raises(LockedError, match=r"busy: clusterctl up \(pid"), second.lock("down"):
        pass
    assert _mode(state.path / "lock") == 0o600
    with state.lock("down"):
        pass


def test_secret_is_created_once_with_its_mode(state: StateDir) -> None:
    key = state.secret_file("munge.key", 1024, binary=True, mode=0o400)
    password = state.secret_file("slurmdbd_password", 24)
    assert _mode(key) == 0o400
    assert _mode(password) == 0o600
    assert _mode(state.secrets_dir) == 0o700
    assert len(key.read_bytes()) == 1024
    first = key.read_bytes()
    assert state.secret_file("munge.key", 1024, binary=True, mode=0o400).read_bytes() == first
    assert [p.name for p in state.secrets_dir.iterdir() if p.name.endswith(".tmp")] == []


def test_symlinked_secret_is_refused(state: StateDir, outside: Path) -> None:
    state.secrets_dir.mkdir(parents=True, mode=0o700)
    (state.secrets_dir / "munge.key").symlink_to(outside)
    with pytest.raises(StateDirError, match=r"secret .* is a symbolic link"):
        state.secret_file("munge.key", 1024, binary=True, mode=0o400)
    assert outside.read_text() == "keep me\n"
    assert _mode(outside) != 0o400, "chmod went through the link"


def test_dangling_symlinked_secret_writes_nothing_through_it(state: StateDir, tmp_path: Path) -> None:
    state.secrets_dir.mkdir(parents=True, mode=0o700)
    (state.secrets_dir / "munge.key").symlink_to(tmp_path / "leak")
    with pytest.raises(StateDirError, match="symbolic link"):
        state.secret_file("munge.key")
    assert not (tmp_path / "leak").exists()


def test_symlinked_secrets_dir_is_refused(state: StateDir, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    state.ensure()
    state.secrets_dir.symlink_to(elsewhere)
    with pytest.raises(StateDirError, match="is a symbolic link"):
        state.secret_file("munge.key")
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_secret_readable_by_others_is_refused_with_the_fix(state: StateDir, mode: int) -> None:
    path = state.secret_file("slurmdbd_password")
    path.chmod(mode)
    with pytest.raises(StateDirError, match=rf"mode {mode:04o}.*chmod 600 {path}.*delete it"):
        state.secret_file("slurmdbd_password")
    assert _mode(path) == mode, "the refused secret was changed"


def test_secret_owned_by_another_user_is_refused(state: StateDir) -> None:
    path = state.secret_file("slurmdbd_password")
    os.chown(path, OTHER_UID, -1)
    with pytest.raises(StateDirError, match=rf"owned by uid {OTHER_UID}"):
        state.secret_file("slurmdbd_password")


def test_secrets_dir_writable_by_group_is_refused(state: StateDir) -> None:
    state.secret_file("slurmdbd_password")
    state.secrets_dir.chmod(0o770)
    with pytest.raises(StateDirError, match="writable by group or others"):
        state.secret_file("slurmdbd_password")


def test_an_empty_secret_left_by_a_crash_is_made_again(state: StateDir) -> None:
    state.secrets_dir.mkdir(parents=True, mode=0o700)
    empty = state.secrets_dir / "slurmdbd_password"
    empty.touch(mode=0o600)
    assert not check_secret(empty)
    assert len(state.secret_file("slurmdbd_password", 24).read_text()) >= 24


def test_a_looser_requested_mode_never_loosens_a_tight_secret(state: StateDir) -> None:
    path = state.secret_file("munge.key", 16, binary=True, mode=0o400)
    assert _mode(state.secret_file("munge.key", 16, binary=True, mode=0o400)) == 0o400
    path.chmod(0o600)
    assert _mode(state.secret_file("munge.key", 16, binary=True, mode=0o400)) == 0o400


def test_state_json_is_written_atomically_and_never_through_a_link(state: StateDir, outside: Path) -> None:
    state.update(status="up")
    assert json.loads(state.state_file.read_text())["status"] == "up"
    state.state_file.unlink()
    state.state_file.symlink_to(outside)
    with pytest.raises(StateDirError, match=r"state file .* is a symbolic link"):
        state.read()
    state.write({"status": "down"})  # replaces the link itself (rename), never writes through it
    assert outside.read_text() == "keep me\n"
    assert not state.state_file.is_symlink()
    assert state.read() == {"status": "down"}


def test_broken_state_json_is_a_clear_error(state: StateDir) -> None:
    state.write({})
    state.state_file.write_text("{not json")
    with pytest.raises(StateDirError, match="not valid JSON"):
        state.read()


def test_remove_never_follows_a_link_out_of_the_state_dir(state: StateDir, tmp_path: Path, outside: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "data").write_text("keep\n")
    state.secret_file("munge.key", 16, binary=True, mode=0o400)
    (state.path / "pulumi").mkdir()
    (state.path / "pulumi" / "backend").symlink_to(elsewhere)
    (state.path / "facts").symlink_to(elsewhere)
    (state.path / "secret-link").symlink_to(outside)
    state.remove()
    assert not state.path.exists()
    assert (elsewhere / "data").read_text() == "keep\n"
    assert outside.read_text() == "keep me\n"


def test_remove_refuses_a_symlinked_state_dir(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (real / "keep").write_text("x")
    root = tmp_path / ".clusterctl"
    root.mkdir(mode=0o700)
    (root / "demo").symlink_to(real)
    with pytest.raises(StateDirError, match="symbolic link"):
        StateDir(root, "demo").remove()
    assert (real / "keep").exists()


def test_cli_up_refuses_an_unsafe_state_dir_with_exit_1(tmp_path: Path) -> None:
    root = tmp_path / "state"
    (root / "local").mkdir(parents=True)
    (root / "local").chmod(0o777)
    result = CliRunner().invoke(
        cli,
        ["up", str(EXAMPLES / "local.yaml"), "--out", str(tmp_path / "b"), "--state-dir", str(root), "--yes"],
        catch_exceptions=False,
    )
    text = " ".join((result.stdout + result.stderr).split())
    assert result.exit_code == 1, text
    assert "writable by group or others" in text
    assert "chmod 700" in text
    assert "Traceback" not in text
    assert not (tmp_path / "b").exists(), "up rendered although its state dir was refused"


def test_pulumi_passphrase_is_a_checked_secret(tmp_path: Path, outside: Path) -> None:
    from clusterctl.run.pulumi import PASSPHRASE_FILE, ensure_passphrase

    state_dir = tmp_path / "demo"
    path = ensure_passphrase(state_dir)
    assert _mode(path) == 0o600
    assert _mode(state_dir / "secrets") == 0o700
    assert ensure_passphrase(state_dir).read_text() == path.read_text()
    path.chmod(0o644)
    with pytest.raises(StateDirError, match="mode 0644"):
        ensure_passphrase(state_dir)
    path.unlink()
    (state_dir / "secrets" / PASSPHRASE_FILE).symlink_to(outside)
    with pytest.raises(StateDirError, match="symbolic link"):
        ensure_passphrase(state_dir)
    assert outside.read_text() == "keep me\n"


def test_burst_group_state_and_lock_never_follow_links(tmp_path: Path, outside: Path) -> None:
    from clusterctl.run.burst_cloud import GroupState, group_lock, read_state, state_path, write_state

    state_dir = tmp_path / "state"
    path = state_path(state_dir, "gpu-b")
    path.parent.mkdir(parents=True)
    (path.parent / f".{path.name}.tmp").symlink_to(outside)  # the fixed temporary name of earlier versions
    write_state(state_dir, "gpu-b", GroupState(active=["b001"]))
    assert read_state(state_dir, "gpu-b").active == ["b001"]
    assert outside.read_text() == "keep me\n"
    path.with_suffix(".lock").symlink_to(outside)
    with pytest.raises(StateDirError, match=r"lock file .* is a symbolic link"), group_lock(state_dir, "gpu-b"):
        pass
    assert outside.read_text() == "keep me\n"
