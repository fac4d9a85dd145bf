"""From stack outputs to an inventory and known_hosts that SSH checks."""

from __future__ import annotations

import shlex
import stat
from pathlib import Path

import pytest

from clusterctl.pipeline import load_and_validate
from clusterctl.render import ansible_yaml
from clusterctl.run.providers.base import ProviderError, ProvisionedHost
from clusterctl.run.providers.ssh_inventory import hosts_from_outputs, ssh_common_args, write_ssh_inventory
from clusterctl.run.sshkeys import ensure_client_key, ensure_host_keys, generate_ed25519
from tests.conftest import EXAMPLES


@pytest.fixture(scope="module")
def plan():
    return load_and_validate(EXAMPLES / "aws-p5.yaml").plan


def outputs_for(plan, keys: dict[str, str]) -> dict:
    """Outputs shaped like the stacks export them."""
    return {
        "nodes": {n.hostname: n.address for n in plan.nodes},
        "sshUser": "ubuntu",
        "hostKeys": keys,
        "bastion": {"address": "198.51.100.9", "user": "ubuntu", "name": "bastion"},
    }


def test_hosts_from_outputs(plan) -> None:
    keys = {n.hostname: f"ssh-ed25519 AAAA{n.hostname}" for n in plan.nodes} | {"bastion": "ssh-ed25519 AAAAb"}
    hosts, bastion = hosts_from_outputs(plan, outputs_for(plan, keys), user="root")
    assert [h.hostname for h in hosts] == [n.hostname for n in plan.nodes]
    assert all(h.user == "ubuntu" and h.host_key for h in hosts)
    assert bastion is not None
    assert bastion.address == "198.51.100.9"
    assert bastion.host_key == "ssh-ed25519 AAAAb"


def test_missing_node_is_an_error(plan) -> None:
    outputs = outputs_for(plan, {})
    del outputs["nodes"]["gpu003"]
    with pytest.raises(ProviderError, match="gpu003"):
        hosts_from_outputs(plan, outputs, user="ubuntu")


def test_inventory_and_known_hosts(plan, tmp_path: Path) -> None:
    key_path, _ = ensure_client_key(tmp_path / "state", "forge")
    host_keys = ensure_host_keys(tmp_path / "state", [n.hostname for n in plan.nodes] + ["bastion"])
    public = {name: pair.public for name, pair in host_keys.items()}
    hosts, bastion = hosts_from_outputs(plan, outputs_for(plan, public), user="ubuntu", host_keys=public)
    known = tmp_path / "state" / "known_hosts"
    path = write_ssh_inventory(
        plan, hosts, inventory_dir=tmp_path / "inv", known_hosts=known, private_key=key_path, bastion=bastion
    )
    data = ansible_yaml.load(path.read_text())["all"]["hosts"]
    gpu = data["gpu001"]
    assert gpu["ansible_host"] == plan.node("gpu001").address
    args = shlex.split(gpu["ansible_ssh_common_args"])
    assert "StrictHostKeyChecking=yes" in args
    assert f"UserKnownHostsFile={known.resolve()}" in args
    proxy = next(a for a in args if a.startswith("ProxyCommand="))
    assert "ubuntu@198.51.100.9" in proxy
    assert "StrictHostKeyChecking=yes" in proxy
    lines = known.read_text().splitlines()
    assert f"{plan.node('gpu001').address},gpu001 {public['gpu001']}" in lines
    assert f"198.51.100.9 {public['bastion']}" in lines
    assert gpu["ansible_ssh_private_key_file"] == str(key_path.resolve())


def test_no_host_key_no_inventory(plan, tmp_path: Path) -> None:
    with pytest.raises(ProviderError, match="no SSH host key"):
        hosts_from_outputs(plan, {"nodes": {n.hostname: n.address for n in plan.nodes}}, user="u")
    hosts = [ProvisionedHost(hostname=n.hostname, address=n.address) for n in plan.nodes]
    with pytest.raises(ProviderError, match="no SSH host key"):
        write_ssh_inventory(
            plan, hosts, inventory_dir=tmp_path, known_hosts=tmp_path / "kh", private_key=tmp_path / "k"
        )


def test_no_bastion_no_proxy(tmp_path: Path) -> None:
    args = ssh_common_args(tmp_path / "kh", tmp_path / "key")
    assert "ProxyCommand" not in args
    assert "StrictHostKeyChecking=yes" in args


def test_keys_generated_once_and_private(tmp_path: Path) -> None:
    path, pair = ensure_client_key(tmp_path, "forge")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "secrets").stat().st_mode) == 0o700
    assert pair.public.startswith("ssh-ed25519 ")
    assert pair.public.endswith("clusterctl@forge")
    assert ensure_client_key(tmp_path, "forge")[1] == pair
    assert "PRIVATE" not in repr(pair)
    assert generate_ed25519().private.startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
