"""Run a command on a cluster node: ``docker exec`` for the local provider, SSH elsewhere.

Readiness, status and every verify check talk to nodes through the `Executor` protocol only, so unit tests replay
recorded outputs through a fake and the checks never know which transport they used.
A transport failure is reported in the return code, never raised: ``UNREACHABLE_RC``
(ssh's own 255) when the node cannot be reached, ``TIMEOUT_RC`` (coreutils ``timeout``'s
124) when the command ran too long, 127 when the program is not installed. The protocol, the codes
and `run_many` are in `clusterctl.remote` (pure) and named here too.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from clusterctl.plan.models import Plan
from clusterctl.remote import NOT_FOUND_RC, TIMEOUT_RC, UNREACHABLE_RC, Executor, Sender, run_many
from clusterctl.render.inventory import container_name
from clusterctl.run.sshopts import SshAccess, SshAccessError, SshEndpoint, client_key_path, load_access, ssh_command

_DOCKER_DAEMON_ERROR = "Error response from daemon"


def _completed(argv: Sequence[str], timeout: float, data: bytes | None = None) -> tuple[int, str, str]:
    """Run ``argv`` (with ``data`` on its stdin, else none); never raises for a timeout or a missing program."""
    try:
        if data is None:
            done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
            return done.returncode, done.stdout, done.stderr
        raw = subprocess.run(list(argv), input=data, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return TIMEOUT_RC, out, f"timed out after {timeout:g} s"
    except FileNotFoundError:
        return NOT_FOUND_RC, "", f"{argv[0]}: command not found on this machine"
    return raw.returncode, raw.stdout.decode(errors="replace"), raw.stderr.decode(errors="replace")


class DockerExecutor:
    """Runs commands in the local provider's node containers with ``docker exec``."""

    def __init__(self, containers: Mapping[str, str], docker: str = "docker") -> None:
        """Create the executor.

        Args:
            containers: Plan hostname -> container name (``clusterctl-<cluster>-<host>``).
            docker: The docker CLI.
        """
        self.containers = dict(containers)
        self.docker = docker

    def run(self, host: str, command: str, timeout: float) -> tuple[int, str, str]:
        """Run ``command`` with bash inside the node's container."""
        container = self.containers.get(host)
        if container is None:
            return UNREACHABLE_RC, "", f"{host} is not a container of this cluster"
        return self.send(host, command, None, timeout)

    def send(self, host: str, command: str, data: bytes | None, timeout: float) -> tuple[int, str, str]:
        """Run ``command`` with ``data`` on its stdin (``docker exec -i``)."""
        container = self.containers.get(host)
        if container is None:
            return UNREACHABLE_RC, "", f"{host} is not a container of this cluster"
        interactive = ["-i"] if data is not None else []
        rc, out, err = _completed([self.docker, "exec", *interactive, container, "bash", "-c", command], timeout, data)
        # docker's own failures (no such container, not running) are not the command's.
        if rc != 0 and err.startswith(_DOCKER_DAEMON_ERROR):
            return UNREACHABLE_RC, out, err
        return rc, out, err


class SshExecutor:
    """Runs commands over SSH, as root or through ``sudo -n`` for another user.

    Every command line comes from ``run.sshopts``: the host key is checked against clusterctl's
    known_hosts (``StrictHostKeyChecking=yes``), with clusterctl's key, through the bastion when
    there is one -- exactly the options Ansible connects with.
    """

    def __init__(
        self,
        targets: Mapping[str, SshEndpoint],
        access: SshAccess,
        *,
        connect_timeout_s: int = 10,
        ssh: str = "ssh",
    ) -> None:
        """Create the executor.

        Args:
            targets: Plan hostname -> where its sshd answers (address, port, login user).
            access: known_hosts, client key and bastion of the cluster (see ``run.sshopts``).
            connect_timeout_s: ssh ``ConnectTimeout``.
            ssh: The ssh client.
        """
        self.targets = dict(targets)
        self.access = access
        self.connect_timeout_s = connect_timeout_s
        self.ssh = ssh

    def argv(self, host: str, command: str) -> list[str]:
        """The ssh command line for ``command`` on ``host``.

        Raises:
            SshAccessError: the recorded address or user of ``host`` cannot go on a command line.
        """
        target = self.targets[host]
        remote = f"bash -c {shlex.quote(command)}"
        if target.user != "root":
            remote = f"sudo -n {remote}"
        return ssh_command(self.access, target, remote, connect_timeout_s=self.connect_timeout_s, ssh=self.ssh)

    def run(self, host: str, command: str, timeout: float) -> tuple[int, str, str]:
        """Run ``command`` on ``host`` over SSH."""
        return self.send(host, command, None, timeout)

    def send(self, host: str, command: str, data: bytes | None, timeout: float) -> tuple[int, str, str]:
        """Run ``command`` on ``host`` over SSH with ``data`` on its stdin."""
        if host not in self.targets:
            return UNREACHABLE_RC, "", f"{host} has no recorded SSH address; run `clusterctl up` first"
        try:
            argv = self.argv(host, command)
        except SshAccessError as exc:
            return UNREACHABLE_RC, "", f"{host}: {exc}"
        return _completed(argv, timeout, data)


