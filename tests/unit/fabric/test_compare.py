"""The cabling check: planned cabling against ibnetdiscover text written here, cable by cable.

The fabrics are built from the spec's numbers (SUs, rails, spines, ports) by this
module, never from `clusterctl.fabric.expected`, and switches carry names unlike
the plan's (``ib-l07``) so that only structure can match them.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from fabric_testkit import Cable, write_ibnetdiscover
from tests.conftest import EXAMPLES
from tests.specs import example_data, group, write_spec

from clusterctl.fabric.compare import CablingReport, compare_fabric, leaf_groups
from clusterctl.fabric.discovered_topology import derive_topology
from clusterctl.fabric.expected import ExpectedFabric, expected_fabric
from clusterctl.fabric.model import normalize_guid
from clusterctl.fabric.parsers import parse_fabric, parse_ibnetdiscover
from clusterctl.pipeline import load_and_validate
from clusterctl.spec.findings import Finding

RAILS = example_data()["hardware"]["dgx-h100"]["rails"]
NODES, SU_SIZE, SPINES, UPLINKS_PER_SPINE = 64, 32, 8, 4


def two_su_spec(tmp_path: Path) -> Path:
    """The on-prem example grown to 64 DGX nodes: two SUs of 32, 8 rails, 64-port switches at 1:1."""
    data: dict[str, Any] = example_data()
    data["provider"] = {"kind": "local"}
    group(data, "gpu").update(count=NODES, spares=0)
    return write_spec(tmp_path, data)


@pytest.fixture(scope="module")
def two_su(tmp_path_factory: pytest.TempPathFactory) -> ExpectedFabric:
    return expected_fabric(load_and_validate(two_su_spec(tmp_path_factory.mktemp("spec"))).plan)


@dataclass
class RailFabric:
    """A rail-optimized fabric as cables: leaf (su, rail) port n holds node n's rail HCA."""

    switches: dict[str, str] = field(default_factory=dict)
    cas: dict[str, str] = field(default_factory=dict)
    cables: list[Cable] = field(default_factory=list)
    leaf: dict[tuple[int, int], str] = field(default_factory=dict)
    spine: dict[int, str] = field(default_factory=dict)
    ca: dict[tuple[str, str], str] = field(default_factory=dict)

    def text(self) -> str:
        return write_ibnetdiscover(self.switches, self.cas, self.cables)

    def host_cable(self, host: str, hca: str) -> Cable:
        guid = self.ca[(host, hca)]
        return next(c for c in self.cables if guid in (c.a, c.b))

    def replace_cable(self, old: Cable, new: Cable | None) -> None:
        index = self.cables.index(old)
        if new is None:
            del self.cables[index]
        else:
            self.cables[index] = new


def rail_fabric_2su(nodes: int = NODES) -> RailFabric:
    """Two SUs of 32 nodes, 8 rail leaves each, 8 spines; every leaf has 4 cables to every spine."""
    fab = RailFabric()
    leaves = [(su, rail) for su in (1, 2) for rail in range(len(RAILS))]
    # Switch numbers deliberately unlike the plan's leaf numbers: rails interleave the SUs.
    for su, rail in leaves:
        guid = f"b8599f0300a0{rail:02x}{su:02x}"
        fab.leaf[(su, rail)] = guid
        fab.switches[guid] = f"MF0;ib-l{rail * 2 + su:02d}:MQM9700/U1"
    for s in range(SPINES):
        guid = f"b8599f0300b000{s:02x}"
        fab.spine[s] = guid
        fab.switches[guid] = f"MF0;ib-s{s + 1:02d}:MQM9700/U1"
    for n in range(1, nodes + 1):
        host, su, port = f"gpu{n:03d}", (n - 1) // SU_SIZE + 1, (n - 1) % SU_SIZE + 1
        for rail, hca in enumerate(RAILS):
            guid = f"946dae0300{n:04x}{rail:02x}"
            fab.ca[(host, hca)] = guid
            fab.cas[guid] = f"{host} {hca}"
            fab.cables.append(Cable(fab.leaf[(su, rail)], port, guid, 1, "4xNDR"))
    for leaf_index, (su, rail) in enumerate(leaves):
        for s in range(SPINES):
            for u in range(UPLINKS_PER_SPINE):
                fab.cables.append(
                    Cable(
                        fab.leaf[(su, rail)],
                        SU_SIZE + 1 + s * UPLINKS_PER_SPINE + u,
                        fab.spine[s],
                        leaf_index * UPLINKS_PER_SPINE + u + 1,
                        "4xNDR",
                    )
                )
    return fab


