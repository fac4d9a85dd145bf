"""Parsers on every real InfiniBand fixture, plus hand-written edge cases."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from clusterctl.fabric.model import degraded_links, normalize_guid
from clusterctl.fabric.parsers import (
    FabricParseError,
    detect_format,
    parse_fabric,
    parse_iblinkinfo,
    parse_ibnetdiscover,
)

IB = "infiniband"
EDR = "ibnetdiscover_edr_fattree_6sw.txt"

# Every file in fixtures/infiniband and the format it is in (None: not a fabric dump).
FIXTURE_FORMATS = {
    "iblinkinfo_ibswitches_ibhosts_hdr_2sw.txt": "iblinkinfo",
    "ibnetdiscover_edr_fattree_6sw.txt": "ibnetdiscover",
    "ibnetdiscover_ibtopotool_1.topo": "ibnetdiscover",
    "ibnetdiscover_ibtopotool_2.topo": "ibnetdiscover",
    "ibnetdiscover_ibtopotool_3.topo": "ibnetdiscover",
    "ibnetdiscover_ibtopotool_4.topo": "ibnetdiscover",
    "ibnetdiscover_p_infiniband_exporter_test.out": "ibnetdiscover-p",
    "ibnetdiscover_p_infiniband_exporter_test2.out": "ibnetdiscover-p",
    "ibnetdiscover_p_infiniband_exporter_test3.out": "ibnetdiscover-p",
    "perfquery_x_switch_0x7cfe9003009ce5b0_infiniband_exporter.out": None,
}

_PLAIN_ID_RE = re.compile(r'"(?P<kind>[SH])-(?P<hex>[0-9a-fA-F]+)"')
_PLAIN_PORT_RE = re.compile(r'^\[(\d+)\]\S*\s+"[SH]-([0-9a-fA-F]+)"\[(\d+)\]')


def _read(fixtures_dir: Path, name: str) -> str:
    return (fixtures_dir / IB / name).read_text()


def _plain_counts(text: str) -> tuple[set[str], set[str], set[frozenset[tuple[str, int]]]]:
    """Switch GUIDs, CA GUIDs and cables read straight from plain ibnetdiscover text."""
    switches: set[str] = set()
    cas: set[str] = set()
    cables: set[frozenset[tuple[str, int]]] = set()
    current = ""
    for line in text.splitlines():
        line = line.strip()
        header = re.match(r'^(Switch|Ca)\s+\d+\s+"[SH]-([0-9a-fA-F]+)"', line)
        if header:
            current = normalize_guid(header[2])
        for ident in _PLAIN_ID_RE.finditer(line):
            (switches if ident["kind"] == "S" else cas).add(normalize_guid(ident["hex"]))
        port = _PLAIN_PORT_RE.match(line)
        if port:
            cables.add(frozenset({(current, int(port[1])), (normalize_guid(port[2]), int(port[3]))}))
    return switches, cas, cables


def test_every_infiniband_fixture_is_covered(fixtures_dir: Path) -> None:
    assert {p.name for p in (fixtures_dir / IB).iterdir()} == set(FIXTURE_FORMATS)


@pytest.mark.parametrize("name", sorted(FIXTURE_FORMATS))
def test_fixture_parses_or_is_rejected(fixtures_dir: Path, name: str) -> None:
    text = _read(fixtures_dir, name)
    expected = FIXTURE_FORMATS[name]
    if expected is None:
        with pytest.raises(FabricParseError) as err:
            parse_fabric(text)
        assert err.value.line_no > 0
        assert err.value.line.strip() in text
        return
    assert detect_format(text) == expected
    fabric = parse_fabric(text)
    assert fabric.source == expected
    assert fabric.nodes
    for link in fabric.links:
        assert link.a in fabric.nodes
        assert link.b in fabric.nodes
        assert fabric.nodes[link.a].port(link.a_port).remote == link.b  # type: ignore[union-attr]
        assert fabric.nodes[link.b].port(link.b_port).remote == link.a  # type: ignore[union-attr]
    # No end of any cable appears twice.
    ends = [end for link in fabric.links for end in link.ends()]
    assert len(ends) == len(set(ends))


@pytest.mark.parametrize("name", [n for n, f in sorted(FIXTURE_FORMATS.items()) if f == "ibnetdiscover"])
def test_plain_fixture_counts_match_the_raw_text(fixtures_dir: Path, name: str) -> None:
    text = _read(fixtures_dir, name)
    switches, cas, cables = _plain_counts(text)
    fabric = parse_ibnetdiscover(text)
    assert {n.guid for n in fabric.switches()} == switches
    assert {n.guid for n in fabric.cas(include_aggregation=True)} == cas
    assert {frozenset(link.ends()) for link in fabric.links} == cables


def test_edr_fat_tree_shape(fixtures_dir: Path) -> None:
    text = _read(fixtures_dir, EDR)
    fabric = parse_ibnetdiscover(text)
    switches = fabric.switches()
    assert len(switches) == 6
    assert len(fabric.cas()) == 96 == len(re.findall(r"^Ca\s", text, re.MULTILINE))
    with_hosts = {s.guid for s in switches if any(fabric.node(n).kind == "ca" for n in fabric.neighbours(s.guid))}
    spines = {s.guid for s in switches} - with_hosts
    assert len(with_hosts) == 4
    assert len(spines) == 2
    assert {g[-6:] for g in with_hosts} == {"ec8240", "ec8480", "f548e0", "f548c0"}
    assert {g[-6:] for g in spines} == {"ec81e0", "ec8200"}
    for leaf in with_hosts:
        for spine in spines:
            between = [link for link in fabric.links_of(leaf) if spine in (link.a, link.b)]
            assert len(between) == 6, (leaf, spine)
    # Every host CA hangs off a leaf, none off a spine.
    for ca in fabric.cas():
        assert set(fabric.neighbours(ca.guid)) <= with_hosts


def test_edr_exactly_one_degraded_link(fixtures_dir: Path) -> None:
    fabric = parse_ibnetdiscover(_read(fixtures_dir, EDR))
    assert {link.rate_label for link in fabric.links} == {"4xEDR", "4xDDR"}
    assert {link.nominal_gbps for link in fabric.links} == {100.0, 20.0}
    degraded = degraded_links(fabric, 100)
    assert len(degraded) == 1
    link = degraded[0]
    assert link.rate_label == "4xDDR"
    assert {(end[-6:], port) for end, port in link.ends()} == {("ec8480", 11), ("ec8200", 11)}
    assert link.nominal_gbps == 20.0
    assert degraded_links(fabric, 20) == []


def test_edr_hca_attachments(fixtures_dir: Path) -> None:
    text = _read(fixtures_dir, EDR)
    fabric = parse_ibnetdiscover(text)
    attachments = fabric.hca_attachments()
    assert len(attachments) == 96
    # Read node018's cabling straight from the leaf's port line.
    line = next(raw for raw in text.splitlines() if '"node018 HCA-1"' in raw and raw.startswith("["))
    port = int(re.match(r"^\[(\d+)\]", line)[1])  # type: ignore[index]
    leaf_guid = next(
        s.guid
        for s in fabric.switches()
        if fabric.node(s.guid).port(port)
        and any(fabric.node(n).description == "node018 HCA-1" for n in fabric.neighbours(s.guid))
    )
    found = attachments[("node018", "HCA-1")]
    assert found.switch_guid == leaf_guid
    assert found.switch_port == port
    assert found.link.nominal_gbps == 100.0
    assert attachments[("controller", "mlx5_0")].switch_guid in {s.guid for s in fabric.switches()}


def test_ibtopotool_1_reconciles_asymmetric_reports(fixtures_dir: Path) -> None:
    # The man-page example reports some cables as 4xSDR from one end and 1xSDR from the other.
    fabric = parse_ibnetdiscover(_read(fixtures_dir, "ibnetdiscover_ibtopotool_1.topo"))
    assert len(fabric.switches()) == 2
    narrow = [link for link in fabric.links if link.width == "1x"]
    assert len(narrow) == 2
    assert all("report 4xSDR and 1xSDR" in note or "report 1xSDR and 4xSDR" in note for note in fabric.notes)
    assert len(fabric.notes) == 2
    # The dual-port CA keeps both ports, each with its own port GUID and lmc-1 LID.
    dual = fabric.node(normalize_guid("0008f10403960558"))
    assert [p.number for p in dual.ports] == [1, 2]
    assert [p.guid for p in dual.ports] == [normalize_guid("8f10403960559"), normalize_guid("8f1040396055a")]
    assert [p.lid for p in dual.ports] == [10, 14]
    assert fabric.describe(dual.guid).startswith("'MT23108 InfiniHost")


def test_ibtopotool_3_noise_self_loops_and_mixed_speeds(fixtures_dir: Path) -> None:
    text = _read(fixtures_dir, "ibnetdiscover_ibtopotool_3.topo")
    fabric = parse_ibnetdiscover(text)
    assert any("umad" in note for note in fabric.notes)
    loops = [link for link in fabric.links if link.is_self_loop]
    assert {(link.a_port, link.b_port) for link in loops} == {(1, 2), (19, 21), (29, 30)}
    switch = loops[0].a
    assert switch not in fabric.neighbours(switch)
    assert {link.speed for link in fabric.links} == {"EDR", "FDR", "QDR", "SDR"}
    managed = next(s for s in fabric.switches() if s.description.startswith("MF0;"))
    assert managed.port_count == 12
    assert managed.lid == 174


def test_ibtopotool_4_trailing_space_line(fixtures_dir: Path) -> None:
    fabric = parse_ibnetdiscover(_read(fixtures_dir, "ibnetdiscover_ibtopotool_4.topo"))
    (link,) = fabric.links
    assert link.rate_label == "4xQDR"
    assert link.nominal_gbps == 40.0
    ((switch, switch_port),) = [end for end in link.ends() if fabric.node(end[0]).kind == "switch"]
    assert (switch_port, fabric.node(switch).description) == (23, "Sun DCS 36 QDR switch localhost")
    assert fabric.hca_attachments() == {("nsn33-43", "HCA-1"): (switch, switch_port, link)}


def test_ports_report_test_out(fixtures_dir: Path) -> None:
    fabric = parse_ibnetdiscover(_read(fixtures_dir, "ibnetdiscover_p_infiniband_exporter_test.out"))
    names = {n.description for n in fabric.switches()}
    assert names == {"ib-i1l1s01", "ib-i1l2s01", "ib-i4l1s01", "ib-i7l2s01"}
    # Unconnected ports (4x ??? and 4x SDR) are ports, not links.
    unknown = fabric.node(normalize_guid("0x506b4b03005c2740")).port(37)
    assert unknown is not None
    assert not unknown.connected
    lonely = next(s for s in fabric.switches() if s.description == "ib-i7l2s01")
    assert fabric.links_of(lonely.guid) == []
    assert [p.number for p in lonely.ports] == [80]
    assert len(fabric.links) == 4
    assert {link.rate_label for link in fabric.links} == {"4xEDR"}
    attachments = fabric.hca_attachments()
    assert attachments[("o0001", "HCA-1")].switch_port == 10
    assert attachments[("p0001", "HCA-1")].switch_port == 35


def test_ports_report_padding_and_aggregation_nodes(fixtures_dir: Path) -> None:
    fabric = parse_ibnetdiscover(_read(fixtures_dir, "ibnetdiscover_p_infiniband_exporter_test2.out"))
    descriptions = {n.description for n in fabric.switches()}
    assert {"5FB0405-leaf-IB01", "5FB0406-spine-IB02", "5FB0406-spine-IB03"} <= descriptions
    aggregation = [n for n in fabric.nodes.values() if n.kind == "aggregation"]
    assert [n.description for n in aggregation] == ["Mellanox Technologies Aggregation Node"]
    assert [n.description for n in fabric.cas()] == ["worker20 mlx5_3"]
    # The fixture cables the aggregation node's one port to two switches; the first report wins.
    assert any("reported cabled to both" in note for note in fabric.notes)
    assert len(fabric.links_of(aggregation[0].guid)) == 1


def test_ports_report_unquoted_description(fixtures_dir: Path) -> None:
    fabric = parse_ibnetdiscover(_read(fixtures_dir, "ibnetdiscover_p_infiniband_exporter_test3.out"))
    (node,) = fabric.nodes.values()
    assert node.description == "Infiniscale-IV Mellanox Technologies"
    assert node.kind == "switch"


def test_iblinkinfo_fixture(fixtures_dir: Path) -> None:
    text = _read(fixtures_dir, "iblinkinfo_ibswitches_ibhosts_hdr_2sw.txt")
    fabric = parse_iblinkinfo(text)
    listed_cas = re.findall(r'^Ca\s*:\s*(0x[0-9a-f]+) ports \d+ "([^"]*)"', text, re.MULTILINE)
    assert {normalize_guid(g) for g, _ in listed_cas} <= set(fabric.nodes)
    assert len(fabric.switches()) == len(re.findall(r"^Switch\s*:\s*0x[0-9a-f]+ ports", text, re.MULTILINE))
    up = re.findall(r"Active/\s*LinkUp\)==>\s+\d+\s+\d+\[\s*\]\s+\"([^\"]*)\"", text)
    assert len(fabric.links) == len(up)
    hosts = fabric.hca_attachments()
    # node1..node4 HCA-2 are cabled to the Quantum switch at EDR speed on HDR-capable ports.
    for host in ("node1", "node2", "node3", "node4"):
        link = hosts[(host, "HCA-2")].link
        assert link.rate_label == "4xEDR"
        assert link.state == "Active"
        assert link.note == "Could be 53.125 Gbps"
        assert link.lane_gbps == 25.78125
    # Switch-to-switch cable resolved to the MQM8700 by its ibswitches LID.
    managed = next(s for s in fabric.switches() if s.description.startswith("MF0;"))
    assert managed.guid == normalize_guid("0x08c0eb0300f6fc26")
    (isl,) = [link for link in fabric.links if managed.guid in (link.a, link.b)]
    assert isl.rate_label == "4xHDR"
    assert isl.nominal_gbps == 200.0
    # Two aggregation nodes share one description; the cabled one cannot be told apart.
    assert any("lid:23" in note for note in fabric.notes)
    assert fabric.node("lid:23").kind == "aggregation"
    assert len(degraded_links(fabric, 200)) == 4


# --- hand-written edge cases -------------------------------------------------------------

PLAIN_EDGE = """\
ibwarn: [1234] _do_madrpc: recv failed: Connection timed out
#
# Topology file: generated on a test
Non-Chassis Nodes

