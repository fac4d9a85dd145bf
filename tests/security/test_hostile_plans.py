"""Escaping without the spec's types: hostile values put straight into the plan, field by field.

The spec's types refuse most hostile values before a plan exists; the render must be safe on
its own anyway (issue 18: "escaping must not rely on the types"). Here every string field of
the plans of five examples (local, bare metal, GCP, Azure, AWS burst) gets each payload in
turn, the plan is rendered, and the render must either refuse with a RenderError or give
files of the same shape as the example's, scripts that run nothing, and an inventory Ansible
templates without running anything.

A few plan fields select what is rendered rather than being written (the provider, a fabric
kind); they are listed in ``SELECTORS`` and left out, with the reason.

The unit phase gives each field Jinja, a newline and a rotating share of the other payloads
(every payload meets a quarter of the fields); tests/integration/test_hostile_plans_full.py
gives every field every payload.
"""

from __future__ import annotations

import functools
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from clusterctl.pipeline import load_and_validate
from clusterctl.plan.models import Plan
from clusterctl.render import RenderedFile, render_files
from clusterctl.render.escape import RenderError
from tests.conftest import EXAMPLES
from tests.security.corpus import (
    CANARY,
    PAYLOADS,
    Baseline,
    ansible_template_hostvars,
    run_scripts,
    shape_problems,
    shapes,
)
from tests.specs import example_data, write_spec

PLAN_EXAMPLES = ("local.yaml", "onprem-h100-256.yaml", "gcp-a3mega.yaml", "azure-ndv5.yaml", "aws-burst.yaml")

# Plan fields whose value chooses which files, lines or variables exist (the spec gives them
# fixed choices; a new value is a new shape, not an escaping problem). Patterns over the
# dotted path with list indices as [].
SELECTORS = tuple(
    re.compile(p)
    for p in (
        r"cluster\.provider",  # picks the inventory's connection variables and the Pulumi program
        r"cluster\.os",  # picks OS-specific variables
        r"fabric\.(kind|layout|subnet_manager)",  # picks health checks and topology comments
        r"nccl\[\]\.fabric",  # picks the cloud fabric files
        r"slurm\.topology",
        r"cloud\.provider|burst_cloud\.[^.]+\.provider",
        # which nodes of which instance group are EFA nodes picks the health check's EFA counts
        r"(cloud|burst_cloud\.[^.]+)\.groups\[\]\.(fabric|hosts\[\])",
        r".*\.purpose",  # a subnet's purpose picks how the stack uses it
        r"findings.*",  # validation findings are not rendered
    )
)


