"""One output contract: every command takes --output json and prints the report envelope, every
--help lists the command's exit statuses and the README's table has the same, and `clusterctl rules`
lists every rule."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from clusterctl.commands import cli
from clusterctl.rules import RULES, SAFETY_TAG
from tests.cli.test_fabric_cli import write_fabric
from tests.cli.test_report_schema import _conforms
from tests.conftest import EXAMPLES, REPO_ROOT

ONPREM = str(EXAMPLES / "onprem-h100-256.yaml")
LOCAL = str(EXAMPLES / "local.yaml")


def _leaves(group: click.Group = cli, prefix: str = "") -> Iterator[tuple[str, click.Command]]:
    for name, command in sorted(group.commands.items()):
        path = f"{prefix} {name}".strip()
        if isinstance(command, click.Group):
            yield from _leaves(command, path)
        else:
            yield path, command


COMMANDS = dict(_leaves())


def invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner(env=env).invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _exit_codes(text: str) -> set[int]:
    """The codes an "Exit status:" sentence names ("0 valid, 1 not valid, 2 bad usage" -> {0, 1, 2})."""
    return {int(n) for n in re.findall(r"(?:^|[,;]\s*)(\d+)(?=\s+[A-Za-z(`])", text.strip())}


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_every_command_takes_output_json(path: str) -> None:
    options = {p.name: p for p in COMMANDS[path].params}
    assert "output" in options, f"`clusterctl {path}` has no --output"
    output = options["output"]
    assert isinstance(output.type, click.Choice)
    assert "json" in output.type.choices


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_every_help_lists_the_exit_statuses_as_the_readme_does(path: str) -> None:
    code, out, _ = invoke(*path.split(), "--help")
    assert code == 0
    text = " ".join(out.split())
    assert "Exit status:" in text, f"`clusterctl {path} --help` does not list its exit statuses"
    statuses = text.split("Exit status:", 1)[1].split(". ", 1)[0]
    helped = _exit_codes(statuses)
    assert {0, 70} <= helped, statuses
    readme = (REPO_ROOT / "README.md").read_text()
    row = next((line for line in readme.splitlines() if line.startswith(f"| `{path}` |")), None)
    assert row is not None, f"README's exit status table has no row for `{path}`"
    assert _exit_codes(row.split("|")[2]) == helped, (row, statuses)


def test_plan_render_schema_rules_print_the_envelope(tmp_path: Path) -> None:
    code, out, _ = invoke("plan", str(EXAMPLES / "aws-burst.yaml"), "-o", "json")
    plan = _conforms(out, "plan")
    assert (code, plan["ok"], plan["nodes"]["total"]) == (0, True, 11)
    burst = {a["hostname"]: a["address"] for a in plan["addresses"] if a["burst"]}
    assert burst == {f"gpu-b00{i}": f"10.60.0.{3 + i}" for i in range(1, 5)}  # as aws-burst.yaml says

    code, out, _ = invoke("render", LOCAL, "--out", str(tmp_path / "b"), "-o", "json")
    render = _conforms(out, "render")
    assert (code, render["build_dir"]) == (0, str(tmp_path / "b"))
    assert "slurm/slurm.conf" in render["changed"]

    code, out, _ = invoke("schema", "-o", "json")
    assert (code, _conforms(out, "schema")["schema"]["title"]) == (0, "clusterctl cluster spec")

    code, out, _ = invoke("rules", "-o", "json")
    rules = _conforms(out, "rules")["rules"]
    assert code == 0
    assert {r["code"] for r in rules} == {r.code for r in RULES.values()}
    by_code = {r["code"]: r for r in rules}
    assert by_code["CLD011"]["skippable"] is False
    assert by_code["HW002"] == {**by_code["HW002"], "level": "warning", "reads": "spec", "skippable": True}
    assert by_code["FAB002"]["reads"] == "plan"


def test_rules_lists_every_rule_with_its_level_and_whether_it_can_be_skipped() -> None:
    code, out, _ = invoke("rules")
    assert code == 0
    lines = {line.split()[0]: line for line in out.splitlines()}
    for rule in RULES.values():
        assert rule.name in lines[rule.code]
        assert str(rule.level) in lines[rule.code]
        assert ("safety" if SAFETY_TAG in rule.tags else "skippable") in lines[rule.code]


@pytest.mark.parametrize(("command", "extra"), [("down", ("--yes",)), ("diff", ())])
def test_errors_that_stop_a_command_are_in_the_envelope(tmp_path: Path, command: str, extra: tuple[str, ...]) -> None:
    """Without the Pulumi CLI, `down` and `diff` of a bare-metal cluster cannot read its machines."""
    state = str(tmp_path / "s")
    code, out, err = invoke(command, ONPREM, "--state-dir", state, "-o", "json", *extra, env={"PATH": str(tmp_path)})
    data = _conforms(out, command)
    assert (code, data["ok"], data["stopped"]) == (1, False, "error")
    assert "Pulumi CLI" in data["error"]
    assert "Pulumi CLI" in err


def test_status_and_fabric_topology_print_the_envelope(tmp_path: Path) -> None:
    code, out, _ = invoke("status", LOCAL, "--state-dir", str(tmp_path / "s"), "-o", "json")
    assert (code, _conforms(out, "status")["state"]) == (3, "not up")
    code, out, _ = invoke("fabric", "topology", "--ibnetdiscover", write_fabric(tmp_path), "-o", "json")
    topology = _conforms(out, "fabric topology")
    assert code == 0
    assert "SwitchName=" in topology["topology"]


def test_json_output_is_one_document_on_stdout() -> None:
    code, out, _ = invoke("validate", ONPREM, "-o", "json")
    assert code == 0
    assert json.loads(out)["command"] == "validate"