vendid=0x2c9
switchguid=0x0000aa0000000001(aa0000000001)
Switch\t36 "S-0000aa0000000001"\t\t# "leaf01 with spaces " enhanced port 0 lid 5 lmc 0   \n\
[1]\t"H-0000cc0000000001"[1](cc0000000001) \t\t# "host-a mlx5_0" lid 7 4xNDR s=4 w=2
[2]\t"H-0000cc0000000002"[1](cc0000000002) \t\t# "host-b mlx5_0" lid 8 4x???
[3]\t"S-0000aa0000000001"[4]\t\t# "leaf01 with spaces " lid 5 2xHDR
[4]\t"S-0000aa0000000001"[3]\t\t# "leaf01 with spaces " lid 5 2xHDR

src/query_smp.c:195; umad (DR path slid 0; dlid 0; 0,1,31 Attr 0x11:0) bad status 110; Connection timed out
caguid=0x0000cc0000000001
Ca\t1 "H-0000cc0000000001"\t\t# "host-a mlx5_0"
[1](cc0000000001) \t"S-0000aa0000000001"[1]\t\t# lid 7 lmc 2 "leaf01 with spaces " lid 5 4xNDR
"""


def test_plain_edge_cases() -> None:
    fabric = parse_ibnetdiscover(PLAIN_EDGE)
    leaf = fabric.node(normalize_guid("aa0000000001"))
    assert leaf.description == "leaf01 with spaces"
    assert leaf.lid == 5
    # host-b has no section of its own; its remote reference still makes it a CA.
    host_b = fabric.node(normalize_guid("cc0000000002"))
    assert host_b.kind == "ca"
    assert host_b.description == "host-b mlx5_0"
    rates = {fabric.describe(link.b if link.a == leaf.guid else link.a): link for link in fabric.links}
    assert rates["'host-a mlx5_0' (0x0000cc0000000001)"].nominal_gbps == 400.0
    unknown = rates["'host-b mlx5_0' (0x0000cc0000000002)"]
    assert unknown.speed is None
    assert unknown.width == "4x"
    assert unknown.rate_label == "4x???"
    (loop,) = [link for link in fabric.links if link.is_self_loop]
    assert loop.nominal_gbps == 100.0  # 2x HDR, "HDR100"
    assert len(fabric.notes) == 2
    assert {link.nominal_gbps for link in degraded_links(fabric, 400)} == {None, 100.0}


@pytest.mark.parametrize(
    ("text", "line_no", "fragment"),
    [
        ('Switch 36 "S-0000aa0000000001" # "x" lid 1\nhello world\n', 2, "not part of ibnetdiscover"),
        ('[1]\t"S-0000aa0000000001"[2]\t# "x" lid 1 4xEDR\n', 1, "before any Switch or Ca"),
        ("just some text\n", 1, "not ibnetdiscover"),
        ("\n\n#only a comment\n", 0, "no ibnetdiscover"),
        ('Switch 36 "S-0000aa0000000001" # "x" lid 1\n[1]\t"Q-12"[2]\t# "x" lid 1 4xEDR\n', 2, "is not S-, H- or R-"),
    ],
)
def test_plain_errors(text: str, line_no: int, fragment: str) -> None:
    with pytest.raises(FabricParseError) as err:
        parse_ibnetdiscover(text)
    assert err.value.line_no == line_no
    assert fragment in err.value.message


def test_ports_report_error_line() -> None:
    text = "SW  1 1 0x0000aa0000000001 4x EDR 'a'\nnot a port line\n"
    with pytest.raises(FabricParseError) as err:
        parse_ibnetdiscover(text)
    assert (err.value.line_no, err.value.line) == (2, "not a port line")


def test_parse_ibnetdiscover_points_iblinkinfo_elsewhere() -> None:
    text = 'Switch: 0x0000aa0000000001 leaf01:\n  1  1[  ] ==(  Down/ Polling)==>  [  ] "" ( )\n'
    with pytest.raises(FabricParseError, match="parse_iblinkinfo"):
        parse_ibnetdiscover(text)
    assert parse_fabric(text).source == "iblinkinfo"


_LEAF = '0x0000aa0000000001 "                        leaf01"      5'
LINE_MODE = "\n".join(
    [
        f"{_LEAF}    1[  ] ==( 4X       106.25 Gbps Active/  LinkUp)==>  0x0000cc0000000001      7    1[  ] "
        '"host-a mlx5_0" ( )',
        f"{_LEAF}    2[  ] ==( 4X       53.125 Gbps Active/  LinkUp)==>  0x0000cc0000000002      8    1[  ] "
        '"host-b mlx5_0" ( Could be 106.25 Gbps)',
        f'{_LEAF}    3[  ] ==(                Down/ Polling)==>             [  ] "" ( )',
        f"{_LEAF}   33[  ] ==( 4X       106.25 Gbps Initialize/  LinkUp)==>  0x0000bb0000000001      9   17[  ] "
        '"spine01" ( )',
    ]
)


def test_iblinkinfo_line_mode() -> None:
    fabric = parse_iblinkinfo(LINE_MODE)
    leaf = fabric.node(normalize_guid("aa0000000001"))
    assert leaf.kind == "switch"
    assert leaf.description == "leaf01"
    assert [p.number for p in leaf.ports] == [1, 2, 3, 33]
    spine = fabric.node(normalize_guid("bb0000000001"))
    assert spine.kind == "switch"  # port 17 is beyond any CA's ports
    host_b = fabric.hca_attachments()[("host-b", "mlx5_0")].link
    assert host_b.rate_label == "4xHDR"
    assert host_b.note == "Could be 106.25 Gbps"
    isl = fabric.link_at(spine.guid, 17)
    assert isl is not None
    assert isl.state == "Initialize"
    assert degraded_links(fabric, 400) == [host_b]


CA_SECTIONS = """\
CA: host-a mlx5_0:
      0x0000cc0000000001      7    1[  ] ==( 4X       106.25 Gbps Active/  LinkUp)==>       5    1[  ] "leaf01" ( )
Switch: 0x0000aa0000000001 leaf01:
           5    1[  ] ==( 4X       106.25 Gbps Active/  LinkUp)==>       7    1[  ] "host-a mlx5_0" ( )
"""


def test_iblinkinfo_ca_sections_resolve_by_lid() -> None:
    fabric = parse_iblinkinfo(CA_SECTIONS)
    assert set(fabric.nodes) == {normalize_guid("aa0000000001"), normalize_guid("cc0000000001")}
    (link,) = fabric.links
    assert link.nominal_gbps == 400.0
    assert fabric.notes == ()
