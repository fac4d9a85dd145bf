"""From a provisioning stack's outputs to an SSH inventory whose host keys SSH checks.

``hosts_from_outputs`` turns the outputs every clusterctl stack exports (``nodes``: hostname ->
private address, ``hostKeys``, ``bastion``) into :class:`ProvisionedHost` s. ``write_ssh_inventory``
writes what Ansible and the executor (readiness, status, verify) need to reach them:

- ``known_hosts`` (in the state directory, written atomically): each node's key under its
  address and hostname, plus the bastion's under its public address;
- ``<build>/ansible/inventory/provisioned.yml``: per host the address, port, user, clusterctl's
  key and ``StrictHostKeyChecking=yes`` with that known_hosts -- through the bastion when there
  is one. Ansible reads inventory files in name order, so these values override the rendered
  ``hosts.yml`` for the same hosts;
- ``ssh_access.json`` next to known_hosts: the same addresses, users and bastion, for the
  executor (``run.sshopts``, which builds the options of both).

Host keys are pinned, never learnt: every node and the bastion must have its key in the stack
outputs (``hostKeys``; the cloud stacks export the keys clusterctl generated and injected, the
bare-metal stack the one clusterctl generated and served to the installer), and where
clusterctl generated the key the output must be that key. A node without one, or with another,
is an error -- there is no fallback to trusting a key on first use anywhere. Keys and addresses
are checked for shape before they reach known_hosts, so an output cannot add a line or a marker
of its own.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Any, TypedDict

from clusterctl.plan.models import Plan
from clusterctl.render import ansible_yaml
from clusterctl.run import sshopts
from clusterctl.run.providers.base import ProviderError, ProvisionedHost
from clusterctl.run.sshopts import SshAccess, SshEndpoint
from clusterctl.run.state import write_atomic
from clusterctl.spec.types import SSH_KEY_TYPES

INVENTORY_FILE = "provisioned.yml"
KNOWN_HOSTS_FILE = "known_hosts"
BASTION = "bastion"
KNOWN_HOSTS_MODE = 0o644
# An OpenSSH public key line: type, base64 key, optional comment without control characters.
_KEY_RE = re.compile(
    r"\A(?P<type>[a-z0-9@.-]{1,64}) (?P<key>[A-Za-z0-9+/]{4,16384}={0,3})(?P<comment> [\x21-\x7e]{1,256})?\Z", re.ASCII
)


def host_key_line(key: object, host: str) -> str:
    """An OpenSSH public key line from a stack output: ``<type> <base64> [comment]``, checked.

    Raises:
        ProviderError: not a public key line of a known type (a newline, a marker such as
            ``@cert-authority`` or any other text is refused, so it cannot add a known_hosts line).
    """
    match = _KEY_RE.match(key) if isinstance(key, str) else None
    if match is None or match["type"] not in SSH_KEY_TYPES:
        raise ProviderError(
            f"the SSH host key of {host} in the stack outputs is not an OpenSSH public key line "
            f"({str(key)[:40]!a}); run `clusterctl up` again, and check the stack if it persists"
        )
    return f"{match['type']} {match['key']}{match['comment'] or ''}"


def _same_key(a: str, b: str) -> bool:
    """Whether two public key lines hold the same key (comments aside)."""
    return a.split()[:2] == b.split()[:2]


def _address(value: object, host: str) -> str:
    """An IP address from a stack output (known_hosts and ssh take it; nothing else may ride along)."""
    try:
        return str(ipaddress.ip_address(str(value)))
    except ValueError:
        raise ProviderError(
            f"the stack outputs give {host} the address {str(value)[:60]!a}, which is not an IP address; "
            "run `clusterctl up` again, and check the stack if it persists"
        ) from None


def managed_lustre_sources(outputs: dict[str, Any]) -> dict[str, str]:
    """Tier name -> mount source (``<mgs>@tcp:/<fsname>``) of the managed Lustre file systems."""
    return {name: str(item["source"]) for name, item in (outputs.get("lustre") or {}).items() if item.get("source")}


def hosts_from_outputs(
    plan: Plan, outputs: dict[str, Any], *, user: str, host_keys: dict[str, str] | None = None
) -> tuple[list[ProvisionedHost], ProvisionedHost | None]:
    """The provisioned nodes (plan order) and the bastion, from stack outputs, with pinned host keys.

    Args:
        plan: the plan the stack was built from.
        outputs: the stack outputs (``nodes``, ``hostKeys``, optional ``bastion``, ``sshUser``).
        user: the SSH user when the outputs do not name one.
        host_keys: the public host keys clusterctl generated and injected (cloud stacks); the
            outputs must carry exactly these. Without them (bare metal) the outputs' keys are
            taken as the stack recorded them.

    Raises:
        ProviderError: a planned node (or the bastion) is missing from the outputs, has no host
            key there, has a key that is not the one clusterctl generated, or an address or key
            of the wrong shape.
    """
    nodes: dict[str, Any] = dict(outputs.get("nodes") or {})
    out_keys: dict[str, Any] = dict(outputs.get("hostKeys") or {})
    user = str(outputs.get("sshUser") or user)
    planned = [n.hostname for n in plan.nodes if not n.burst]
    missing = [name for name in planned if name not in nodes]
    if missing:
        raise ProviderError(
            f"the stack outputs have no address for {', '.join(missing)}; run `clusterctl up` again to finish "
            "creating them"
        )
    raw = outputs.get(BASTION)
    bastion_name = str(raw.get("name", BASTION)) if isinstance(raw, dict) and raw.get("address") else None
    names = planned + ([bastion_name] if bastion_name else [])
    unkeyed = [name for name in names if not out_keys.get(name)]
    if unkeyed:
        raise ProviderError(
            f"the stack outputs carry no SSH host key for {', '.join(unkeyed)}; clusterctl pins every host key "
            "and never trusts one on first use. Run `clusterctl up` again; if it persists, the stack program "
            "does not export `hostKeys` for these machines"
        )
    keys = {name: host_key_line(out_keys[name], name) for name in names}
    if host_keys is not None:
        for name in names:
            expected = host_keys.get(name)
            if not expected or not _same_key(host_key_line(expected, name), keys[name]):
                raise ProviderError(
                    f"the SSH host key of {name} in the stack outputs is not the one clusterctl generated for it "
                    "(state directory, secrets/ssh/host_keys); SSH would refuse the node. Run `clusterctl up` "
                    "again so the stack injects the generated key"
                )
    hosts = [
        ProvisionedHost(hostname=name, address=_address(nodes[name], name), user=user, host_key=keys[name])
        for name in planned
    ]
    bastion = None
    if bastion_name is not None:
        assert isinstance(raw, dict)
        bastion = ProvisionedHost(
            hostname=BASTION,
            address=_address(raw["address"], BASTION),
            user=str(raw.get("user") or user),
            port=int(raw.get("port", 22)),
            host_key=keys[bastion_name],
        )
    return hosts, bastion


def _known_host_names(host: ProvisionedHost) -> str:
    names = [host.address if host.port == 22 else f"[{host.address}]:{host.port}"]
    if host.hostname not in names and host.hostname != BASTION:
        names.append(host.hostname if host.port == 22 else f"[{host.hostname}]:{host.port}")
    return ",".join(names)


def write_known_hosts(path: Path, hosts: list[ProvisionedHost]) -> Path:
    """Write ``known_hosts`` for ``hosts`` atomically (a reader sees the old file or the new one).

    Raises:
        ProviderError: a host without a host key, or one that is not a public key line: there is
            no unpinned entry, and so no trust on first use.
    """
    unkeyed = [h.hostname for h in hosts if not h.host_key]
    if unkeyed:
        raise ProviderError(
            f"no SSH host key is known for {', '.join(unkeyed)}, so SSH cannot check it; run `clusterctl up` again"
        )
    lines = [f"{_known_host_names(h)} {host_key_line(h.host_key, h.hostname)}" for h in hosts]
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, ("\n".join(lines) + ("\n" if lines else "")).encode(), KNOWN_HOSTS_MODE)
    return path


def ssh_access(known_hosts: Path, private_key: Path, bastion: ProvisionedHost | None = None) -> SshAccess:
    """What every connection to these hosts uses: checked host keys, clusterctl's key, the bastion."""
    jump = SshEndpoint(bastion.address, bastion.user, bastion.port) if bastion is not None else None
    return SshAccess(known_hosts=known_hosts, identity_file=private_key, bastion=jump)


