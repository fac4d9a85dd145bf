"""Every role has the two stages of the image contract, one shape for all (roles/README.md, "Stages").

tasks/main.yml runs validate, then install.yml when ``clusterctl_stage`` is all or install, then
configure.yml and service.yml when it is all or configure; ``clusterctl_stage`` defaults to ``all``
(defaults/main.yml and meta/argument_specs.yml, choices all/install/configure), so a role applied
from a plain playbook runs both. No role reads another role's files, and the old one-call state
reader (node_state.py) is gone. site.yml's plays honour the stage per host.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ROLES_DIR = ROOT / "roles"
# Every role takes the same shape.
STAGED = sorted(p.name for p in ROLES_DIR.iterdir() if (p / "tasks" / "main.yml").is_file())
ALL_ROLES = sorted(p.name for p in ROLES_DIR.iterdir() if (p / "tasks" / "main.yml").is_file())
INSTALL = "clusterctl_stage in ['all', 'install']"
CONFIGURE = "clusterctl_stage in ['all', 'configure']"


def _yaml(path: Path) -> object:
    return yaml.safe_load(path.read_text())


def _imports(role: str) -> dict[str, dict]:
    tasks = _yaml(ROLES_DIR / role / "tasks" / "main.yml")
    assert isinstance(tasks, list)
    return {t["ansible.builtin.import_tasks"]: t for t in tasks if "ansible.builtin.import_tasks" in t}


def _conditions(task: dict) -> list[str]:
    when = task.get("when", [])
    return when if isinstance(when, list) else [when]


@pytest.mark.parametrize("role", STAGED)
def test_main_runs_install_then_configure_then_service_by_stage(role: str) -> None:
    """A role without services has no service.yml; a role for one fabric adds its own condition."""
    imports = _imports(role)
    assert next(iter(imports)) == "validate.yml"
    order = [name for name in imports if name in ("install.yml", "configure.yml", "service.yml")]
    assert order[:2] == ["install.yml", "configure.yml"], f"{role}: {list(imports)}"
    assert order[2:] in ([], ["service.yml"]), f"{role}: {list(imports)}"
    stages = {"install.yml": INSTALL, "configure.yml": CONFIGURE, "service.yml": CONFIGURE}
    tags = {"install.yml": "install", "configure.yml": "configure", "service.yml": "run"}
    for name in order:
        assert stages[name] in _conditions(imports[name]), f"{role}/{name}: {imports[name].get('when')}"
        assert f"{role}_{tags[name]}" in imports[name]["tags"], f"{role}/{name}: {imports[name]['tags']}"


@pytest.mark.parametrize("role", STAGED)
def test_stage_defaults_to_all_and_is_declared(role: str) -> None:
    defaults = _yaml(ROLES_DIR / role / "defaults" / "main.yml")
    assert isinstance(defaults, dict)
    assert defaults["clusterctl_stage"] == "all"
    spec = _yaml(ROLES_DIR / role / "meta" / "argument_specs.yml")
    option = spec["argument_specs"]["main"]["options"]["clusterctl_stage"]  # type: ignore[index]
    assert option["type"] == "str"
    assert option["choices"] == ["all", "install", "configure"]


@pytest.mark.parametrize("role", STAGED)
def test_install_stage_writes_nothing_of_the_cluster(role: str) -> None:
    """install.yml installs packages; the render, secrets and rendered files are configure's."""
    text = (ROLES_DIR / role / "tasks" / "install.yml").read_text()
    for word in ("render_dir", "_key_file", "password", "slurm_config_dir", "hosts_file", "_prometheus_config"):
        assert word not in text, f"{role}/tasks/install.yml mentions {word}"


@pytest.mark.parametrize("role", ALL_ROLES)
def test_no_role_reads_another_roles_files(role: str) -> None:
    other = re.compile(
        r"role_path\s*~\s*['\"]/\.\./|playbook_dir\s*~\s*['\"]/\w+/files/|\.\./(?!\.\./)\w+/(files|library|templates)/"
    )
    for path in (ROLES_DIR / role).rglob("*.yml"):
        if "molecule" in path.parts:
            continue
        assert not other.search(path.read_text()), f"{path.relative_to(ROOT)} reads another role's files"


def test_the_state_reader_is_gone() -> None:
    assert not list(ROLES_DIR.glob("*/files/node_state.py"))
    users = [p for p in ROLES_DIR.rglob("*.yml") if "node_state" in p.read_text()]
    assert users == []


def test_site_plays_honour_the_stage_per_host() -> None:
    """Play 0 gates its package step on the host's stage; every other play applies roles, which gate
    themselves, and runs no task of its own that is not a role."""
    plays = _yaml(ROLES_DIR / "site.yml")
    assert isinstance(plays, list)
    block = next(t for t in plays[0]["tasks"] if "block" in t)
    assert block["when"] == "(clusterctl_stage | default('all')) in ['all', 'install']"
    for play in plays[1:]:
        for task in play.get("tasks", []):
            assert "ansible.builtin.include_role" in task, f"{play['name']}: {task.get('name')} is not a role"
