"""``python3 -m clusterctl.agent``: the node's agent and the controller's bundle server.

``run [CONFIG]``: the agent of this node (clusterctl-agent.service), with the settings its provider
wrote at provisioning (default ``/etc/clusterctl/agent/agent.json``): the cluster, the node's
name, the bundle servers, where the munge key is. Exits 75 after installing a newer agent from
the bundle it applied, so systemd starts the new one.
``serve ROOT ADDRESS PORT``: the bundle server (clusterctl-bundles.service on the controller).
``publish ROOT [--have]``: what ``up`` runs on the controller to publish layers and pointers.
"""

from __future__ import annotations

import filecmp
import logging
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..bounded import BoundsError, json_document
from ..slurm import applied as slurm_applied
from ..slurm.commands import run_here
from . import publish, server
from .apply import APPLY_LOG, STATE_DIR, ApplyResult, Failure, Layout, prepare, run_playbook
from .cause import cause
from .cause import run_here as shell_here
from .digest import local_digest
from .fetch import FetchError, Server
from .loop import Agent, Settings, Steps
from .pointer import Pointer, signing_key

CONFIG_PATH = "/etc/clusterctl/agent/agent.json"
INSTALL_DIR = "/usr/local/lib/clusterctl/agent"
TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"
UPDATED_RC = 75
REPORT_TIMEOUT_S = 30.0
MAX_CONFIG_BYTES = 65536
LOG = logging.getLogger("clusterctl.agent")


class ConfigError(Exception):
    """The agent's settings cannot be read."""


@dataclass(frozen=True)
class Config:
    """What the provider wrote for this node."""

    cluster: str
    node: str
    servers: tuple[str, ...]
    munge_key: str
    facts: dict[str, Any]
    jitter_s: float = 10.0

    @classmethod
    def read(cls, path: str) -> Config:
        """The settings at ``path``.

        Raises:
            ConfigError: Missing, too large, or not the settings the provider writes.
        """
        try:
            with open(path, "rb") as handle:
                raw = handle.read(MAX_CONFIG_BYTES + 1)
            data = json_document(raw.decode("utf-8"), "agent settings")
        except (OSError, UnicodeDecodeError, BoundsError) as exc:
            raise ConfigError(f"{path}: {exc}") from None
        if len(raw) > MAX_CONFIG_BYTES or not isinstance(data, dict):
            raise ConfigError(f"{path} is not the agent's settings")
        servers = data.get("servers")
        facts = data.get("facts") or {}
        if not isinstance(servers, list) or not servers or not all(isinstance(s, str) for s in servers):
            raise ConfigError(f"{path} names no bundle server")
        if not isinstance(facts, dict):
            raise ConfigError(f"{path}: facts is not a mapping")
        try:
            return cls(
                cluster=str(data["cluster"]),
                node=str(data["node"]),
                servers=tuple(servers),
                munge_key=str(data["munge_key"]),
                facts=facts,
                jitter_s=float(data.get("jitter_s", 10.0)),
            )
        except KeyError as exc:
            raise ConfigError(f"{path} lacks {exc}") from None


class Servers:
    """The bundle servers, tried in turn."""

    def __init__(self, urls: Sequence[str]) -> None:
        """Parse ``urls``; raises FetchError for one that is not ``http://ADDRESS:PORT``."""
        self.servers = [Server.parse(url) for url in urls]
        self.index = 0

    @property
    def current(self) -> Server:
        """The server in use."""
        return self.servers[self.index]

    def next(self) -> None:
        """Use the next server."""
        self.index = (self.index + 1) % len(self.servers)


def textfile(applied: slurm_applied.Applied, directory: str = TEXTFILE_DIR) -> None:
    """The node exporter's textfile collector gets the same report, for Prometheus and dashboards."""
    folder = Path(directory)
    if not folder.is_dir():
        return
    state = {"ok": 0, "applying": 1, "failed": 2}[applied.state]
    text = (
        "# HELP clusterctl_agent_state The last apply: 0 ok, 1 applying, 2 failed.\n"
        "# TYPE clusterctl_agent_state gauge\n"
        f'clusterctl_agent_state{{bundle="{applied.bundle}"}} {state}\n'
        "# HELP clusterctl_agent_generation The generation of the last request the node answered.\n"
        "# TYPE clusterctl_agent_generation gauge\n"
        f"clusterctl_agent_generation {applied.generation}\n"
        "# HELP clusterctl_agent_report_timestamp_seconds When the node answered it.\n"
        "# TYPE clusterctl_agent_report_timestamp_seconds gauge\n"
        f"clusterctl_agent_report_timestamp_seconds {applied.at}\n"
    )
    temporary = folder / ".clusterctl_agent.prom.tmp"
    try:
        temporary.write_text(text, encoding="utf-8")
        temporary.replace(folder / "clusterctl_agent.prom")
    except OSError as exc:
        LOG.warning("cannot write the node exporter's textfile: %s", exc)