def ssh_common_args(known_hosts: Path, private_key: Path, bastion: ProvisionedHost | None = None) -> str:
    """The ssh options every connection uses (built by ``run.sshopts``, the one builder of them)."""
    return sshopts.ssh_common_args(ssh_access(known_hosts, private_key, bastion))


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
    access = ssh_access(known_hosts.resolve(), private_key.resolve(), bastion)
    args = sshopts.ssh_common_args(access)
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
    # status, verify and the readiness check connect the same way (known_hosts sits in the state directory).
    sshopts.save_access(known_hosts.parent, {h.hostname: SshEndpoint(h.address, h.user, h.port) for h in hosts}, access)
    inventory_dir.mkdir(parents=True, exist_ok=True)
    path = inventory_dir / INVENTORY_FILE
    # Addresses come from the cloud's answers and names from the spec: all !unsafe, never templated.
    text = ansible_yaml.dump(
        {"all": {"hosts": entries, **({"vars": group_vars} if group_vars else {})}},
        f"written by clusterctl up for {plan.cluster.name}: provisioned addresses and SSH access",
    )
    # Atomically, and a link planted at the file is replaced, never written through.
    write_atomic(path, text.encode(), 0o644)
    return path


class InventoryPaths(TypedDict):
    """Where a provider's inventory and known_hosts go: ``write_ssh_inventory(..., **build_inventory(...))``."""

    inventory_dir: Path
    known_hosts: Path


def build_inventory(build_dir: Path, state_dir: Path) -> InventoryPaths:
    """The build directory's inventory and the state directory's known_hosts."""
    return {"inventory_dir": build_dir / "ansible" / "inventory", "known_hosts": state_dir / KNOWN_HOSTS_FILE}
