"""clusterctl.node.sync_files: the module's logic on a temporary directory, and the action's packing.

The module's functions run without Ansible (the node side); the action plugin is driven with a fake
task and a recorded module call (the controller side). Ownership is checked with this user's IDs, so
the tests run as root or not.
"""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.unit.collection.modules import load

ROOT = Path(__file__).resolve().parents[3]
COLLECTION = ROOT / "collections" / "ansible_collections" / "clusterctl" / "node"


sync_files = load("clusterctl_sync_files_module", COLLECTION / "plugins" / "modules" / "sync_files.py")
SyncError = sync_files.SyncError


def _b64(text: str | bytes) -> str:
    return base64.b64encode(text.encode() if isinstance(text, str) else text).decode()


def _file(dest: Path, text: str | bytes, **extra: Any) -> dict[str, Any]:
    return {"dest": str(dest), "content_b64": _b64(text), **extra}


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


# --- files --------------------------------------------------------------------------------------


def test_writes_only_the_files_that_differ(tmp_path: Path) -> None:
    same, other, new = tmp_path / "same", tmp_path / "other", tmp_path / "new"
    same.write_text("a\n")
    same.chmod(0o644)
    other.write_text("old\n")
    other.chmod(0o644)
    inode_same = same.stat().st_ino
    result = sync_files.sync(
        [_file(same, "a\n", mode="0644"), _file(other, "b\n", mode="0644"), _file(new, "c\n", mode="0600")]
    )
    assert result["changed"] is True
    assert result["changed_files"] == [str(other), str(new)]
    assert result["states"] == {str(same): "ok", str(other): "updated", str(new): "created"}
    assert same.stat().st_ino == inode_same  # not rewritten
    assert other.read_text() == "b\n"
    assert new.read_text() == "c\n"
    assert _mode(new) == 0o600
    # Atomic writes leave no temporary file behind.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new", "other", "same"]


def test_a_second_run_changes_nothing(tmp_path: Path) -> None:
    files = [
        {"dest": str(tmp_path / "d"), "state": "directory", "mode": "0750"},
        _file(tmp_path / "d" / "f", "x\n", mode="0640"),
        {"dest": str(tmp_path / "d" / "l"), "state": "link", "target": "f"},
        {"dest": str(tmp_path / "hosts"), "block": "10.0.0.1 a\n", "marker": "# {mark} nodes"},
    ]
    first = sync_files.sync(files)
    assert first["changed_files"] == [
        str(tmp_path / "d"),
        str(tmp_path / "d" / "f"),
        str(tmp_path / "d" / "l"),
        str(tmp_path / "hosts"),
    ]
    second = sync_files.sync(files)
    assert second == {
        "changed": False,
        "changed_files": [],
        "notify": [],
        "states": dict.fromkeys(first["states"], "ok"),
    }


