"""What the docs claim about the tool, held to the tool: the examples' notes on rules, the README's
setup and figures, CONTRIBUTING's commands."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from clusterctl.rules import UnskippableRuleError, check_skip, validate
from clusterctl.spec import Level, load_spec
from tests.conftest import EXAMPLES, REPO_ROOT
from tests.specs import mutated

README = (REPO_ROOT / "README.md").read_text()


def test_aws_p5_says_what_a_world_open_ssh_range_gets(tmp_path: Path) -> None:
    def world(data: dict[str, Any]) -> None:
        data["provider"]["allowed_ssh_cidrs"] = ["0.0.0.0/0"]

    findings, _ = validate(load_spec(mutated(tmp_path, world, base="aws-p5.yaml")))
    (finding,) = [f for f in findings if f.code == "CLD011"]
    assert finding.level is Level.ERROR
    with pytest.raises(UnskippableRuleError):
        check_skip(["CLD011"])
    comment = " ".join(line.strip("# ") for line in (EXAMPLES / "aws-p5.yaml").read_text().splitlines() if "#" in line)
    assert "0.0.0.0/0 is refused (error CLD011, which --skip-rule cannot skip)" in comment


def test_readme_setup_says_cloud_and_bare_metal_need_the_pulumi_cli() -> None:
    setup = README.split("## What `make up` gives you")[0]
    assert "Pulumi CLI" in setup
    assert "bare-metal" in setup
    assert "pip install ." in setup


def test_readme_render_figures_give_the_command_time_too() -> None:
    section = README.split("**Validate + plan + render**")[1].split("**`clusterctl up")[0]
    header = next(line for line in section.splitlines() if line.startswith("| compute nodes"))
    assert "in-process" in header
    assert "`clusterctl render`" in header


def test_contributing_names_only_the_projects_tools() -> None:
    text = (REPO_ROOT / "CONTRIBUTING.md").read_text()
    block = text.split("## Before sending a change")[1].split("```bash")[1].split("```")[0]
    makefile = (REPO_ROOT / "Makefile").read_text()
    for line in filter(None, (raw.split("#")[0].strip() for raw in block.splitlines())):
        tool, first, *_ = line.split()
        assert tool in ("make", "bash"), line
        if tool == "make":
            assert re.search(rf"^{first}:", makefile, re.MULTILINE), line
        else:
            assert (REPO_ROOT / first).is_file(), line
