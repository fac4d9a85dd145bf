"""The resolved plan of the examples: nodes, addresses, spares, topology, sizing."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from clusterctl.hostlist import expand
from clusterctl.plan import Plan, build_plan
from clusterctl.plan.storage import systemd_mount_unit
from clusterctl.spec import load_spec
from tests.conftest import EXAMPLES
from tests.specs import example_data, group, write_spec


def _plan(name: str) -> Plan:
    loaded = load_spec(EXAMPLES / name)
    return build_plan(loaded.spec, loaded.base_dir)


def test_onprem_example_figures() -> None:
    summary = _plan("onprem-h100-256.yaml").summary()
    assert summary["gpus"]["total"] == 256
    assert summary["nodes"]["total"] == 35
    assert summary["nodes"]["by_group"] == {"ctl": 2, "login": 1, "gpu": 32}
    fabric = summary["fabric"]
    assert (fabric["leaf_switches"], fabric["spine_switches"], fabric["core_switches"]) == (8, 4, 0)
    assert (fabric["node_links"], fabric["leaf_spine_links"], fabric["tiers"]) == (256, 256, 2)
    assert fabric["oversubscription"] == 1.0
    assert summary["gpus"]["hbm_gib"] == 256 * 80


def test_spares_are_nodes_but_in_no_partition() -> None:
    plan = _plan("onprem-h100-256.yaml")
    spares = [n.hostname for n in plan.nodes if n.spare]
    assert spares == ["gpu031", "gpu032"]
    assert plan.slurm.spares == "gpu[031-032]"
    for part in plan.slurm.partitions:
        assert not set(spares) & set(expand(part.hosts))
    defined = {h for line in plan.slurm.node_lines for h in expand(line.hosts)}
    assert set(spares) <= defined


def test_addresses_are_unique_and_inside_the_network() -> None:
    plan = _plan("onprem-h100-256.yaml")
    addresses = [n.address for n in plan.nodes]
    assert len(set(addresses)) == len(addresses)
    assert addresses[0] == "10.20.0.10"
    assert all(a.startswith("10.20.") for a in addresses)


def test_racks_come_from_machines_csv() -> None:
    plan = _plan("onprem-h100-256.yaml")
    csv_racks = {
        line.split(",")[0]: line.split(",")[3] for line in (EXAMPLES / "machines.csv").read_text().splitlines()[1:]
    }
    assert {n.hostname: n.rack for n in plan.nodes} == csv_racks
    assert plan.node("gpu001").bmc == "10.10.1.1"


def test_rail_optimized_leaves_one_per_rail() -> None:
    plan = _plan("onprem-h100-256.yaml")
    node = plan.node("gpu007")
    assert node.su == 1
    assert node.leaves == [f"su1-leaf{r}" for r in range(1, 9)]
    leaf3 = next(leaf for leaf in plan.fabric.leaves if leaf.name == "su1-leaf3")
    assert {hca for _, hca in leaf3.ports} == {"mlx5_4"}  # rail 2 (0-based) is mlx5_4 on every node
    assert len(leaf3.ports) == 32


def test_local_rack_leaf_topology() -> None:
    plan = _plan("local.yaml")
    switches = {s.name: s for s in plan.slurm.switches}
    assert switches["leaf-r01"].nodes == "gpu[001-002]"
    assert switches["leaf-r02"].nodes == "gpu[003-004]"
    assert switches["fabric-root"].switches == "leaf-r[01-02]"
    assert all(n.emulated for n in plan.nodes if n.gpus)
    assert plan.slurm.slurmd_timeout_s < 60


def test_workload_matches_the_reference_example(tmp_path: Path) -> None:
    # techref §9.1: 70B params x 1.4T tokens on 1024 H100 at MFU 0.45 is about 14.9 days.
    data = example_data()
    data["provider"] = {"kind": "local"}
    group(data, "gpu").update(count=128, spares=0)
    loaded = load_spec(write_spec(tmp_path, data))
    plan = build_plan(loaded.spec, loaded.base_dir)
    assert plan.workload is not None
    assert plan.gpus.active == 1024
    assert plan.workload.train_days == pytest.approx(14.9, abs=0.1)
    assert plan.workload.training_flops == pytest.approx(5.88e23)
    assert plan.workload.model_state_tib == pytest.approx(70e9 * 16 / 2**40, abs=1e-3)
    assert plan.workload.min_gpus_for_state == math.ceil(70e9 * 16 / (80 * 2**30))


def test_checkpoint_write_time() -> None:
    plan = _plan("onprem-h100-256.yaml")
    ckpt = next(s for s in plan.storage if s.name == "ckpt")
    assert ckpt.checkpoint_write_s == pytest.approx(70e9 * 14 / 120e9, abs=0.1)


def test_power_sums_nodes_and_switches() -> None:
    plan = _plan("onprem-h100-256.yaml")
    assert plan.power.racks["r01"] == pytest.approx(4 * 10.2)  # DGX H100 datasheet ~10.2 kW max
    assert plan.power.max_rack_kw == pytest.approx(40.8)
    assert plan.power.it_kw == pytest.approx(32 * 10.2 + 3 * 0.8 + 12 * 1.5, abs=0.2)


@pytest.mark.parametrize(
    ("mount", "unit"),
    [("/home", "home.mount"), ("/lustre/datasets", "lustre-datasets.mount"), ("/mnt/my-ckpt", r"mnt-my\x2dckpt.mount")],
)
def test_mount_unit_names_follow_systemd_escape(mount: str, unit: str) -> None:
    assert systemd_mount_unit(mount) == unit


def test_lustre_source_lists_mgs_failover_nids() -> None:
    plan = _plan("onprem-h100-256.yaml")
    lustre = next(s for s in plan.storage if s.kind == "lustre")
    assert lustre.source == "10.30.0.11@o2ib:10.30.0.12@o2ib:/datasets"
    assert plan.lnet[0].networks[0].interfaces == ["ibs1", "ibs2"]