def _leaves(data: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """String leaves of a plan dump, the first item of each list only."""
    out: list[tuple[Any, ...]] = []
    if isinstance(data, dict):
        for key, value in data.items():
            out += _leaves(value, (*path, key))
    elif isinstance(data, list | tuple):
        if data:
            out += _leaves(data[0], (*path, 0))
    elif isinstance(data, str):
        out.append(path)
    return out


def pattern(path: tuple[Any, ...]) -> str:
    """``nodes[].hostname`` for a path."""
    out = ""
    for part in path:
        out += "[]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


@functools.cache
def example_plan(example: str) -> tuple[Plan, list[RenderedFile], Baseline]:
    """The example's plan (at most two nodes per group, so each render takes milliseconds),
    its files and their shapes."""
    data = example_data(example)
    for group in data["nodes"]:
        if isinstance(group.get("count"), int) and group["count"] > 2:
            group["count"] = 2
            group["spares"] = min(group.get("spares", 0), 1)
    folder = Path(tempfile.mkdtemp(prefix="hostile-plans-"))
    for csv in EXAMPLES.glob("*.csv"):
        shutil.copy(csv, folder / csv.name)
    validated = load_and_validate(write_spec(folder, data, example))
    return validated.plan, validated.files, Baseline(shapes(validated.files, validated.plan))


def _cases() -> list[tuple[str, tuple[Any, ...]]]:
    seen: set[str] = set()
    out = []
    for example in PLAN_EXAMPLES:
        plan, _, _ = example_plan(example)
        for path in _leaves(plan.model_dump(mode="json")):
            name = pattern(path)
            if name in seen or any(s.fullmatch(name) for s in SELECTORS):
                continue
            seen.add(name)
            out.append((example, path))
    return out


CASES = _cases()
# Payloads every field gets in the unit phase, and how many of the others it gets in turn.
ALWAYS = ("jinja", "newline")
SHARE = 3


def payloads_for(index: int, full: bool = False) -> list[str]:
    """The payload names of the ``index``-th field."""
    if full:
        return list(PAYLOADS)
    others = [n for n in PAYLOADS if n not in ALWAYS]
    return [*ALWAYS, *(others[(index * SHARE + k) % len(others)] for k in range(SHARE))]


def _set(data: dict[str, Any], path: tuple[Any, ...], value: str) -> None:
    target: Any = data
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value


def _changed(files: list[RenderedFile], original: list[RenderedFile]) -> list[RenderedFile]:
    before = {(f.path, f.text) for f in original}
    return [f for f in files if (f.path, f.text) not in before]


def check_plan_field(example: str, path: tuple[Any, ...], names: list[str], tmp_path: Path) -> None:
    """Render the example's plan with each payload in the field at ``path``; assert it is safe."""
    plan, original, baseline = example_plan(example)
    dump = plan.model_dump(mode="json")
    problems: list[str] = []
    inventories: list[tuple[Path, set[str]]] = []
    for name in names:
        payload = PAYLOADS[name]
        data = plan.model_dump(mode="json")
        target: Any = dump
        for part in path:
            target = target[part]
        _set(data, path, payload(target))
        try:
            hostile = Plan.model_validate(data)
        except ValidationError:
            continue  # the plan's own types cannot hold it
        try:
            files = render_files(hostile)
        except RenderError as exc:
            if not (exc.fmt and exc.reason):
                problems.append(f"{pattern(path)} + {name}: a RenderError without its format or reason")
            continue
        where = f"{pattern(path)} + {name}"
        problems += [f"{where}: {p}" for p in shape_problems(files, hostile, baseline, original)]
        changed = _changed(files, original)
        problems += [f"{where}: {p}" for p in run_scripts(changed, tmp_path)]
        # Only Jinja means anything to Ansible's templating; the YAML itself is checked above.
        inventory = [f for f in changed if f.path.startswith("ansible/inventory/")]
        if inventory and name == "jinja":
            base = tmp_path / f"inv-{name}"
            for item in files:
                if item.path.startswith("ansible/inventory/"):
                    target_file = base / item.path.removeprefix("ansible/inventory/")
                    target_file.parent.mkdir(parents=True, exist_ok=True)
                    target_file.write_text(item.text)
            inventories.append((base, {n.hostname for n in hostile.nodes}))
    problems += ansible_template_hostvars(inventories, tmp_path)
    assert not problems, "\n".join(problems)
    assert not list(tmp_path.rglob(CANARY)), f"{pattern(path)}: a payload ran"


INDEXED = [(example, path, index) for index, (example, path) in enumerate(CASES)]


@pytest.mark.parametrize(("example", "path", "index"), INDEXED, ids=[f"{e}:{pattern(p)}" for e, p, _ in INDEXED])
def test_hostile_plan_field(example: str, path: tuple[Any, ...], index: int, tmp_path: Path) -> None:
    check_plan_field(example, path, payloads_for(index), tmp_path)


def test_the_rotation_reaches_every_payload() -> None:
    assert {n for index in range(len(CASES)) for n in payloads_for(index)} == set(PAYLOADS)


def test_every_example_contributes_fields() -> None:
    """Each example adds fields the others do not have (the corpus is not only the first one)."""
    examples = {example for example, _ in CASES}
    assert examples == set(PLAN_EXAMPLES)
    assert len(CASES) > 150
