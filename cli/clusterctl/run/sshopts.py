"""The SSH options of every connection clusterctl makes: one builder, so no two can disagree.

Ansible (``ansible_ssh_common_args`` of the provisioned and burst inventories), the executor
behind ``up``'s readiness check, ``status`` and ``verify``, and the bastion hop of each take
their options from :func:`ssh_options`:

- ``StrictHostKeyChecking=yes`` against clusterctl's own known_hosts in the state directory
  (``UserKnownHostsFile``), and nothing else: no global known_hosts, no DNS, and no host key
  learnt or updated by ssh (``UpdateHostKeys=no``). A host whose key clusterctl did not pin
  is refused; there is no trust on first use anywhere.
- clusterctl's key only (``IdentitiesOnly``, ``IdentityFile``), not whatever an agent offers.
- the bastion, when the stack has one, through ``ProxyCommand`` with the same options.

Why ProxyCommand and not ProxyJump: options given with ``-o`` do not reach the connection
ProxyJump opens to the jump host, so its key would be checked against the user's files.

:func:`save_access` records, next to known_hosts in the state directory, how each provisioned
host is reached (address, port, user, bastion); :func:`load_access` reads it back for the
executor, so ``status`` and ``verify`` connect exactly as Ansible did in ``up``.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterctl.bounded import json_document
from clusterctl.run.providers.base import ProviderError
from clusterctl.run.state import StateDirError, read_text_nofollow, write_atomic

ACCESS_FILE = "ssh_access.json"
ACCESS_VERSION = 1
KNOWN_HOSTS_FILE = "known_hosts"
# The client key clusterctl generates once per cluster (run/sshkeys.py CLIENT_KEY).
CLIENT_KEY_PATH = Path("secrets") / "ssh" / "id_ed25519"
# Ansible's ssh_args (ANSIBLE_SSH_ARGS) start with these: ssh keeps the first value it reads for
# an option, so nothing placed after them (a user's ssh_extra_args) can turn host key checks off.
STRICT_SSH_ARGS = "-o StrictHostKeyChecking=yes -o UpdateHostKeys=no"
_USER = re.compile(r"\A[a-z_][a-z0-9_-]{0,31}\Z")
# Characters ssh's option parser or its %-token expansion would change in a path (quotes,
# backslash, '%', control characters): a state directory holding one cannot be passed safely.
_UNSAFE_PATH = re.compile(r"[\"\\%\x00-\x1f\x7f]")


class SshAccessError(ProviderError):
    """How to reach a node cannot be expressed safely, or the recorded access is unusable."""


@dataclass(frozen=True)
class SshEndpoint:
    """Where one SSH server answers."""

    address: str
    user: str
    port: int = 22

    def check(self) -> SshEndpoint:
        """This endpoint, after checking that it can go on an ssh command line as data.

        Addresses and users come from stack outputs (answers from outside): a user starting with
        ``-`` would be read by ssh as an option, so only login names and IP addresses pass.

        Raises:
            SshAccessError: not an IP address, not a login name, or not a TCP port.
        """
        try:
            ipaddress.ip_address(self.address)
        except ValueError:
            raise SshAccessError(
                f"{self.address[:60]!a} is not an IP address, so clusterctl does not connect to it; "
                "run `clusterctl up` again"
            ) from None
        if not _USER.match(self.user):
            raise SshAccessError(
                f"{self.user[:40]!a} is not a login name, so clusterctl does not connect as it; "
                "check the stack's sshUser output and run `clusterctl up` again"
            )
        if not isinstance(self.port, int) or isinstance(self.port, bool) or not 0 < self.port < 65536:
            raise SshAccessError(f"{str(self.port)[:20]!a} is not a TCP port; run `clusterctl up` again")
        return self

    @property
    def login(self) -> str:
        """``user@address`` for the ssh command line (checked first)."""
        self.check()
        return f"{self.user}@{self.address}"


@dataclass(frozen=True)
class SshAccess:
    """What every connection to a cluster's provisioned hosts uses."""

    known_hosts: Path
    identity_file: Path
    bastion: SshEndpoint | None = None


def _option_path(path: Path, what: str) -> str:
    """``path`` as an ssh option value: absolute, quoted when it holds a space, never rewritten by ssh."""
    text = str(path.resolve())
    if _UNSAFE_PATH.search(text):
        raise SshAccessError(
            f"the {what} {text!a} holds a quote, backslash, '%' or control character, which ssh would read "
            "differently; keep clusterctl's state directory under a plain path (--state-dir)"
        )
    return f'"{text}"' if any(c.isspace() for c in text) else text


