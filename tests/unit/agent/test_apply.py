"""One apply for real: ansible-playbook -c local from the engine layer clusterctl builds, on this machine.

The playbook touches only a temporary directory; the engine is the one the nodes get (the control
machine's ansible-core and libraries, run by the system's python3 with nothing else on its path).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clusterctl.agent.apply import Layout, inventory, prepare, run_playbook
from clusterctl.agent.layers import unpack
from clusterctl.paths import collections_dir
from clusterctl.run.engine import engine_layer

PLAYBOOK = """
- name: Configure the compute nodes
  hosts: compute
  gather_facts: false
  tasks:
    - name: Write the marker
      ansible.builtin.copy:
        dest: "{{ target }}/marker"
        content: "{{ clusterctl_stage }} {{ inventory_hostname }} {{ groups['controller'] | join(',') }}\\n"
        mode: "0644"
    - name: Fail when asked
      ansible.builtin.command: "false"
      changed_when: false
      when: fail | default(false) | bool
- name: Never on this node
  hosts: controller
  gather_facts: false
  tasks:
    - name: Would run on the controller
      ansible.builtin.file:
        path: "{{ target }}/controller-ran"
        state: touch
        mode: "0644"
"""


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not Path("/usr/bin/python3").is_file():
        pytest.skip("no /usr/bin/python3 to run the engine with")
    folder = tmp_path_factory.mktemp("engine")
    archive = folder / "engine.tar.gz"
    archive.write_bytes(engine_layer().data)
    return unpack(archive, folder / "layer")


def _layout(tmp_path: Path, engine: Path) -> Layout:
    roles = tmp_path / "roles"
    (roles / "roles").mkdir(parents=True)
    (roles / "roles" / "site.yml").write_text(PLAYBOOK)
    node = collections_dir() / "ansible_collections" / "clusterctl" / "node"
    shutil.copytree(node, roles / "collections" / "ansible_collections" / "clusterctl" / "node")
    files = tmp_path / "files"
    (files / "inventory" / "group_vars").mkdir(parents=True)
    (files / "render").mkdir()
    (files / "inventory" / "group_vars" / "all.yml").write_text(f"target: !unsafe '{tmp_path}'\n")
    bundle = {"groups": ["compute", "static_compute"], "others": {"controller": ["ctl001"]}, "empty_groups": ["gpu"]}
    (files / "bundle.json").write_text(json.dumps(bundle))
    return Layout(engine=engine, roles=roles, files=files, run=tmp_path / "run")


def test_the_node_applies_its_plays_only_and_the_callback_counts_them(tmp_path: Path, engine: Path) -> None:
    layout = _layout(tmp_path, engine)
    prepare("gpu001", "configure", {}, layout)
    outcome = run_playbook("gpu001", layout, tmp_path / "apply.log")
    assert outcome.ok, (outcome, (tmp_path / "apply.log").read_text()[-3000:])
    assert (tmp_path / "marker").read_text() == "configure gpu001 ctl001\n"
    assert not (tmp_path / "controller-ran").exists(), "the apply reached another host"
    assert (outcome.tasks, outcome.changed) == (2, 1)

    again = run_playbook("gpu001", layout, tmp_path / "apply.log")
    assert (again.ok, again.changed) == (True, 0)


CONFIG_PLAYBOOK = """
- name: Record the settings Ansible runs this apply with
  hosts: compute
  gather_facts: false
  tasks:
    - name: Write them
      ansible.builtin.copy:
        dest: "{{ target }}/settings"
        content: >-
          {{ lookup('ansible.builtin.config', 'DEFAULT_INTERNAL_POLL_INTERVAL') }}
          {{ lookup('ansible.builtin.config', 'DEFAULT_NO_TARGET_SYSLOG') }}
          {{ lookup('ansible.builtin.config', 'DEFAULT_FORKS') }}
        mode: "0644"
"""


def test_the_apply_runs_with_the_agents_settings_not_ansibles_defaults(tmp_path: Path, engine: Path) -> None:
    """The written ansible.cfg is the one Ansible reads: a 20 ms poll (not 1 ms, which keeps part of a
    core busy through every package install), no module arguments in the journal, one fork."""
    layout = _layout(tmp_path, engine)
    (layout.roles / "roles" / "site.yml").write_text(CONFIG_PLAYBOOK)
    prepare("gpu001", "configure", {}, layout)
    outcome = run_playbook("gpu001", layout, tmp_path / "apply.log")
    assert outcome.ok, (outcome, (tmp_path / "apply.log").read_text()[-3000:])
    assert (tmp_path / "settings").read_text().split() == ["0.02", "True", "1"]


def test_a_failed_task_comes_back_with_its_name_module_and_output(tmp_path: Path, engine: Path) -> None:
    layout = _layout(tmp_path, engine)
    prepare("gpu001", "all", {"fail": True}, layout)
    outcome = run_playbook("gpu001", layout, tmp_path / "apply.log")
    assert not outcome.ok
    assert outcome.rc != 0
    (failure,) = outcome.failures
    assert failure.task == "Fail when asked"
    assert failure.action == "ansible.builtin.command"


def test_the_inventory_reaches_this_node_alone() -> None:
    layout = Layout(Path("/e"), Path("/r"), Path("/f"), Path("/run"))
    bundle = {"groups": ["compute"], "others": {"controller": ["ctl001"], "login": ["login001"]}}
    data = inventory("gpu001", "configure", {"clusterctl_x": 1}, bundle, layout)
    hosts = data["all"]["hosts"]
    assert hosts["gpu001"]["ansible_connection"] == "local"
    assert hosts["gpu001"]["clusterctl_pull"] is True
    assert hosts["gpu001"]["clusterctl_render_dir"] == "/f/render"
    assert data["all"]["children"]["compute"]["hosts"] == {"gpu001": None}
    assert data["all"]["children"]["controller"]["hosts"] == {"ctl001": None}
