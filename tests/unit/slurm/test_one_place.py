"""Slurm is read and driven from clusterctl.slurm alone: no other module builds a Slurm command or parses its records.

A string that starts a Slurm command (``scontrol ...``, ``sinfo ...``, ``squeue ...``) outside the
package is a second place that drives Slurm; so is a template or role that drains, resumes or reads
a node without the shipped module (``clusterctl-slurm``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "cli" / "clusterctl"
COMMAND = re.compile(r"^\s*(scontrol|sinfo|squeue)\s+\S")
NODE_SIDE = re.compile(r"scontrol\s+(update|show\s+node)|state=(drain|resume)", re.IGNORECASE)


def _strings(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    docstrings = {
        id(body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and (body := node.body)
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_no_module_outside_the_package_builds_a_slurm_command() -> None:
    found = [
        f"{path.relative_to(REPO_ROOT)}:{line}: {text[:60]!r}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if "slurm" not in path.relative_to(PACKAGE).parts[:1]
        for line, text in _strings(path)
        if COMMAND.match(text)
    ]
    assert not found, "Slurm commands built outside clusterctl.slurm:\n" + "\n".join(found)


def test_no_script_drains_resumes_or_reads_a_node_but_through_the_module() -> None:
    found = []
    for folder in (REPO_ROOT / "templates", REPO_ROOT / "roles"):
        for path in sorted(p for p in folder.rglob("*") if p.is_file() and "molecule" not in p.parts):
            for number, line in enumerate(path.read_text(errors="replace").split("\n"), 1):
                if NODE_SIDE.search(line) and not line.lstrip().startswith("#"):
                    found.append(f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()[:80]}")
    assert not found, "drains, resumes or node reads outside clusterctl-slurm:\n" + "\n".join(found)


def test_the_checks_see_a_command_built_elsewhere(tmp_path: Path) -> None:
    """The patterns above find what they look for (the tests can fail)."""
    assert COMMAND.match("scontrol update nodename=x state=resume")
    assert NODE_SIDE.search('scontrol update nodename="$HOST" state=drain reason="x"')
