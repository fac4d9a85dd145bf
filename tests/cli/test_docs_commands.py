"""Docs that cannot drift: every `clusterctl` command line README.md and the examples show.

Each line must parse against the real command tree (a renamed option or command fails here).
How each is checked depends on what it needs:

- the commands that need no cluster (validate, plan, render, schema, rules) run, in a copy of
  examples/, and must exit 0, as the docs imply;
- `status` of an example nobody brought up runs and must say so with its documented exit 3;
- `up` of a cloud or bare-metal example runs without the Pulumi CLI on PATH, as the example's own
  comment says it needs it: it must stop with that message, exit 1, and create nothing;
- the rest needs a running cluster (`up`/`down` of the local examples): it is parsed here and its
  documented output is checked where the end-to-end suite has a cluster
  (tests/e2e/test_docs_transcript.py).

Why this split: running `up` for every example here would take the 50-minute CI budget twice over.
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from clusterctl.commands import cli
from tests.conftest import EXAMPLES, REPO_ROOT

OFFLINE = ("validate", "plan", "render", "schema", "rules")


def _documented() -> list[tuple[str, str]]:
    """(where, command line) for every concrete `clusterctl` line of README.md and examples/*.yaml."""
    found: list[tuple[str, str]] = []
    in_block = False
    for number, line in enumerate((REPO_ROOT / "README.md").read_text().splitlines(), 1):
        if line.startswith("```"):
            in_block = not in_block
            continue
        if in_block and (m := re.match(r"^(?:\$ )?(clusterctl .+)$", line)):
            found.append((f"README.md:{number}", m.group(1)))
        elif not in_block:
            # Inline commands on a real example (not the syntax summaries with SPEC, NODE, ...).
            found += [(f"README.md:{number}", c) for c in re.findall(r"`(clusterctl [^`]*examples/[^`]+)`", line)]
    for spec in sorted(EXAMPLES.glob("*.yaml")):
        for number, line in enumerate(spec.read_text().splitlines(), 1):
            if m := re.match(r"^#\s+(clusterctl .+)$", line):
                found.append((f"examples/{spec.name}:{number}", m.group(1)))
    return found


DOCUMENTED = _documented()


def _argv(line: str) -> tuple[list[str], str]:
    """The arguments of a documented line and its trailing `# comment`."""
    command, _, comment = line.partition(" # ")
    return shlex.split(command)[1:], comment.strip()


def _command(argv: list[str]) -> tuple[list[str], click.Command]:
    """The leaf command an argv names, and the path to it."""
    command: click.Command = cli
    path: list[str] = []
    args = [a for a in argv if not a.startswith("-")]
    while isinstance(command, click.Group):
        name = args[len(path)]
        assert name in command.commands, f"`clusterctl {' '.join([*path, name])}` is no command"
        command = command.commands[name]
        path.append(name)
    return path, command


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory with a copy of examples/, where the documented relative paths resolve."""
    shutil.copytree(EXAMPLES, tmp_path / "examples", ignore=shutil.ignore_patterns(".clusterctl"))
    (tmp_path / "bin").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_docs_show_commands() -> None:
    assert len(DOCUMENTED) >= 20
    assert {line.split()[1] for _, line in DOCUMENTED} >= {"validate", "plan", "render", "up", "status", "down"}


@pytest.mark.parametrize(("where", "line"), DOCUMENTED, ids=[w for w, _ in DOCUMENTED])
def test_a_documented_command_does_what_the_docs_say(where: str, line: str, workdir: Path) -> None:
    argv, comment = _argv(line)
    global_options = [a for a in argv if a in ("-v", "-q")]
    rest = [a for a in argv if a not in global_options]
    path, command = _command(rest)
    # Parses: every option and argument as written exists (no side effect).
    command.make_context(" ".join(path), rest[len(path) :])
    runner = CliRunner(env={"PATH": str(workdir / "bin"), "COLUMNS": "200"})
    verb = path[0]
    if verb in OFFLINE:
        result = runner.invoke(cli, argv, catch_exceptions=False)
        assert result.exit_code == 0, f"{where}: {line}\n{result.output}"
    elif verb == "status":
        result = runner.invoke(cli, argv, catch_exceptions=False)
        assert (result.exit_code, "is not up" in result.output) == (3, True), f"{where}: {line}\n{result.output}"
    elif verb == "up" and "pulumi CLI" in comment:
        result = runner.invoke(cli, [*argv, "--yes"], catch_exceptions=False)
        assert result.exit_code == 1, f"{where}: {line}\n{result.output}"
        assert "The Pulumi CLI (`pulumi`) is not on PATH" in result.output
        assert "Nothing was created." in result.output
        assert not list(workdir.rglob(".clusterctl"))
