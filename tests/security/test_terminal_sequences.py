"""No terminal sequence from a spec key or a node's output reaches the terminal.

The finding: an escape sequence in a spec key (the finding's path) and a network name in an NCCL
log (check-output, verify) reached the terminal; the parsers stripped only CSI sequences, so an
OSC sequence (window title, hyperlink) or a C1 control went through.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from clusterctl.commands import cli
from clusterctl.plain import plain
from tests.conftest import EXAMPLES, REPO_ROOT

SEQUENCES = {
    "osc title": "\x1b]0;pwned\x07",
    "osc hyperlink": "\x1b]8;;https://evil.example/\x1b\\",
    "csi clear": "\x1b[2J",
    "c1 csi": "\x9b2J",
    "c1 osc": "\x9d0;pwned\x9c",
    "dcs": "\x1bPq#0;2;0;0;0\x1b\\",
    "bell": "\x07",
}
CONTROLS = ("\x1b", "\x07", "\x9b", "\x9c", "\x9d", "\x90")


def _clean(text: str) -> bool:
    return not any(c in text for c in CONTROLS)


@pytest.mark.parametrize("sequence", sorted(SEQUENCES))
def test_plain_removes_every_kind_of_sequence(sequence: str) -> None:
    assert plain(f"a{SEQUENCES[sequence]}b") == "ab"


@pytest.mark.parametrize("sequence", sorted(SEQUENCES))
def test_a_spec_key_with_a_sequence_is_shown_without_it(tmp_path: Path, sequence: str) -> None:
    escaped = SEQUENCES[sequence].encode("unicode_escape").decode().replace("\\x1b", "\\e").replace("\\x07", "\\a")
    text = (EXAMPLES / "local.yaml").read_text().replace("name: local\n", f'name: local\n"{escaped}x": 1\n', 1)
    spec = tmp_path / "local.yaml"
    spec.write_text(text)
    shutil.copy(EXAMPLES / "machines.csv", tmp_path)

    result = CliRunner().invoke(cli, ["validate", str(spec)])

    assert result.exit_code == 1, result.output
    assert "Unknown field" in result.output
    assert _clean(result.output), repr(result.output)


@pytest.mark.parametrize("sequence", sorted(SEQUENCES))
def test_a_network_name_in_an_nccl_log_is_shown_without_it(tmp_path: Path, sequence: str) -> None:
    source = REPO_ROOT / "tests" / "unit" / "verify" / "data" / "nccl_debug" / "ib_roce_2node_nccltests185.log"
    log = tmp_path / "nccl.log"
    log.write_text(source.read_text().replace("Using network IB", f"Using network IB{SEQUENCES[sequence]}Socket"))

    result = CliRunner().invoke(cli, ["check-output", "nccl-debug", str(log)])

    assert result.exit_code in (0, 1), result.output
    assert _clean(result.output), repr(result.output)