def check(fab: RailFabric, expected: ExpectedFabric) -> CablingReport:
    return compare_fabric(parse_ibnetdiscover(fab.text()), expected)


def only_error(report: CablingReport) -> Finding:
    errors = report.errors()
    assert len(errors) == 1, [f.to_dict() for f in errors]
    return errors[0]


# --- the 2-SU acceptance cases ------------------------------------------------------


def test_plan_of_the_two_su_spec(two_su: ExpectedFabric) -> None:
    # The test fabric's numbers come from the design, checked here against the plan once.
    assert two_su.layout == "rail-optimized"
    assert len(two_su.leaves) == 16
    assert two_su.uplinks_per_leaf == SPINES * UPLINKS_PER_SPINE == 32
    assert two_su.down_ports_per_leaf == SU_SIZE
    assert two_su.rate_label == "4xNDR (400 Gb/s)"


def test_clean_fabric_passes(two_su: ExpectedFabric) -> None:
    fab = rail_fabric_2su()
    report = check(fab, two_su)
    assert report.findings == ()
    assert report.matches(strict=True)
    assert report.summary() == {
        "errors": 0,
        "warnings": 0,
        "hosts_expected": 64,
        "hosts_found": 64,
        "hcas_expected": 512,
        "hcas_found": 512,
        "leaves_expected": 16,
        "leaves_found": 16,
        "hcas_unmapped": 0,
    }
    # Every planned leaf found its switch, by structure alone: rail r of SU s on leaf (s, r).
    assert report.leaf_match == {
        f"su{su}-leaf{rail + 1}": normalize_guid(fab.leaf[(su, rail)]) for su in (1, 2) for rail in range(8)
    }
    assert {(leaf.down, leaf.up, leaf.ratio) for leaf in report.leaves} == {(32, 32, "1:1")}


def test_rail_cable_moved_to_another_leaf(two_su: ExpectedFabric) -> None:
    fab = rail_fabric_2su()
    old = fab.host_cable("gpu005", "mlx5_3")  # rail 1 of su1
    wrong_leaf = fab.leaf[(1, 2)]
    # A full 64-port leaf has no free port: the moved cable takes a 65th so that exactly one
    # cable differs from the clean fabric (a real move is a swap; see the next test).
    fab.replace_cable(old, Cable(wrong_leaf, 65, old.b, old.b_port, old.rate))
    report = check(fab, two_su)
    finding = only_error(report)
    assert finding.code == "FAB-C001"
    assert finding.rule == "miscabled-rail"
    assert (finding.data["host"], finding.data["hca"]) == ("gpu005", "mlx5_3")
    assert (finding.data["switch"], finding.data["switch_guid"], finding.data["port"]) == (
        "ib-l05",
        normalize_guid(wrong_leaf),
        65,
    )
    right_leaf = normalize_guid(fab.leaf[(1, 1)])
    assert finding.data["expected"] == f"switch ib-l03 ({right_leaf}), the leaf of rail 1 of su1 (su1-leaf2)"
    assert finding.data["found"] == (
        f"switch ib-l05 ({normalize_guid(wrong_leaf)}) port 65, the leaf of rail 2 of su1 (su1-leaf3)"
    )
    assert finding.cable == f"gpu005 mlx5_3 -> ib-l05 ({normalize_guid(wrong_leaf)}) port 65"
    assert report.warnings() == []
    # The rail leaf it left is one host link short; its uplinks are as designed.
    leaf = next(r for r in report.leaves if r.guid == right_leaf)
    assert (leaf.down, leaf.up) == (31, 32)


