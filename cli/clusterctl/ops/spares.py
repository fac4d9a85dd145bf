"""Hot spares on a live cluster: ``clusterctl node replace`` and ``clusterctl node return``.

Replacing a failed node drains it (an existing drain and its reason are kept), takes a free spare of
its hardware profile that Slurm has idle, closest to it in the fabric, and records the swap in the
cluster's state; the ``up`` that follows renders the partitions with the spare in the failed node's
place and reconfigures Slurm. Returning a repaired node runs its health check first; only when it
passes is the swap marked returned and the node resumed, idle in no partition: a free spare, which the
``up`` that follows configures again. The spare that took its place stays in service.
"""

from __future__ import annotations

from clusterctl.ops.heal import HEALTH_TIMEOUT_S
from clusterctl.plan.models import Plan
from clusterctl.plan.service import Swap, SwapError, choose_spare, read_swaps, replaceable
from clusterctl.remote import Executor
from clusterctl.render.health import HEALTHCHECK_PATH
from clusterctl.run.state import SWAPS_KEY, StateDir
from clusterctl.slurm.client import Slurm, SlurmError, why
from clusterctl.slurm.nodes import SlurmNode
from clusterctl.slurm.reasons import REPLACED, clean

FREE_STATES = frozenset({"IDLE"})


def slurm_nodes(plan: Plan, executor: Executor) -> dict[str, SlurmNode]:
    """Every node slurmctld knows, by name.

    Raises:
        SwapError: ``scontrol show node`` failed or printed something else.
    """
    try:
        return Slurm(executor, plan.launcher()).node_map()
    except SlurmError as exc:
        raise SwapError(str(exc)) from None


def _not_free(node: SlurmNode | None) -> str | None:
    """Why a spare cannot take a place now (None: it is idle and answering)."""
    if node is None:
        return "Slurm does not know it"
    if node.state not in FREE_STATES or node.drained or node.not_responding or node.ambiguous:
        said = f" ({clean(node.reason)})" if node.reason else ""
        return f"Slurm state {'+'.join((node.state, *node.flags))}{said}, not idle"
    return None


def replace(plan: Plan, state: StateDir, executor: Executor, failed: str) -> Swap:
    """Drain ``failed`` (keeping an existing drain's reason), choose its spare and record the swap.

    The caller holds the state lock and runs ``up`` next, which puts the spare in the partitions.

    Raises:
        SwapError: no such node in service, no idle spare of its profile, or Slurm refused the drain.
    """
    replaceable(plan, failed)
    slurm = slurm_nodes(plan, executor)
    spares = [n.hostname for n in plan.nodes if n.spare]
    unusable = {h: why for h in spares if (why := _not_free(slurm.get(h)))}
    spare = choose_spare(plan, failed, unusable)
    current = slurm.get(failed)
    if current is None or not current.drained:
        error = Slurm(executor, plan.launcher()).drain({failed: f"{REPLACED} by {spare.hostname}"})[failed]
        if error:
            raise SwapError(f"could not drain {failed}: {error}. Nothing was changed.")
    swap = Swap(failed=failed, spare=spare.hostname)
    swaps = read_swaps(state.read().get(SWAPS_KEY))
    state.update(**{SWAPS_KEY: [s.to_dict() for s in (*swaps, swap)]})
    return swap


def health_check(executor: Executor, host: str) -> str | None:
    """Run the node's health check; None when it passes, else why it failed."""
    rc, out, err = executor.run(host, HEALTHCHECK_PATH, HEALTH_TIMEOUT_S)
    return None if rc == 0 else why(rc, out, err)


def mark_returned(plan: Plan, state: StateDir, executor: Executor, node: str) -> Swap:
    """Health-check the replaced ``node`` and, when it passes, record it as a spare again.

    The caller holds the state lock, then resumes the node (:func:`resume_spare`: it is in no
    partition) and runs ``up``, which configures it again.

    Raises:
        SwapError: ``node`` was not replaced, or its health check failed (nothing is recorded).
    """
    try:
        planned = plan.node(node)
    except KeyError:
        raise SwapError(f"{node} is not a node of cluster {plan.cluster.name}.") from None
    if planned.replaced_by is None:
        raise SwapError(f"{node} was not replaced by a spare (`clusterctl node replace`): there is nothing to return.")
    failure = health_check(executor, node)
    if failure is not None:
        raise SwapError(f"{node} is not healthy: its health check failed ({failure}). It stays out of service.")
    swaps = read_swaps(state.read().get(SWAPS_KEY))
    returned = Swap(node, planned.replaced_by, returned=True)
    # The last swap that took the node out is the one in force (an earlier one may have been returned).
    last = max(i for i, s in enumerate(swaps) if s.failed == node and s.spare == planned.replaced_by)
    swaps[last] = returned
    state.update(**{SWAPS_KEY: [s.to_dict() for s in swaps]})
    return returned


def resume_spare(plan: Plan, executor: Executor, node: str) -> None:
    """Resume ``node`` in Slurm if it is drained: a free spare is idle, ready to take a place.

    Raises:
        SwapError: Slurm refused.
    """
    current = slurm_nodes(plan, executor).get(node)
    if current is None or not current.drained:
        return
    error = Slurm(executor, plan.launcher()).resume([node])[node]
    if error:
        raise SwapError(f"{node} is a spare again but Slurm did not resume it: {error}.")
