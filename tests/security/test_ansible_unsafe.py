"""Ansible never templates spec data: the real ansible-playbook (ansible-core 2.19) on an
inventory where every string the plan holds carries Jinja that would touch a canary file.

A play on the inventory's hosts (connection local) templates every host's ``hostvars`` (debug
and a template task, as the issue asks), and a small role writes a template that uses the
values the way the real roles do. No canary may appear, the role must receive the literal
text, and booleans, numbers, lists and dicts must keep their types. A control writes the same
inventory without ``!unsafe`` and shows the canary does appear then (the test can fail).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from clusterctl.pipeline import load_and_validate
from clusterctl.plan.models import Plan
from clusterctl.render import ansible_yaml
from clusterctl.render.inventory import group_vars, inventory
from tests.conftest import EXAMPLES
from tests.security.corpus import CANARY, ansible_template_hostvars

JINJA = "{{ lookup('pipe', 'touch " + CANARY + "') }}{% set _x = lookup('pipe', 'touch " + CANARY + "') %}{# c #}"

PLAYBOOK = """\
- name: Template every host's variables
  hosts: all
  gather_facts: false
  vars:
    ansible_connection: local
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
  tasks:
    - name: Show every host's variables
      ansible.builtin.debug:
        msg: "{{ hostvars[item] }}"
      loop: "{{ groups['all'] }}"
      run_once: true
    - name: Write every host's variables to a file
      ansible.builtin.template:
        src: hostvars.j2
        dest: "{{ out_dir }}/hostvars.json"
        mode: "0644"
      run_once: true
  roles:
    - probe
"""

HOSTVARS_TEMPLATE = """\
{
{% for host in groups['all'] | sort %}
  {{ host | to_json }}: {{ hostvars[host] | to_json }}{{ "," if not loop.last else "" }}
{% endfor %}
}
"""

# What a role does with inventory values: interpolate them into a file it templates.
PROBE_TEMPLATE = """\
{{ {
  "cluster": clusterctl_cluster_name,
  "group": clusterctl_group,
  "rails": clusterctl_rails | default([]),
  "storage_mounts": clusterctl_storage | map(attribute="mount") | list,
  "versions": clusterctl_versions,
  "gpus_plus_one": clusterctl_gpus + 1,
  "spare_type": clusterctl_spare | type_debug,
  "render_dir": clusterctl_render_dir,
} | to_json }}
"""

PROBE_TASKS = """\
- name: Write what the role sees
  ansible.builtin.template:
    src: probe.j2
    dest: "{{ out_dir }}/probe-{{ inventory_hostname | hash('sha1') }}.json"
    mode: "0644"
# The roles read rendered files with the file lookup and install them with copy (never template).
- name: Read a rendered file as the slurm and common roles do
  ansible.builtin.set_fact:
    __probe_conf: "{{ lookup('ansible.builtin.file', probe_file) }}"
- name: Install it as the roles do
  ansible.builtin.copy:
    src: "{{ probe_file }}"
    dest: "{{ out_dir }}/copied-{{ inventory_hostname | hash('sha1') }}.conf"
    mode: "0644"
- name: Write what was read
  ansible.builtin.copy:
    content: "{{ __probe_conf }}"
    dest: "{{ out_dir }}/read-{{ inventory_hostname | hash('sha1') }}.conf"
    mode: "0644"
"""


def _hostile(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _hostile(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_hostile(v) for v in value]
    if isinstance(value, str):
        return value + JINJA
    return value


@pytest.fixture(scope="module")
def hostile_plan() -> Plan:
    """The onprem example's plan (storage, rails, bare metal) with Jinja after every string."""
    plan = load_and_validate(EXAMPLES / "onprem-h100-256.yaml").plan
    original = plan.model_dump(mode="json")
    data = _hostile(original)
    try:
        return Plan.model_validate(data)
    except ValidationError as exc:
        # Fixed choices (a role, a boot mode) keep their value: the plan cannot hold another.
        for error in exc.errors():
            target, source = data, original
            for part in error["loc"][:-1]:
                target, source = target[part], source[part]
            target[error["loc"][-1]] = source[error["loc"][-1]]
    return Plan.model_validate(data)


def _write_inventory(folder: Path, plan: Plan, *, unsafe: bool = True) -> Path:
    inventory_dir = folder / "inventory"
    (inventory_dir / "group_vars").mkdir(parents=True)
    if unsafe:
        hosts, all_vars = ansible_yaml.dump(inventory(plan), "test"), ansible_yaml.dump(group_vars(plan), "test")
    else:
        # The control: the same data as plain JSON (valid YAML), which Ansible treats as templates.
        hosts, all_vars = json.dumps(inventory(plan)), json.dumps(group_vars(plan))
    (inventory_dir / "hosts.yml").write_text(hosts)
    (inventory_dir / "group_vars" / "all.yml").write_text(all_vars)
    return inventory_dir


