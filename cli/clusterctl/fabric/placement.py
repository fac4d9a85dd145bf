"""Host HCAs on their leaves: each discovered HCA matched to the plan, each planned leaf to the
switch that carries most of its HCAs, then every HCA off its rail's or rack's leaf, every
planned host or HCA missing, and every HCA port not linked (FAB-C001 to C004, C008, C009).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from clusterctl.fabric.cabling import (
    DOWN_PORT,
    MISCABLED_RAIL,
    MISSING_NODE,
    TWO_LEAVES,
    UNKNOWN_HOST,
    UNMAPPED_HCA,
    Attachment,
    Cabling,
    ca_guids,
    hca_label,
)
from clusterctl.fabric.expected import ExpectedHca


def place_hcas(c: Cabling) -> None:
    """Match every host HCA on the fabric to a planned one; report unknown hosts and unmapped HCAs."""
    unknown: dict[str, list[Attachment]] = defaultdict(list)
    for att in c.hosts.attached:
        host = c.resolve(att.host)
        want = c.matcher.want(host, att.hca, c.guids(att)) if host else None
        why = c.matcher.unmapped(host, att.hca) if host and want is None else None
        if why:
            c.unmapped[host or att.host].append((att, why))
        elif want is None:
            unknown[host or att.host].append(att)
        else:
            c.placed[want].append(att)
    for host, atts in sorted(unknown.items()):
        _unknown(c, host, atts)
    for host, items in sorted(c.unmapped.items()):
        _unmapped(c, host, items)
    if c.hosts.nameless:
        c.add(
            UNKNOWN_HOST,
            f"{len(c.hosts.nameless)} CA(s) have no host name in their node description, so they "
            "cannot be matched to the plan. Set node descriptions with rdma-ndd or pass --host-pattern.",
            "host CAs described as '<host> <hca>'",
            ", ".join(c.hosts.nameless[:5]) + (" ..." if len(c.hosts.nameless) > 5 else ""),
        )


def _unmapped(c: Cabling, host: str, items: list[tuple[Attachment, str]]) -> None:
    rails = [w.hca or "any" for w in c.expected.hcas_of[host]]
    whys = list(dict.fromkeys(why for _, why in items))
    found = ", ".join(
        f"{a.hca or '(no HCA name)'} ({a.ca_guid}) on {c.switch(a.switch_guid)} port {a.switch_port}" for a, _ in items
    )
    where: dict[str, Any] = {"host": host}
    if len(items) == 1:
        ((att, _),) = items
        where.update(hca=att.hca, switch=c.switch(att.switch_guid), switch_guid=att.switch_guid)
        where["port"] = att.switch_port
    c.add(
        UNMAPPED_HCA,
        f"{len(items)} HCA(s) of {host} on the fabric could not be matched to its rails: {'; '.join(whys)}. "
        f"Its cabling is not checked; give the nodes' rail maps (clusterctl fabric check --from-nodes reads "
        f"each node's /etc/clusterctl/rdma-rails.conf and its RDMA devices' GUIDs; --node-rails DIR reads "
        f"saved copies).",
        f"the rails of {host} ({', '.join(rails)}) recognised by device name or GUID",
        found,
        **where,
    )


def _unknown(c: Cabling, host: str, atts: list[Attachment]) -> None:
    ports = ", ".join(f"{a.hca} on {c.switch(a.switch_guid)} port {a.switch_port}" for a in atts)
    where: dict[str, Any] = {"host": host}
    if len(atts) == 1:
        where.update(hca=atts[0].hca, switch=c.switch(atts[0].switch_guid), switch_guid=atts[0].switch_guid)
        where["port"] = atts[0].switch_port
    if host in c.expected.hcas_of:
        rails = ", ".join(h.hca or "any" for h in c.expected.hcas_of[host])
        message = (
            f"{host} has HCA(s) on the compute fabric that the plan does not cable to it (its fabric "
            f"HCAs are {rails}); move the cable to the fabric it belongs to, or add the HCA to the "
            "hardware profile's rails."
        )
        expected = f"only {rails} on this fabric"
    elif host in c.expected.other_hosts:
        message = (
            f"{host} is in the plan but not on the compute fabric by design; if it should be, "
            "give it a compute role, otherwise unplug it or ignore this warning."
        )
        expected = "not on the compute fabric"
    else:
        message = (
            f"{host} is not in the plan; storage servers and management hosts on the same fabric are "
            "expected to show up here, anything else is a cable in the wrong switch."
        )
        expected = "no such host in the plan"
    c.add(UNKNOWN_HOST, message, expected, ports, **where)


def match_leaves(c: Cabling) -> None:
    """Give each planned leaf the switch carrying most of its HCAs, one switch per leaf."""
    votes: Counter[tuple[str, str]] = Counter()
    for want, atts in c.placed.items():
        for att in atts:
            votes[(want.leaf, att.switch_guid)] += 1
    for (leaf, guid), _ in sorted(votes.items(), key=lambda item: (-item[1], item[0])):
        if leaf in c.match or guid in c.leaf_of_switch:
            continue
        c.match[leaf] = guid
        c.leaf_of_switch[guid] = leaf


def check_placement(c: Cabling) -> None:
    """Every placed HCA on its leaf: its rail's (rail-optimized) or one of its rack's (rack-leaf)."""
    rail_optimized = c.expected.layout == "rail-optimized"
    for want, atts in sorted(c.placed.items(), key=lambda item: (item[0].host, item[0].hca or "")):
        for att in atts:
            if rail_optimized:
                _check_rail(c, want, att)
            else:
                _check_rack(c, want, att)


def _check_rail(c: Cabling, want: ExpectedHca, att: Attachment) -> None:
    leaf_guid = c.match.get(want.leaf)
    if leaf_guid == att.switch_guid:
        return
    role = f"rail {want.rail} of {want.group}"
    if leaf_guid is None:
        expected = f"the leaf of {role} ({want.leaf}); no switch carries that rail"
    else:
        expected = f"switch {c.switch(leaf_guid)} ({leaf_guid}), the leaf of {role} ({want.leaf})"
    found = c.found_on(att)
    c.add(
        MISCABLED_RAIL,
        f"Rail {want.rail} HCA {hca_label(want, att.hca)} of {want.host} is not on the leaf shared by {role}; "
        f"move its cable to {c.switch(leaf_guid) if leaf_guid else 'that leaf'}.",
        expected,
        found,
        **c.where(att, want),
    )


def _check_rack(c: Cabling, want: ExpectedHca, att: Attachment) -> None:
    allowed = {c.match[name] for name in c.expected.groups[want.group] if name in c.match}
    if att.switch_guid in allowed:
        return
    rack_leaves = ", ".join(
        f"{c.switch(c.match[n])} ({n})" if n in c.match else f"{n} (not found)" for n in c.expected.groups[want.group]
    )
    others = sorted(
        {
            a.switch_guid
            for h in c.expected.hcas_of[want.host]
            for a in c.placed.get(h, [])
            if a.switch_guid != att.switch_guid
        }
    )
    if others:
        message = (
            f"{want.host} is on two leaves: {want.hca or att.hca} is on {c.switch(att.switch_guid)}, "
            f"its other HCAs on {', '.join(c.switch(g) for g in others)}; all of a node's HCAs belong "
            f"on the leaves of rack {want.group}. Move this cable."
        )
    else:
        message = (
            f"{want.host} is cabled to {c.switch(att.switch_guid)}, not to the leaves of its rack "
            f"{want.group}; move its cables or fix its rack in machines.csv."
        )
    c.add(
        TWO_LEAVES,
        message,
        f"a leaf of rack {want.group}: {rack_leaves}",
        c.found_on(att),
        **c.where(att, want),
    )


def check_missing(c: Cabling) -> None:
    """Planned hosts and HCAs not on the fabric, and HCA ports discovered but not linked."""
    for host in c.expected.hosts:
        wanted = c.expected.hcas_of[host]
        missing = [h for h in wanted if h not in c.placed]
        # HCAs that matched no rail are reported as unmapped; calling the rails missing would guess.
        if not missing or host in c.unmapped:
            continue
        down = [h for h in missing if _unlinked(c, h)]
        for want in down:
            _down_hca(c, want)
        absent = [h for h in missing if h not in down]
        if not absent:
            continue
        seen = sorted({a.hca for a in c.hosts.attached if c.resolve(a.host) == host})
        if len(absent) == len(wanted) and not down:
            c.add(
                MISSING_NODE,
                f"{host} is not on the fabric: none of its {len(wanted)} HCA(s) was discovered. Check that "
                "it is powered on and cabled, and that its node description names it.",
                f"{len(wanted)} HCA(s) ({', '.join(h.hca or 'any' for h in wanted)}) on "
                + ", ".join(sorted({c.expected_leaf(h) for h in wanted})),
                "no CA whose description names " + host,
                host=host,
            )
            continue
        for want in absent:
            leaf_guid = c.match.get(want.leaf)
            where: dict[str, Any] = {"host": host, "hca": want.hca}
            if leaf_guid:
                where.update(switch=c.switch(leaf_guid), switch_guid=leaf_guid)
            c.add(
                MISSING_NODE,
                f"HCA {want.hca} of {host} is not on the fabric; check its cable and that the HCA is up.",
                f"{want.label} on {c.expected_leaf(want)}",
                f"{host} has {', '.join(seen) if seen else 'no HCA'} on the fabric",
                **where,
            )


def _unlinked(c: Cabling, want: ExpectedHca) -> list[tuple[str, int, str | None]]:
    def same(hca: str, guid: str, number: int) -> bool:
        guids = ca_guids(c.fabric, guid, number)
        return want.hca is None or c.matcher.planned_name(want.host, hca, guids) == want.hca

    return [
        (guid, number, state)
        for (host, hca), ports in sorted(c.hosts.unlinked.items())
        if c.resolve(host) == want.host
        for guid, number, state in ports
        if same(hca, guid, number)
    ]


def _down_hca(c: Cabling, want: ExpectedHca) -> None:
    guid, port, state = _unlinked(c, want)[0]
    c.add(
        DOWN_PORT,
        f"Port {port} of {want.label} is discovered but not linked to a switch; reseat or replace "
        "the cable or transceiver.",
        f"port linked to {c.expected_leaf(want)}",
        f"CA {guid} port {port} {state or 'not linked'}",
        host=want.host,
        hca=want.hca,
    )