def test_two_rail_cables_swapped(two_su: ExpectedFabric) -> None:
    fab = rail_fabric_2su()
    a, b = fab.host_cable("gpu040", "mlx5_0"), fab.host_cable("gpu040", "mlx5_11")
    fab.replace_cable(a, replace(a, b=b.b))
    fab.replace_cable(b, replace(b, b=a.b))
    errors = check(fab, two_su).errors()
    assert [(f.code, f.data["host"], f.data["hca"], f.data["port"]) for f in errors] == [
        ("FAB-C001", "gpu040", "mlx5_0", 8),
        ("FAB-C001", "gpu040", "mlx5_11", 8),
    ]
    assert "rail 7 of su2 (su2-leaf8)" in errors[0].data["found"]


def test_leaf_uplink_removed(two_su: ExpectedFabric) -> None:
    fab = rail_fabric_2su()
    leaf, spine = fab.leaf[(2, 5)], fab.spine[3]
    uplink = next(c for c in fab.cables if c.a == leaf and c.b == spine)
    fab.replace_cable(uplink, None)
    report = check(fab, two_su)
    finding = only_error(report)
    assert finding.code == "FAB-C005"
    assert finding.rule == "missing-uplinks"
    assert (finding.data["switch"], finding.data["switch_guid"], finding.data["port"]) == (
        "ib-l12",
        normalize_guid(leaf),
        uplink.a_port,
    )
    assert (finding.data["peer"], finding.data["peer_guid"]) == ("ib-s04", normalize_guid(spine))
    assert finding.data["host"] is None
    assert finding.data["expected"] == "32 uplinks (1:1)"
    assert finding.data["found"] == (
        "31 uplinks for 32 host links: 1.03:1 (1 fewer to ib-s04 (3 instead of 4)); "
        f"port(s) {uplink.a_port} empty where the other leaves have uplinks"
    )
    assert "runs at 1.03:1 instead of 1:1" in finding.message
    assert "planned as rail 5 of su2 (su2-leaf6)," in finding.message
    assert report.warnings() == []
    (short,) = [r for r in report.leaves if r.up != 32]
    assert (short.switch, short.down, short.up, round(short.oversubscription or 0, 3)) == ("ib-l12", 32, 31, 1.032)


def test_link_at_half_width(two_su: ExpectedFabric) -> None:
    fab = rail_fabric_2su()
    cable = fab.host_cable("gpu040", "mlx5_5")
    fab.replace_cable(cable, replace(cable, rate="2xNDR"))
    report = check(fab, two_su)
    finding = only_error(report)
    assert finding.code == "FAB-C007"
    assert finding.rule == "degraded-link"
    assert (finding.data["host"], finding.data["hca"]) == ("gpu040", "mlx5_5")
    assert (finding.data["switch_guid"], finding.data["port"]) == (
        normalize_guid(fab.leaf[(2, 3)]),
        8,
    )  # mlx5_5 is rail 3
    assert finding.data["switch"] == "ib-l08"
    assert finding.data["expected"] == "4xNDR (400 Gb/s)"
    assert finding.data["found"] == "2xNDR (200 Gb/s)"
    assert report.warnings() == []


def test_degraded_uplink_names_both_switch_ends(two_su: ExpectedFabric) -> None:
    fab = rail_fabric_2su()
    uplink = next(c for c in fab.cables if c.a == fab.leaf[(1, 0)] and c.b == fab.spine[7])
    fab.replace_cable(uplink, replace(uplink, rate="4xHDR"))
    finding = only_error(check(fab, two_su))
    assert finding.code == "FAB-C007"
    assert (finding.data["switch"], finding.data["port"]) == ("ib-l01", uplink.a_port)
    assert (finding.data["peer"], finding.data["peer_port"]) == ("ib-s08", uplink.b_port)
    assert finding.data["found"] == "4xHDR (200 Gb/s)"


# --- more findings --------------------------------------------------------------------


