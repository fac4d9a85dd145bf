"""Uplinks and links: each discovered leaf's uplinks against the design (its real
oversubscription), switch ports down where the plan uses every port, and links of the
designed fabric below its rate or not Active (FAB-C005 to C008).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from clusterctl.fabric.cabling import DEGRADED_LINK, DOWN_PORT, EXTRA_UPLINKS, MISSING_UPLINKS, Cabling
from clusterctl.fabric.model import Link, degraded_links

# Logical port states that pass traffic; iblinkinfo prints "Active" (and the SM's "LinkUp" physically).
_ACTIVE_STATES = frozenset({"active"})
_DOWN_STATES = frozenset({"down", "polling", "disabled", "sleep"})


@dataclass(frozen=True)
class LeafReport:
    """One discovered leaf: what it carries and its real oversubscription.

    Attributes:
        switch: Its name.
        guid: Its GUID.
        planned: The planned leaf it was matched to, ``None`` when none.
        down: Cables to host CAs.
        up: Cables to other switches.
        planned_down: Host HCAs the plan puts on it (``None`` when unmatched).
        planned_up: Uplinks the plan gives it (``None`` when unmatched).
    """

    switch: str
    guid: str
    planned: str | None
    down: int
    up: int
    planned_down: int | None
    planned_up: int | None

    @property
    def oversubscription(self) -> float | None:
        """Down:up ratio as cabled (``None`` without uplinks)."""
        return self.down / self.up if self.up else None

    @property
    def ratio(self) -> str:
        """The ratio as text: ``1:1``, ``1.03:1``, ``no uplinks``."""
        ratio = self.oversubscription
        return f"{ratio:.3g}:1" if ratio is not None else "no uplinks"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        ratio = self.oversubscription
        return {
            "switch": self.switch,
            "guid": self.guid,
            "planned": self.planned,
            "down": self.down,
            "up": self.up,
            "planned_down": self.planned_down,
            "planned_up": self.planned_up,
            "oversubscription": round(ratio, 3) if ratio is not None else None,
        }


def check_uplinks(c: Cabling) -> tuple[LeafReport, ...]:
    """Each discovered leaf as cabled; a matched leaf with other uplinks than designed, or down ports."""
    switches = {s.guid for s in c.fabric.switches()}
    host_cas = {c.guid for c in c.fabric.cas()}
    ups: dict[str, list[tuple[int, str, int]]] = defaultdict(list)
    downs: Counter[str] = Counter()
    for link in c.fabric.links:
        if link.is_self_loop:
            continue
        for (end, port), (far, far_port) in (link.ends(), link.ends()[::-1]):
            if end in switches and far in switches:
                ups[end].append((port, far, far_port))
            elif end in switches and far in host_cas:
                downs[end] += 1
    planned_down = {leaf.name: len(leaf.hcas) for leaf in c.expected.leaves}
    reports = []
    for guid in sorted(downs, key=lambda g: (c.switch(g), g)):
        planned = c.leaf_of_switch.get(guid)
        reports.append(
            LeafReport(
                c.switch(guid),
                guid,
                planned,
                downs[guid],
                len(ups[guid]),
                planned_down[planned] if planned else None,
                c.expected.uplinks_per_leaf if planned else None,
            )
        )
    matched = [r for r in reports if r.planned]
    usual_ports, usual_per_peer = _usual_uplinks([ups[r.guid] for r in matched])
    for report in matched:
        _uplink_finding(c, report, ups[report.guid], usual_ports, usual_per_peer)
        _down_switch_ports(c, report)
    return tuple(reports)


def _uplink_finding(
    c: Cabling,
    report: LeafReport,
    ups: list[tuple[int, str, int]],
    usual_ports: set[int],
    usual_per_peer: dict[str, int],
) -> None:
    designed = c.expected.uplinks_per_leaf
    leaf = f"Leaf {report.switch}, planned as {c.leaf_role(report.planned or '')},"
    if report.up == designed:
        return
    per_peer = Counter(far for _, far, _ in ups)
    if report.up < designed:
        short = {p: n - per_peer[p] for p, n in usual_per_peer.items() if per_peer[p] < n}
        used = {
            port.number for port in (c.fabric.node(report.guid).ports) if port.connected and port.remote != report.guid
        }
        empty = sorted(usual_ports - used)
        detail = "; ".join(
            f"{n} fewer to {c.switch(p)} ({per_peer[p]} instead of {usual_per_peer[p]})"
            for p, n in sorted(short.items(), key=lambda item: c.switch(item[0]))
        )
        where: dict[str, Any] = {"switch": report.switch, "switch_guid": report.guid}
        if len(empty) == 1:
            where["port"] = empty[0]
        if len(short) == 1:
            (peer,) = short
            where.update(peer=c.switch(peer), peer_guid=peer)
        found = f"{report.up} uplinks for {report.down} host links: {report.ratio}"
        if detail:
            found += f" ({detail})"
        if empty:
            found += f"; port(s) {compress_ports(empty)} empty where the other leaves have uplinks"
        c.add(
            MISSING_UPLINKS,
            f"{leaf} has {designed - report.up} "
            f"uplink(s) fewer than designed, so it runs at {report.ratio} instead of "
            f"{c.expected.oversubscription:g}:1; cable the missing uplink(s).",
            f"{designed} uplinks ({c.expected.oversubscription:g}:1)",
            found,
            **where,
        )
        return
    extra = {p: per_peer[p] - usual_per_peer.get(p, 0) for p in per_peer if per_peer[p] > usual_per_peer.get(p, 0)}
    detail = "; ".join(
        f"{n} more to {c.switch(p)}" for p, n in sorted(extra.items(), key=lambda item: c.switch(item[0]))
    )
    c.add(
        EXTRA_UPLINKS,
        f"{leaf} has {report.up - designed} uplink(s) "
        "more than designed; a cable meant for another leaf or a host may be in this switch.",
        f"{designed} uplinks ({c.expected.oversubscription:g}:1)",
        f"{report.up} uplinks for {report.down} host links: {report.ratio}" + (f" ({detail})" if detail else ""),
        switch=report.switch,
        switch_guid=report.guid,
    )


def _down_switch_ports(c: Cabling, report: LeafReport) -> None:
    # Unused switch ports sit in Down/Polling too, so a Down port only proves a fault when
    # the leaf has no more Down ports than it lacks planned cables.
    node = c.fabric.node(report.guid)
    down = [p for p in node.ports if not p.connected and (p.state or "").lower() in _DOWN_STATES]
    wanted = (report.planned_down or 0) + (report.planned_up or 0)
    shortfall = wanted - report.down - report.up
    if not down or len(down) > shortfall:
        return
    for port in down:
        c.add(
            DOWN_PORT,
            f"Port {port.number} of leaf {report.switch} is {port.state}; the plan uses every port of this "
            "leaf, so a cable here is unplugged or failed.",
            "port Active",
            f"port {port.state}",
            switch=report.switch,
            switch_guid=report.guid,
            port=port.number,
        )


def _link_ends(c: Cabling, link: Link) -> dict[str, Any]:
    """Finding location for a link: host/HCA and switch end, or both switch ends (leaf first)."""
    by_ca = {(a.ca_guid, a.ca_port): a for a in c.hosts.attached}
    for end in link.ends():
        att = by_ca.get(end)
        if att is not None:
            host = c.resolve(att.host) or att.host
            return {
                "host": host,
                "hca": att.hca,
                "switch": c.switch(att.switch_guid),
                "switch_guid": att.switch_guid,
                "port": att.switch_port,
            }
    (a, a_port), (b, b_port) = link.ends()
    if b in c.leaf_of_switch and a not in c.leaf_of_switch:
        (a, a_port), (b, b_port) = (b, b_port), (a, a_port)
    return {
        "switch": c.switch(a),
        "switch_guid": a,
        "port": a_port,
        "peer": c.switch(b),
        "peer_guid": b,
        "peer_port": b_port,
    }


def check_links(c: Cabling) -> None:
    """Links of the designed fabric that trained below its rate, or are not Active."""
    switches = {s.guid for s in c.fabric.switches()}
    planned_cas = {a.ca_guid for atts in c.placed.values() for a in atts}
    # Links to hosts outside the plan (storage, UFM) may run slower by design; only the
    # designed fabric is held to fabric.speed_gbps.
    candidates = [
        link
        for link in c.fabric.links
        if not link.is_self_loop and all(end in switches or end in planned_cas for end, _ in link.ends())
    ]
    for link in degraded_links(c.fabric, c.expected.speed_gbps, links=candidates):
        nominal = link.nominal_gbps
        found = link.rate_label + (f" ({nominal:g} Gb/s)" if nominal is not None else " (rate unknown)")
        if link.note:
            found += f"; {link.note}"
        where = _link_ends(c, link)
        c.add(
            DEGRADED_LINK,
            "The link trained below the designed rate; reseat or replace the cable or transceiver "
            "(a width below 4x points to a bad lane).",
            c.expected.rate_label,
            found,
            **where,
        )
    for link in candidates:
        state = (link.state or "").strip()
        if state and state.lower() not in _ACTIVE_STATES:
            c.add(
                DOWN_PORT,
                f"The link is {state}, not Active, so it passes no traffic; check that a subnet manager "
                "runs and has swept the fabric.",
                "Active",
                state,
                **_link_ends(c, link),
            )


def _usual_uplinks(ups_per_leaf: list[list[tuple[int, str, int]]]) -> tuple[set[int], dict[str, int]]:
    """The uplink ports and per-spine cable counts most leaves share.

    Returns:
        Ports used as uplinks on more than half of the leaves, and for each spine the most
        common number of cables a leaf has to it (over the leaves cabled to it by majority).
    """
    if not ups_per_leaf:
        return set(), {}
    half = len(ups_per_leaf) / 2
    port_count: Counter[int] = Counter(port for ups in ups_per_leaf for port in {p for p, _, _ in ups})
    usual_ports = {port for port, n in port_count.items() if n > half}
    per_peer: dict[str, Counter[int]] = defaultdict(Counter)
    peers = {far for ups in ups_per_leaf for _, far, _ in ups}
    for ups in ups_per_leaf:
        cables = Counter(far for _, far, _ in ups)
        for peer in peers:
            per_peer[peer][cables.get(peer, 0)] += 1
    usual: dict[str, int] = {}
    for peer, tally in per_peer.items():
        # The most common count; on a tie the larger, so a leaf short of cables is the odd one out.
        value = min(tally, key=lambda n: (-tally[n], -n))
        if value:
            usual[peer] = value
    return usual_ports, usual


def compress_ports(ports: Iterable[int]) -> str:
    """``[33, 34, 35, 40]`` -> ``33-35,40``."""
    ordered = sorted(set(ports))
    runs: list[str] = []
    start = prev = None
    for port in [*ordered, None]:
        if port is not None and prev is not None and port == prev + 1:
            prev = port
            continue
        if start is not None:
            runs.append(f"{start}-{prev}" if prev != start else str(start))
        start = prev = port
    return ",".join(runs)
