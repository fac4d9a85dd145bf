"""On-prem RDMA pieces of the plan: where opensm runs, and the IPoIB address of each rail.

The subnet manager runs on the hosts ``fabric.opensm_hosts`` names and nowhere else (opensm
elects its master by priority, then GUID: linux-rdma/opensm man/opensm.8.in ``-p``); IPoIB
gives rail i of a node the address at the node's management offset in ``fabric.ipoib.networks[i]``.
Rails stay as the spec names them (PCI address or RDMA device): nodes resolve them at converge
time (roles/rdma/library/rdma_rails.py).
"""

from __future__ import annotations

from ipaddress import IPv4Address

from clusterctl.plan.models import FabricPlan, OpenSmPlacement, PlanNode
from clusterctl.spec.models import Spec

# opensm's range: 0 (default, lowest) .. 15 (highest).
MAX_SM_PRIORITY = 15


def opensm_placements(spec: Spec, nodes: list[PlanNode]) -> list[OpenSmPlacement]:
    """The opensm hosts with their priority and port; empty unless the subnet manager is opensm.

    A host the plan does not have is left out (rule FAB007 reports it); a priority left unset
    is 15 for the first host listed, 14 for the second, and so on.
    """
    fabric = spec.fabric
    if fabric.subnet_manager != "opensm":
        return []
    by_name = {n.hostname: n for n in nodes}
    out: list[OpenSmPlacement] = []
    for position, entry in enumerate(fabric.opensm_hosts):
        node = by_name.get(entry.host)
        if node is None:
            continue
        priority = entry.priority if entry.priority is not None else max(MAX_SM_PRIORITY - position, 0)
        port = entry.port or (node.rails[0] if node.rails else None)
        out.append(OpenSmPlacement(host=node.hostname, priority=priority, port=port))
    return out


def assign_ipoib(spec: Spec, nodes: list[PlanNode]) -> None:
    """Give rail i of every node with rails its IPoIB address in ``fabric.ipoib.networks[i]``."""
    ipoib = spec.fabric.ipoib
    if ipoib is None or spec.fabric.kind != "infiniband":
        return
    base = int(spec.network.management_cidr.network_address)
    for node in nodes:
        if not node.rails or node.emulated or node.burst:
            continue
        offset = int(IPv4Address(node.address)) - base
        node.ipoib = [
            f"{IPv4Address(int(net.network_address) + offset)}/{net.prefixlen}"
            for net in ipoib.networks[: len(node.rails)]
            if offset < net.num_addresses - 1
        ]


def apply_rdma(spec: Spec, nodes: list[PlanNode], fabric: FabricPlan) -> None:
    """Fill the fabric plan's opensm placement and IPoIB settings, and the nodes' IPoIB addresses."""
    fabric.opensm = opensm_placements(spec, nodes)
    if spec.fabric.ipoib is not None and spec.fabric.kind == "infiniband":
        fabric.ipoib_mode = spec.fabric.ipoib.mode
        fabric.ipoib_mtu = spec.fabric.ipoib.mtu
    assign_ipoib(spec, nodes)