def test_missing_node_is_one_finding(two_su: ExpectedFabric) -> None:
    fab = rail_fabric_2su()
    for hca in RAILS:
        fab.replace_cable(fab.host_cable("gpu064", hca), None)
        del fab.cas[fab.ca[("gpu064", hca)]]
    finding = only_error(check(fab, two_su))
    assert (finding.code, finding.rule, finding.data["host"], finding.data["hca"]) == (
        "FAB-C003",
        "missing-node",
        "gpu064",
        None,
    )
    assert finding.data["found"] == "no CA whose description names gpu064"
    assert finding.data["expected"].startswith("8 HCA(s) (mlx5_0, mlx5_3,")
    assert "ib-l02 (su2-leaf1)" in finding.data["expected"]


def test_missing_hca_names_its_leaf(two_su: ExpectedFabric) -> None:
    fab = rail_fabric_2su()
    fab.replace_cable(fab.host_cable("gpu010", "mlx5_9"), None)
    del fab.cas[fab.ca[("gpu010", "mlx5_9")]]
    finding = only_error(check(fab, two_su))
    assert (finding.code, finding.data["host"], finding.data["hca"]) == ("FAB-C003", "gpu010", "mlx5_9")
    assert finding.data["switch_guid"] == normalize_guid(fab.leaf[(1, 5)])
    assert finding.data["expected"] == "gpu010 mlx5_9 on ib-l11 (su1-leaf6)"
    assert finding.data["found"].startswith("gpu010 has mlx5_0, mlx5_10, mlx5_11,")


def test_unknown_host_is_a_warning(two_su: ExpectedFabric) -> None:
    fab = rail_fabric_2su()
    fab.cas["0000ee0000000001"] = "weka01 mlx5_0"
    fab.cables.append(Cable(fab.leaf[(1, 0)], 65, "0000ee0000000001", 1, "4xNDR"))
    report = check(fab, two_su)
    assert report.errors() == []
    (warning,) = report.warnings()
    assert (warning.code, warning.rule, warning.data["host"], warning.data["hca"], warning.data["port"]) == (
        "FAB-C004",
        "unknown-host",
        "weka01",
        "mlx5_0",
        65,
    )
    assert warning.data["expected"] == "no such host in the plan"
    assert report.matches()
    assert not report.matches(strict=True)


def test_storage_hca_of_a_planned_node_is_unknown(two_su: ExpectedFabric) -> None:
    fab = rail_fabric_2su()
    fab.cas["0000ee0000000002"] = "gpu001 mlx5_1"  # a storage NIC, cabled into the compute fabric
    fab.cables.append(Cable(fab.leaf[(1, 0)], 65, "0000ee0000000002", 1, "4xNDR"))
    (warning,) = check(fab, two_su).warnings()
    assert (warning.code, warning.data["host"], warning.data["hca"]) == ("FAB-C004", "gpu001", "mlx5_1")
    assert "mlx5_0, mlx5_3" in warning.data["expected"]


def test_extra_uplink_is_a_warning(two_su: ExpectedFabric) -> None:
    fab = rail_fabric_2su()
    fab.cables.append(Cable(fab.leaf[(1, 0)], 65, fab.spine[0], 65, "4xNDR"))
    report = check(fab, two_su)
    assert report.errors() == []
    (warning,) = report.warnings()
    assert (warning.code, warning.rule, warning.data["switch"]) == ("FAB-C006", "extra-uplinks", "ib-l01")
    assert warning.data["found"] == "33 uplinks for 32 host links: 0.97:1 (1 more to ib-s01)"


def test_host_pattern_reads_other_descriptions(two_su: ExpectedFabric) -> None:
    fab = rail_fabric_2su()
    fab.cas = {guid: f"{desc.split()[1]}@{desc.split()[0]}.atlas.internal" for guid, desc in fab.cas.items()}
    fabric = parse_ibnetdiscover(fab.text())
    assert {f.code for f in compare_fabric(fabric, two_su).findings} == {"FAB-C003", "FAB-C004"}
    pattern = r"^(?P<hca>[^@]+)@(?P<host>[^.]+)"
    assert compare_fabric(fabric, two_su, host_pattern=pattern).findings == ()


