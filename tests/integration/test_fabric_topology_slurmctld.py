"""Debian's real slurmctld (22.05) loads the topology.conf that ``fabric topology`` derives.

The input is a real ``ibnetdiscover`` capture of an EDR fat tree (4 leaves, 2 spines,
96 hosts); slurm.conf is written here with a NodeName for every discovered host.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from clusterctl.commands import cli
from clusterctl.fabric.lint import parse_topology_conf
from clusterctl.hostlist import compress, expand
from tests.integration.slurmctld import parse_scontrol_records, running_slurmctld

pytestmark = [pytest.mark.integration, pytest.mark.docker]

EDR = "infiniband/ibnetdiscover_edr_fattree_6sw.txt"
CONTROLLER = "fabricctl"  # not one of the discovered hosts (the capture has one called "controller")


def _slurm_conf(hosts: list[str]) -> str:
    return "\n".join(
        [
            "ClusterName=fabric",
            f"SlurmctldHost={CONTROLLER}",
            "SlurmUser=slurm",
            "AuthType=auth/munge",
            "StateSaveLocation=/var/spool/slurmctld",
            "SlurmctldPidFile=/run/slurmctld.pid",
            "SlurmctldLogFile=/var/log/slurm/slurmctld.log",
            "SlurmctldDebug=info",
            "SchedulerType=sched/backfill",
            "SelectType=select/cons_tres",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "MpiDefault=none",
            "ReturnToService=2",
            "AccountingStorageType=accounting_storage/none",
            "TopologyPlugin=topology/tree",
            f"NodeName={compress(hosts)} CPUs=1 RealMemory=1000 State=UNKNOWN",
            "PartitionName=all Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
            "",
        ]
    )


def test_slurmctld_loads_the_discovered_topology(docker_ready: None, fixtures_dir: Path, tmp_path: Path) -> None:
    slurm_dir = tmp_path / "slurm"
    topology_conf = slurm_dir / "topology.conf"
    result = CliRunner().invoke(
        cli,
        ["fabric", "topology", "--ibnetdiscover", str(fixtures_dir / EDR), "--out", str(topology_conf)],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    conf = parse_topology_conf(topology_conf.read_text())
    expected = {s.name: s for s in conf.switches}
    leaves = {name: set(s.nodes) for name, s in expected.items() if s.nodes}
    (parent,) = [s for s in expected.values() if s.switches]
    hosts = sorted({host for nodes in leaves.values() for host in nodes})
    assert len(leaves) == 4
    assert len(hosts) == 96
    assert set(parent.switches) == set(leaves)

    (slurm_dir / "slurm.conf").write_text(_slurm_conf(hosts))
    # Beside the directory, as render writes it: the harness adds it to /etc/hosts.
    (tmp_path / "hosts").write_text("".join(f"10.77.{i // 250}.{i % 250 + 1} {host}\n" for i, host in enumerate(hosts)))
    with running_slurmctld(slurm_dir, CONTROLLER) as ctld:
        records = {r["SwitchName"]: r for r in parse_scontrol_records(ctld.scontrol("show", "topology"))}
        assert set(records) == set(expected)
        for name, nodes in leaves.items():
            assert records[name]["Level"] == "0"
            assert set(expand(records[name]["Nodes"])) == nodes
        top = records[parent.name]
        assert top["Level"] == "1"
        assert set(expand(top["Switches"])) == set(leaves)
        assert set(expand(top["Nodes"])) == set(hosts)
        # slurmctld only logs a topology it half-understands ("switches lack access to N nodes").
        complaints = [
            line
            for line in ctld.log().splitlines()
            if "switch" in line.lower() and ("error" in line.lower() or "warning" in line.lower())
        ]
        assert complaints == []
