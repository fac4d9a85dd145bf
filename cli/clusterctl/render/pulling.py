"""Which nodes configure themselves from a bundle (pull) and which the control machine configures (push).

A compute node pulls when its provider delivers the agent, its settings and the munge key at
provisioning (``PULL_PROVIDERS``: the local provider through ``docker exec``, bare metal over SSH
to the node that presented its generated host key); every other node is pushed with Ansible, as
are the controllers and login nodes everywhere.
"""

from __future__ import annotations

from clusterctl.plan.models import Plan, PlanNode

# Providers whose machines get the agent, its settings and the munge key at provisioning.
PULL_PROVIDERS = frozenset({"local", "baremetal"})


def pulls(plan: Plan, node: PlanNode) -> bool:
    """Whether ``node`` configures itself from a bundle: a compute node whose provider delivers the agent."""
    if node.role != "compute":
        return False
    group = next((g for g in plan.groups if g.name == node.group), None)
    provider = (group.provider if group is not None and group.provider else None) or plan.cluster.provider
    return provider in PULL_PROVIDERS


def pull_nodes(plan: Plan) -> list[PlanNode]:
    """The nodes that pull, in plan order."""
    return [n for n in plan.nodes if pulls(plan, n)]
