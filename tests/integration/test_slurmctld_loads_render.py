"""Debian's real slurmctld (22.05) loads what clusterctl renders, and agrees with the spec."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from clusterctl.hostlist import expand
from clusterctl.pipeline import load_and_validate, render
from tests.conftest import EXAMPLES
from tests.integration.slurmctld import parse_scontrol_records, running_slurmctld
from tests.specs import example_data, group, write_spec

pytestmark = [pytest.mark.integration, pytest.mark.docker]


def _sixty_four_nodes(tmp_path: Path) -> Path:
    data: dict[str, Any] = example_data()
    data["provider"] = {"kind": "local"}
    data["os"] = "debian-12"
    data["versions"]["slurm"] = "22.05"
    group(data, "gpu").update(count=64, spares=2)
    # No storage here, so one controller with its state on its own disk (SLU004).
    data["storage"] = []
    group(data, "ctl")["count"] = 1
    data["slurm"].pop("state_save_location")
    return write_spec(tmp_path, data, "cluster64.yaml")


@pytest.mark.parametrize("spec_name", ["local", "sixty-four"])
def test_slurmctld_agrees_with_spec(docker_ready: None, tmp_path: Path, spec_name: str) -> None:
    spec_path = EXAMPLES / "local.yaml" if spec_name == "local" else _sixty_four_nodes(tmp_path)
    validated = load_and_validate(spec_path)
    plan = validated.plan
    build, _ = render(validated, tmp_path / "build")
    with running_slurmctld(build / "slurm", plan.slurm.controllers[0]) as ctld:
        switches = {r["SwitchName"]: r for r in parse_scontrol_records(ctld.scontrol("show", "topology"))}
        assert set(switches) == {s.name for s in plan.slurm.switches}
        for expected in plan.slurm.switches:
            got = switches[expected.name]
            if expected.nodes:
                assert set(expand(got["Nodes"])) == set(expand(expected.nodes))
            if expected.switches:
                assert set(expand(got["Switches"])) == set(expand(expected.switches))
        if spec_name == "sixty-four":
            assert set(switches) == {"su1", "su2", "fabric-root"}
            assert switches["su2"]["Nodes"] == "gpu[033-064]"

        partitions = {r["PartitionName"]: r for r in parse_scontrol_records(ctld.scontrol("show", "partition"))}
        spec_parts = validated.loaded.spec.slurm.partitions
        assert set(partitions) == {p.name for p in spec_parts}
        for part in spec_parts:
            got = partitions[part.name]
            want = {n.hostname for n in plan.nodes if n.group in part.groups and not n.spare}
            assert set(expand(got["Nodes"])) == want
            assert got["Default"] == ("YES" if part.default else "NO")
            if part.max_nodes:
                assert got["MaxNodes"] == str(part.max_nodes)
        spares = {n.hostname for n in plan.nodes if n.spare}
        nodes = {r["NodeName"]: r for r in parse_scontrol_records(ctld.scontrol("show", "node"))}
        assert spares <= set(nodes), "spares are defined as nodes"
        assert nodes["gpu001"]["Gres"] == f"gpu:h100:{plan.node('gpu001').gpus}"
        if spec_name == "sixty-four":
            # The example's site.slurm_conf parameters, as slurmctld read them.
            config = ctld.scontrol("show", "config")
            for name, value in validated.loaded.spec.site.slurm_conf.items():
                assert re.search(rf"^{name}\s*=\s*{value}$", config, re.MULTILINE), (name, config)


def test_slurmctld_loads_the_burst_render(docker_ready: None, tmp_path: Path) -> None:
    """Power saving on Debian's 22.05: cloud nodes, per-partition SuspendTime, the programs."""
    validated = load_and_validate(EXAMPLES / "local-burst.yaml")
    plan = validated.plan
    build, _ = render(validated, tmp_path / "build")
    with running_slurmctld(build / "slurm", plan.slurm.controllers[0]) as ctld:
        nodes = {r["NodeName"]: r for r in parse_scontrol_records(ctld.scontrol("show", "node"))}
        burst = {n.hostname for n in plan.nodes if n.burst}
        assert burst
        assert burst <= set(nodes)
        for host in burst:
            assert "CLOUD" in nodes[host]["State"], nodes[host]
            assert "POWERED_DOWN" in nodes[host]["State"], nodes[host]
        config = ctld.scontrol("show", "config")
        assert "/usr/local/sbin/clusterctl-burst-resume" in config
        partitions = {r["PartitionName"]: r for r in parse_scontrol_records(ctld.scontrol("show", "partition"))}
        assert partitions["burst"]["SuspendTime"] == "60"
