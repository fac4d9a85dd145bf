"""Hot spares in service: which spare took a failed node's place, and which repaired node is a spare again.

The spec says how many nodes of a group are spares (its last ``spares`` nodes). ``clusterctl node
replace`` records a swap: the failed node leaves the partitions (``replaced_by``) and a free spare
of the same hardware profile takes its place (``replaces``). ``clusterctl node return`` marks the
swap returned: the repaired node is a free spare from then on and the spare that replaced it stays
in service. Swaps are kept in the cluster's state and applied in the order they were made, each on
the roles the ones before it left; a swap the spec no longer allows (a node removed, a group whose
spares changed) is skipped, so the spec's counts always hold.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from clusterctl.plan.models import Plan, PlanNode

NodeRole = Literal["active", "spare", "replaced"]


class SwapError(Exception):
    """A swap that cannot be made (no such node, no free spare, a node not in service...)."""


@dataclass(frozen=True)
class Swap:
    """Spare ``spare`` took failed node ``failed``'s place; ``returned`` once ``failed`` is a spare again."""

    failed: str
    spare: str
    returned: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The record kept in state.json."""
        return {"failed": self.failed, "spare": self.spare, "returned": self.returned}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Swap:
        """A swap from its state.json record.

        Raises:
            SwapError: the record is not one clusterctl wrote.
        """
        failed, spare, returned = data.get("failed"), data.get("spare"), data.get("returned", False)
        if not isinstance(failed, str) or not isinstance(spare, str) or not isinstance(returned, bool):
            raise SwapError(f"not a swap record: {dict(data)!r}")
        return cls(failed, spare, returned)


@dataclass(frozen=True)
class Placement:
    """A node's role after the swaps: in service, a free spare, or out (replaced by another)."""

    role: NodeRole
    replaces: str | None = None
    replaced_by: str | None = None


def place(profiles: Mapping[str, tuple[str, bool]], swaps: Iterable[Swap]) -> dict[str, Placement]:
    """Each node's placement: the spec's roles, then each swap in order.

    ``profiles``: hostname -> (hardware profile, whether the spec makes it a spare). A swap applies
    when both nodes have the same profile, the failed node is in service and the spare is a free
    spare at that point; any other swap is skipped.
    """
    placed = {host: Placement("spare" if spare else "active") for host, (_, spare) in profiles.items()}
    for swap in swaps:
        failed, spare = placed.get(swap.failed), placed.get(swap.spare)
        if failed is None or spare is None or failed.role != "active" or spare.role != "spare":
            continue
        if profiles[swap.failed][0] != profiles[swap.spare][0]:
            continue
        placed[swap.spare] = Placement("active", replaces=swap.failed)
        placed[swap.failed] = Placement("spare") if swap.returned else Placement("replaced", replaced_by=swap.spare)
    return placed


def applied(profiles: Mapping[str, tuple[str, bool]], swaps: Sequence[Swap]) -> list[Swap]:
    """The swaps :func:`place` applies, in order (the others are the spec's to drop)."""
    kept = []
    for i, swap in enumerate(swaps):
        before = place(profiles, swaps[:i])
        after = place(profiles, swaps[: i + 1])
        if before != after:
            kept.append(swap)
    return kept


def spec_roles(plan: Plan) -> dict[str, tuple[str, bool]]:
    """hostname -> (hardware profile, whether the spec alone makes it a spare): what :func:`place` starts from."""
    groups = {g.name: g for g in plan.groups}
    return {n.hostname: (n.hardware, n.index > groups[n.group].count - groups[n.group].spares) for n in plan.nodes}


def read_swaps(records: object) -> list[Swap]:
    """The swaps of state.json's ``spares`` list.

    Raises:
        SwapError: the list is not one clusterctl wrote.
    """
    if records is None:
        return []
    if not isinstance(records, list):
        raise SwapError(f"`spares` is not a list: {records!r}")
    swaps = []
    for record in records:
        if not isinstance(record, Mapping):
            raise SwapError(f"not a swap record: {record!r}")
        swaps.append(Swap.from_dict(record))
    return swaps


def _closeness(failed: PlanNode, spare: PlanNode) -> tuple[int, ...]:
    """Sort key: a spare on the failed node's leaves first, then its SU, its rack, its group."""
    return (
        not (failed.leaves and spare.leaves == failed.leaves),
        not (failed.su is not None and spare.su == failed.su),
        spare.rack != failed.rack,
        spare.group != failed.group,
    )


def replaceable(plan: Plan, failed: str) -> PlanNode:
    """``failed``'s plan node, when it is a compute node in service that a spare may replace.

    Raises:
        SwapError: it is not.
    """
    try:
        node = plan.node(failed)
    except KeyError:
        raise SwapError(f"{failed} is not a node of cluster {plan.cluster.name}.") from None
    if node.role != "compute" or node.burst:
        raise SwapError(f"{failed} is a {'burst' if node.burst else node.role} node; only compute nodes have spares.")
    if node.spare:
        raise SwapError(f"{failed} is a free spare, in no partition: there is nothing to replace.")
    if node.replaced_by:
        raise SwapError(f"{failed} was already replaced by {node.replaced_by}.")
    return node


def choose_spare(plan: Plan, failed: str, unusable: Mapping[str, str] | None = None) -> PlanNode:
    """The free spare that takes ``failed``'s place: same hardware profile, closest in the fabric.

    ``unusable``: spares that may not be used now (hostname -> why, e.g. their Slurm state).

    Raises:
        SwapError: ``failed`` is not a compute node in service, or no spare of its profile is free.
    """
    node = replaceable(plan, failed)
    unusable = unusable or {}
    same = [n for n in plan.nodes if n.spare and n.hardware == node.hardware]
    free = sorted((n for n in same if n.hostname not in unusable), key=lambda n: _closeness(node, n))
    if free:
        return free[0]
    if same:
        why = "; ".join(f"{n.hostname}: {unusable[n.hostname]}" for n in same)
        raise SwapError(f"no spare of hardware profile `{node.hardware}` can take {failed}'s place ({why}).")
    raise SwapError(
        f"no free spare of hardware profile `{node.hardware}` (give a group of that profile `spares:` in the spec)."
    )
