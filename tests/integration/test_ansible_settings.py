"""`clusterctl up` runs Ansible with the rendered settings, whatever ansible.cfg the user has."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterctl.pipeline import load_and_validate, render
from clusterctl.run.ansible import run_playbook
from clusterctl.run.events import EventBus

pytestmark = [pytest.mark.integration]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "local.yaml"
PLAYBOOK = """\
---
- name: Report the settings this run has
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: The controller polls its workers every 20 ms, as the rendered ansible.cfg says
      ansible.builtin.assert:
        that: lookup('ansible.builtin.config', 'DEFAULT_INTERNAL_POLL_INTERVAL') == 0.02
        fail_msg: "internal_poll_interval is {{ lookup('ansible.builtin.config', 'DEFAULT_INTERNAL_POLL_INTERVAL') }}"
"""


def test_runs_use_the_rendered_ansible_cfg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build, _ = render(load_and_validate(EXAMPLE), tmp_path / "build")
    assert "internal_poll_interval = 0.02" in (build / "ansible" / "ansible.cfg").read_text()
    # A user's ANSIBLE_CONFIG, or an ansible.cfg where they run clusterctl, must not win here.
    user = tmp_path / "user"
    user.mkdir()
    (user / "ansible.cfg").write_text("[defaults]\ninternal_poll_interval = 0.5\n")
    monkeypatch.chdir(user)
    monkeypatch.setenv("ANSIBLE_CONFIG", str(user / "ansible.cfg"))
    playbook = tmp_path / "settings.yml"
    playbook.write_text(PLAYBOOK)

    result = run_playbook(build, tmp_path / "state", EventBus(), playbook=playbook)

    assert result.succeeded, f"{result.failures}\n{result.log.read_text()[-3000:] if result.log else ''}"
    assert result.ok == {"localhost": 1}
