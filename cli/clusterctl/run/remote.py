"""Run a shell command on a cluster node: ``docker exec`` for local nodes, SSH for the rest."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from clusterctl.plan import Plan
from clusterctl.render.inventory import container_name


@dataclass(frozen=True)
class CommandResult:
    """What a remote command returned."""

    rc: int
    stdout: str
    stderr: str


class Remote:
    """Runs commands on the plan's nodes the way the provider connects to them."""

    def __init__(self, plan: Plan, known_hosts: Path | None = None, user: str | None = None) -> None:
        self.plan = plan
        self.known_hosts = known_hosts
        self.user = user or str(plan.cluster.provider_config.get("ssh_user", "root"))

    def _argv(self, host: str, command: str) -> list[str]:
        node = self.plan.node(host)
        if self.plan.cluster.provider == "local" or (node.burst and node.emulated):
            return ["docker", "exec", container_name(self.plan, node), "bash", "-lc", command]
        opts = ["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes"]
        if self.known_hosts:
            opts += ["-o", f"UserKnownHostsFile={self.known_hosts}"]
        return ["ssh", *opts, f"{self.user}@{node.address}", command]

    def run(self, host: str, command: str, timeout: float = 120) -> CommandResult:
        """Run ``command`` on ``host``; a timeout or missing transport is rc 124/127, never an exception."""
        try:
            done = subprocess.run(
                self._argv(host, command), capture_output=True, text=True, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired:
            return CommandResult(124, "", f"timed out after {timeout:.0f} s")
        except FileNotFoundError as exc:
            return CommandResult(127, "", str(exc))
        return CommandResult(done.returncode, done.stdout, done.stderr)