def test_leaf_groups_follow_the_scalable_units(two_su: ExpectedFabric) -> None:
    fab = rail_fabric_2su()
    fabric = parse_ibnetdiscover(fab.text())
    groups = leaf_groups(fabric, two_su)
    assert groups == {f"su{su}": {normalize_guid(fab.leaf[(su, r)]) for r in range(8)} for su in (1, 2)}
    topology = derive_topology(fabric, group_leaves=groups)
    assert topology.warnings == ()
    assert [(leaf.name, len(leaf.nodes)) for leaf in topology.leaves()] == [("su1", 32), ("su2", 32)]


# --- rack-leaf ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def racks(tmp_path_factory: pytest.TempPathFactory) -> ExpectedFabric:
    """examples/local.yaml: 4 nodes of 8 rails, 2 per rack, one 32-port leaf per rack, 1 spine."""
    return expected_fabric(load_and_validate(EXAMPLES / "local.yaml").plan)


def rack_fabric() -> tuple[dict[str, str], dict[str, str], list[Cable], dict[str, str]]:
    leaves = {"r01": "0000aa0000000001", "r02": "0000aa0000000002"}
    spine = "0000bb0000000001"
    switches = {leaves["r01"]: "rack1-leaf", leaves["r02"]: "rack2-leaf", spine: "core"}
    cas: dict[str, str] = {}
    cables: list[Cable] = []
    for n in range(1, 5):
        rack = leaves["r01"] if n <= 2 else leaves["r02"]
        for i in range(8):
            guid = f"0000cc00000{n:01x}{i:04x}"
            cas[guid] = f"gpu{n:03d} mlx5_{i}"
            cables.append(Cable(rack, ((n - 1) % 2) * 8 + i + 1, guid, 1, "4xNDR"))
    for r, leaf in enumerate(leaves.values()):
        cables += [Cable(leaf, 17 + u, spine, r * 16 + u + 1, "4xNDR") for u in range(16)]
    return switches, cas, cables, leaves


def test_rack_leaf_clean(racks: ExpectedFabric) -> None:
    assert racks.layout == "rack-leaf"
    switches, cas, cables, _ = rack_fabric()
    report = compare_fabric(parse_ibnetdiscover(write_ibnetdiscover(switches, cas, cables)), racks)
    assert report.findings == ()
    assert {(r.switch, r.down, r.up) for r in report.leaves} == {("rack1-leaf", 16, 16), ("rack2-leaf", 16, 16)}


def test_rack_leaf_node_on_two_leaves(racks: ExpectedFabric) -> None:
    switches, cas, cables, leaves = rack_fabric()
    ca = next(g for g, d in cas.items() if d == "gpu002 mlx5_7")
    index = next(i for i, c in enumerate(cables) if c.b == ca)
    cables[index] = Cable(leaves["r02"], 33, ca, 1, "4xNDR")
    finding = only_error(compare_fabric(parse_ibnetdiscover(write_ibnetdiscover(switches, cas, cables)), racks))
    assert finding.code == "FAB-C002"
    assert finding.rule == "node-on-two-leaves"
    assert (finding.data["host"], finding.data["hca"], finding.data["switch"], finding.data["port"]) == (
        "gpu002",
        "mlx5_7",
        "rack2-leaf",
        33,
    )
    assert finding.data["expected"] == "a leaf of rack r01: rack1-leaf (leaf-r01)"
    assert "gpu002 is on two leaves" in finding.message


# --- port states (iblinkinfo) -------------------------------------------------------------


def one_leaf_spec(tmp_path: Path) -> ExpectedFabric:
    """Two 8-rail nodes on one 16-port leaf: every port of the leaf is planned."""
    data = copy.deepcopy(example_data("local.yaml"))
    group(data, "gpu").update(count=2)
    data["fabric"].update(nodes_per_rack=2, switch_ports=32)
    return expected_fabric(load_and_validate(write_spec(tmp_path, data)).plan)


