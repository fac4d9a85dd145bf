"""The build directory writer: never outside the directory, never through a link, always atomic."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from clusterctl.commands import cli
from clusterctl.render import BuildDirError, RenderedFile, write_tree
from clusterctl.render.builddir import MANIFEST, read_manifest, split_entry
from tests.conftest import EXAMPLES

LOCAL = str(EXAMPLES / "local.yaml")

FILES = [
    RenderedFile("hosts", "127.0.0.1 localhost\n"),
    RenderedFile("slurm/slurm.conf", "ClusterName=x\n"),
    RenderedFile("scripts/run.sh", "#!/bin/sh\n", 0o755),
]


def _outside(tmp_path: Path) -> Path:
    """A directory next to the build directory with a file that must never change."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim").write_text("keep me\n")
    return outside


def _untouched(outside: Path) -> None:
    assert sorted(p.name for p in outside.iterdir()) == ["victim"]
    assert (outside / "victim").read_text() == "keep me\n"


def _render(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["render", LOCAL, *args], catch_exceptions=False)
    return result.exit_code, result.stdout + result.stderr


def test_writes_files_with_modes_and_a_manifest(tmp_path: Path) -> None:
    out = tmp_path / "build"
    changed = write_tree(FILES, out)
    assert changed == ["hosts", "slurm/slurm.conf", "scripts/run.sh"]
    assert (out / "slurm" / "slurm.conf").read_text() == "ClusterName=x\n"
    assert (out / "scripts" / "run.sh").stat().st_mode & 0o777 == 0o755
    assert (out / "hosts").stat().st_mode & 0o777 == 0o644
    assert read_manifest(out) == ["hosts", "scripts/run.sh", "slurm/slurm.conf"]
    leftovers = [p.name for p in out.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == [], "temporary files stay behind"


def test_rerender_changes_nothing_and_removes_stale_files(tmp_path: Path) -> None:
    out = tmp_path / "build"
    write_tree(FILES, out)
    inode = (out / "hosts").stat().st_ino
    assert write_tree(FILES, out) == []
    assert (out / "hosts").stat().st_ino == inode, "an unchanged file was rewritten"
    changed = write_tree([*FILES[:1], RenderedFile("slurm/slurm.conf", "ClusterName=y\n")], out)
    assert changed == ["scripts/run.sh", "slurm/slurm.conf"]
    assert not (out / "scripts" / "run.sh").exists()
    assert read_manifest(out) == ["hosts", "slurm/slurm.conf"]


def test_a_file_whose_mode_changed_is_rewritten(tmp_path: Path) -> None:
    out = tmp_path / "build"
    write_tree(FILES, out)
    (out / "hosts").chmod(0o666)
    assert write_tree(FILES, out) == ["hosts"]
    assert (out / "hosts").stat().st_mode & 0o777 == 0o644


def test_empty_existing_directory_is_accepted(tmp_path: Path) -> None:
    out = tmp_path / "empty"
    out.mkdir()
    assert write_tree(FILES, out)


def test_non_empty_directory_without_manifest_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "home"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    with pytest.raises(BuildDirError, match=r"is not empty and has no \.clusterctl-manifest"):
        write_tree(FILES, out)
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"], "something was written into a foreign directory"


def test_cli_render_refuses_a_foreign_directory_with_exit_1(tmp_path: Path) -> None:
    out = tmp_path / "home"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    code, text = _render("--out", str(out))
    assert code == 1
    assert f"{out} is not empty and has no {MANIFEST}" in " ".join(text.split())
    assert "Traceback" not in text
    assert "internal error" not in text


def test_cli_up_refuses_a_foreign_build_directory_before_anything_runs(tmp_path: Path) -> None:
    out = tmp_path / "home"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    result = CliRunner().invoke(
        cli,
        ["up", LOCAL, "--out", str(out), "--state-dir", str(tmp_path / "state"), "--yes"],
        catch_exceptions=False,
    )
    text = " ".join((result.stdout + result.stderr).split())
    assert result.exit_code == 1, text
    assert "is not empty and has no" in text
    assert "Traceback" not in text
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize(
    ("entry", "why"),
    [("../outside/victim", "climbs out with '..'"), ("slurm/../../outside/victim", "climbs out with '..'")],
)
def test_manifest_entry_with_dotdot_is_refused(tmp_path: Path, entry: str, why: str) -> None:
    outside = _outside(tmp_path)
    out = tmp_path / "build"
    write_tree(FILES, out)
    (out / MANIFEST).write_text(f"hosts\n{entry}\n")
    with pytest.raises(BuildDirError, match=why):
        write_tree(FILES[:1], out)
    _untouched(outside)
    assert (out / "slurm" / "slurm.conf").exists(), "the refused run removed files"


def test_manifest_entry_with_an_absolute_path_is_refused(tmp_path: Path) -> None:
    outside = _outside(tmp_path)
    out = tmp_path / "build"
    write_tree(FILES, out)
    (out / MANIFEST).write_text(f"hosts\n{outside / 'victim'}\n")
    with pytest.raises(BuildDirError, match="an absolute path"):
        write_tree(FILES, out)
    _untouched(outside)


def test_cli_render_reports_a_tampered_manifest_with_exit_1(tmp_path: Path) -> None:
    out = tmp_path / "build"
    assert _render("--out", str(out))[0] == 0
    (out / MANIFEST).write_text("../../etc/passwd\n")
    code, text = _render("--out", str(out))
    assert code == 1
    assert "../../etc/passwd" in text
    assert "Traceback" not in text


def test_a_rendered_path_that_leaves_the_directory_is_refused(tmp_path: Path) -> None:
    outside = _outside(tmp_path)
    with pytest.raises(BuildDirError, match="climbs out"):
        write_tree([RenderedFile("../outside/victim", "owned\n")], tmp_path / "build")
    with pytest.raises(BuildDirError, match="absolute path"):
        write_tree([RenderedFile(str(outside / "victim"), "owned\n")], tmp_path / "build")
    _untouched(outside)


@pytest.mark.parametrize(
    "entry", ["", "/etc/passwd", "..", "a/../b", "a//b", "./a", "a/.", "a\nb", "a\x00b", "a/", "a\x7fb"]
)
def test_split_entry_refuses_anything_but_a_plain_relative_path(entry: str) -> None:
    assert split_entry(entry) is None


def test_split_entry_accepts_plain_paths() -> None:
    assert split_entry("storage/units/dgx-h100/mnt-home.mount") == ("storage", "units", "dgx-h100", "mnt-home.mount")
    assert split_entry(".hidden/..dots") == (".hidden", "..dots")


def test_symlinked_out_dir_is_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    link = tmp_path / "build"
    link.symlink_to(target)
    with pytest.raises(BuildDirError, match="is a symbolic link"):
        write_tree(FILES, link)
    assert list(target.iterdir()) == []
    code, text = _render("--out", str(link))
    assert code == 1
    assert "symbolic link" in text
    assert list(target.iterdir()) == []


def test_dangling_symlink_as_out_dir_is_not_followed(tmp_path: Path) -> None:
    link = tmp_path / "build"
    link.symlink_to(tmp_path / "would-be-created")
    with pytest.raises(BuildDirError, match="is a symbolic link"):
        write_tree(FILES, link)
    assert not (tmp_path / "would-be-created").exists()


def test_symlinked_subdirectory_is_not_followed(tmp_path: Path) -> None:
    outside = _outside(tmp_path)
    out = tmp_path / "build"
    write_tree(FILES, out)
    for child in (out / "slurm").iterdir():
        child.unlink()
    (out / "slurm").rmdir()
    (out / "slurm").symlink_to(outside)
    with pytest.raises(BuildDirError, match=r"slurm is a symbolic link"):
        write_tree(FILES, out)
    _untouched(outside)


def test_symlinked_parent_of_a_stale_entry_is_not_followed(tmp_path: Path) -> None:
    outside = _outside(tmp_path)
    out = tmp_path / "build"
    write_tree([*FILES, RenderedFile("old/victim", "x\n")], out)
    (out / "old" / "victim").unlink()
    (out / "old").rmdir()
    (out / "old").symlink_to(outside)
    with pytest.raises(BuildDirError, match=r"old is a symbolic link"):
        write_tree(FILES, out)  # old/victim is stale now: removing it would delete outside/victim
    _untouched(outside)


@pytest.mark.parametrize("stale", [False, True])
def test_symlinked_file_is_not_followed(tmp_path: Path, stale: bool) -> None:
    outside = _outside(tmp_path)
    out = tmp_path / "build"
    write_tree(FILES, out)
    (out / "hosts").unlink()
    (out / "hosts").symlink_to(outside / "victim")
    with pytest.raises(BuildDirError, match=r"hosts is a symbolic link"):
        write_tree(FILES[1:] if stale else FILES, out)
    _untouched(outside)
    assert (out / "hosts").is_symlink()


def test_symlinked_manifest_is_not_followed(tmp_path: Path) -> None:
    outside = _outside(tmp_path)
    out = tmp_path / "build"
    out.mkdir()
    (out / MANIFEST).symlink_to(outside / "victim")
    with pytest.raises(BuildDirError, match="is a symbolic link"):
        write_tree(FILES, out)
    _untouched(outside)


def test_a_planted_link_at_the_old_temporary_name_is_not_followed(tmp_path: Path) -> None:
    """Earlier versions wrote ``.<name>.tmp`` and followed a link there; temporary names are now new files."""
    outside = _outside(tmp_path)
    out = tmp_path / "build"
    write_tree(FILES, out)
    (out / ".hosts.tmp").symlink_to(outside / "victim")
    write_tree([RenderedFile("hosts", "changed\n"), *FILES[1:]], out)
    assert (out / "hosts").read_text() == "changed\n"
    _untouched(outside)


def test_a_directory_where_a_file_goes_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "build"
    write_tree(FILES, out)
    (out / "hosts").unlink()
    (out / "hosts").mkdir()
    with pytest.raises(BuildDirError, match="not a regular file"):
        write_tree(FILES, out)


def test_an_interrupted_first_render_leaves_a_directory_the_next_render_accepts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "build"
    real_rename = os.rename
    calls = {"n": 0}

    def crash_on_second_file(*args: object, **kwargs: object) -> None:
        calls["n"] += 1
        if calls["n"] == 3:  # the manifest, the first file, then the crash
            raise OSError(28, "No space left on device")
        real_rename(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "rename", crash_on_second_file)
    with pytest.raises(OSError, match="No space"):
        write_tree(FILES, out)
    monkeypatch.setattr(os, "rename", real_rename)
    assert (out / MANIFEST).exists(), "the manifest must be written before the files"
    assert not [p for p in out.rglob("*.tmp")], "the failed write left its temporary file"
    assert write_tree(FILES, out) == ["slurm/slurm.conf", "scripts/run.sh"]
    assert read_manifest(out) == ["hosts", "scripts/run.sh", "slurm/slurm.conf"]
