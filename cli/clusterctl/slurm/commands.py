"""The Slurm commands clusterctl runs, as argv lists, with one timeout.

Names go through ``names.node_name`` and reasons through ``reasons.clean`` before they are put in
an argv: scontrol takes ``key=value`` words, so a checked value cannot become another word or an
option. ``shell`` quotes an argv for an executor that runs a shell command line on a node.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Sequence

from .names import address, node_name
from .reasons import clean

SCONTROL_TIMEOUT_S = 60.0
# Running, completing (epilogs), configuring (nodes booting for it) and suspended jobs all hold nodes.
HOLDING_STATES = "RUNNING,COMPLETING,CONFIGURING,SUSPENDED"


def run_here(argv: Sequence[str], timeout: float = SCONTROL_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` on this machine; a timeout or a missing program is exit 124 / 127, never a traceback."""
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(list(argv), 124, "", f"no answer in {timeout:.0f} s")
    except OSError as exc:
        return subprocess.CompletedProcess(list(argv), 127, "", str(exc))


def shell(argv: Sequence[str]) -> str:
    """``argv`` as one shell command line, every word quoted."""
    return " ".join(shlex.quote(word) for word in argv)


def show_nodes(name: str | None = None) -> list[str]:
    """``scontrol show node -o [NAME]``: one record per line."""
    return ["scontrol", "show", "node", "-o", *([node_name(name)] if name else [])]


def show_partitions() -> list[str]:
    """``scontrol show partition -o``."""
    return ["scontrol", "show", "partition", "-o"]


def show_topology() -> list[str]:
    """``scontrol show topology``."""
    return ["scontrol", "show", "topology"]


def drain(host: str, reason: str) -> list[str]:
    """Drain ``host``: no new job starts there; ``reason`` says who and why."""
    return ["scontrol", "update", f"nodename={node_name(host)}", "state=drain", f"reason={clean(reason)}"]


def resume(host: str) -> list[str]:
    """Resume ``host`` (Slurm refuses a node that is not drained or down)."""
    return ["scontrol", "update", f"nodename={node_name(host)}", "state=resume"]


def down(host: str, reason: str) -> list[str]:
    """Set ``host`` DOWN with ``reason``."""
    return ["scontrol", "update", f"nodename={node_name(host)}", "state=down", f"reason={clean(reason, 200)}"]


def power_down_force(host: str, reason: str) -> list[str]:
    """Power ``host`` down now (a burst node whose resume failed)."""
    return [
        "scontrol",
        "update",
        f"nodename={node_name(host)}",
        "state=power_down_force",
        f"reason={clean(reason, 200)}",
    ]


def set_address(host: str, addr: str) -> list[str]:
    """Tell slurmctld where a burst node will be, before its slurmd registers."""
    name = node_name(host)
    return ["scontrol", "update", f"nodename={name}", f"nodeaddr={address(addr)}", f"nodehostname={name}"]


def reboot(hosts: Sequence[str], reason: str) -> list[str]:
    """Reboot ``hosts`` once their jobs ended, back DOWN (out of service) until resumed."""
    names = ",".join(node_name(h) for h in hosts)
    return ["scontrol", "reboot", "ASAP", "nextstate=DOWN", f"reason={clean(reason)}", names]


def jobs(nodes: Sequence[str] = ()) -> list[str]:
    """``squeue`` for the jobs that hold nodes: ``id|nodes`` rows, all of them or those on ``nodes``."""
    where = ["-w", ",".join(node_name(n) for n in nodes)] if nodes else []
    return ["squeue", "-h", "-t", HOLDING_STATES, "-o", "%i|%N", *where]


def version() -> list[str]:
    """``sinfo --version``."""
    return ["sinfo", "--version"]
