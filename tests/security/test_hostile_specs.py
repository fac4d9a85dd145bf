"""Hostile specs: every string field of the examples, in turn, holding Jinja, newlines, ``#``, ``=``,
quotes, ``;``, ``$()``, backticks, path traversal, look-alikes, NUL or a very long value.

Each spec either fails validation with a located error, or renders; a render must have the
shape of the example's (same keys per Slurm line, unit sections and keys, user-data keys,
nccl.conf keys, dnsmasq options, ...), its scripts must not run the value, and Ansible must
template every host's variables without running it (no canary file).

The unit phase puts Jinja into every field in turn and each payload into every field at once;
tests/integration/test_hostile_specs_full.py runs every payload on every field in turn.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

from clusterctl.pipeline import Validated, load_and_validate, render
from clusterctl.spec import SpecError
from tests.security.corpus import (
    CANARY,
    KEY,
    PAYLOADS,
    Baseline,
    FieldPath,
    ansible_template_hostvars,
    dotted,
    located_problems,
    mutate,
    run_scripts,
    shape_problems,
    shapes,
    string_fields,
)
from tests.specs import example_data, write_spec

EXAMPLES = ("local.yaml", "onprem-h100-256.yaml")


@functools.cache
def baseline(example: str) -> Baseline:
    """The shapes the unmodified example renders to."""
    validated = load_and_validate(Path(__file__).resolve().parents[2] / "examples" / example)
    return Baseline(shapes(validated.files, validated.plan))


def fields(example: str) -> list[FieldPath]:
    """Every string field (and user-defined key) of an example."""
    return list(string_fields(example_data(example)))


def check_field(example: str, path: FieldPath, payload_names: list[str], tmp_path: Path) -> list[str]:
    """Run the corpus for one field; returns every problem found (empty: all good)."""
    base = example_data(example)
    problems: list[str] = []
    inventories: list[tuple[Path, set[str]]] = []
    workdir = tmp_path / "work"
    workdir.mkdir()
    for name in payload_names:
        spec = write_spec(tmp_path, mutate(base, path, PAYLOADS[name]), f"{name}.yaml")
        where = f"{dotted(path)} + {name}"
        try:
            validated: Validated = load_and_validate(spec)
        except SpecError as exc:
            problems += [f"{where}: {p}" for p in located_problems(exc, spec)]
            continue
        problems += [f"{where}: {p}" for p in shape_problems(validated.files, validated.plan, baseline(example))]
        problems += [f"{where}: {p}" for p in run_scripts(validated.files, workdir)]
        out, _ = render(validated, tmp_path / f"build-{name}")
        inventories.append((out / "ansible" / "inventory", {n.hostname for n in validated.plan.nodes}))
    if inventories:
        problems += ansible_template_hostvars(inventories, workdir)
    if list(tmp_path.rglob(CANARY)):
        problems.append(f"{dotted(path)}: a payload ran: {CANARY} was created")
    return problems


def _unique_fields() -> list[tuple[str, FieldPath]]:
    """Every field of the on-prem example, and the fields only the local example has."""
    seen: set[str] = set()
    out = []
    for example in ("onprem-h100-256.yaml", "local.yaml"):
        for path in fields(example):
            if dotted(path) not in seen:
                seen.add(dotted(path))
                out.append((example, path))
    return out


JINJA_CASES = _unique_fields()


@pytest.mark.parametrize(("example", "path"), JINJA_CASES, ids=[f"{e}:{dotted(p)}" for e, p in JINJA_CASES])
def test_jinja_in_each_field(example: str, path: FieldPath, tmp_path: Path) -> None:
    """The headline case of every field in turn: Jinja that would touch the canary if templated."""
    problems = check_field(example, path, ["jinja"], tmp_path)
    assert not problems, "\n".join(problems)


def mutate_all(data: dict[str, Any], payload: str) -> dict[str, Any]:
    """``data`` with every string field and user-defined key made hostile at once."""
    out = data
    for path in sorted(string_fields(data), key=lambda p: p[-1] == KEY):
        if path[-1] != KEY:
            out = mutate(out, path, PAYLOADS[payload])
    for path in [p for p in string_fields(out) if p[-1] == KEY]:
        out = mutate(out, path, PAYLOADS[payload])
    return out


ALL_AT_ONCE = [(example, name) for example in EXAMPLES for name in PAYLOADS]


@pytest.mark.parametrize(("example", "payload"), ALL_AT_ONCE, ids=[f"{e}:{n}" for e, n in ALL_AT_ONCE])
def test_each_payload_in_every_field_at_once(example: str, payload: str, tmp_path: Path) -> None:
    """Every payload in every field of an example at once: all errors located, or a safe render."""
    spec = write_spec(tmp_path, mutate_all(example_data(example), payload), "all.yaml")
    try:
        validated = load_and_validate(spec)
    except SpecError as exc:
        problems = located_problems(exc, spec)
        assert not problems, "\n".join(problems)
        return
    problems = shape_problems(validated.files, validated.plan, baseline(example))
    problems += run_scripts(validated.files, tmp_path)
    out, _ = render(validated, tmp_path / "build")
    problems += ansible_template_hostvars(
        [(out / "ansible" / "inventory", {n.hostname for n in validated.plan.nodes})], tmp_path
    )
    assert not problems, "\n".join(problems)
    assert not list(tmp_path.rglob(CANARY))


def test_the_shape_check_sees_a_new_key(tmp_path: Path) -> None:
    """Negative control: a value that did start a new line would be reported."""
    validated = load_and_validate(Path(__file__).resolve().parents[2] / "examples" / "local.yaml")
    broken = [
        type(f)(f.path, f.text.replace("ClusterName=local", "ClusterName=local\nSlurmUser=root"), f.mode)
        for f in validated.files
    ]
    problems = shape_problems(broken, validated.plan, baseline("local.yaml"))
    assert any("slurm/slurm.conf" in p for p in problems)


SPEC_NAMES = ["a$(touch CANARY)\n.yaml", "x`touch CANARY`;{{ lookup('pipe','touch CANARY') }}.yaml"]


@pytest.mark.parametrize("name", SPEC_NAMES)
def test_a_hostile_spec_file_name(name: str, tmp_path: Path) -> None:
    """The spec's file name reaches every header comment and the re-render command: harmless."""
    spec = write_spec(tmp_path, example_data("onprem-h100-256.yaml"), name)
    validated = load_and_validate(spec)
    problems = shape_problems(validated.files, validated.plan, baseline("onprem-h100-256.yaml"))
    problems += run_scripts(validated.files, tmp_path)
    out, _ = render(validated, tmp_path / "build")
    problems += ansible_template_hostvars(
        [(out / "ansible" / "inventory", {n.hostname for n in validated.plan.nodes})], tmp_path
    )
    assert not problems, "\n".join(problems)
    for item in validated.files:
        head = item.text.split("\n", 3)[:3]
        assert not any(line.startswith(("a$(", ".yaml")) for line in head), item.path
    rerender = (out / "DO_NOT_EDIT").read_text().splitlines()[-1]
    assert rerender.startswith("Re-render with: clusterctl render '")
    assert not list(tmp_path.rglob(CANARY))
