"""A cluster's state lives beside its spec, whatever the working directory: `up` from elsewhere
finds the same state instead of making a second one; --state-dir still wins."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from clusterctl.commands import cli
from clusterctl.run.providers import ProviderError
from clusterctl.run.state import StateDir
from tests.conftest import EXAMPLES


class _Unreadable:
    """Machines that cannot be read (said once, as a warning): status asks for them only when the state exists."""

    def status(self, plan: object, state_dir: Path) -> dict[str, str]:
        raise ProviderError(f"machines asked with state {state_dir}")


@pytest.fixture
def spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "site").mkdir()
    (tmp_path / "elsewhere").mkdir()
    path = tmp_path / "site" / "local.yaml"
    shutil.copy(EXAMPLES / "local.yaml", path)
    monkeypatch.chdir(tmp_path / "elsewhere")
    monkeypatch.setattr("clusterctl.ops.status.for_kind", lambda kind: _Unreadable())
    return path


def status(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["status", *args], catch_exceptions=False)
    return result.exit_code, result.output


def test_the_state_beside_the_spec_is_found_from_any_directory(spec: Path) -> None:
    code, out = status(str(spec))
    assert code == 3
    assert f"nothing is recorded in {spec.parent / '.clusterctl' / 'local'}" in out
    StateDir(spec.parent / ".clusterctl", "local").write({"status": "up"})
    code, out = status(str(spec))
    assert code == 0
    assert f"machines asked with state {spec.parent / '.clusterctl' / 'local'}" in out
    assert not Path(".clusterctl").exists()  # nothing made in the working directory


def test_state_dir_still_wins(spec: Path, tmp_path: Path) -> None:
    StateDir(tmp_path / "mine", "local").write({"status": "up"})
    code, out = status(str(spec), "--state-dir", str(tmp_path / "mine"))
    assert code == 0
    assert f"machines asked with state {tmp_path / 'mine' / 'local'}" in out


def test_state_left_in_the_working_directory_is_pointed_at(spec: Path) -> None:
    """State an earlier release kept relative to the working directory is not silently replaced by a new one."""
    StateDir(Path(".clusterctl"), "local").write({"status": "up"})
    code, out = status(str(spec))
    assert code == 1
    assert "now lives beside the spec" in out
    assert "--state-dir .clusterctl" in out
    assert not (spec.parent / ".clusterctl").exists()


def test_a_new_state_root_keeps_itself_out_of_git(tmp_path: Path) -> None:
    StateDir(tmp_path / ".clusterctl", "local").ensure()
    assert (tmp_path / ".clusterctl" / ".gitignore").read_text().splitlines()[-1] == "*"
