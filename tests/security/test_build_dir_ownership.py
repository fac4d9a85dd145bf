"""A build directory someone else can write is refused: its playbook and inventory run as root at the next `up`.

The finding: `render --out D` took a world-writable directory of another user as long as it held
a manifest; that user swapped ansible/ and added inventory/host_vars/gpu001.yml with a
lookup('pipe', ...), which the next `up` ran as root. The build directory and every directory in it
must be yours and writable by you alone, as the state directory.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from clusterctl.commands import cli
from tests.conftest import EXAMPLES

NOBODY = 65534


def _render(out: Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["render", str(EXAMPLES / "local.yaml"), "--out", str(out)])
    return result.exit_code, result.output


@pytest.fixture
def made(tmp_path: Path) -> Path:
    out = tmp_path / "build" / "local"
    code, output = _render(out)
    assert code == 0, output
    return out


def test_a_world_writable_build_directory_is_refused(made: Path) -> None:
    made.chmod(0o777)
    planted = made / "ansible" / "inventory" / "host_vars"
    planted.mkdir(parents=True, exist_ok=True)
    (planted / "gpu001.yml").write_text("x: \"{{ lookup('pipe', 'touch /tmp/canary') }}\"\n")

    code, output = _render(made)

    assert code == 1, output
    assert "writable by group or others" in output
    assert "chmod go-w" in output
    assert "Traceback" not in output


def test_a_group_writable_directory_inside_is_refused(made: Path) -> None:
    (made / "ansible").chmod(0o775)
    code, output = _render(made)
    assert code == 1, output
    assert f"{made / 'ansible'} is writable by group or others" in output.replace("\n", "")


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_a_build_directory_of_another_user_is_refused(made: Path) -> None:
    for path in [made, *made.rglob("*")]:
        os.chown(path, NOBODY, NOBODY, follow_symlinks=False)
    before = {p: p.stat().st_mtime_ns for p in made.rglob("*")}

    code, output = _render(made)

    assert code == 1, output
    assert "not by you" in output.replace("\n", " ")
    assert {p: p.stat().st_mtime_ns for p in made.rglob("*")} == before, "something was written"


def test_your_own_build_directory_renders_again(made: Path) -> None:
    code, output = _render(made)
    assert code == 0, output