def report_to_slurm(node: str, applied: slurm_applied.Applied) -> bool:
    """``scontrol update NodeName=<node> Extra=<report>``; False (retried later) when Slurm did not take it."""
    textfile(applied)
    done = run_here(slurm_applied.set_report(node, applied), REPORT_TIMEOUT_S)
    if done.returncode != 0:
        LOG.warning("Slurm did not take the report yet: %s", (done.stderr or done.stdout).strip()[:200])
        return False
    return True


def failure_cause(failure: Failure) -> tuple[str, ...]:
    """What this node says caused ``failure`` (apt's errors, the unit's journal)."""
    return cause(failure.action, failure.message, failure.detail, failure.unit, shell_here)


def updated_self(layout: Layout, install_dir: str = INSTALL_DIR) -> bool:
    """Install the agent the roles layer carries when it differs from this one; True when it did."""
    shipped = layout.roles / "agent"
    target = Path(install_dir)
    if not shipped.is_dir() or not target.is_dir():
        return False
    differ = filecmp.dircmp(shipped, target)
    stack = [differ]
    changed = False
    while stack:
        current = stack.pop()
        if current.left_only or current.diff_files or current.funny_files:
            changed = True
            break
        stack.extend(current.subdirs.values())
    if not changed:
        return False
    staging = target.with_name(f".{target.name}.new")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(shipped, staging)
    old = target.with_name(f".{target.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    target.replace(old)
    staging.replace(target)
    shutil.rmtree(old, ignore_errors=True)
    return True


def run_agent(config_path: str) -> int:
    """The agent's main loop (see loop.py)."""
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    try:
        config = Config.read(config_path)
        servers = Servers(config.servers)
        with open(config.munge_key, "rb") as handle:
            key = signing_key(handle.read(64 * 1024))
    except (ConfigError, FetchError, OSError, ValueError) as exc:
        LOG.error("cannot start: %s", exc)
        return 78  # EX_CONFIG: systemd keeps restarting it, the journal says why
    state_dir = Path(STATE_DIR)
    updated = False

    def apply(pointer: Pointer, layout: Layout) -> ApplyResult:
        nonlocal updated
        facts = {**config.facts, **pointer.vars}
        prepare(config.node, pointer.stage, facts, layout)
        outcome = run_playbook(config.node, layout, Path(APPLY_LOG))
        if outcome.ok:
            updated = updated_self(layout)
        return outcome

    steps = Steps(
        pointer=lambda known, wait: servers.current.pointer(config.node, known, wait),
        layer=lambda digest, path: servers.current.layer(digest, path),
        apply=apply,
        digest=local_digest,
        report=lambda applied: report_to_slurm(config.node, applied),
        cause=failure_cause,
        next_server=servers.next,
    )
    agent = Agent(Settings(config.cluster, config.node, key, state_dir, jitter_s=config.jitter_s), steps)
    LOG.info(
        "clusterctl agent of %s (cluster %s), bundle servers %s", config.node, config.cluster, ", ".join(config.servers)
    )
    agent.run(until=lambda: updated and agent.pending is None)
    LOG.info("a newer agent came with the bundle: restarting into it")
    return UPDATED_RC


def main(argv: list[str]) -> int:
    """Dispatch ``run`` and ``serve``."""
    if argv[:1] == ["run"] and len(argv) <= 2:
        return run_agent(argv[1] if len(argv) == 2 else CONFIG_PATH)
    if argv[:1] == ["serve"]:
        return server.main(argv[1:])
    if argv[:1] == ["publish"]:
        return publish.main(argv[1:])
    sys.stderr.write(
        "usage: python3 -m clusterctl.agent run [CONFIG] | serve ROOT ADDRESS PORT | publish ROOT [--have]\n"
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
