"""The fabric model: speeds, GUIDs, descriptions, links and HCA attachments."""

from __future__ import annotations

import re

import pytest
from fabric_testkit import Cable, write_ibnetdiscover

from clusterctl.fabric.model import (
    SPEED_TABLE,
    SPEEDS,
    Link,
    degraded_links,
    lanes_from_width,
    make_link,
    normalize_guid,
    speed_from_text,
    split_description,
)
from clusterctl.fabric.parsers import parse_ibnetdiscover

# Marketing rates of a 4x link (IBTA roadmap), independent of the lane table in the code.
FOUR_LANE_NOMINAL = {
    "SDR": 10,
    "DDR": 20,
    "QDR": 40,
    "FDR10": 40,
    "FDR": 56,
    "EDR": 100,
    "HDR": 200,
    "NDR": 400,
    "XDR": 800,
}


@pytest.mark.parametrize(("name", "gbps"), sorted(FOUR_LANE_NOMINAL.items()))
def test_four_lane_nominal_rates(name: str, gbps: int) -> None:
    link = Link("0x1", 1, "0x2", 1, "4x", name)
    assert link.nominal_gbps == gbps
    assert link.total_gbps == pytest.approx(4 * SPEEDS[name].lane_gbps)


def test_speed_table_is_ordered_and_complete() -> None:
    assert [s.name for s in SPEED_TABLE] == list(FOUR_LANE_NOMINAL)
    rates = [s.lane_gbps for s in SPEED_TABLE]
    assert rates == sorted(rates)


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("EDR", "EDR"),
        ("edr", "EDR"),
        ("FDR10", "FDR10"),
        ("25.78125 Gbps", "EDR"),  # iblinkinfo signalling rate
        ("25.0 Gbps", "EDR"),  # ibv_devinfo nominal rate
        ("53.125", "HDR"),
        ("50.0 Gb/s", "HDR"),
        ("106.25 Gbps", "NDR"),
        ("10.0 Gbps", "QDR"),
        ("10.3125 Gbps", "FDR10"),
        ("2.5 Gbps", "SDR"),
        ("212.5", "XDR"),
        ("???", None),
        ("undefined", None),
        ("", None),
        ("fast", None),
    ],
)
def test_speed_from_text(text: str, name: str | None) -> None:
    found = speed_from_text(text)
    assert (found.name if found else None) == name


@pytest.mark.parametrize(("width", "lanes"), [("4x", 4), ("4X", 4), ("12x", 12), ("1x", 1), ("??", None), (None, None)])
def test_lanes_from_width(width: str | None, lanes: int | None) -> None:
    assert lanes_from_width(width) == lanes


@pytest.mark.parametrize("text", ["0x08c0eb0300add04e", "8c0eb0300add04e", "0x8C0EB0300ADD04E", " 08c0eb0300add04e "])
def test_normalize_guid(text: str) -> None:
    assert normalize_guid(text) == "0x08c0eb0300add04e"


@pytest.mark.parametrize("text", ["", "0x", "zz", "0x1234567890abcdef0"])
def test_normalize_guid_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="not a hexadecimal GUID"):
        normalize_guid(text)


@pytest.mark.parametrize(
    ("description", "pattern", "expected"),
    [
        ("node018 HCA-1", None, ("node018", "HCA-1")),
        ("  controller mlx5_0 ", None, ("controller", "mlx5_0")),
        ("node5", None, ("node5", "")),
        ("MT23108 InfiniHost Mellanox Technologies", None, None),
        ("", None, None),
        ("gpu001.cluster.local mlx5_3", r"^(?P<host>[^.\s]+)", ("gpu001", "mlx5_3")),
        ("rack1/gpu002/port mlx5_1", r"/(?P<host>gpu\d+)/\S*\s(?P<hca>\S+)", ("gpu002", "mlx5_1")),
        ("switch-internal", r"^(?P<host>gpu\d+)", None),
    ],
)
def test_split_description(description: str, pattern: str | None, expected: tuple[str, str] | None) -> None:
    assert split_description(description, pattern) == expected


def test_split_description_needs_host_group() -> None:
    with pytest.raises(ValueError, match="named group 'host'"):
        split_description("node1 mlx5_0", re.compile(r"^\S+"))