def ssh_options(access: SshAccess) -> list[str]:
    """The ``-o`` options of every ssh clusterctl or Ansible runs to a provisioned host.

    Raises:
        SshAccessError: a state directory path ssh options cannot carry.
    """
    base = [
        "-o", "StrictHostKeyChecking=yes",
        "-o", f"UserKnownHostsFile={_option_path(access.known_hosts, 'known_hosts file')}",
        # Only clusterctl's file decides: not /etc/ssh/ssh_known_hosts, not DNS, and ssh never adds keys.
        "-o", "GlobalKnownHostsFile=/dev/null",
        "-o", "VerifyHostKeyDNS=no",
        "-o", "UpdateHostKeys=no",
        "-o", "IdentitiesOnly=yes",
        "-o", f"IdentityFile={_option_path(access.identity_file, 'SSH key')}",
    ]  # fmt: skip
    if access.bastion is not None:
        bastion = access.bastion
        jump = ["ssh", "-W", "%h:%p", "-o", "BatchMode=yes", *base, "-p", str(bastion.port), bastion.login]
        base += ["-o", f"ProxyCommand={shlex.join(jump)}"]
    return base


def ssh_common_args(access: SshAccess) -> str:
    """:func:`ssh_options` as one string (Ansible's ``ansible_ssh_common_args``)."""
    return shlex.join(ssh_options(access))


def ssh_command(
    access: SshAccess, target: SshEndpoint, remote: str, *, connect_timeout_s: int = 10, ssh: str = "ssh"
) -> list[str]:
    """The ssh command line that runs ``remote`` (one shell string) on ``target``.

    Its own connection every time: a master connection an ssh config shares (``ControlMaster``)
    was opened with other options, and a command sent through it skips the host key check.
    """
    return [
        ssh,
        "-o", "BatchMode=yes",
        "-o", f"ConnectTimeout={connect_timeout_s}",
        "-o", "ControlMaster=no",
        "-o", "ControlPath=none",
        *ssh_options(access),
        "-p", str(target.port),
        target.login,
        remote,
    ]  # fmt: skip


def control_path_dir(state_dir: Path) -> Path:
    """Where Ansible keeps its shared SSH connections for the cluster of ``state_dir``.

    Why one folder per state directory: a run reuses a master connection to the same host, port
    and user without checking the host key again, so runs that check against another known_hosts
    (another cluster, another state directory) must never find each other's. Under ``~/.ansible``
    and short, because a socket path longer than 108 bytes cannot be created.
    """
    digest = hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:12]
    return Path.home() / ".ansible" / "cp" / f"clusterctl-{digest}"


def client_key_path(state_dir: Path) -> Path:
    """Where clusterctl's client key of the cluster with state directory ``state_dir`` lives."""
    return state_dir / CLIENT_KEY_PATH


def _endpoint_dict(endpoint: SshEndpoint) -> dict[str, Any]:
    return {"address": endpoint.address, "port": endpoint.port, "user": endpoint.user}


def save_access(state_dir: Path, hosts: Mapping[str, SshEndpoint], access: SshAccess) -> Path:
    """Record how the provisioned ``hosts`` are reached (atomically, 0600, in the state directory).

    The executor of ``status`` and ``verify`` reads this instead of the plan, so it reaches the
    addresses the stack gave, through the same bastion, checked against the same known_hosts.
    """
    data = {
        "version": ACCESS_VERSION,
        "known_hosts": str(access.known_hosts.resolve()),
        "identity_file": str(access.identity_file.resolve()),
        "bastion": _endpoint_dict(access.bastion) if access.bastion else None,
        "hosts": {name: _endpoint_dict(endpoint) for name, endpoint in sorted(hosts.items())},
    }
    path = state_dir / ACCESS_FILE
    write_atomic(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode(), 0o600)
    return path


def _endpoint(raw: Any, where: Path) -> SshEndpoint:
    """An endpoint read back from the record; checked when a command line is built from it."""
    if not isinstance(raw, dict):
        raise SshAccessError(f"{where} is damaged (an entry is not a mapping); run `clusterctl up` again")
    return SshEndpoint(address=str(raw.get("address")), user=str(raw.get("user")), port=raw.get("port", 22))


def load_access(state_dir: Path) -> tuple[dict[str, SshEndpoint], SshAccess] | None:
    """The hosts and access :func:`save_access` recorded (None when nothing was provisioned yet).

    Raises:
        SshAccessError: the record is a link, not JSON, or holds values of the wrong shape.
    """
    path = state_dir / ACCESS_FILE
    try:
        text = read_text_nofollow(path, "SSH access record")
    except StateDirError as exc:  # a link or not a regular file
        raise SshAccessError(str(exc)) from None
    if text is None:
        return None
    try:
        data = json_document(text, "SSH access record")
    except ValueError:
        data = None
    if not isinstance(data, dict) or data.get("version") != ACCESS_VERSION or not isinstance(data.get("hosts"), dict):
        raise SshAccessError(f"{path} is not an SSH access record clusterctl wrote; run `clusterctl up` again")
    hosts = {str(name): _endpoint(raw, path) for name, raw in data["hosts"].items()}
    access = SshAccess(
        known_hosts=Path(str(data.get("known_hosts"))),
        identity_file=Path(str(data.get("identity_file"))),
        bastion=_endpoint(data["bastion"], path) if data.get("bastion") is not None else None,
    )
    return hosts, access
