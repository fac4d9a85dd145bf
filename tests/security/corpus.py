"""The hostile-spec corpus: examples with one string field at a time made hostile, and the checks.

A hostile spec must either fail validation with a located error (file:line:col and a field)
or render; when it renders, every file must have the keys, sections and fields the example
renders to (the value changed, the shape did not), the generated scripts must run without
running anything the value holds, and Ansible must template every host's variables without
running anything either (the canary file ``CANARY`` in the working directory never appears).
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterctl.plan.models import Plan
from clusterctl.render import RenderedFile
from clusterctl.spec import Level, SpecError
from tests.security import formats

CANARY = "CANARY"

Payload = Callable[[str], str]

# Each payload keeps the original value in front, so a field's type has its best chance to
# accept it and the value reaches the render; the rest is what must stay data.
PAYLOADS: dict[str, Payload] = {
    "jinja": lambda v: (
        v + "{{ lookup('pipe','touch " + CANARY + "') }}{% set _x = lookup('pipe','touch " + CANARY + "') %}{# c #}"
    ),
    "newline": lambda v: v + "\nEvil=1\r\n[Install]",
    "hash-equals": lambda v: v + "#x=y",
    "space-key": lambda v: v + " Evil=1",
    "quotes": lambda v: v + "'\"",
    "semicolon": lambda v: v + ";touch " + CANARY,
    "dollar-paren": lambda v: v + "$(touch " + CANARY + ")",
    "backtick": lambda v: v + "`touch " + CANARY + "`",
    "traversal": lambda v: v + "/../../../etc/passwd",
    "lookalike": lambda v: v + "\uff47\u0440u",  # fullwidth g, Cyrillic r
    "separator": lambda v: v + "\u2028x\u202ey",  # line separator, right-to-left override
    "nul": lambda v: v + "\x00x",
    "long": lambda v: v + "a" * 5000,
    "percent": lambda v: v + "%h%%",
}

FieldPath = tuple[str | int, ...]
KEY = "<key>"  # last element of a path that renames a mapping key instead of changing a value

# Mappings whose keys are names the spec defines (and refers to elsewhere).
NAMED_MAPS = ("hardware",)


def string_fields(data: Any, path: FieldPath = ()) -> Iterator[FieldPath]:
    """Every string value of a spec document, and every user-defined mapping key."""
    if isinstance(data, dict):
        for key, value in data.items():
            if path and path[-1] in NAMED_MAPS:
                yield (*path, key, KEY)
            yield from string_fields(value, (*path, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from string_fields(value, (*path, index))
    elif isinstance(data, str):
        yield path


def _replace_refs(data: Any, old: str, new: str) -> Any:
    if isinstance(data, dict):
        return {k: _replace_refs(v, old, new) for k, v in data.items()}
    if isinstance(data, list):
        return [_replace_refs(v, old, new) for v in data]
    return new if data == old else data


def mutate(data: dict[str, Any], path: FieldPath, payload: Payload) -> dict[str, Any]:
    """A copy of ``data`` with the field at ``path`` made hostile (a key renamed everywhere)."""
    if path[-1] == KEY:
        parent_path, name = path[:-2], str(path[-2])
        new = payload(name)
        out = _replace_refs(copy.deepcopy(data), name, new)
        parent = out
        for part in parent_path:
            parent = parent[part]
        parent[new] = parent.pop(name)
        return out
    out = copy.deepcopy(data)
    target = out
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = payload(target[path[-1]])
    return out


def dotted(path: FieldPath) -> str:
    """``nodes[2].group`` for a path."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


# --- checks ---------------------------------------------------------------------------------------


def located_problems(error: SpecError, spec: Path) -> list[str]:
    """What is wrong with a validation failure: it must be located (file:line:col and a field)."""
    errors = [f for f in error.findings if f.level >= Level.ERROR]
    if not errors:
        return ["the spec failed without an error finding"]
    problems = []
    for finding in errors:
        if not finding.file or finding.line < 1 or finding.column < 1:
            problems.append(f"finding {finding.code} is not located: {finding.location!r}: {finding.message}")
        if Path(finding.file).name not in (spec.name, "machines.csv"):
            problems.append(f"finding {finding.code} names another file: {finding.file}")
        if not finding.path:
            problems.append(f"finding {finding.code} names no field: {finding.message}")
    return problems


@dataclass
class Baseline:
    """The shapes of an example's rendered files, grouped so renamed files still compare."""

    shapes: dict[str, list[str]]


def _names(plan: Plan) -> set[str]:
    """Plan values that appear as YAML keys: host names and the inventory groups named after
    node groups and racks."""
    from clusterctl.render.inventory import inventory

    groups = inventory(plan)["all"]["children"]
    return {n.hostname for n in plan.nodes} | {g for g in groups if g.startswith(("group_", "rack_"))}


