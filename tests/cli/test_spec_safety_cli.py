"""The trust boundary as a user meets it: safety rules cannot be skipped, hostile specs fail located."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from clusterctl.commands import cli
from tests.conftest import EXAMPLES
from tests.specs import group, mutated

LOCAL = str(EXAMPLES / "local.yaml")


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("command", ["validate", "plan", "render"])
@pytest.mark.parametrize(("name", "rule"), [("NAM001", "unique-names"), ("dns-safe-hostnames", "dns-safe-hostnames")])
def test_skipping_a_safety_rule_is_a_usage_error(command: str, name: str, rule: str) -> None:
    code, out, err = invoke(command, LOCAL, "--skip-rule", name)
    assert code == 2
    assert "Invalid value for '--skip-rule'" in err
    assert rule in err
    assert "safety rules cannot be skipped" in err
    assert "fix the spec instead" in err
    assert "Traceback" not in out + err


def test_the_refusal_comes_before_the_spec_is_read(tmp_path: Path) -> None:
    code, _, err = invoke("validate", str(tmp_path / "missing.yaml"), "--skip-rule", "SAF001")
    assert code == 2
    assert "safe-mount-points (SAF001)" in err


def test_a_clash_stays_an_error_whatever_is_skipped(tmp_path: Path) -> None:
    def clash(data: dict) -> None:
        group(data, "login")["hostname"] = "ctl{index:03d}"

    spec = str(mutated(tmp_path, clash))
    assert invoke("validate", spec, "--skip-rule", "spares")[0] == 1
    assert invoke("validate", spec, "--skip-rule", "NAM001")[0] == 2


def test_ordinary_rules_can_still_be_skipped() -> None:
    assert invoke("validate", LOCAL, "--skip-rule", "spares", "--skip-rule", "FAB003")[0] == 0


def test_alias_bomb_fails_with_a_located_error(tmp_path: Path) -> None:
    lines = ["version: 1", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\n")
    code, out, err = invoke("validate", str(bomb))
    assert code == 1
    assert f"{bomb}:5:" in err
    assert "refused before expanding" in err
    assert "Traceback" not in out + err
    code, out, _ = invoke("validate", str(bomb), "-o", "json")
    finding = json.loads(out)["findings"][0]
    assert (code, finding["code"], finding["path"], finding["line"]) == (1, "SPEC-limit", "a3[9]", 5)


def test_jinja_in_a_mount_point_is_refused_at_its_field(tmp_path: Path) -> None:
    def jinja(data: dict) -> None:
        data["storage"][2]["mount"] = "/home/{{ lookup('pipe','touch PWNED') }}"

    code, out, _ = invoke("validate", str(mutated(tmp_path, jinja)), "-o", "json")
    findings = json.loads(out)["findings"]
    assert code == 1
    assert [f["path"] for f in findings] == ["storage[2].mount"]
    assert "is not a mount point" in findings[0]["message"]
    assert not (tmp_path / "PWNED").exists()