def _playbook_dir(folder: Path) -> Path:
    play = folder / "play"
    (play / "templates").mkdir(parents=True)
    (play / "roles" / "probe" / "templates").mkdir(parents=True)
    (play / "roles" / "probe" / "tasks").mkdir(parents=True)
    (play / "site.yml").write_text(PLAYBOOK)
    (play / "templates" / "hostvars.j2").write_text(HOSTVARS_TEMPLATE)
    (play / "roles" / "probe" / "templates" / "probe.j2").write_text(PROBE_TEMPLATE)
    (play / "roles" / "probe" / "tasks" / "main.yml").write_text(PROBE_TASKS)
    return play


def test_ansible_playbook_templates_hostvars_without_running_spec_data(hostile_plan: Plan, tmp_path: Path) -> None:
    # Two nodes of each group are enough for Ansible; the values are the plan's.
    keep = {g: [n for n in hostile_plan.nodes if n.group == g][:2] for g in {n.group for n in hostile_plan.nodes}}
    plan = hostile_plan.model_copy(update={"nodes": [n for nodes in keep.values() for n in nodes]})
    inventory_dir = _write_inventory(tmp_path, plan)
    play = _playbook_dir(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    # A rendered file whose text holds Jinja (a comment or a value the format allows).
    rendered = tmp_path / "slurm.conf"
    rendered.write_text(f"# generated from {JINJA}\nClusterName=x{JINJA}\n")
    (tmp_path / "ansible.cfg").write_text("[defaults]\n")
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(tmp_path / "ansible.cfg"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"),
        "ANSIBLE_REMOTE_TEMP": str(tmp_path / "tmp"),
        "ANSIBLE_ROLES_PATH": str(play / "roles"),
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
    }
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            str(inventory_dir / "hosts.yml"),
            str(play / "site.yml"),
            "-e",
            json.dumps({"out_dir": str(out), "probe_file": str(rendered)}),
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert not list(tmp_path.rglob(CANARY)), "Ansible ran a lookup from spec data"

    # Every host's variables come back as the literal text the plan holds.
    seen = json.loads((out / "hostvars.json").read_text())
    assert set(seen) == {n.hostname for n in plan.nodes}
    node = plan.nodes[0]
    mine = seen[node.hostname]
    assert mine["clusterctl_address"] == node.address
    assert mine["clusterctl_group"] == node.group
    assert mine["clusterctl_cluster_name"] == plan.cluster.name
    assert mine["clusterctl_cluster_name"].endswith(JINJA)
    # Types survive: numbers, booleans, lists, dicts.
    assert mine["clusterctl_gpus"] == node.gpus
    assert mine["clusterctl_spare"] is node.spare
    assert mine["clusterctl_burst"] is False
    assert isinstance(mine["clusterctl_monitoring"], dict)
    assert isinstance(mine["clusterctl_storage"], list)
    assert mine["clusterctl_storage"][0]["requires_lnet"] is plan.storage[0].requires_lnet
    # The one templated value is still templated.
    assert mine["clusterctl_render_dir"] == f"{inventory_dir}/../.."

    # A role's template gets the literal text.
    gpu = next(n for n in plan.nodes if n.rails)
    probe = json.loads(next(out.glob("probe-*.json")).read_text())
    assert probe["cluster"] == plan.cluster.name
    probes = [json.loads(p.read_text()) for p in out.glob("probe-*.json")]
    assert any(p["rails"] == list(gpu.rails) and p["gpus_plus_one"] == gpu.gpus + 1 for p in probes)
    assert all(p["spare_type"] == "bool" for p in probes)
    assert probe["storage_mounts"] == [t.mount for t in plan.storage]
    assert probe["versions"] == plan.cluster.versions
    # Rendered files holding Jinja are installed and read as text.
    for copied in [*out.glob("copied-*.conf"), *out.glob("read-*.conf")]:
        assert copied.read_text().rstrip("\n") == rendered.read_text().rstrip("\n")


def test_the_same_inventory_without_unsafe_runs_the_canary(hostile_plan: Plan, tmp_path: Path) -> None:
    """Control: written as plain strings, Ansible templates the values and the canary appears."""
    plan = hostile_plan.model_copy(update={"nodes": hostile_plan.nodes[:2]})
    inventory_dir = _write_inventory(tmp_path, plan, unsafe=False)
    ansible_template_hostvars([(inventory_dir, {n.hostname for n in plan.nodes})], tmp_path)
    assert list(tmp_path.rglob(CANARY))


def test_the_unsafe_inventory_in_process(hostile_plan: Plan, tmp_path: Path) -> None:
    """The in-process check the corpus uses agrees with ansible-playbook on the same data."""
    plan = hostile_plan.model_copy(update={"nodes": hostile_plan.nodes[:2]})
    inventory_dir = _write_inventory(tmp_path, plan)
    assert ansible_template_hostvars([(inventory_dir, {n.hostname for n in plan.nodes})], tmp_path) == []
    assert not list(tmp_path.rglob(CANARY))