def test_link_ends_and_canonical_order() -> None:
    link = make_link(("0x2", 7), ("0x1", 3), "4x", "HDR")
    assert (link.a, link.a_port, link.b, link.b_port) == ("0x1", 3, "0x2", 7)
    assert link.other_end("0x2") == ("0x1", 3)
    assert link.other_end("0x1", 3) == ("0x2", 7)
    with pytest.raises(ValueError, match="does not end at"):
        link.other_end("0x3")
    loop = make_link(("0x1", 4), ("0x1", 2), "4x", "EDR")
    assert loop.is_self_loop
    assert (loop.a_port, loop.b_port) == (2, 4)
    unknown = Link("0x1", 1, "0x2", 1, None, None)
    assert (unknown.lanes, unknown.lane_gbps, unknown.total_gbps, unknown.nominal_gbps) == (None, None, None, None)
    assert unknown.rate_label == "?????"


def _dual_port_fabric() -> str:
    switches = {"aa01": "leaf-a", "aa02": "leaf-b"}
    cas = {
        "c001": "gpu1 mlx5_0",
        "c002": "gpu1 mlx5_0",
        "c003": "gpu2 mlx5_0",
        "c004": "MT4129 ConnectX7 Mellanox Technologies",
    }
    cables = [
        Cable("aa01", 1, "c001", 1, "4xNDR"),
        Cable("aa02", 1, "c001", 2, "4xNDR"),
        Cable("aa01", 2, "c002", 1, "4xHDR"),
        Cable("aa01", 3, "c003", 1, "4xNDR"),
        Cable("aa02", 3, "c004", 1, "4xNDR"),
        Cable("aa01", 40, "aa02", 40, "4xNDR"),
    ]
    return write_ibnetdiscover(switches, cas, cables)


def test_hca_attachments_disambiguates_ports_and_duplicates() -> None:
    fabric = parse_ibnetdiscover(_dual_port_fabric())
    attachments = fabric.hca_attachments()
    leaf_a, leaf_b = normalize_guid("aa01"), normalize_guid("aa02")
    # gpu1 mlx5_0 names two CAs (c001 dual-port, c002): ports repeat, so GUIDs are added.
    assert set(attachments) == {
        ("gpu1", f"mlx5_0@{normalize_guid('c001')}/p1"),
        ("gpu1", f"mlx5_0@{normalize_guid('c002')}/p1"),
        ("gpu1", "mlx5_0/p2"),
        ("gpu2", "mlx5_0"),
    }
    assert attachments[("gpu1", "mlx5_0/p2")][:2] == (leaf_b, 1)
    assert attachments[("gpu2", "mlx5_0")][:2] == (leaf_a, 3)
    # The vendor-default description names no host and is left out; switch links are not HCAs.
    assert all(host in {"gpu1", "gpu2"} for host, _ in attachments)


def test_fabric_helpers() -> None:
    fabric = parse_ibnetdiscover(_dual_port_fabric())
    leaf_a = normalize_guid("aa01")
    assert [n.description for n in fabric.switches()] == ["leaf-a", "leaf-b"]
    assert len(fabric.cas()) == 4
    assert fabric.neighbours(leaf_a) == sorted(normalize_guid(g) for g in ("aa02", "c001", "c002", "c003"))
    assert len(fabric.links_of(leaf_a)) == 4
    isl = fabric.link_at(leaf_a, 40)
    assert isl is not None
    assert isl.other_end(leaf_a) == (normalize_guid("aa02"), 40)
    assert fabric.link_at(leaf_a, 39) is None
    assert fabric.describe("0xnothing") == "0xnothing"
    slow = degraded_links(fabric, 400)
    assert [link.speed for link in slow] == ["HDR"]
    switch_links = [link for link in fabric.links if fabric.node(link.a).kind == fabric.node(link.b).kind == "switch"]
    assert degraded_links(fabric, 400, links=switch_links) == []


def test_switch_links_of_a_dual_port_ca() -> None:
    fabric = parse_ibnetdiscover(_dual_port_fabric())
    found = [(port, far, far_port) for port, far, far_port, _ in fabric.switch_links(normalize_guid("c001"))]
    assert sorted(found) == [(1, normalize_guid("aa01"), 1), (2, normalize_guid("aa02"), 1)]
    # The inter-switch link is a switch's, and a node without links has none.
    assert [port for port, *_ in fabric.switch_links(normalize_guid("aa01"))] == [40]
    assert fabric.switch_links("0xnothing") == []
