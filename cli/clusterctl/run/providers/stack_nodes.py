"""What the Pulumi-backed providers (cloud, bare metal) do alike with their stack: destroy it, read its nodes."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from clusterctl.plan.models import Plan
from clusterctl.run.events import EventBus
from clusterctl.run.providers.base import ProviderError
from clusterctl.run.pulumi import (
    PHASE,
    DestroySummary,
    PulumiError,
    PulumiStack,
    output_mapping,
    require_pulumi_cli,
)


class _Destroyable(Protocol):
    def destroy(self) -> DestroySummary: ...


def destroy_stack(stack: _Destroyable, events: EventBus, done: str) -> None:
    """Destroy ``stack`` and report ``done: <changes>``; an engine failure becomes a ProviderError."""
    try:
        summary = stack.destroy()
    except PulumiError as exc:
        raise ProviderError(str(exc)) from None
    events.info(f"{done}: {summary.describe()}", phase=PHASE)


def stack_node_status(plan: Plan, state_dir: Path, present: str) -> dict[str, str]:
    """``present`` or ``missing`` per non-burst node, from the stack's ``nodes`` output.

    The outputs need no build directory.

    Raises:
        ProviderError: the outputs cannot be read (the Pulumi CLI is missing, the stack is
            unreadable): one message for the whole cluster, not one per node.
    """
    names = [n.hostname for n in plan.nodes if not n.burst]
    try:
        require_pulumi_cli()
        stack = PulumiStack(plan, state_dir, state_dir)
        nodes = output_mapping(stack.outputs().values, "nodes", stack.target.stack)
    except PulumiError as exc:
        raise ProviderError(f"the machines of {plan.cluster.name} cannot be read: {exc}") from None
    return {name: present if name in nodes else "missing" for name in names}
