"""Run a command on a cluster node: ``docker exec`` for the local provider, SSH elsewhere.

Readiness, status and every verify check talk to nodes through the `Executor` protocol only, so unit tests replay
recorded outputs through a fake and the checks never know which transport they used.
A transport failure is reported in the return code, never raised: ``UNREACHABLE_RC``
(ssh's own 255) when the node cannot be reached, ``TIMEOUT_RC`` (coreutils ``timeout``'s
124) when the command ran too long, 127 when the program is not installed.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from clusterctl.plan.models import Plan
from clusterctl.render.inventory import container_name

TIMEOUT_RC = 124
NOT_FOUND_RC = 127
UNREACHABLE_RC = 255
_DOCKER_DAEMON_ERROR = "Error response from daemon"


class Executor(Protocol):
    """Runs a shell command on a node."""

    def run(self, host: str, command: str, timeout: float) -> tuple[int, str, str]:
        """Run ``command`` (a POSIX shell string) on ``host``.

        Args:
            host: The plan hostname.
            command: Shell command line, run by bash as root.
            timeout: Seconds before the command is abandoned.

        Returns:
            ``(returncode, stdout, stderr)``; see the module docstring for the codes a
            transport failure gives.
        """
        ...


def _completed(argv: Sequence[str], timeout: float) -> tuple[int, str, str]:
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return TIMEOUT_RC, out, f"timed out after {timeout:g} s"
    except FileNotFoundError:
        return NOT_FOUND_RC, "", f"{argv[0]}: command not found on this machine"
    return done.returncode, done.stdout, done.stderr


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
        rc, out, err = _completed([self.docker, "exec", container, "bash", "-c", command], timeout)
        # docker's own failures (no such container, not running) are not the command's.
        if rc != 0 and err.startswith(_DOCKER_DAEMON_ERROR):
            return UNREACHABLE_RC, out, err
        return rc, out, err


class SshExecutor:
    """Runs commands over SSH, as root or through ``sudo -n`` for another user."""

    def __init__(
        self,
        addresses: Mapping[str, str],
        user: str = "root",
        *,
        port: int = 22,
        identity_file: str | None = None,
        jump_host: str | None = None,
        connect_timeout_s: int = 10,
        known_hosts: str | None = None,
        ssh: str = "ssh",
    ) -> None:
        """Create the executor.

        Args:
            addresses: Plan hostname -> address to connect to (the management address).
            user: Login user; commands run through ``sudo -n`` unless it is root.
            port: SSH port.
            identity_file: Private key (``-i``); the agent or ssh config otherwise.
            jump_host: ``user@host`` to go through (``-J``), for nodes behind a login node.
            connect_timeout_s: ssh ``ConnectTimeout``.
            known_hosts: A known_hosts file with the nodes' keys (from provisioning); when given,
                host keys are checked strictly against it.
            ssh: The ssh client.
        """
        self.addresses = dict(addresses)
        self.user = user
        self.port = port
        self.identity_file = identity_file
        self.jump_host = jump_host
        self.connect_timeout_s = connect_timeout_s
        self.known_hosts = known_hosts
        self.ssh = ssh

    def argv(self, host: str, command: str) -> list[str]:
        """The ssh command line for ``command`` on ``host``."""
        remote = f"bash -c {shlex.quote(command)}"
        if self.user != "root":
            remote = f"sudo -n {remote}"
        args = [
            self.ssh,
            "-o",
            "BatchMode=yes",
            "-o",
            f"ConnectTimeout={self.connect_timeout_s}",
            "-p",
            str(self.port),
        ]
        if self.known_hosts:
            args += ["-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={self.known_hosts}"]
        else:
            # Freshly installed nodes have unknown host keys; accept new ones, refuse changed ones.
            args += ["-o", "StrictHostKeyChecking=accept-new"]
        if self.identity_file:
            args += ["-i", self.identity_file]
        if self.jump_host:
            args += ["-J", self.jump_host]
        return [*args, f"{self.user}@{self.addresses[host]}", remote]

    def run(self, host: str, command: str, timeout: float) -> tuple[int, str, str]:
        """Run ``command`` on ``host`` over SSH."""
        if host not in self.addresses:
            return UNREACHABLE_RC, "", f"{host} has no address in the plan"
        return _completed(self.argv(host, command), timeout)


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


def executor_for(plan: Plan) -> Executor:
    """The executor that reaches the plan's nodes, chosen the way the inventory connects.

    Local-provider nodes (and emulated burst nodes) are containers; every other node is
    reached over SSH at its management address as the provider's ``ssh_user``.
    """
    provider = plan.cluster.provider
    containers = {
        n.hostname: container_name(plan, n) for n in plan.nodes if provider == "local" or (n.burst and n.emulated)
    }
    addresses = {n.hostname: n.address for n in plan.nodes if n.hostname not in containers}
    docker = DockerExecutor(containers)
    if not addresses:
        return docker
    ssh = SshExecutor(addresses, user=str(plan.cluster.provider_config.get("ssh_user", "root")))
    if not containers:
        return ssh
    routes: dict[str, Executor] = {h: docker for h in containers}
    routes.update({h: ssh for h in addresses})
    return RoutingExecutor(routes)


def run_many(
    executor: Executor, jobs: Iterable[tuple[str, str, float]], max_workers: int = 32
) -> list[tuple[int, str, str]]:
    """Run ``(host, command, timeout)`` jobs at once; results in the order given.

    Why threads: every job waits on a subprocess (docker, ssh, srun), so the GIL is no
    bottleneck, and a wave of 64 single-node runs must start together.
    """
    items = list(jobs)
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(items)))) as pool:
        futures = [pool.submit(executor.run, host, command, timeout) for host, command, timeout in items]
        return [f.result() for f in futures]