def shapes(files: list[RenderedFile], plan: Plan) -> dict[str, list[str]]:
    """Group key -> sorted shapes of the files in that group."""
    names = _names(plan)
    out: dict[str, list[str]] = {}
    for item in files:
        out.setdefault(formats.group_key(item.path), []).append(repr(formats.structure(item.path, item.text, names)))
    return {k: sorted(v) for k, v in out.items()}


def shape_problems(
    files: list[RenderedFile], plan: Plan, baseline: Baseline, original: list[RenderedFile] | None = None
) -> list[str]:
    """Files whose keys, sections or fields differ from the example's.

    With ``original`` (the example's files), only the groups with a changed file are read.
    """
    if original is not None:
        before = {(f.path, f.text) for f in original}
        changed = {formats.group_key(f.path) for f in files if (f.path, f.text) not in before}
        changed |= {formats.group_key(f.path) for f in original} ^ {formats.group_key(f.path) for f in files}
        files = [f for f in files if formats.group_key(f.path) in changed]
        baseline = Baseline({k: v for k, v in baseline.shapes.items() if k in changed})
    try:
        got = shapes(files, plan)
    except Exception as exc:  # a file that does not even parse is the finding
        return [f"a rendered file does not parse: {type(exc).__name__}: {exc}"]
    problems = []
    for key in sorted(set(got) | set(baseline.shapes)):
        if got.get(key) != baseline.shapes.get(key):
            problems.append(f"{key}: shape changed: {str(got.get(key))[:300]} != {str(baseline.shapes.get(key))[:300]}")
    problems += _unit_problems(files)
    return problems


def _unit_problems(files: list[RenderedFile]) -> list[str]:
    """A mount unit's name must be what systemd derives from its Where= (else systemd ignores it)."""
    from clusterctl.plan.storage import systemd_mount_unit

    problems = []
    for item in files:
        if item.path.startswith("storage/units/"):
            where = formats.systemd_values(item.text).get("Where", "")
            if systemd_mount_unit(where) != item.path.rsplit("/", 1)[-1]:
                problems.append(f"{item.path}: Where={where!r} does not match the unit name")
    return problems


def run_scripts(files: list[RenderedFile], workdir: Path) -> list[str]:
    """Run what is safe to run of the generated scripts, in ``workdir``: the job environment
    (sourced like the docs say) and the TaskProlog (it only prints); ``bash -n`` the others."""
    problems = []
    env = {"PATH": os.environ["PATH"], "SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_ID": "42", "HOME": str(workdir)}
    for item in files:
        name = item.path.rsplit("/", 1)[-1]
        script = workdir / ("script-" + name.replace("/", "_"))
        script.write_text(item.text)
        if item.path.startswith("nccl/") and name.endswith(".env"):
            command = ["bash", "-c", 'set -a; . "$1"; set +a', "_", str(script)]
        elif item.path.startswith("slurm/task_prolog.d/"):
            command = ["bash", str(script)]
        elif item.text.startswith("#!/usr/bin/python3"):
            command = [sys.executable, "-m", "py_compile", str(script)]
        elif item.mode & 0o111 or name.endswith(".sh"):
            command = ["bash", "-n", str(script)]
        else:
            continue
        done = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True, check=False, timeout=30)
        if done.returncode != 0:
            problems.append(f"{item.path}: {' '.join(command[:2])} failed: {done.stderr.strip()[:300]}")
    return problems


def ansible_template_hostvars(inventories: list[tuple[Path, set[str]]], workdir: Path) -> list[str]:
    """Template every host's variables with Ansible itself, as ``{{ hostvars[host] }}`` in a play does.

    In-process (the same inventory loader and templating engine ansible-playbook uses), so the
    whole corpus costs seconds; tests/security/test_ansible_unsafe.py runs the real
    ansible-playbook on the worst case.

    Returns:
        Problems: an inventory Ansible could not read, or whose hosts are not the plan's.
    """
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template
    from ansible.vars.hostvars import HostVars
    from ansible.vars.manager import VariableManager

    problems = []
    cwd = Path.cwd()
    os.chdir(workdir)
    try:
        for directory, expected in inventories:
            loader = DataLoader()
            source = directory if directory.is_file() else directory / "hosts.yml"
            inventory = InventoryManager(loader=loader, sources=[str(source)])
            hosts = inventory.get_hosts()
            if {h.name for h in hosts} != expected:
                problems.append(f"{directory}: Ansible read hosts {sorted(h.name for h in hosts)[:5]}...")
                continue
            manager = VariableManager(loader=loader, inventory=inventory)
            hostvars = HostVars(inventory=inventory, variable_manager=manager, loader=loader)
            for host in hosts:
                variables = manager.get_vars(host=host)
                variables["hostvars"] = hostvars
                templar = Templar(loader=loader, variables=variables)
                templar.template(trust_as_template("{{ hostvars[inventory_hostname] | to_json }}"))
                templar.template(trust_as_template("{{ groups | to_json }}"))
    finally:
        os.chdir(cwd)
    return problems
