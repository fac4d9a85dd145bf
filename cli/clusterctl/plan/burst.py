"""Resolve what the burst stacks create: one cloud plan per cloud burst group.

A cloud burst group (``burst.provider.kind`` aws, gcp or azure) gets its own
:class:`~clusterctl.plan.models.CloudPlan`, resolved by the same code as ``plan.cloud``
(:func:`clusterctl.plan.cloud.resolve_cloud`) for a cluster made of that group alone on the
group's provider: instance type, EFA/GPU NIC counts, placement, capacity, image, subnets and
addresses come out exactly as the cluster stacks would make them. What differs:

- names are prefixed ``<cluster>-<group>`` (``CloudPlan.cluster``), so the group's networks,
  placement group, scale set or resource group never clash with the cluster stack's or with
  another group's;
- labels carry the real cluster name and the group (:data:`GROUP_LABEL`): the burst stack tags
  everything with both, and the controller's least-privilege policy is scoped by them;
- the network is the group's own (``burst.provider.cidr``), and the on-prem management network
  is admitted as a peer (``CloudPlan.peer_cidrs``): slurmctld and srun reach the nodes over the
  routed link;
- no bastion and no managed Lustre: the controller reaches burst nodes inside the network,
  and burst nodes mount the cluster's file systems they can reach (``burst.mounts``).

Pure, like the rest of ``plan``; the burst stack (``stacks/burst``), ``run.burst_cloud`` and
``render.burst`` read ``plan.burst_cloud`` and never the spec.
"""

from __future__ import annotations

from clusterctl.plan.cloud import CLUSTER_LABEL, MANAGED_BY_LABEL, is_cloud, resolve_cloud
from clusterctl.plan.models import CloudPlan, PlanNode
from clusterctl.spec.models import Spec

# The tag/label naming a burst group on every resource of its stack. A dash, not a colon:
# GCP label keys allow only lower-case letters, digits, '_' and '-', and all three clouds
# share one key (like CLUSTER_LABEL).
GROUP_LABEL = "clusterctl-group"
CLOUD_BURST_KINDS = ("aws", "gcp", "azure")


def burst_stack_name(cluster: str, group: str) -> str:
    """The (short) Pulumi stack name of a burst group: one stack per cluster and group."""
    return f"{cluster}-burst-{group}"


def burst_labels(cluster: str, group: str) -> dict[str, str]:
    """Tags/labels every resource of a burst group's stack carries."""
    return {CLUSTER_LABEL: cluster, GROUP_LABEL: group, MANAGED_BY_LABEL: "clusterctl"}


def resolve_burst_cloud(spec: Spec, nodes: list[PlanNode]) -> dict[str, CloudPlan]:
    """Group name -> what its burst stack creates, for every cloud burst group of ``spec``.

    Why through ``resolve_cloud`` on a one-group copy of the spec: the burst stack reuses the
    cluster stacks' components, so it must be fed the very facts they are fed; resolving them
    a second way would let the two drift apart.
    """
    out: dict[str, CloudPlan] = {}
    for group in spec.nodes:
        if group.burst is None or group.burst.provider.kind not in CLOUD_BURST_KINDS:
            continue
        provider = group.burst.provider
        # The group's own network (rule BUR004 requires it): the stack's VPC/subnet, never the
        # on-prem management network, which only reaches it through the routed link.
        network = spec.network
        if is_cloud(provider) and provider.cidr is not None:
            network = network.model_copy(update={"management_cidr": provider.cidr, "gateway": None})
        alone = spec.model_copy(
            update={
                "name": f"{spec.name}-{group.group}",
                "provider": provider,
                "network": network,
                # Without ``burst`` the group is an ordinary instance group to resolve_cloud.
                "nodes": [group.model_copy(update={"burst": None})],
                # No managed Lustre: burst nodes mount the cluster's file systems.
                "storage": [],
            }
        )
        cloud = resolve_cloud(
            alone,
            [n for n in nodes if n.group == group.group],
            labels=burst_labels(spec.name, group.group),
            bastion_host=False,
        )
        if cloud is None:  # pragma: no cover - the kind was checked above
            continue
        # slurmctld, srun and the login nodes are on the management network (on-prem, over the link).
        peers = [str(spec.network.management_cidr)] if cloud.network_cidr != str(spec.network.management_cidr) else []
        out[group.group] = cloud.model_copy(update={"peer_cidrs": peers})
    return out