def test_only_the_mode_is_fixed_when_the_content_is_right(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("x")
    path.chmod(0o600)
    inode = path.stat().st_ino
    result = sync_files.sync([_file(path, "x", mode="0644")])
    assert result["states"] == {str(path): "attributes"}
    assert _mode(path) == 0o644
    assert path.stat().st_ino == inode


def test_ownership_is_set_by_name_and_checked(tmp_path: Path) -> None:
    import grp
    import pwd

    user = pwd.getpwuid(os.getuid()).pw_name
    group = grp.getgrgid(os.getgid()).gr_name
    path = tmp_path / "f"
    result = sync_files.sync([_file(path, "x", owner=user, group=group)])
    assert result["states"][str(path)] == "created"
    assert (path.stat().st_uid, path.stat().st_gid) == (os.getuid(), os.getgid())
    assert sync_files.sync([_file(path, "x", owner=str(os.getuid()), group=group)])["changed"] is False


def test_an_unknown_owner_fails_with_the_destination(tmp_path: Path) -> None:
    with pytest.raises(SyncError, match=r"f: user 'no-such-user-xyz' does not exist"):
        sync_files.sync([_file(tmp_path / "f", "x", owner="no-such-user-xyz")])


def test_a_new_file_keeps_no_mode_from_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        sync_files.sync([_file(tmp_path / "f", "x")])
    finally:
        os.umask(old)
    assert _mode(tmp_path / "f") == 0o644


def test_an_existing_file_keeps_its_mode_when_none_is_given(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("old")
    path.chmod(0o600)
    sync_files.sync([_file(path, "new")])
    assert (path.read_text(), _mode(path)) == ("new", 0o600)


def test_binary_content_is_written_as_is(tmp_path: Path) -> None:
    key = bytes(range(256)) * 4
    path = tmp_path / "munge.key"
    result = sync_files.sync([_file(path, key, mode="0400")], want_diff=True)
    assert path.read_bytes() == key
    assert _mode(path) == 0o400
    assert "diff" not in result  # binary content is never put in a diff


def test_task_defaults_apply_to_entries_that_name_none(tmp_path: Path) -> None:
    sync_files.sync(
        [
            _file(tmp_path / "a", "a"),
            _file(tmp_path / "b", "b", mode="0600"),
            {"dest": str(tmp_path / "d"), "state": "directory"},
        ],
        {"mode": "0640", "directory_mode": "0700"},
    )
    assert (_mode(tmp_path / "a"), _mode(tmp_path / "b"), _mode(tmp_path / "d")) == (0o640, 0o600, 0o700)


def test_a_file_without_its_directory_fails_and_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(SyncError, match="list it as a directory entry before the file") as caught:
        sync_files.sync([_file(tmp_path / "a", "a"), _file(tmp_path / "missing" / "f", "x")])
    # What was done before the failure is reported.
    assert caught.value.partial["changed_files"] == [str(tmp_path / "a")]


def test_a_bad_mode_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SyncError, match="is not an octal mode"):
        sync_files.sync([_file(tmp_path / "f", "x", mode="u=rw")])


def test_a_relative_destination_is_refused() -> None:
    with pytest.raises(SyncError, match="dest must be an absolute path"):
        sync_files.sync([_file(Path("etc/f"), "x")])


# --- links at dest -------------------------------------------------------------------------------


def test_a_link_at_dest_is_replaced_never_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    link = tmp_path / "conf"
    link.symlink_to(victim)
    result = sync_files.sync([_file(link, "new\n")])
    assert result["states"] == {str(link): "updated"}
    assert victim.read_text() == "precious\n"
    assert not link.is_symlink()
    assert link.read_text() == "new\n"


def test_a_link_at_dest_is_followed_when_told(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.write_text("old\n")
    link = tmp_path / "conf"
    link.symlink_to(real)
    sync_files.sync([_file(link, "new\n", follow=True)])
    assert link.is_symlink()
    assert real.read_text() == "new\n"
    assert sync_files.sync([_file(link, "new\n", follow=True)])["changed"] is False


def test_a_linked_directory_is_refused_unless_followed(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "dir"
    link.symlink_to(real)
    with pytest.raises(SyncError, match="is a symbolic link; set follow: true"):
        sync_files.sync([{"dest": str(link), "state": "directory"}])
    assert sync_files.sync([{"dest": str(link), "state": "directory", "follow": True}])["changed"] is False


# --- check mode and diff -------------------------------------------------------------------------


def test_check_mode_reports_and_writes_nothing(tmp_path: Path) -> None:
    existing = tmp_path / "f"
    existing.write_text("old\n")
    files = [
        {"dest": str(tmp_path / "d"), "state": "directory"},
        _file(tmp_path / "d" / "g", "x"),  # in a directory that would be created: not an error
        _file(existing, "new\n", notify=["restart x"]),
        {"dest": str(tmp_path / "l"), "state": "link", "target": "f"},
    ]
    result = sync_files.sync(files, check=True, want_diff=True)
    assert result["changed_files"] == [
        str(tmp_path / "d"),
        str(tmp_path / "d" / "g"),
        str(existing),
        str(tmp_path / "l"),
    ]
    assert result["notify"] == ["restart x"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]
    assert existing.read_text() == "old\n"
    text_diff = next(d for d in result["diff"] if d.get("before_header") == str(existing))
    assert (text_diff["before"], text_diff["after"]) == ("old\n", "new\n")


def test_entries_marked_diff_false_stay_out_of_diffs(tmp_path: Path) -> None:
    result = sync_files.sync([_file(tmp_path / "secret", "password\n", diff=False)], want_diff=True)
    assert result["changed"] is True
    assert "diff" not in result


# --- notify ---------------------------------------------------------------------------------------


def test_notify_lists_the_topics_of_changed_entries_once_in_order(tmp_path: Path) -> None:
    (tmp_path / "same").write_text("s")
    result = sync_files.sync(
        [
            _file(tmp_path / "same", "s", notify=["never"]),
            _file(tmp_path / "slurm.conf", "a", notify=["slurm config changed"]),
            _file(tmp_path / "gres.conf", "b", notify=["restart slurmd"]),
            _file(tmp_path / "topology.conf", "c", notify=["slurm config changed"]),
        ]
    )
    assert result["notify"] == ["slurm config changed", "restart slurmd"]


# --- blocks ---------------------------------------------------------------------------------------


def test_block_is_added_then_replaced_in_place(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n::1 localhost")  # no final newline
    marker = "# {mark} cluster nodes"
    sync_files.sync([{"dest": str(hosts), "block": "10.0.0.1 a\n10.0.0.2 b\n", "marker": marker}])
    assert hosts.read_text() == (
        "127.0.0.1 localhost\n::1 localhost\n# BEGIN cluster nodes\n10.0.0.1 a\n10.0.0.2 b\n# END cluster nodes\n"
    )
    hosts.write_text(hosts.read_text() + "192.168.0.1 other\n")
    sync_files.sync([{"dest": str(hosts), "block": "10.0.0.3 c", "marker": marker}])
    assert hosts.read_text() == (
        "127.0.0.1 localhost\n::1 localhost\n"
        "# BEGIN cluster nodes\n10.0.0.3 c\n# END cluster nodes\n192.168.0.1 other\n"
    )


def test_block_goes_after_the_last_line_matching_insertafter() -> None:
    text = "auth x\n@include common-account\naccount y\n"
    out = sync_files.block_content(
        text, "account required pam_slurm_adopt.so", "# {mark} adopt", "^@include common-account"
    )
    assert out == (
        "auth x\n@include common-account\n# BEGIN adopt\naccount required pam_slurm_adopt.so\n# END adopt\naccount y\n"
    )
    # No matching line: at the end.
    assert sync_files.block_content("a\n", "b", "# {mark} m", "^nomatch").endswith("a\n# BEGIN m\nb\n# END m\n")


def test_block_in_a_bind_mounted_file_is_written_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n")
    inode = hosts.stat().st_ino

    def busy(src: str, dst: str) -> None:
        raise OSError(16, "Device or resource busy")

    monkeypatch.setattr(sync_files.os, "rename", busy)
    entry = {"dest": str(hosts), "block": "10.0.0.1 a", "marker": "# {mark} n"}
    with pytest.raises(SyncError, match="cannot replace it"):
        sync_files.sync([entry])
    sync_files.sync([{**entry, "unsafe_writes": True}])
    assert hosts.stat().st_ino == inode
    assert "10.0.0.1 a" in hosts.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hosts"]


# --- directories, absent, links, validate ---------------------------------------------------------


def test_directories_are_created_with_parents(tmp_path: Path) -> None:
    leaf = tmp_path / "a" / "b" / "c"
    sync_files.sync([{"dest": str(leaf), "state": "directory", "mode": "0700"}])
    assert _mode(leaf) == 0o700
    assert _mode(tmp_path / "a") == 0o755


def test_absent_removes_files_and_links_only(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    (tmp_path / "l").symlink_to("f")
    (tmp_path / "d").mkdir()
    result = sync_files.sync([{"dest": str(tmp_path / p), "state": "absent"} for p in ("f", "l", "gone")])
    assert result["states"] == {
        str(tmp_path / "f"): "removed",
        str(tmp_path / "l"): "removed",
        str(tmp_path / "gone"): "ok",
    }
    with pytest.raises(SyncError, match="is a directory"):
        sync_files.sync([{"dest": str(tmp_path / "d"), "state": "absent"}])


def test_link_is_repointed(tmp_path: Path) -> None:
    link = tmp_path / "l"
    link.symlink_to("old")
    assert sync_files.sync([{"dest": str(link), "state": "link", "target": "/usr/bin/new"}])["states"] == {
        str(link): "updated"
    }
    assert link.readlink() == Path("/usr/bin/new")


def test_validate_failure_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "prometheus.yml"
    path.write_text("good\n")
    seen: list[list[str]] = []

    def run(argv: list[str]) -> tuple[int, str, str]:
        seen.append(argv)
        return (1, "", "bad config") if Path(argv[-1]).read_text() == "bad\n" else (0, "", "")

    with pytest.raises(SyncError, match="failed `promtool check config %s` \\(rc 1\\): bad config"):
        sync_files.sync([_file(path, "bad\n", validate="promtool check config %s")], run_command=run)
    assert path.read_text() == "good\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prometheus.yml"]
    sync_files.sync([_file(path, "better\n", validate="promtool check config %s")], run_command=run)
    assert path.read_text() == "better\n"
    assert seen[-1][:3] == ["promtool", "check", "config"]


def test_a_destination_listed_twice_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SyncError, match="listed twice"):
        sync_files.sync([_file(tmp_path / "f", "a"), _file(tmp_path / "f", "b")])


# --- the action plugin (controller side) ----------------------------------------------------------

ansible_action = pytest.importorskip("ansible.plugins.action")


def _action(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, args: dict[str, Any], no_log: bool = False
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    action_module = load("clusterctl_sync_files_action", COLLECTION / "plugins" / "action" / "sync_files.py")
    calls: list[dict[str, Any]] = []
    action = action_module.ActionModule.__new__(action_module.ActionModule)
    action._task = SimpleNamespace(args=args, no_log=no_log)
    action._loader = SimpleNamespace(get_real_file=lambda path, decrypt=True: path, cleanup_tmp_file=lambda path: None)
    action._find_needle = lambda kind, needle: str(tmp_path / needle) if not Path(needle).is_absolute() else needle

    def execute(module_name: str, module_args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        calls.append({"module": module_name, "args": module_args})
        return {
            "changed": False,
            "changed_files": [],
            "notify": [],
            "states": {},
            "invocation": {"module_args": module_args},
        }

    action._execute_module = execute
    monkeypatch.setattr(action_module.ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    return action.run(task_vars={}), calls


def test_action_reads_sources_on_the_controller_in_one_call(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "key").write_bytes(b"\x00\x01secret")
    (tmp_path / "conf").write_text("a=1\n")
    result, calls = _action(
        monkeypatch,
        tmp_path,
        {
            "files": [
                {"src": str(tmp_path / "key"), "dest": "/etc/munge/munge.key", "mode": "0400"},
                {"src": "conf", "dest": "/etc/x.conf", "notify": ["restart x"]},
                {"content": "inline\n", "dest": "/etc/y"},
                {"dest": "/etc/d", "state": "directory"},
            ]
        },
    )
    (call,) = calls
    assert call["module"] == "clusterctl.node.sync_files"
    key, conf, inline, directory = call["args"]["files"]
    assert base64.b64decode(key["content_b64"]) == b"\x00\x01secret"
    assert key["diff"] is False  # binary
    assert "src" not in key
    assert base64.b64decode(conf["content_b64"]) == b"a=1\n"
    assert (conf["diff"], conf["notify"]) == (True, ["restart x"])
    assert base64.b64decode(inline["content_b64"]) == b"inline\n"
    assert directory == {"dest": "/etc/d", "state": "directory", "diff": True}
    assert "invocation" not in result  # the echo of the arguments (every content) is dropped


def test_action_keeps_contents_out_of_diffs_under_no_log(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _, calls = _action(
        monkeypatch,
        tmp_path,
        {"files": [{"content": "StoragePass=x\n", "dest": "/etc/slurm/slurmdbd.conf"}]},
        no_log=True,
    )
    assert calls[0]["args"]["files"][0]["diff"] is False


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"dest": "/etc/x"}, "give exactly one of src, content or block"),
        ({"dest": "/etc/x", "src": "a", "content": "b"}, "got src, content"),
        ({"dest": "/etc/x", "state": "directory", "content": "b"}, "state=directory takes no content"),
        ({"src": "a"}, "has no dest"),
        ({"dest": "/etc/x", "src": "missing-file"}, "source missing-file not found"),
    ],
)
def test_action_refuses_malformed_entries(tmp_path: Path, entry: dict[str, Any], message: str) -> None:
    from ansible.errors import AnsibleActionFail, AnsibleError

    def missing(kind: str, needle: str) -> str:
        raise AnsibleError("not found")

    action_module = load("clusterctl_sync_files_action", COLLECTION / "plugins" / "action" / "sync_files.py")
    action = action_module.ActionModule.__new__(action_module.ActionModule)
    action._task = SimpleNamespace(args={"files": [entry]}, no_log=False)
    action._find_needle = missing
    with pytest.raises(AnsibleActionFail, match=message):
        action._pack(0, entry, False)


def test_documentation_parses_and_matches_the_argument_spec() -> None:
    import yaml

    doc = yaml.safe_load(sync_files.DOCUMENTATION)
    assert yaml.safe_load(sync_files.EXAMPLES)
    assert yaml.safe_load(sync_files.RETURN)
    assert set(doc["options"]["files"]["suboptions"]) == set(sync_files.ENTRY_OPTIONS)