def iblinkinfo_one_leaf(down_port: int | None = None, init_port: int | None = None) -> str:
    lines = ["Switch: 0x0000aa0000000001 MF0;leaf01:MQM9700/U1:"]
    for port in range(1, 17):
        host, hca = f"gpu{(port - 1) // 8 + 1:03d}", f"mlx5_{(port - 1) % 8}"
        if port == down_port:
            lines.append(f'          1 {port:4d}[  ] ==(                Down/ Polling)==>             [  ] "" ( )')
            continue
        state = "Init/  LinkUp" if port == init_port else "Active/  LinkUp"
        lines.append(
            f"          1 {port:4d}[  ] ==( 4X        106.25 Gbps {state})==>  {port + 10:6d}    1[  ] "
            f'"{host} {hca}" ( )'
        )
    return "\n".join(lines) + "\n"


def test_iblinkinfo_down_port_on_a_full_leaf(tmp_path: Path) -> None:
    expected = one_leaf_spec(tmp_path)
    assert expected.uplinks_per_leaf == 0
    assert sum(len(leaf.hcas) for leaf in expected.leaves) == 16
    clean = compare_fabric(parse_fabric(iblinkinfo_one_leaf()), expected)
    assert clean.findings == ()
    report = compare_fabric(parse_fabric(iblinkinfo_one_leaf(down_port=11)), expected)
    assert [(f.code, f.data["host"], f.data["hca"], f.data["switch"], f.data["port"]) for f in report.errors()] == [
        ("FAB-C003", "gpu002", "mlx5_2", "leaf01", None),
        ("FAB-C008", None, None, "leaf01", 11),
    ]
    down = report.errors()[1]
    assert (down.rule, down.data["expected"], down.data["found"]) == ("down-port", "port Active", "port Down")


def test_iblinkinfo_link_not_active(tmp_path: Path) -> None:
    expected = one_leaf_spec(tmp_path)
    finding = only_error(compare_fabric(parse_fabric(iblinkinfo_one_leaf(init_port=3)), expected))
    assert (finding.code, finding.data["host"], finding.data["hca"], finding.data["port"]) == (
        "FAB-C008",
        "gpu001",
        "mlx5_2",
        3,
    )
    assert (finding.data["expected"], finding.data["found"]) == ("Active", "Init")


def ports_report(fab: RailFabric) -> str:
    """``ibnetdiscover -p`` text for the fabric: one line per cable, from its first end."""
    desc = {**fab.switches, **fab.cas}
    lids = {guid: lid for lid, guid in enumerate(sorted(desc), start=1)}

    def end(guid: str, port: int) -> str:
        kind = "SW" if guid in fab.switches else "CA"
        return f"{kind} {lids[guid]:5d} {port:2d} 0x{guid}"

    return "".join(
        f"{end(c.b, c.b_port)} 4x NDR - {end(c.a, c.a_port)} ( '{desc[c.b]}' - '{desc[c.a]}' )\n" for c in fab.cables
    )


def test_planned_hca_seen_but_not_linked_is_a_down_port(two_su: ExpectedFabric) -> None:
    # ibnetdiscover -p lists a port with no far end; for a CA that is a planned HCA whose link is down.
    fab = rail_fabric_2su()
    assert compare_fabric(parse_fabric(ports_report(fab)), two_su).findings == ()
    guid = fab.ca[("gpu007", "mlx5_6")]
    fab.replace_cable(fab.host_cable("gpu007", "mlx5_6"), None)
    text = ports_report(fab) + f"CA   999  1 0x{guid} 4x ???                      '{fab.cas[guid]}'\n"
    finding = only_error(compare_fabric(parse_fabric(text), two_su))
    assert (finding.code, finding.rule, finding.data["host"], finding.data["hca"]) == (
        "FAB-C008",
        "down-port",
        "gpu007",
        "mlx5_6",
    )
    assert finding.data["found"] == f"CA {normalize_guid(guid)} port 1 not linked"
    assert finding.data["expected"] == "port linked to ib-l09 (su1-leaf5)"
