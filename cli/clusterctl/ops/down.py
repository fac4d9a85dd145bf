"""``down`` as a function: destroy what the cluster's provider created.

``commands/down.py`` checks for running jobs first (ops/running_jobs.py) and removes the state after.
"""

from __future__ import annotations

from pathlib import Path

from clusterctl.plan import Plan
from clusterctl.run.events import EventBus
from clusterctl.run.providers import for_kind
from clusterctl.run.state import StateDir


def down(plan: Plan, state: StateDir, events: EventBus, *, build_dir: Path | None = None, yes: bool = False) -> None:
    """Destroy what the cluster's provider created and remove its state. The caller holds the lock."""
    events.phase("destroy")
    provider = for_kind(plan.cluster.provider)
    recorded = state.read().get("build_dir")
    target = build_dir or (Path(recorded) if recorded else Path("build") / plan.cluster.name)
    provider.destroy(plan, target, state.path, yes=yes, events=events)
    if plan.burst_cloud:
        from clusterctl.run.burst_cloud import destroy_cloud_bases

        destroy_cloud_bases(plan, target, state.path, events)
    events.phase_done("destroy")
