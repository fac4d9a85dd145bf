"""Linting topology.conf: real files from real clusters, then each rule on small texts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from clusterctl.fabric.lint import lint_topology_conf, parse_topology_conf
from clusterctl.hostlist import compress
from clusterctl.spec.findings import Finding, Level

SLURM = "slurm"


def _read(fixtures_dir: Path, name: str) -> str:
    return (fixtures_dir / SLURM / name).read_text()


def _line_of(text: str, fragment: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), start=1) if fragment in line)


def _codes(findings: list[Finding]) -> list[tuple[str, str]]:
    return [(f.code, str(f.level)) for f in findings]


def _circe_known_nodes(fixtures_dir: Path) -> set[str]:
    slurm_conf = _read(fixtures_dir, "slurm_conf_nvidia_circe_superpod.conf")
    return set(re.findall(r"^NodeName=(\S+)", slurm_conf, re.MULTILINE))


def test_circe_superpod_node_under_two_leaves(fixtures_dir: Path) -> None:
    text = _read(fixtures_dir, "topology_conf_nvidia_circe_superpod.conf")
    conf = parse_topology_conf(text)
    twice = {node for node, leaves in conf.leaves_of_node().items() if len(leaves) > 1}
    assert twice == {"circe-n051"}
    findings = lint_topology_conf(text)
    errors = [f for f in findings if f.level is Level.ERROR]
    assert _codes(errors) == [("FAB-L001", "error")]
    assert "circe-n051" in errors[0].message
    assert "s2, s4" in errors[0].message
    assert errors[0].line == _line_of(text, "SwitchName=s4")
    # Five leaves and no parent: a several-roots warning.
    (warning,) = [f for f in findings if f.level is Level.WARNING]
    assert warning.code == "FAB-L006"
    assert "5 switches" in warning.message


def test_circe_superpod_with_known_nodes(fixtures_dir: Path) -> None:
    text = _read(fixtures_dir, "topology_conf_nvidia_circe_superpod.conf")
    known = _circe_known_nodes(fixtures_dir)
    assert len(known) == 98
    findings = lint_topology_conf(text, known_nodes=known)
    (unknown,) = [f for f in findings if f.code == "FAB-L003"]
    assert unknown.line == _line_of(text, "n[019-020]")
    assert "n[019-020]" in unknown.message
    assert "n019 -> circe-n019" in unknown.message
    (missing,) = [f for f in findings if f.code == "FAB-L002"]
    listed = parse_topology_conf(text).nodes()
    assert compress(sorted(known - listed)) in missing.message
    assert {"circe-n019", "circe-n020"} <= known - listed
    assert {f.code for f in findings} == {"FAB-L001", "FAB-L002", "FAB-L003", "FAB-L006"}


def test_azure_expected_output_is_clean(fixtures_dir: Path) -> None:
    text = _read(fixtures_dir, "azslurm_topo_slurm_topology.txt")
    assert lint_topology_conf(text) == []
    conf = parse_topology_conf(text)
    assert conf.roots() == ["sw05"]
    assert conf.parents()["sw00"] == ["sw05"]
    hosts = set(re.findall(r"hpcbench-hpc-\d+", text))
    assert lint_topology_conf(text, known_nodes=hosts) == []


def test_puppet_file_warns_about_several_roots(fixtures_dir: Path) -> None:
    text = _read(fixtures_dir, "topology_conf_maatthias_puppet.conf")
    findings = lint_topology_conf(text)
    assert _codes(findings) == [("FAB-L006", "warning")]
    roots = re.findall(r"^SwitchName=(\S+)", text, re.MULTILINE)
    assert ", ".join(roots) in findings[0].message
    assert findings[0].line == 0  # the whole file


def test_azure_guid_topology_has_cycles(fixtures_dir: Path) -> None:
    # ibsw47 lists the spines as children while each spine lists ibsw47: Slurm refuses a cycle.
    text = _read(fixtures_dir, "azslurm_topo_topology.txt")
    findings = lint_topology_conf(text)
    cycles = [f for f in findings if f.code == "FAB-L007"]
    assert cycles
    assert all("ibsw47" in f.message for f in cycles)
    (multi,) = [f for f in findings if f.code == "FAB-L008"]
    assert multi.line == _line_of(text, "SwitchName=ibsw47 ")


@pytest.mark.parametrize(
    ("text", "expected", "fragment"),
    [
        ("SwitchName=s0 Nodes=a1\nSwitchName=s0 Nodes=a2\n", [("FAB-L005", 2)], "already defined on line 1"),
        ("SwitchName=s0 Nodes=a1\nSwitchName=top Switches=s[0-1]\n", [("FAB-L004", 2)], "s1"),
        (
            "SwitchName=s0 Nodes=a1 Switches=s1\nSwitchName=s1 Nodes=a2\n",
            [("FAB-L009", 1)],
            "both Nodes= and Switches=",
        ),
        ("SwitchName=s0 Switches=s0\n", [("FAB-L007", 1)], "s0 -> s0"),
        ("SwitchName=s0\n", [("FAB-L011", 1)], "neither"),
        ("SwitchName=s0 Nodes=a1 Bogus=1\n", [("FAB-L010", 1)], "Unknown key 'Bogus'"),
        ("BlockName=b1 Nodes=a1\n", [("FAB-L010", 1)], "topology/block"),
        ("Nodes=a1 SwitchName=s0\n", [("FAB-L010", 1)], "must start with SwitchName="),
        ("SwitchName=s0 Nodes=a[1-\n", [("FAB-L010", 1)], "not a valid hostlist"),
        ("SwitchName=s0 Nodes=\n", [("FAB-L010", 1)], "is empty"),
        ("SwitchName=s0 Nodes=a1 LinkSpeed=fast\n", [("FAB-L010", 1)], "not a whole number"),
        ("SwitchName=s0 Nodes=a1 nodes=a2\n", [("FAB-L010", 1)], "given twice"),
        ("SwitchName=s0 Nodes=a1 junk\n", [("FAB-L010", 1)], "not key=value"),
        (f"SwitchName={'s' * 65} Nodes=a1\n", [("FAB-L010", 1)], "at most 64"),
        (
            "SwitchName=a Nodes=n1\nSwitchName=b Nodes=n2\nSwitchName=p1 Switches=a,b\nSwitchName=p2 Switches=b\n"
            "SwitchName=top Switches=p[1-2]\n",
            [("FAB-L008", 2)],
            "child of p1, p2",
        ),
    ],
)
def test_rules(text: str, expected: list[tuple[str, int]], fragment: str) -> None:
    findings = lint_topology_conf(text)
    assert [(f.code, f.line) for f in findings] == expected
    assert fragment in findings[0].message
    assert all(f.message.endswith((".", "?")) for f in findings)


def test_known_nodes_clean_file() -> None:
    text = "SwitchName=s0 Nodes=gpu[01-02]\nSwitchName=s1 Nodes=gpu03\nSwitchName=spine Switches=s[0-1]\n"
    assert lint_topology_conf(text, known_nodes={"gpu01", "gpu02", "gpu03"}) == []
    findings = lint_topology_conf(text, known_nodes={"gpu01", "gpu02", "gpu03", "gpu04"})
    assert [(f.code, f.line) for f in findings] == [("FAB-L002", 0)]
    assert "gpu04" in findings[0].message


def test_parse_comments_continuations_and_case() -> None:
    text = (
        "# a comment\n"
        "switchname=leaf1 NODES=gpu[001-003] # trailing comment\n"
        "SwitchName=leaf2 \\\n"
        "    Nodes=gpu[004-005] LinkSpeed=400\n"
        "\n"
        "SwitchName=sp\\#1 Switches=leaf[1-2]\n"
    )
    conf = parse_topology_conf(text)
    assert conf.problems == ()
    assert [(s.name, s.line_no) for s in conf.switches] == [("leaf1", 2), ("leaf2", 3), ("sp#1", 6)]
    assert conf.switches[0].nodes == ("gpu001", "gpu002", "gpu003")
    assert conf.switches[1].link_speed == 400
    assert conf.switches[2].switches == ("leaf1", "leaf2")
    assert conf.roots() == ["sp#1"]
    assert conf.by_name()["leaf2"].nodes == ("gpu004", "gpu005")
    assert lint_topology_conf(text) == []


def test_findings_are_sorted_whole_file_last() -> None:
    text = "SwitchName=b Nodes=x1\nSwitchName=a Nodes=x1\nSwitchName=a Nodes=x2\n"
    findings = lint_topology_conf(text, known_nodes={"x1", "x2", "x3"})
    assert [(f.code, f.line) for f in findings] == [
        ("FAB-L001", 2),
        ("FAB-L005", 3),
        ("FAB-L002", 0),
        ("FAB-L006", 0),
    ]
