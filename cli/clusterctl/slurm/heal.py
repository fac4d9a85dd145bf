"""The heal decision: what a round of ``clusterctl heal`` or the controller's heal timer does with one node.

One pure function for both. A node is health-checked (and resumed if the check passes) only
when Slurm drained it for a clusterctl reason that no running command owns; an admin's drain,
a node whose record is ambiguous and the nodes a command is removing, upgrading or replaced are
left alone. What differs between the two callers is what they know, passed in ``Scope``.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from enum import Enum

from .nodes import SlurmNode
from .reasons import REMOVE, REPLACED, UPGRADE, ours


class Verdict(str, Enum):  # noqa: UP042 (StrEnum is 3.11; controllers may run 3.10)
    """The decision for one node."""

    IN_SERVICE = "in-service"
    FOREIGN = "foreign"
    AMBIGUOUS = "ambiguous"
    LEAVING = "leaving"
    REPLACED = "replaced"
    UPGRADING = "upgrading"
    OUT_OF_SERVICE = "out-of-service"
    CLOUD = "cloud"
    CHECK = "check"


@dataclass(frozen=True)
class Scope:
    """What the caller knows beyond Slurm's record.

    Attributes:
        upgrading: Nodes a rolling upgrade drained and has not upgraded yet; None when unknown
            (the timer), so every ``clusterctl:upgrade`` drain counts as one under way.
        replaced: Nodes a hot spare replaced (the plan's swaps); None when unknown (the timer), so
            every ``clusterctl:replaced`` drain counts as one.
        cloud: Whether power-saving (burst) nodes are checked; the control machine reaches them,
            the controller's timer leaves them.
        out_of_partition: Whether nodes in no partition (free spares) are checked.
    """

    upgrading: Collection[str] | None = None
    replaced: Collection[str] | None = None
    cloud: bool = False
    out_of_partition: bool = False


TIMER = Scope()


def decide(node: SlurmNode, scope: Scope = TIMER) -> Verdict:
    """What heal does with ``node``: ``CHECK`` (health-check it, resume it if it passes) or why not."""
    if node.ambiguous:
        return Verdict.AMBIGUOUS
    if not node.drained:
        return Verdict.IN_SERVICE
    if not ours(node.reason):
        return Verdict.FOREIGN
    if node.reason.startswith(REMOVE):
        return Verdict.LEAVING
    if node.name in scope.replaced if scope.replaced is not None else node.reason.startswith(REPLACED):
        return Verdict.REPLACED
    if node.reason.startswith(UPGRADE) and (scope.upgrading is None or node.name in scope.upgrading):
        return Verdict.UPGRADING
    if not node.partitions and not scope.out_of_partition:
        return Verdict.OUT_OF_SERVICE
    if node.cloud and not scope.cloud:
        return Verdict.CLOUD
    return Verdict.CHECK
