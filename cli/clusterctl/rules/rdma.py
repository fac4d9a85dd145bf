"""Rules for the on-prem RDMA fabric: where the subnet manager runs, and IPoIB on the rails.

Sources: linux-rdma/opensm ``man/opensm.8.in`` (``-p``: priority 0..15, the master is chosen by
priority then GUID; ``-g``: one port GUID per opensm), the Debian package's ``opensm@.service``
(one opensm per port GUID in ``/etc/default/opensm`` PORTS).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from ipaddress import IPv4Address

from clusterctl.plan.rdma import MAX_SM_PRIORITY
from clusterctl.rules.engine import RuleContext, rule
from clusterctl.spec.findings import Finding, Level


def _priorities(ctx: RuleContext) -> list[int]:
    """Each opensm host's priority as the plan will give it (unset: 15 for the first, then down)."""
    return [
        h.priority if h.priority is not None else max(MAX_SM_PRIORITY - i, 0)
        for i, h in enumerate(ctx.spec.fabric.opensm_hosts)
    ]


@rule("FAB006", "subnet-manager-placement", Level.ERROR, phase=1)
def subnet_manager_placement(ctx: RuleContext) -> Iterator[Finding]:
    """opensm runs on the named hosts of an InfiniBand fabric only, with distinct priorities."""
    fabric = ctx.spec.fabric
    hosts = fabric.opensm_hosts
    if fabric.subnet_manager != "opensm":
        if hosts:
            yield subnet_manager_placement.finding(
                ("fabric", "opensm_hosts"),
                f"`opensm_hosts` is set but the subnet manager is `{fabric.subnet_manager}`: nothing would run there.",
                "Remove `opensm_hosts`, or set `subnet_manager: opensm`.",
            )
        return
    if fabric.kind != "infiniband":
        yield subnet_manager_placement.finding(
            ("fabric", "subnet_manager"),
            f"opensm manages InfiniBand subnets; a {fabric.kind} fabric has no subnet manager.",
            "Set `subnet_manager: switch` (nothing runs on the nodes).",
        )
        return
    if not hosts:
        yield subnet_manager_placement.finding(
            ("fabric", "opensm_hosts"),
            "`subnet_manager: opensm` names no host to run it: opensm runs only on the hosts in `opensm_hosts`, "
            "never on every node.",
            "List two hosts with an InfiniBand port, e.g. `opensm_hosts: [{host: ctl001, priority: 15}, "
            "{host: ctl002, priority: 14}]`, or use `switch`/`ufm`.",
        )
        return
    for name, count in Counter(h.host for h in hosts).items():
        if count > 1:
            index = next(i for i, h in enumerate(hosts) if h.host == name)
            yield subnet_manager_placement.finding(
                ("fabric", "opensm_hosts", index, "host"),
                f"Host `{name}` is listed {count} times in `opensm_hosts`.",
                "List each host once.",
            )
    priorities = _priorities(ctx)
    for value, count in Counter(priorities).items():
        if count > 1:
            index = [i for i, p in enumerate(priorities) if p == value][1]
            yield subnet_manager_placement.finding(
                ("fabric", "opensm_hosts", index, "priority"),
                f"{count} opensm hosts have priority {value}: opensm then elects the master by GUID, not by the "
                "order you meant.",
                "Give each host its own priority (0..15; the highest is master).",
            )
    if len(hosts) == 1:
        yield subnet_manager_placement.finding(
            ("fabric", "opensm_hosts"),
            f"Only `{hosts[0].host}` runs opensm: when it goes down the subnet has no SM and no standby takes over.",
            "Add a second host with a lower priority.",
            level=Level.WARNING,
        )


@rule("FAB007", "opensm-hosts-exist", Level.ERROR)
def opensm_hosts_exist(ctx: RuleContext) -> Iterator[Finding]:
    """Every opensm host is a node of the plan with an InfiniBand port to bind to."""
    fabric = ctx.spec.fabric
    if fabric.subnet_manager != "opensm" or fabric.kind != "infiniband":
        return
    nodes = {n.hostname: n for n in ctx.require_plan().nodes}
    for i, entry in enumerate(fabric.opensm_hosts):
        node = nodes.get(entry.host)
        if node is None:
            known = ", ".join(sorted(nodes)[:8])
            yield opensm_hosts_exist.finding(
                ("fabric", "opensm_hosts", i, "host"),
                f"opensm host `{entry.host}` is not a node of this cluster.",
                f"Use a planned hostname, e.g. {known}.",
            )
        elif node.burst:
            yield opensm_hosts_exist.finding(
                ("fabric", "opensm_hosts", i, "host"),
                f"opensm host `{entry.host}` is a burst node: it is powered off when idle, and the subnet with it.",
                "Run opensm on a static node.",
            )
        elif entry.port is None and not node.rails:
            yield opensm_hosts_exist.finding(
                ("fabric", "opensm_hosts", i, "port"),
                f"opensm host `{entry.host}` (hardware `{node.hardware}`) has no rails, so no InfiniBand port to bind "
                "opensm to.",
                "Name its fabric HCA in `port` (PCI address such as 0000:17:00.0, or RDMA device name).",
            )


@rule("FAB008", "ipoib-networks", Level.ERROR)
def ipoib_networks(ctx: RuleContext) -> Iterator[Finding]:
    """IPoIB networks are on InfiniBand, one per rail, disjoint, and hold every node's offset."""
    fabric = ctx.spec.fabric
    ipoib = fabric.ipoib
    if ipoib is None:
        return
    if fabric.kind != "infiniband":
        yield ipoib_networks.finding(
            ("fabric", "ipoib"),
            f"IPoIB needs an InfiniBand fabric; this one is {fabric.kind}.",
            "Remove `fabric.ipoib`.",
        )
        return
    plan = ctx.require_plan()
    most_rails = max((len(n.rails) for n in plan.nodes), default=0)
    if len(ipoib.networks) > most_rails:
        yield ipoib_networks.finding(
            ("fabric", "ipoib", "networks"),
            f"{len(ipoib.networks)} IPoIB networks but no node has more than {most_rails} rail(s).",
            "List one network per rail, rail 0 first.",
        )
    management = ctx.spec.network.management_cidr
    base = int(management.network_address)
    offsets = [int(IPv4Address(n.address)) - base for n in plan.nodes if n.rails and not n.emulated and not n.burst]
    top = max(offsets, default=0)
    for i, net in enumerate(ipoib.networks):
        if net.overlaps(management):
            yield ipoib_networks.finding(
                ("fabric", "ipoib", "networks", i),
                f"IPoIB network {net} overlaps the management network {management}.",
                "Use a separate network for each rail.",
            )
        for j, other in enumerate(ipoib.networks[:i]):
            if net.overlaps(other):
                yield ipoib_networks.finding(
                    ("fabric", "ipoib", "networks", i),
                    f"IPoIB network {net} (rail {i}) overlaps {other} (rail {j}).",
                    "Give each rail its own network: the same subnet on two rails answers ARP on the wrong port.",
                )
        if top >= net.num_addresses - 1:
            yield ipoib_networks.finding(
                ("fabric", "ipoib", "networks", i),
                f"IPoIB network {net} is too small: nodes keep their management offset (up to {top}) on every rail.",
                f"Use a /{management.prefixlen} or larger network.",
            )
