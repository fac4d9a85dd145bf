"""Inventories written at run time (provisioned hosts, burst groups) hold outside answers as data.

A stack output is an answer from outside (issue 18): whatever it holds reaches Ansible as the
literal text, like every rendered value, even where the output parser would let it through.
"""

from __future__ import annotations

from pathlib import Path

from clusterctl.pipeline import load_and_validate
from clusterctl.render import ansible_yaml
from clusterctl.run.providers.base import ProvisionedHost
from clusterctl.run.providers.ssh_inventory import write_ssh_inventory
from clusterctl.run.sshkeys import ensure_client_key, ensure_host_keys
from tests.conftest import EXAMPLES
from tests.security.corpus import CANARY, ansible_template_hostvars

JINJA = "{{ lookup('pipe', 'touch " + CANARY + "') }}"


def test_provisioned_inventory_is_unsafe(tmp_path: Path) -> None:
    plan = load_and_validate(EXAMPLES / "aws-p5.yaml").plan
    key_path, _ = ensure_client_key(tmp_path / "state", "forge")
    keys = ensure_host_keys(tmp_path / "state", [n.hostname for n in plan.nodes])
    hosts = [
        ProvisionedHost(hostname=n.hostname, address=n.address, user="ubuntu" + JINJA, host_key=keys[n.hostname].public)
        for n in plan.nodes
    ]
    path = write_ssh_inventory(
        plan,
        hosts,
        inventory_dir=tmp_path / "inventory",
        known_hosts=tmp_path / "state" / "known_hosts",
        private_key=key_path,
        group_vars={"clusterctl_managed_lustre": {"datasets": "fs-1@tcp:/x" + JINJA}},
    )
    text = path.read_text()
    data = ansible_yaml.load(text)
    node = plan.nodes[0]
    assert data["all"]["hosts"][node.hostname]["ansible_user"] == "ubuntu" + JINJA
    assert data["all"]["vars"]["clusterctl_managed_lustre"]["datasets"].endswith(JINJA)
    assert 'ansible_user: !unsafe "ubuntu{{' in text
    problems = ansible_template_hostvars([(path, {n.hostname for n in plan.nodes})], tmp_path)
    assert problems == []
    assert not list(tmp_path.rglob(CANARY))
