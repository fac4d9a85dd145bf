"""The Ansible collections of an installed clusterctl: found where Ansible looks, else fetched once
(pinned wheel, checked sha256, only the collections the roles use), else a message that names the fix."""

from __future__ import annotations

import hashlib
import sys
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from clusterctl.commands import cli
from clusterctl.run import collections
from clusterctl.run.collections import AnsibleSetupError
from tests.conftest import EXAMPLES

NEEDED = collections.FETCHED_COLLECTIONS


def _wheel(tmp_path: Path, names: tuple[str, ...] = NEEDED, extra: tuple[str, ...] = ()) -> Path:
    """A stand-in for the ansible wheel: one file per collection, plus ``extra`` entries."""
    wheel = tmp_path / "src" / collections.WHEEL
    wheel.parent.mkdir(exist_ok=True)
    with zipfile.ZipFile(wheel, "w") as archive:
        for name in (*names, "community/aws"):
            archive.writestr(f"ansible_collections/{name}/MANIFEST.json", name)
        for entry in extra:
            archive.writestr(entry, "x")
        archive.writestr("ansible-12.3.0.dist-info/METADATA", "Name: ansible")
    return wheel


def _copying(wheel: Path) -> collections.Download:
    """A downloader that hands over the stand-in wheel."""

    def download(dest: Path) -> Path:
        out = dest / wheel.name
        out.write_bytes(wheel.read_bytes())
        return out

    return download


@pytest.fixture
def nowhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No collections anywhere: an empty ANSIBLE_COLLECTIONS_PATH, home and cache; no installed package."""
    for name in ("home", "cache", "empty"):
        (tmp_path / name).mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("ANSIBLE_COLLECTIONS_PATH", str(tmp_path / "empty"))
    # The checkout's .ansible-collections is not where an installed clusterctl looks.
    monkeypatch.setattr(collections, "data_root", lambda: tmp_path / "empty")
    monkeypatch.setattr(sys, "path", [p for p in sys.path if not (Path(p) / "ansible_collections").is_dir()])
    return tmp_path


def test_no_installed_package_is_none_not_an_import_error(nowhere: Path) -> None:
    """find_spec of a dotted name raises when its parent package is missing; the lookup must not."""
    assert collections.installed_package_root() is None
    with pytest.raises(AnsibleSetupError, match=r"pip install ansible==12\.3\.0"):
        collections.collections_path()


def test_missing_collections_are_fetched_once_into_the_cache(nowhere: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheel = _wheel(nowhere)
    monkeypatch.setattr(collections, "WHEEL_SHA256", hashlib.sha256(wheel.read_bytes()).hexdigest())
    lines: list[str] = []
    path = collections.ensure_collections(lines.append, _copying(wheel))
    target = collections.cache_dir()
    assert target == nowhere / "cache" / "clusterctl" / "ansible-collections" / collections.ANSIBLE_RELEASE
    assert path.split(":")[:2] == [str(collections.collections_dir()), str(target)]
    assert sorted(p.parent.relative_to(target / "ansible_collections").as_posix() for p in target.rglob("*.json")) == (
        sorted(NEEDED)
    )  # community/aws and the dist-info stay in the wheel
    assert len(lines) == 1
    assert "fetching them once" in lines[0]
    assert str(target) in lines[0]
    # Found the next time: no second fetch.
    assert collections.ensure_collections(lines.append, _failing) == path
    assert len(lines) == 1


def _failing(dest: Path) -> Path:
    raise AssertionError("fetched although the collections are there")


def test_a_wheel_that_is_not_the_pinned_one_is_refused(nowhere: Path) -> None:
    wheel = _wheel(nowhere)
    target = nowhere / "target"
    with pytest.raises(AnsibleSetupError, match="not the pinned"):
        collections.fetch(target, _copying(wheel))
    assert not target.exists()
    assert list(nowhere.glob("target*")) == []


def test_a_path_out_of_the_collections_is_refused(nowhere: Path) -> None:
    wheel = _wheel(nowhere, extra=("ansible_collections/community/docker/../../../../etc/evil",))
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    with pytest.raises(AnsibleSetupError, match="unsafe path"):
        collections.fetch(nowhere / "target", _copying(wheel), digest)
    assert not (nowhere / "etc").exists()
    assert not (nowhere / "target").exists()


def test_up_without_obtainable_collections_says_how_to_get_them(nowhere: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pip cannot reach any index: a clear message and exit 1 before anything is created, never exit 70."""
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(nowhere / "empty"))
    state = nowhere / "state"
    result = CliRunner().invoke(
        cli, ["up", str(EXAMPLES / "local.yaml"), "--yes", "--state-dir", str(state)], catch_exceptions=False
    )
    assert result.exit_code == 1, result.output
    assert "internal error" not in result.output
    assert "fetching them failed: `pip download ansible==12.3.0` failed" in result.stderr
    assert "pip install ansible==12.3.0" in result.stderr
    assert "Nothing was created." in result.stderr
    assert not state.exists()
