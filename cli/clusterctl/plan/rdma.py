"""On-prem RDMA pieces of the plan: where opensm runs, and the IPoIB address of each rail.

The subnet manager runs on the hosts ``fabric.opensm_hosts`` names and nowhere else (opensm
elects its master by priority, then GUID: linux-rdma/opensm man/opensm.8.in ``-p``); IPoIB
gives rail i of a node the address at the node's management offset in ``fabric.ipoib.networks[i]``.
Rails stay as the spec names them (PCI address or RDMA device): nodes resolve them at converge
time (clusterctl.node.rdma_rails). Both are computed from the nodes' seats, before the
fabric plan and the nodes are built.
"""

from __future__ import annotations

from ipaddress import IPv4Address

from clusterctl.plan.models import OpenSmPlacement
from clusterctl.plan.nodes import Seat
from clusterctl.spec.models import IpoibSpec, Spec

# opensm's range: 0 (default, lowest) .. 15 (highest).
MAX_SM_PRIORITY = 15


def opensm_placements(spec: Spec, seats: list[Seat]) -> list[OpenSmPlacement]:
    """The opensm hosts with their priority and port; empty unless the subnet manager is opensm.

    A host the plan does not have is left out (rule FAB007 reports it); a priority left unset
    is 15 for the first host listed, 14 for the second, and so on.
    """
    fabric = spec.fabric
    if fabric.subnet_manager != "opensm":
        return []
    by_name = {s.hostname: s for s in seats}
    out: list[OpenSmPlacement] = []
    for position, entry in enumerate(fabric.opensm_hosts):
        seat = by_name.get(entry.host)
        if seat is None:
            continue
        priority = entry.priority if entry.priority is not None else max(MAX_SM_PRIORITY - position, 0)
        port = entry.port or (seat.rails[0] if seat.rails else None)
        out.append(OpenSmPlacement(host=seat.hostname, priority=priority, port=port))
    return out


def ipoib_spec(spec: Spec) -> IpoibSpec | None:
    """The spec's IPoIB settings where they apply (an InfiniBand fabric), else None."""
    return spec.fabric.ipoib if spec.fabric.kind == "infiniband" else None


def ipoib_addresses(spec: Spec, seat: Seat) -> list[str]:
    """Rail i's IPoIB address (CIDR) in ``fabric.ipoib.networks[i]``; empty where IPoIB is off.

    Nodes without rails, emulated nodes and burst nodes get none.
    """
    ipoib = ipoib_spec(spec)
    if ipoib is None or not seat.rails or seat.emulated or seat.burst:
        return []
    offset = int(IPv4Address(seat.address)) - int(spec.network.management_cidr.network_address)
    return [
        f"{IPv4Address(int(net.network_address) + offset)}/{net.prefixlen}"
        for net in ipoib.networks[: len(seat.rails)]
        if offset < net.num_addresses - 1
    ]
