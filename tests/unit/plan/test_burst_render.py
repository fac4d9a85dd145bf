"""Burst groups: the BUR rules, and what the render gives Slurm for elastic nodes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from clusterctl.pipeline import load_and_validate, render
from clusterctl.rules import validate
from clusterctl.spec import Level, load_spec
from tests.conftest import EXAMPLES
from tests.specs import Mutation, group, mutated

BURST = "local-burst.yaml"


def _burst(**changes: Any) -> Mutation:
    def apply(data: dict[str, Any]) -> None:
        group(data, "gpu-b").update(changes)

    return apply


def _no_burst_partition(data: dict[str, Any]) -> None:
    data["slurm"]["partitions"] = [p for p in data["slurm"]["partitions"] if p["name"] != "burst"]


def _burst_on_login(data: dict[str, Any]) -> None:
    group(data, "login")["burst"] = {"provider": {"kind": "local"}}


@pytest.mark.parametrize(
    ("code", "mutation", "fragment", "path"),
    [
        ("BUR001", _no_burst_partition, "is in no partition", "nodes[3].burst"),
        ("BUR001", _burst(spares=1), "has spares", "nodes[3].spares"),
        ("BUR001", _burst_on_login, "only compute nodes burst", "nodes[1].burst"),
        (
            "BUR003",
            _burst(burst={"provider": {"kind": "local"}, "resume_timeout": "1m", "suspend_after": "2m"}),
            "shorter than a local node",
            "nodes[3].burst.resume_timeout",
        ),
    ],
    ids=["no-partition", "spares", "login", "short-timeout"],
)
def test_burst_rule_fires(tmp_path: Path, code: str, mutation: Mutation, fragment: str, path: str) -> None:
    findings, _ = validate(load_spec(mutated(tmp_path, mutation, base=BURST)))
    hits = [f for f in findings if f.code == code and fragment in f.message]
    assert hits, [(f.code, f.message) for f in findings]
    assert hits[0].level is Level.ERROR
    assert hits[0].dotted_path == path
    assert hits[0].line > 0


def test_burst_on_a_provider_without_on_demand_machines_is_refused(tmp_path: Path) -> None:
    mutation = _burst(burst={"provider": {"kind": "baremetal", "machines": "machines.csv"}, "resume_timeout": "30m"})
    findings, _ = validate(load_spec(mutated(tmp_path, mutation, base=BURST)))
    assert any(f.code == "BUR002" and "needs on-demand machines" in f.message for f in findings), findings


def test_the_burst_example_passes() -> None:
    findings, plan = validate(load_spec(EXAMPLES / BURST))
    assert plan is not None
    assert not [f for f in findings if f.level >= Level.WARNING], findings


@pytest.fixture(scope="module")
def burst_render(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out, _ = render(load_and_validate(EXAMPLES / BURST), tmp_path_factory.mktemp("burst") / "build")
    return out / "slurm"


def test_burst_nodes_are_cloud_nodes_and_static_ones_are_not(burst_render: Path) -> None:
    conf = (burst_render / "slurm.conf").read_text()
    states = dict(re.findall(r"^NodeName=(\S+) .* State=(\S+)$", conf, re.MULTILINE))
    assert states["gpu-b[001-002]"] == "CLOUD"
    assert states["gpu-a[001-002]"] != "CLOUD"
    assert re.search(r"^SuspendExcNodes=ctl001,login001,gpu-a\[001-002\]$", conf, re.MULTILINE)
    assert re.search(r"^PartitionName=burst .*SuspendTime=60 ", conf, re.MULTILINE)
    assert re.search(r"^ResumeTimeout=600$", conf, re.MULTILINE)
    assert re.search(r"^SlurmctldParameters=enable_configless,cloud_reg_addrs$", conf, re.MULTILINE), (
        "22.05: a failed resume stays DOWN"
    )
    assert re.search(r"^TreeWidth=65533$", conf, re.MULTILINE)


def test_suspend_exc_states_only_where_slurm_knows_it(tmp_path: Path, burst_render: Path) -> None:
    old = (burst_render / "slurm.conf").read_text()
    assert not re.search(r"^SuspendExcStates", old, re.MULTILINE), "Slurm 22.05 refuses the line"

    def newer(data: dict[str, Any]) -> None:
        data["versions"]["slurm"] = "23.11"
        data["os"] = "ubuntu-24.04"

    out, _ = render(load_and_validate(mutated(tmp_path, newer, base=BURST)), tmp_path / "build")
    conf = (out / "slurm" / "slurm.conf").read_text()
    assert re.search(r"^SuspendExcStates=down,drain$", conf, re.MULTILINE)
    assert re.search(
        r"^SlurmctldParameters=enable_configless,idle_on_node_suspend,cloud_reg_addrs$", conf, re.MULTILINE
    )


def test_burst_gres_is_explicit_and_burst_switch_has_no_shared_parent(burst_render: Path) -> None:
    gres = (burst_render / "gres.conf").read_text()
    assert "AutoDetect=off" in gres
    # One line per GPU (gres.conf Cores= is per GPU); the emulated profile has no NUMA map.
    assert re.search(r"^NodeName=gpu-b\[001-002\] Name=gpu Type=h100 File=/dev/nvidia7$", gres, re.MULTILINE)
    topology = (burst_render / "topology.conf").read_text()
    assert re.search(r"^SwitchName=burst-gpu-b Nodes=gpu-b\[001-002\]$", topology, re.MULTILINE)
    assert "gpu-b" not in "".join(line for line in topology.splitlines() if "Switches=" in line)
