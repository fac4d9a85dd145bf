"""Extra variables of a run reach Ansible as data: a path holding Jinja is not templated."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterctl.pipeline import load_and_validate, render
from clusterctl.run.ansible import run_playbook
from clusterctl.run.events import EventBus

pytestmark = [pytest.mark.integration]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "local.yaml"
JINJA = "{{ lookup('pipe', 'touch CANARY') }}"
PLAYBOOK = """\
---
- name: Use the extra variables the way the roles do
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: The value arrives as the literal text, with its type
      ansible.builtin.assert:
        that:
          - munge_key_file.endswith("/munge.key")
          - "'lookup' in munge_key_file"
          - container_nodes is sameas true
          - count == 3
        fail_msg: "munge_key_file is {{ munge_key_file }}"
    - name: Write it into a file as a role template would
      ansible.builtin.copy:
        content: "{{ munge_key_file }}"
        dest: "{{ out }}"
        mode: "0644"
"""


def test_extravars_are_not_templated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build, _ = render(load_and_validate(EXAMPLE), tmp_path / "build")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    playbook = tmp_path / "extravars.yml"
    playbook.write_text(PLAYBOOK)
    state = tmp_path / "state"
    value = f"/state/{JINJA}/munge.key"
    extravars = {"munge_key_file": value, "container_nodes": True, "count": 3, "out": str(tmp_path / "out.txt")}

    result = run_playbook(build, state, EventBus(), playbook=playbook, extravars=extravars)

    assert result.succeeded, f"{result.failures}\n{result.log.read_text()[-3000:] if result.log else ''}"
    assert (tmp_path / "out.txt").read_text() == value
    assert not list(tmp_path.rglob("CANARY"))
    # The file that carried them is gone.
    assert not list(state.glob(".extravars-*"))
