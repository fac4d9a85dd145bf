"""From a provisioning stack's outputs to an SSH inventory whose host keys SSH checks.

``hosts_from_outputs`` turns the outputs every clusterctl stack exports (``nodes``: hostname ->
private address, ``hostKeys``, ``bastion``) into :class:`ProvisionedHost` s. ``write_ssh_inventory``
writes what Ansible and ``Remote`` need to reach them:

- ``known_hosts`` (in the state directory): each node's key under its address and hostname,
  plus the bastion's under its public address;
- ``<build>/ansible/inventory/provisioned.yml``: per host the address, port, user, clusterctl's
  key and ``StrictHostKeyChecking=yes`` with that known_hosts -- through the bastion when there
  is one. Ansible reads inventory files in name order, so these values override the rendered
  ``hosts.yml`` for the same hosts.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from clusterctl.plan.models import Plan
from clusterctl.run.providers.base import ProviderError, ProvisionedHost

INVENTORY_FILE = "provisioned.yml"
KNOWN_HOSTS_FILE = "known_hosts"
BASTION = "bastion"


def managed_lustre_sources(outputs: dict[str, Any]) -> dict[str, str]:
    """Tier name -> mount source (``<mgs>@tcp:/<fsname>``) of the managed Lustre file systems."""
    return {name: str(item["source"]) for name, item in (outputs.get("lustre") or {}).items() if item.get("source")}


def hosts_from_outputs(
    plan: Plan, outputs: dict[str, Any], *, user: str, host_keys: dict[str, str] | None = None
) -> tuple[list[ProvisionedHost], ProvisionedHost | None]:
    """The provisioned nodes (plan order) and the bastion, from stack outputs.

    Args:
        plan: the plan the stack was built from.
        outputs: the stack outputs (``nodes``, optional ``hostKeys``, ``bastion``, ``sshUser``).
        user: the SSH user when the outputs do not name one.
        host_keys: public host keys clusterctl generated (used where the outputs have none).

    Raises:
        ProviderError: a planned node is missing from the outputs.
    """
    nodes: dict[str, str] = dict(outputs.get("nodes") or {})
    keys = {**(host_keys or {}), **{k: v for k, v in (outputs.get("hostKeys") or {}).items() if v}}
    user = str(outputs.get("sshUser") or user)
    missing = [n.hostname for n in plan.nodes if not n.burst and n.hostname not in nodes]
    if missing:
        raise ProviderError(
            f"the stack outputs have no address for {', '.join(missing)}; run `clusterctl up` again to finish "
            "creating them"
        )
    hosts = [
        ProvisionedHost(hostname=n.hostname, address=nodes[n.hostname], user=user, host_key=keys.get(n.hostname))
        for n in plan.nodes
        if not n.burst
    ]
    bastion = None
    raw = outputs.get(BASTION)
    if raw and raw.get("address"):
        bastion = ProvisionedHost(
            hostname=BASTION,
            address=str(raw["address"]),
            user=str(raw.get("user") or user),
            port=int(raw.get("port", 22)),
            host_key=keys.get(str(raw.get("name", BASTION))),
        )
    return hosts, bastion


def _known_host_names(host: ProvisionedHost) -> str:
    names = [host.address if host.port == 22 else f"[{host.address}]:{host.port}"]
    if host.hostname not in names and host.hostname != BASTION:
        names.append(host.hostname if host.port == 22 else f"[{host.hostname}]:{host.port}")
    return ",".join(names)


def write_known_hosts(path: Path, hosts: list[ProvisionedHost]) -> Path:
    """Write ``known_hosts`` for ``hosts`` (hosts without a key are left out: SSH will refuse them)."""
    lines = [f"{_known_host_names(h)} {h.host_key}" for h in hosts if h.host_key]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + ("\n" if lines else ""))
    path.chmod(0o644)
    return path


def ssh_common_args(known_hosts: Path, private_key: Path, bastion: ProvisionedHost | None = None) -> str:
    """The ssh options every connection uses: checked host keys, clusterctl's key, the bastion."""
    base = [
        "-o", "StrictHostKeyChecking=yes",
        "-o", f"UserKnownHostsFile={known_hosts}",
        "-o", "IdentitiesOnly=yes",
    ]  # fmt: skip
    if bastion is not None:
        # ProxyCommand, not ProxyJump: options given with -o do not reach a ProxyJump connection,
        # and the bastion's key must be checked against the same known_hosts.
        jump = [
            "ssh", "-W", "%h:%p", *base,
            "-i", str(private_key), "-p", str(bastion.port), f"{bastion.user}@{bastion.address}",
        ]  # fmt: skip
        base += ["-o", f"ProxyCommand={shlex.join(jump)}"]
    return shlex.join(base)


def write_ssh_inventory(
    plan: Plan,
    hosts: list[ProvisionedHost],
    *,
    inventory_dir: Path,
    known_hosts: Path,
    private_key: Path,
    bastion: ProvisionedHost | None = None,
    group_vars: dict[str, Any] | None = None,
) -> Path:
    """Write ``known_hosts`` and ``inventory_dir/provisioned.yml`` for ``hosts``; return the inventory path.

    ``group_vars`` become variables of ``all`` (e.g. ``clusterctl_managed_lustre``: the mount
    sources of managed file systems, known only once the stack created them).

    Raises:
        ProviderError: a host has no host key (SSH with checked keys could never reach it).
    """
    unkeyed = [h.hostname for h in [*hosts, *([bastion] if bastion else [])] if not h.host_key]
    if unkeyed:
        raise ProviderError(
            f"no SSH host key is known for {', '.join(unkeyed)}, so SSH cannot check it; run `clusterctl up` again"
        )
    write_known_hosts(known_hosts, [*hosts, *([bastion] if bastion else [])])
    args = ssh_common_args(known_hosts.resolve(), private_key.resolve(), bastion)
    planned = {n.hostname for n in plan.nodes}
    entries: dict[str, Any] = {}
    for host in hosts:
        if host.hostname not in planned:
            raise ProviderError(f"provisioned host {host.hostname} is not in the plan")
        entries[host.hostname] = {
            "ansible_host": host.address,
            "ansible_port": host.port,
            "ansible_user": host.user,
            # Cloud images log in as an unprivileged user with passwordless sudo; the roles need root.
            "ansible_become": host.user != "root",
            "ansible_ssh_private_key_file": str(private_key.resolve()),
            "ansible_ssh_common_args": args,
            # The roles template /etc/hosts and service addresses from this.
            "clusterctl_address": host.address,
        }
    inventory_dir.mkdir(parents=True, exist_ok=True)
    path = inventory_dir / INVENTORY_FILE
    yaml = YAML(typ="safe")
    yaml.default_flow_style = False
    yaml.width = 4096
    with path.open("w") as handle:
        handle.write(f"---\n# written by clusterctl up for {plan.cluster.name}: provisioned addresses and SSH access\n")
        yaml.dump({"all": {"hosts": entries, **({"vars": group_vars} if group_vars else {})}}, handle)
    return path