class UnreachableExecutor:
    """Answers every command with ``UNREACHABLE_RC`` and the reason no connection is made."""

    def __init__(self, reason: str) -> None:
        """Create the executor that explains ``reason`` for every host."""
        self.reason = reason

    def run(self, host: str, command: str, timeout: float) -> tuple[int, str, str]:
        """Refuse to run ``command``: there is no checked way to reach ``host``."""
        return UNREACHABLE_RC, "", f"{host}: {self.reason}"

    def send(self, host: str, command: str, data: bytes | None, timeout: float) -> tuple[int, str, str]:
        """Refuse as :meth:`run` does."""
        return self.run(host, command, timeout)


class RoutingExecutor:
    """Sends each host to the executor that reaches it (containers and SSH nodes mixed)."""

    def __init__(self, routes: Mapping[str, Executor]) -> None:
        """Create the executor from hostname -> executor."""
        self.routes = dict(routes)

    def run(self, host: str, command: str, timeout: float) -> tuple[int, str, str]:
        """Run ``command`` through the executor of ``host``."""
        route = self.routes.get(host)
        if route is None:
            return UNREACHABLE_RC, "", f"{host} is not a node of this cluster"
        return route.run(host, command, timeout)

    def send(self, host: str, command: str, data: bytes | None, timeout: float) -> tuple[int, str, str]:
        """Run ``command`` with ``data`` on its stdin through the executor of ``host``."""
        route = self.routes.get(host)
        if route is None or not isinstance(route, Sender):
            return UNREACHABLE_RC, "", f"{host} is not a node of this cluster that takes input"
        return route.send(host, command, data, timeout)


def _burst_cloud_routes(plan: Plan, state_dir: Path) -> dict[str, Executor]:
    """SSH routes of the cloud burst hosts that exist now, as ``clusterctl burst`` configured them."""
    if not plan.burst_cloud:
        return {}
    from clusterctl.run.burst_cloud import STATE_SUBDIR, read_state

    routes: dict[str, Executor] = {}
    for group, cloud in plan.burst_cloud.items():
        addresses = read_state(state_dir, group).addresses
        if not addresses:
            continue
        access = SshAccess(
            known_hosts=state_dir / STATE_SUBDIR / f"{group}.known_hosts", identity_file=client_key_path(state_dir)
        )
        targets = {h: SshEndpoint(address, cloud.ssh_user) for h, address in addresses.items()}
        executor = SshExecutor(targets, access)
        routes.update(dict.fromkeys(targets, executor))
    return routes


def executor_for(plan: Plan, state_dir: Path) -> Executor:
    """The executor that reaches the plan's nodes, chosen the way the inventory connects.

    Local-provider nodes (and emulated burst nodes) are containers. Every other node is reached
    over SSH as ``clusterctl up`` recorded it in ``state_dir`` (address, user, bastion, the
    known_hosts with its pinned key; cloud burst hosts as ``clusterctl burst`` did): never at
    an address or with a host key taken from anywhere else. A node with no record is
    unreachable, with the reason, until ``up`` has run.

    Args:
        plan: The cluster.
        state_dir: The cluster's state directory (``.clusterctl/<cluster>``).

    Raises:
        SshAccessError: the access record in ``state_dir`` is a link or damaged.
    """
    provider = plan.cluster.provider
    containers = {
        n.hostname: container_name(plan, n) for n in plan.nodes if provider == "local" or (n.burst and n.emulated)
    }
    remote = [n.hostname for n in plan.nodes if n.hostname not in containers]
    docker = DockerExecutor(containers)
    if not remote:
        return docker
    routes: dict[str, Executor] = dict.fromkeys(containers, docker)
    recorded = load_access(state_dir)
    if recorded is not None:
        targets, access = recorded
        ssh = SshExecutor(targets, access)
        routes.update({h: ssh for h in remote if h in targets})
    routes.update({h: e for h, e in _burst_cloud_routes(plan, state_dir).items() if h in remote})
    missing = UnreachableExecutor(
        "clusterctl has no pinned SSH access to this node (address and host key are recorded by "
        f"`clusterctl up` in {state_dir}); run `clusterctl up` first"
    )
    routes.update({h: missing for h in remote if h not in routes})
    return RoutingExecutor(routes)


__all__ = [
    "NOT_FOUND_RC",
    "TIMEOUT_RC",
    "UNREACHABLE_RC",
    "DockerExecutor",
    "Executor",
    "RoutingExecutor",
    "Sender",
    "SshExecutor",
    "UnreachableExecutor",
    "executor_for",
    "run_many",
]
