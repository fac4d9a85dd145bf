"""A cloud burst group of an on-prem cluster: its own fabric, its own network, what it mounts.

examples/aws-burst.yaml is the case: bare-metal H100 servers on InfiniBand with a `gpu-b` group
of p5.48xlarge that Slurm creates on AWS.
"""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterctl.pipeline import load_and_validate, render
from clusterctl.plan.models import Plan
from clusterctl.rules import validate
from clusterctl.spec import Level, load_spec
from tests.conftest import EXAMPLES
from tests.specs import example_data, group, write_spec

BURST = "aws-burst.yaml"


def _spec(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = write_spec(tmp_path, data)
    shutil.copy(EXAMPLES / "aws-burst-machines.csv", tmp_path / "aws-burst-machines.csv")
    return path


def _data(**provider: Any) -> dict[str, Any]:
    data = copy.deepcopy(example_data(BURST))
    group(data, "gpu-b")["burst"]["provider"].update(provider)
    return data


@pytest.fixture(scope="module")
def plan() -> Plan:
    return load_and_validate(EXAMPLES / BURST).plan


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out, _ = render(load_and_validate(EXAMPLES / BURST), tmp_path_factory.mktemp("aws-burst") / "build")
    return out


def _findings(tmp_path: Path, data: dict[str, Any], code: str) -> list[Any]:
    findings, _ = validate(load_spec(_spec(tmp_path, data)))
    return [f for f in findings if f.code == code]


# --- the fabric: the p5 profile is on EFA, the on-prem servers on InfiniBand -----------------


def test_the_burst_profile_gets_efa_nccl_settings(build: Path) -> None:
    conf = (build / "nccl" / "p5.conf").read_text()
    assert "on efa:" in conf
    assert "NCCL_SOCKET_IFNAME=en\n" in conf
    assert "NCCL_IB_HCA" not in conf
    env = (build / "nccl" / "p5.env").read_text()
    # aws-ofi-nccl 1.14.2 (the example's installer 1.41.0 ships it): AWS's buffer sizes, its tuner named.
    assert "NCCL_BUFFSIZE=8388608" in env
    assert "NCCL_TUNER_PLUGIN=" in env
    assert (build / "slurm" / "task_prolog.d" / "nccl-p5.sh").exists()
    # The on-prem profile stays on InfiniBand.
    assert "on infiniband:" in (build / "nccl" / "dgx-h100.conf").read_text()


def test_the_roles_see_efa_and_aws_on_the_burst_nodes_only(build: Path) -> None:
    inventory = yaml.safe_load((build / "ansible" / "inventory" / "hosts.yml").read_text().replace("!unsafe ", ""))
    hosts = inventory["all"]["hosts"]
    assert hosts["gpu-b001"]["clusterctl_fabric_kind"] == "efa"
    assert hosts["gpu-b001"]["clusterctl_provider"] == "aws"
    assert "clusterctl_fabric_kind" not in hosts["gpu001"]
    group_vars = yaml.safe_load(
        (build / "ansible" / "inventory" / "group_vars" / "all.yml").read_text().replace("!unsafe ", "")
    )
    assert group_vars["clusterctl_fabric_kind"] == "infiniband"
    assert group_vars["clusterctl_nccl_fabrics"] == {"p5": "efa"}
    assert group_vars["clusterctl_efa"]["ofi_nccl_libdir"]


def test_groups_carry_their_fabric_and_provider(plan: Plan) -> None:
    by_name = {g.name: g for g in plan.groups}
    assert (by_name["gpu-b"].fabric, by_name["gpu-b"].provider) == ("efa", "aws")
    assert (by_name["gpu"].fabric, by_name["gpu"].provider) == ("infiniband", "baremetal")


def test_rails_are_not_asked_of_the_burst_profile_on_a_rail_optimized_fabric(tmp_path: Path) -> None:
    data = _data()
    data["fabric"]["layout"] = "rail-optimized"
    data["provider"] = {"kind": "baremetal", "machines": "aws-burst-machines.csv"}
    fab001 = _findings(tmp_path, data, "FAB001")
    assert fab001 == []
    # The on-prem profile is still checked.
    data["hardware"]["dgx-h100"]["rails"] = data["hardware"]["dgx-h100"]["rails"][:4]
    assert [f.dotted_path for f in _findings(tmp_path, data, "FAB001")] == ["hardware.dgx-h100.rails"]


def test_a_profile_shared_with_an_onprem_group_is_refused(tmp_path: Path) -> None:
    data = _data()
    group(data, "gpu")["hardware"] = "p5"
    hits = [f for f in _findings(tmp_path, data, "BUR002") if "shares hardware" in f.message]
    assert hits
    assert hits[0].level is Level.ERROR


# --- the network: gpu-b's own CIDR, past AWS's reserved addresses ----------------------------


def test_burst_addresses_come_from_the_groups_own_cidr(plan: Plan, build: Path) -> None:
    addresses = {n.hostname: n.address for n in plan.nodes if n.group == "gpu-b"}
    # AWS keeps .0-.3 and the last address of every subnet.
    assert addresses == {f"gpu-b00{i}": f"10.60.0.{3 + i}" for i in range(1, 5)}
    assert "10.60.0.4 gpu-b001.harbor.internal gpu-b001" in (build / "hosts").read_text()
    cloud = plan.burst_cloud["gpu-b"]
    assert cloud.network_cidr == "10.60.0.0/24"
    assert cloud.peer_cidrs == ["10.20.0.0/16"]
    assert cloud.groups[0].addresses == list(addresses.values())
    # The static nodes keep the management network, one after another.
    assert next(n.address for n in plan.nodes if n.hostname == "gpu005") == "10.20.0.16"


def test_a_stack_made_subnet_is_the_lower_half_and_gcp_reserves_two(tmp_path: Path) -> None:
    data = _data()
    data["hardware"]["p5"].update(instance_type="a3-megagpu-8g")
    group(data, "gpu-b")["burst"]["provider"] = {
        "kind": "gcp",
        "region": "us-central1",
        "zone": "us-central1-a",
        "cidr": "10.70.0.0/23",
    }
    plan = load_and_validate(_spec(tmp_path, data)).plan
    assert [n.address for n in plan.nodes if n.group == "gpu-b"][:2] == ["10.70.0.2", "10.70.0.3"]
    assert {s.purpose: s.cidr for s in plan.burst_cloud["gpu-b"].subnets}["nodes"] == "10.70.0.0/24"


def test_a_burst_cidr_overlapping_the_onprem_network_is_refused_at_its_line(tmp_path: Path) -> None:
    (hit,) = _findings(tmp_path, _data(cidr="10.20.128.0/24"), "BUR004")
    assert hit.level is Level.ERROR
    assert "overlaps the on-prem management network 10.20.0.0/16" in hit.message
    assert hit.dotted_path == "nodes[3].burst.provider.cidr"
    assert hit.file
    assert hit.line > 0


def test_a_cloud_burst_group_without_a_network_of_its_own_is_refused(tmp_path: Path) -> None:
    data = _data()
    del group(data, "gpu-b")["burst"]["provider"]["cidr"]
    (hit,) = _findings(tmp_path, data, "BUR004")
    assert "has no network of its own" in hit.message
    assert hit.dotted_path == "nodes[3].burst.provider"


def test_a_burst_subnet_too_small_for_the_group_is_refused(tmp_path: Path) -> None:
    # A /29 holds 8 addresses; AWS keeps 5 of them, so 3 remain for 4 nodes.
    (hit,) = _findings(tmp_path, _data(cidr="10.60.0.0/29"), "BUR004")
    assert "leaves 3 addresses after the 5 aws reserves" in hit.message


# --- what burst nodes mount --------------------------------------------------------------------


def test_burst_nodes_mount_what_the_spec_lists(plan: Plan, build: Path) -> None:
    home = next(t for t in plan.storage if t.name == "home")
    assert "gpu-b[001-004]" in home.hosts
    assert (build / "storage" / "units" / "p5" / "home.mount").exists()


def test_leaving_the_mounts_out_is_said(tmp_path: Path) -> None:
    data = _data()
    del group(data, "gpu-b")["burst"]["mounts"]
    (hit,) = _findings(tmp_path, data, "BUR005")
    assert hit.level is Level.WARNING
    assert "mounts none of the storage tiers (home on /home)" in hit.message
    plan = load_and_validate(_spec(tmp_path, data)).plan
    assert "gpu-b" not in next(t for t in plan.storage if t.name == "home").hosts


def test_a_tier_the_cloud_cannot_reach_is_refused(tmp_path: Path) -> None:
    data = _data()
    data["storage"].append(
        {"name": "lustre", "kind": "lustre", "mount": "/lustre", "mgs": ["10.30.0.11@o2ib"], "fsname": "lfs"}
    )
    group(data, "gpu-b")["burst"]["mounts"] = ["home", "lustre", "scratch"]
    hits = {f.dotted_path: f.message for f in _findings(tmp_path, data, "BUR005")}
    assert "over RDMA (10.30.0.11@o2ib)" in hits["nodes[3].burst.mounts[1]"]
    assert "not a storage tier" in hits["nodes[3].burst.mounts[2]"]
    assert "nodes[3].burst.mounts[0]" not in hits
