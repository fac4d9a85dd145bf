"""An unexpected error: exit 70, one short message naming a saved report, no traceback on screen."""

from __future__ import annotations

import re
import stat
import tempfile
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from clusterctl.commands.common import handle_internal_errors


@click.command()
@handle_internal_errors
def broken() -> None:
    raise KeyError("the bug")


def test_an_unexpected_error_exits_70_and_names_its_saved_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv("CLUSTERCTL_DEBUG", raising=False)
    result = CliRunner().invoke(broken, [])

    assert result.exit_code == 70
    assert "Traceback" not in result.stderr
    assert "internal error: KeyError: 'the bug'" in result.stderr
    found = re.search(r"the traceback is in (\S+);", result.stderr)
    assert found, result.stderr
    report = Path(found.group(1))
    assert report.parent == tmp_path
    assert stat.S_IMODE(report.stat().st_mode) == 0o600
    text = report.read_text()
    assert "Traceback" in text
    assert 'raise KeyError("the bug")' in text


def test_a_usage_error_is_not_an_internal_error() -> None:
    @click.command()
    @handle_internal_errors
    def refuses() -> None:
        raise click.UsageError("wrong option")

    result = CliRunner().invoke(refuses, [])
    assert result.exit_code == 2
    assert "internal error" not in result.stderr
