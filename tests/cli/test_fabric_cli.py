"""``clusterctl fabric check|topology|lint`` as a user meets them: exit codes and exact output.

Fabrics are ibnetdiscover text written here for examples/local.yaml (rack-leaf: four
8-rail nodes, two per rack, one leaf per rack, one spine) and examples/onprem-h100-256.yaml
(one rail-optimized SU of 32 nodes).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from clusterctl.commands import cli
from tests.conftest import EXAMPLES
from tests.unit.fabric.fabric_testkit import Cable, write_ibnetdiscover

LOCAL = str(EXAMPLES / "local.yaml")
ONPREM = str(EXAMPLES / "onprem-h100-256.yaml")
EDR = "infiniband/ibnetdiscover_edr_fattree_6sw.txt"
LEAF = {"r01": "0000aa0000000001", "r02": "0000aa0000000002"}
SPINE = "0000bb0000000001"


def invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False, env=env)
    return result.exit_code, result.stdout, result.stderr


def rack_cables() -> tuple[dict[str, str], dict[str, str], list[Cable]]:
    """Nodes gpu001-002 on the r01 leaf, gpu003-004 on r02, HCA i on port 8*(n-1 mod 2)+i+1."""
    switches = {LEAF["r01"]: "rack1-leaf", LEAF["r02"]: "rack2-leaf", SPINE: "core"}
    cas: dict[str, str] = {}
    cables: list[Cable] = []
    for n in range(1, 5):
        leaf = LEAF["r01"] if n <= 2 else LEAF["r02"]
        for i in range(8):
            guid = f"0000cc000000{n:01x}{i:03x}"
            cas[guid] = f"gpu{n:03d} mlx5_{i}"
            cables.append(Cable(leaf, ((n - 1) % 2) * 8 + i + 1, guid, 1, "4xNDR"))
    for r, leaf in enumerate(LEAF.values()):
        cables += [Cable(leaf, 17 + u, SPINE, r * 16 + u + 1, "4xNDR") for u in range(16)]
    return switches, cas, cables


def write_fabric(tmp_path: Path, name: str = "fabric.txt", *, move_gpu002_rail7: bool = False) -> str:
    switches, cas, cables = rack_cables()
    if move_gpu002_rail7:
        ca = next(g for g, d in cas.items() if d == "gpu002 mlx5_7")
        cables = [Cable(LEAF["r02"], 33, ca, 1, "4xNDR") if c.b == ca else c for c in cables]
    path = tmp_path / name
    path.write_text(write_ibnetdiscover(switches, cas, cables))
    return str(path)


# --- check ------------------------------------------------------------------------------


def test_check_clean_fabric(tmp_path: Path) -> None:
    code, out, err = invoke("fabric", "check", LOCAL, "--ibnetdiscover", write_fabric(tmp_path))
    assert code == 0, err
    assert out == f"The fabric matches {LOCAL}: 4 hosts, 32 HCAs on 2 leaves (1:1).\n"
    assert err == ""


def test_check_miscabled_node(tmp_path: Path) -> None:
    fabric = write_fabric(tmp_path, move_gpu002_rail7=True)
    code, out, err = invoke("fabric", "check", LOCAL, "--ibnetdiscover", fabric)
    assert code == 1
    assert out == (
        "error FAB-C002 node-on-two-leaves: gpu002 mlx5_7 -> rack2-leaf (0x0000aa0000000002) port 33: "
        "expected a leaf of rack r01: rack1-leaf (leaf-r01); "
        "found switch rack2-leaf (0x0000aa0000000002) port 33, the leaf of rack r02 (leaf-r02). "
        "gpu002 is on two leaves: mlx5_7 is on rack2-leaf, its other HCAs on rack1-leaf; all of a node's "
        "HCAs belong on the leaves of rack r01. Move this cable.\n"
    )
    assert err == f"error: The fabric does not match {LOCAL}: 1 error(s), 0 warning(s).\n"


def test_check_json(tmp_path: Path) -> None:
    fabric = write_fabric(tmp_path, move_gpu002_rail7=True)
    code, out, _ = invoke("fabric", "check", LOCAL, "--ibnetdiscover", fabric, "--output", "json")
    data = json.loads(out)
    assert code == 1
    assert (data["command"], data["ok"]) == ("fabric check", False)
    assert data["format"] == "ibnetdiscover"
    assert data["summary"]["errors"] == 1
    assert data["counts"] == {"error": 1, "warning": 0, "info": 0}
    (finding,) = data["findings"]
    assert {k: finding[k] for k in ("code", "rule", "level", "node", "cable")} == {
        "code": "FAB-C002",
        "rule": "node-on-two-leaves",
        "level": "error",
        "node": "gpu002",
        "cable": "gpu002 mlx5_7 -> rack2-leaf (0x0000aa0000000002) port 33",
    }
    assert {k: finding["data"][k] for k in ("host", "hca", "switch", "port")} == {
        "host": "gpu002",
        "hca": "mlx5_7",
        "switch": "rack2-leaf",
        "port": 33,
    }
    leaves = {leaf["switch"]: leaf for leaf in data["leaves"]}
    assert leaves["rack1-leaf"] | {"guid": None} == {
        "switch": "rack1-leaf",
        "guid": None,
        "planned": "leaf-r01",
        "down": 15,
        "up": 16,
        "planned_down": 16,
        "planned_up": 16,
        "oversubscription": 0.938,
    }


def test_check_verbose_lists_every_leaf(tmp_path: Path) -> None:
    code, out, _ = invoke("-v", "fabric", "check", LOCAL, "--ibnetdiscover", write_fabric(tmp_path))
    assert code == 0
    assert out.splitlines()[:2] == [
        "leaf rack1-leaf (0x0000aa0000000001) planned leaf-r01: 16 host links, 16 uplinks, 1:1",
        "leaf rack2-leaf (0x0000aa0000000002) planned leaf-r02: 16 host links, 16 uplinks, 1:1",
    ]


def test_check_unparsable_file_exits_2_with_the_line(tmp_path: Path) -> None:
    good = Path(write_fabric(tmp_path)).read_text().splitlines()
    bad = tmp_path / "bad.txt"
    bad.write_text("\n".join([*good[:10], "garbage from a pasted terminal", *good[10:]]))
    code, out, err = invoke("fabric", "check", LOCAL, "--ibnetdiscover", str(bad))
    assert code == 2
    assert out == ""
    assert err.splitlines()[:2] == [
        f"error: {bad} line 11: This line is not part of ibnetdiscover output.",
        "   11 | garbage from a pasted terminal",
    ]
    assert "Traceback" not in err
    code, out, _ = invoke("fabric", "check", LOCAL, "--ibnetdiscover", str(bad), "-o", "json")
    assert code == 2
    data = json.loads(out)
    assert (data["command"], data["ok"]) == ("fabric check", False)
    (finding,) = data["findings"]
    assert {k: finding[k] for k in ("code", "level", "file", "line", "data")} == {
        "code": "INPUT-unreadable",
        "level": "error",
        "file": str(bad),
        "line": 11,
        "data": {"text": "garbage from a pasted terminal"},
    }


def test_check_wrong_format_option(tmp_path: Path) -> None:
    fabric = write_fabric(tmp_path)
    code, _, err = invoke("fabric", "check", LOCAL, "--iblinkinfo", fabric)
    assert code == 2
    assert err == f"error: {fabric} holds ibnetdiscover output; pass it with --ibnetdiscover.\n"


def test_check_usage_errors(tmp_path: Path) -> None:
    fabric = write_fabric(tmp_path)
    result = CliRunner().invoke(cli, ["fabric", "check", LOCAL, "--ibnetdiscover", fabric, "--iblinkinfo", fabric])
    assert result.exit_code == 2
    assert "not both" in result.output
    result = CliRunner().invoke(cli, ["fabric", "check", LOCAL, "--ibnetdiscover", fabric, "--host-pattern", "(\\S+)"])
    assert result.exit_code == 2
    assert "has no named group 'host'" in result.output
    result = CliRunner().invoke(cli, ["fabric", "check", LOCAL, "--ibnetdiscover", str(tmp_path / "nope.txt")])
    assert result.exit_code == 2
    assert "does not exist" in result.output


def test_check_without_ibnetdiscover_installed(tmp_path: Path) -> None:
    code, out, err = invoke("fabric", "check", LOCAL, env={"PATH": str(tmp_path)})
    assert code == 2
    assert out == ""
    assert err == (
        "error: ibnetdiscover is not installed on this host (package infiniband-diags). Run it on a host on "
        "the fabric and pass its output: --ibnetdiscover FILE.\n"
    )


def test_check_runs_ibnetdiscover_when_no_file_is_given(tmp_path: Path) -> None:
    fabric = write_fabric(tmp_path)
    tool = tmp_path / "bin" / "ibnetdiscover"
    tool.parent.mkdir()
    tool.write_text(f"#!/bin/sh\ncat {fabric}\necho 'ibwarn: [123] mad_rpc: _do_madrpc failed' >&2\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    code, out, err = invoke("fabric", "check", LOCAL, env={"PATH": f"{tool.parent}{os.pathsep}/usr/bin:/bin"})
    assert code == 0, err
    assert out == f"The fabric matches {LOCAL}: 4 hosts, 32 HCAs on 2 leaves (1:1).\n"
    assert err == "Running ibnetdiscover on this host ...\n"


def test_check_with_host_pattern(tmp_path: Path) -> None:
    switches, cas, cables = rack_cables()
    cas = {guid: f"{d.split()[0]}.local.internal HCA {d.split()[1]}" for guid, d in cas.items()}
    path = tmp_path / "fqdn.txt"
    path.write_text(write_ibnetdiscover(switches, cas, cables))
    assert invoke("fabric", "check", LOCAL, "--ibnetdiscover", str(path))[0] == 1
    pattern = r"^(?P<host>[^.]+)\S* HCA (?P<hca>\S+)"
    code, out, _ = invoke("fabric", "check", LOCAL, "--ibnetdiscover", str(path), "--host-pattern", pattern)
    assert code == 0
    assert out.startswith("The fabric matches")


# --- topology ---------------------------------------------------------------------------


def test_topology_of_the_edr_fixture(fixtures_dir: Path, tmp_path: Path) -> None:
    fixture = str(fixtures_dir / EDR)
    code, out, err = invoke("fabric", "topology", "--ibnetdiscover", fixture)
    assert code == 0
    assert err == ""
    assert out.splitlines() == [
        f"# Generated by clusterctl 0.1.0 from {fixture} — do not edit",
        "SwitchName=sw-ec8240 Nodes=gpu[001-003],node[001-020,046]",
        "SwitchName=sw-ec8480 Nodes=gpu[004-020,045],node[041-045,047]",
        "SwitchName=sw-f548c0 Nodes=bee[01-02],controller,login01,node[021-040]",
        "SwitchName=sw-f548e0 Nodes=gpu[021-044]",
        "# sw-ec81e0_sw-ec8200: 2 switches collapsed into one line: sw-ec81e0 sw-ec8200",
        "SwitchName=sw-ec81e0_sw-ec8200 Switches=sw-ec[8240,8480],sw-f548c0,sw-f548e0",
    ]
    target = tmp_path / "slurm" / "topology.conf"
    code, out, _ = invoke("fabric", "topology", "--ibnetdiscover", fixture, "--out", str(target))
    assert code == 0
    assert out == f"Wrote {target}: 4 leaf line(s), 1 above them.\n"
    assert (
        target.read_text().splitlines()[1:]
        == invoke("fabric", "topology", "--ibnetdiscover", fixture)[1].splitlines()[1:]
    )


def su_fabric(tmp_path: Path) -> str:
    """One SU of the on-prem example: 32 nodes, rail r of every node on leaf r, two spines."""
    rails = ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"]
    leaves = {r: f"0000aa00000000{r:02x}" for r in range(8)}
    spines = {s: f"0000bb00000000{s:02x}" for s in range(2)}
    switches = {g: f"leaf-{r}" for r, g in leaves.items()} | {g: f"spine-{s}" for s, g in spines.items()}
    cas: dict[str, str] = {}
    cables: list[Cable] = []
    for n in range(1, 33):
        for r, hca in enumerate(rails):
            guid = f"0000cc00{n:04x}{r:04x}"
            cas[guid] = f"gpu{n:03d} {hca}"
            cables.append(Cable(leaves[r], n, guid, 1, "4xNDR"))
    cables += [Cable(leaves[r], 33 + s, spines[s], r + 1, "4xNDR") for r in range(8) for s in range(2)]
    path = tmp_path / "su.txt"
    path.write_text(write_ibnetdiscover(switches, cas, cables))
    return str(path)


def test_topology_groups_rail_leaves_with_spec(tmp_path: Path) -> None:
    fabric = su_fabric(tmp_path)
    code, out, err = invoke("fabric", "topology", "--ibnetdiscover", fabric)
    assert code == 0
    assert "SwitchName=leaf-0 Nodes=gpu[001-032]" in out
    assert "group them" in err
    assert err.endswith("hint: pass --spec SPEC to make the rail leaves of each scalable unit one switch line.\n")
    code, out, err = invoke("fabric", "topology", "--ibnetdiscover", fabric, "--spec", ONPREM)
    assert code == 0, err
    assert err == ""
    assert out.splitlines()[1:] == [
        "# su1: 8 leaves grouped into one line: leaf-0 leaf-1 leaf-2 leaf-3 leaf-4 leaf-5 leaf-6 leaf-7",
        "SwitchName=su1 Nodes=gpu[001-032]",
        "# spine-0-1: 2 switches collapsed into one line: spine-0 spine-1",
        "SwitchName=spine-0-1 Switches=su1",
    ]


def test_topology_with_spec_warns_about_nodes_off_the_fabric(tmp_path: Path) -> None:
    switches, cas, cables = rack_cables()
    gone = {g for g, d in cas.items() if d.startswith("gpu004 ")}
    path = tmp_path / "short.txt"
    path.write_text(
        write_ibnetdiscover(
            switches, {g: d for g, d in cas.items() if g not in gone}, [c for c in cables if c.b not in gone]
        )
    )
    code, out, err = invoke("fabric", "topology", "--ibnetdiscover", str(path), "--spec", LOCAL)
    assert code == 0
    assert "SwitchName=rack2-leaf Nodes=gpu003" in out
    assert err.startswith("warning: FAB-L002: Node(s) gpu004 are under no switch")


def test_topology_unparsable_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("hello\n")
    code, out, err = invoke("fabric", "topology", "--ibnetdiscover", str(bad))
    assert code == 2
    assert out == ""
    assert err.startswith(f"error: {bad} line 1: This is not ibnetdiscover, ibnetdiscover -p or iblinkinfo output.")


# --- lint -------------------------------------------------------------------------------


def test_lint_flags_the_superpod_node_under_two_leaves(fixtures_dir: Path) -> None:
    path = fixtures_dir / "slurm" / "topology_conf_nvidia_circe_superpod.conf"
    code, out, err = invoke("fabric", "lint", str(path))
    assert code == 1
    assert out.splitlines()[:2] == [
        f"{path}:5: error FAB-L001: Node circe-n051 is under more than one leaf switch (s2, s4); a node must "
        "hang off exactly one leaf. Keep it under the leaf it is cabled to.",
        "    5 | SwitchName=s4 Nodes=circe-n[037-039,051,061,078-080]",
    ]
    assert f"{path}: warning FAB-L006: 5 switches (s0, s1, s2, s3, s4) have no common parent" in out
    assert err == f"error: {path} has problems: 1 error(s), 1 warning(s).\n"


def test_lint_passes_the_azure_fixture(fixtures_dir: Path) -> None:
    path = fixtures_dir / "slurm" / "azslurm_topo_slurm_topology.txt"
    code, out, err = invoke("fabric", "lint", str(path))
    assert (code, err) == (0, "")
    assert out == f"{path} is valid: 6 switches, 16 nodes.\n"
    code, out, _ = invoke("fabric", "lint", str(path), "--output", "json")
    assert code == 0
    data = json.loads(out)
    assert {k: data[k] for k in ("command", "file", "ok", "findings")} == {
        "command": "fabric lint",
        "file": str(path),
        "ok": True,
        "findings": [],
    }


def test_lint_with_spec(tmp_path: Path) -> None:
    conf = tmp_path / "topology.conf"
    conf.write_text(
        "SwitchName=leaf1 Nodes=gpu[001-002]\n"
        "SwitchName=leaf2 Nodes=gpu003,gpu0004\n"
        "SwitchName=top Switches=leaf[1-2]\n"
    )
    assert invoke("fabric", "lint", str(conf))[0] == 0
    code, out, _ = invoke("fabric", "lint", str(conf), "--spec", LOCAL, "-o", "json")
    assert code == 1
    data = json.loads(out)
    assert data["ok"] is False
    assert data["counts"] == {"error": 2, "warning": 0, "info": 0}
    assert [(f["code"], f["line"]) for f in data["findings"]] == [("FAB-L003", 2), ("FAB-L002", 0)]
    assert [(f["file"], f["rule"]) for f in data["findings"]] == [
        (str(conf), "unknown-node"),
        (str(conf), "node-under-no-switch"),
    ]
    assert "gpu0004" in data["findings"][0]["message"]
    assert "gpu004" in data["findings"][1]["message"]


@pytest.mark.parametrize("strict", [False, True])
def test_lint_strict_fails_on_warnings(tmp_path: Path, strict: bool) -> None:
    conf = tmp_path / "topology.conf"
    conf.write_text("SwitchName=a Nodes=n1\nSwitchName=b Nodes=n2\n")
    code, out, _ = invoke("fabric", "lint", str(conf), *(["--strict"] if strict else []))
    assert code == (1 if strict else 0)
    assert "FAB-L006" in out
