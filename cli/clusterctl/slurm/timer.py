"""The controller's heal timer: one round of what ``clusterctl heal`` does, run by clusterctl-heal.service.

Every compute node drained for a clusterctl reason that no running command owns runs its health
check over SSH, with a key whose only command on the nodes is the health check; it is resumed
only when the check passes. Admins' drains, ambiguous records, nodes in no partition and cloud
(burst) nodes are left alone (``heal.decide`` with the timer's scope).

SSH goes to the address the plan gave the node (the config file), never to Slurm's NodeAddr:
whoever can change a NodeAddr must not choose where root's SSH connects or with which options.
The node's host key must be the one pinned under its name.

Exit 0 when Slurm's node list was read (an unhealthy node is a finding, not a failed run), 1 when
it could not be, or the config cannot be read. Every decision is one line on stdout (the journal).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from .commands import SCONTROL_TIMEOUT_S, resume, run_here, show_nodes
from .heal import TIMER, Verdict, decide
from .names import is_address, is_node_name
from .nodes import SlurmNode, by_name, parse_nodes
from .reasons import clean
from .records import RecordError

CONFIG_PATH = "/etc/clusterctl/heal/heal.json"
# The health checks run side by side: a round over many drained nodes takes one check's time.
PARALLEL = 16
MAX_CONFIG_BYTES = 16 * 1024 * 1024

Run = Callable[[Sequence[str], float], "subprocess.CompletedProcess[str]"]


class TimerError(Exception):
    """The round cannot run: Slurm or the config could not be read."""


@dataclass(frozen=True)
class Config:
    """What the render tells the timer (health/heal.json)."""

    key: str
    known_hosts: str
    check_timeout_s: float
    scontrol_timeout_s: float
    addresses: Mapping[str, str]

    @classmethod
    def read(cls, path: str) -> Config:
        """The config at ``path``; node entries that are not a name and an address are dropped."""
        try:
            with open(path, "rb") as handle:
                raw = handle.read(MAX_CONFIG_BYTES + 1)
            if len(raw) > MAX_CONFIG_BYTES:
                raise TimerError(f"{path} is larger than {MAX_CONFIG_BYTES} bytes")
            data = json.loads(raw)
            addresses = data["addresses"]
            config = cls(
                key=str(data["key"]),
                known_hosts=str(data["known_hosts"]),
                check_timeout_s=float(data["check_timeout_s"]),
                scontrol_timeout_s=float(data.get("scontrol_timeout_s", SCONTROL_TIMEOUT_S)),
                addresses={
                    name: addr
                    for name, addr in addresses.items()
                    if isinstance(name, str) and isinstance(addr, str) and is_node_name(name) and is_address(addr)
                },
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            raise TimerError(f"cannot read {path}: {exc}") from None
        return config


def _line(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _last(done: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in (done.stderr + "\n" + done.stdout).split("\n") if line.strip()]
    return clean(lines[-1], 200) if lines else f"exit {done.returncode}"


def read_nodes(config: Config, run: Run) -> dict[str, SlurmNode]:
    """Slurm's nodes by name.

    Raises:
        TimerError: scontrol failed or printed something else.
    """
    done = run(show_nodes(), config.scontrol_timeout_s)
    if done.returncode != 0:
        raise TimerError(f"scontrol show node failed: {_last(done)}")
    try:
        return by_name(parse_nodes(done.stdout))
    except RecordError as exc:
        raise TimerError(f"scontrol show node: {exc}") from None


def ssh_argv(config: Config, node: str, address: str) -> list[str]:
    """ssh to ``address`` as root with the heal key, the host key pinned under ``node``; ``--`` ends options."""
    return [
        "ssh", "-i", config.key, "-l", "root",
        "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "ConnectTimeout=10",
        "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={config.known_hosts}",
        "-o", "GlobalKnownHostsFile=/dev/null", "-o", f"HostKeyAlias={node}",
        "-o", "ProxyCommand=none", "-o", "ProxyJump=none", "-o", "PermitLocalCommand=no",
        "--", address, "clusterctl-healthcheck",
    ]  # fmt: skip


def health_check(config: Config, node: str, run: Run) -> tuple[bool, str]:
    """Run ``node``'s health check at the plan's address; the key's forced command runs it, whatever is asked."""
    addr = config.addresses.get(node)
    if addr is None:
        return False, "not a node of this cluster's plan"
    done = run(ssh_argv(config, node, addr), config.check_timeout_s)
    if done.returncode == 124:
        return False, f"no answer in {config.check_timeout_s:.0f} s"
    if done.returncode == 255:
        return False, f"unreachable over SSH: {_last(done)}"
    return done.returncode == 0, _last(done)


def heal_round(config: Config, run: Run = run_here, say: Callable[[str], None] | None = None) -> None:
    """One round: decide for every node, check the candidates side by side, resume those that pass.

    Raises:
        TimerError: Slurm's node list could not be read.
    """
    say = say or _line
    nodes = read_nodes(config, run)
    candidates: list[str] = []
    for name, node in nodes.items():
        verdict = decide(node, TIMER)
        shown = clean(node.reason, 200) or "none given"
        if verdict is Verdict.CHECK:
            candidates.append(name)
        elif verdict is Verdict.FOREIGN:
            say(f"{clean(name, 80)}: left drained: its reason is not clusterctl's ({shown})")
        elif verdict is not Verdict.IN_SERVICE:
            say(f"{clean(name, 80)}: left drained ({verdict.value}: {shown})")
    if not candidates:
        return
    with ThreadPoolExecutor(max_workers=min(PARALLEL, len(candidates))) as pool:
        results = list(pool.map(lambda name: health_check(config, name, run), candidates))
    healthy = []
    for name, (ok, why) in zip(candidates, results, strict=True):
        if ok:
            healthy.append(name)
        else:
            say(f"{name}: stays drained: its health check failed ({why})")
    if not healthy:
        return
    # The health check resumes its own drains, and an admin may have drained a node meanwhile:
    # only nodes still drained for a reason this timer may undo are resumed.
    now = read_nodes(config, run)
    for name in healthy:
        current = now.get(name)
        if current is None or decide(current, TIMER) is not Verdict.CHECK:
            say(f"{name}: healthy; no longer drained by clusterctl, nothing to resume")
            continue
        done = run(resume(name), config.scontrol_timeout_s)
        if done.returncode == 0:
            say(f"{name}: resumed: its health check passed (drained: {clean(current.reason, 200)})")
        else:
            say(f"{name}: healthy but scontrol did not resume it: {_last(done)}")


def main(argv: Sequence[str] | None = None) -> int:
    """``clusterctl-heal [CONFIG]``: one round; exit 1 (one line on stderr) when it cannot run."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        heal_round(Config.read(args[0] if args else CONFIG_PATH))
    except TimerError as exc:
        sys.stderr.write(f"clusterctl-heal: {exc}\n")
        return 1
    return 0
