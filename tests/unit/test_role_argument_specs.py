"""Every role's public interface is declared: defaults/main.yml and meta/argument_specs.yml agree.

The port of prometheus-community/ansible's argument-spec check: the keys of ``defaults/main.yml``
are exactly the options of the ``main`` entry point, each option has a type and a description, and
every public variable carries the role's prefix. roles/README.md's variable tables, generated from
the specs by scripts/role-docs.py, must be current.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ROLES = sorted(p for p in (ROOT / "roles").iterdir() if (p / "tasks" / "main.yml").is_file())


def _load(path: Path) -> dict:
    return (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}


def _options(role: Path) -> dict:
    specs = _load(role / "meta" / "argument_specs.yml").get("argument_specs", {})
    return (specs.get("main") or {}).get("options") or {}


def test_there_are_roles() -> None:
    assert ROLES, "no roles found under roles/"


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_role_has_main_argument_spec(role: Path) -> None:
    specs = _load(role / "meta" / "argument_specs.yml").get("argument_specs", {})
    assert "main" in specs, f"{role.name}: meta/argument_specs.yml has no `main` entry point"


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_defaults_match_argument_specs(role: Path) -> None:
    defaults = set(_load(role / "defaults" / "main.yml"))
    options = set(_options(role))
    assert defaults - options == set(), (
        f"{role.name}: in defaults/main.yml, not in argument_specs: {sorted(defaults - options)}"
    )
    assert options - defaults == set(), (
        f"{role.name}: in argument_specs, not in defaults/main.yml: {sorted(options - defaults)}"
    )


# The one variable every role shares: the stage to run (roles/README.md, "Stages").
SHARED_OPTIONS = {"clusterctl_stage"}


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_options_are_documented_and_prefixed(role: Path) -> None:
    for name, option in _options(role).items():
        if name in SHARED_OPTIONS:
            continue
        assert name.startswith(f"{role.name}_"), f"{role.name}: {name} lacks the `{role.name}_` prefix"
        assert (option or {}).get("type"), f"{role.name}: {name} has no type"
        assert (option or {}).get("description"), f"{role.name}: {name} has no description"


def test_readme_variable_tables_are_current() -> None:
    spec = importlib.util.spec_from_file_location("role_docs", ROOT / "scripts" / "role-docs.py")
    assert spec
    assert spec.loader
    role_docs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(role_docs)
    assert role_docs.main(["--check"]) == 0, "roles/README.md is out of date: run scripts/role-docs.py"
