"""``python3 -m clusterctl.slurm``: the parts of this package the controller and the nodes run.

``heal-round [CONFIG]``: one round of the controller's heal timer (timer.py).
``reason NODE``: the drain reason of ``NODE`` as Slurm has it, or nothing (the health check asks
whether it drained its own node).
``drain NODE REASON`` and ``resume NODE``: what the node's health check, its DCGM check and a
fabric's job prolog do to their own node, through the one drain command (commands.py).
"""

from __future__ import annotations

import sys

from . import timer
from .commands import SCONTROL_TIMEOUT_S, drain, resume, run_here, show_nodes
from .names import NameCheckError
from .nodes import by_name, parse_nodes
from .records import RecordError


def node_reason(name: str) -> int:
    """Print ``name``'s reason (empty when it has none or its record is ambiguous); exit 1 when Slurm cannot be read."""
    try:
        done = run_here(show_nodes(name), SCONTROL_TIMEOUT_S)
        node = by_name(parse_nodes(done.stdout)).get(name) if done.returncode == 0 else None
    except (NameCheckError, RecordError):
        return 1
    if done.returncode != 0:
        return 1
    if node is not None and not node.ambiguous:
        sys.stdout.write(node.reason + "\n")
    return 0


def change(argv: list[str]) -> int:
    """Run one drain or resume; scontrol's own message on stderr when it refuses."""
    try:
        done = run_here(argv, SCONTROL_TIMEOUT_S)
    except NameCheckError as exc:
        sys.stderr.write(f"clusterctl-slurm: {exc}\n")
        return 2
    if done.returncode != 0:
        sys.stderr.write((done.stderr or done.stdout)[-500:])
    return done.returncode


def main(argv: list[str]) -> int:
    """Dispatch ``heal-round``, ``reason``, ``drain`` and ``resume``."""
    try:
        if argv[:1] == ["heal-round"] and len(argv) <= 2:
            return timer.main(argv[1:])
        if argv[:1] == ["reason"] and len(argv) == 2:
            return node_reason(argv[1])
        if argv[:1] == ["drain"] and len(argv) == 3:
            return change(drain(argv[1], argv[2]))
        if argv[:1] == ["resume"] and len(argv) == 2:
            return change(resume(argv[1]))
    except NameCheckError as exc:
        sys.stderr.write(f"clusterctl-slurm: {exc}\n")
        return 2
    sys.stderr.write("usage: clusterctl-slurm heal-round [CONFIG] | reason NODE | drain NODE REASON | resume NODE\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
