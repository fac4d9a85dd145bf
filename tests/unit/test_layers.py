"""Imports only go down: each module of clusterctl imports its own layer and the layers below it.

The layers, top to bottom, are CONTRIBUTING.md's table ("Layout"); this test reads every import
of every module (``import`` and ``from ... import``, at any depth, type-checking ones included)
and fails on an arrow from a lower layer to a higher one, naming the file and the line.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "cli" / "clusterctl"
# Top to bottom. A module belongs to the first layer with a prefix of its dotted name.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("commands", ("clusterctl.__main__", "clusterctl.commands", "clusterctl.app")),
    ("workflows", ("clusterctl.ops",)),
    ("verify", ("clusterctl.verify",)),
    ("image", ("clusterctl.image",)),
    ("front half", ("clusterctl.pipeline", "clusterctl.progress")),
    ("adapters", ("clusterctl.run",)),
    ("render", ("clusterctl.render", "clusterctl.fabric")),
    ("rules", ("clusterctl.rules",)),
    ("plan", ("clusterctl.plan",)),
    ("spec", ("clusterctl.spec", "clusterctl.catalog", "clusterctl.report")),
    (
        "base",
        (
            "clusterctl.slurm",
            "clusterctl.agent",
            "clusterctl.remote",
            "clusterctl.bounded",
            "clusterctl.plain",
            "clusterctl.hostlist",
            "clusterctl.paths",
            "clusterctl.environ",
            "clusterctl",
        ),
    ),
)


def layer_of(module: str) -> int:
    """The index of ``module``'s layer (0 is the top)."""
    for index, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return index
    raise AssertionError(f"{module} is in no layer: add it to LAYERS and to CONTRIBUTING.md's table")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` for every clusterctl module ``path`` imports, relative imports resolved."""
    tree = ast.parse(path.read_text(), str(path))
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rsplit(".", 1)[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            # `from clusterctl.ops import heal` imports the module clusterctl.ops.heal.
            found += [(node.lineno, f"{target}.{alias.name}") for alias in node.names]
            found.append((node.lineno, target))
    return [(line, name) for line, name in found if name == "clusterctl" or name.startswith("clusterctl.")]


def _existing(name: str) -> str:
    """The longest prefix of ``name`` that is a module of the package (drops the imported names)."""
    parts = name.split(".")
    while parts:
        candidate = PACKAGE.parent.joinpath(*parts)
        if candidate.with_suffix(".py").is_file() or (candidate / "__init__.py").is_file():
            return ".".join(parts)
        parts.pop()
    return name


def test_no_import_runs_back_up() -> None:
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        here = module_name(path)
        mine = layer_of(here)
        for line, name in imports(path):
            target = _existing(name)
            theirs = layer_of(target)
            if theirs < mine:
                where = path.relative_to(REPO_ROOT)
                upward.append(f"{where}:{line}: {LAYERS[mine][0]} imports {target} ({LAYERS[theirs][0]})")
    assert not upward, "imports that run back up:\n" + "\n".join(sorted(set(upward)))


def test_every_layer_is_in_contributing() -> None:
    table = (REPO_ROOT / "CONTRIBUTING.md").read_text()
    for _, prefixes in LAYERS:
        for prefix in prefixes:
            if prefix == "clusterctl":
                continue
            path = prefix.removeprefix("clusterctl.").replace(".", "/")
            assert re.search(rf"`cli/clusterctl/{re.escape(path)}(/|\.py)`", table), prefix


def test_the_layer_test_sees_an_arrow_up(tmp_path: Path) -> None:
    """A lower module importing a higher one is found (the test above can fail)."""
    assert layer_of("clusterctl.run.state") > layer_of("clusterctl.ops.heal")
    assert layer_of("clusterctl.slurm.nodes") > layer_of("clusterctl.render.health")
