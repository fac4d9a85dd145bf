"""``python3 -m clusterctl.slurm``: the parts of this package the controller and the nodes run.

``heal-round [CONFIG]``: one round of the controller's heal timer (timer.py).
``reason NODE``: the drain reason of ``NODE`` as Slurm has it, or nothing (the health check asks
whether it drained its own node).
"""

from __future__ import annotations

import sys

from . import timer
from .commands import SCONTROL_TIMEOUT_S, run_here, show_nodes
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


def main(argv: list[str]) -> int:
    """Dispatch ``heal-round`` and ``reason``."""
    if argv[:1] == ["heal-round"] and len(argv) <= 2:
        return timer.main(argv[1:])
    if argv[:1] == ["reason"] and len(argv) == 2:
        return node_reason(argv[1])
    sys.stderr.write("usage: python3 -m clusterctl.slurm heal-round [CONFIG] | reason NODE\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
