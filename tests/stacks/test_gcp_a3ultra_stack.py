"""The GCP program for A3 Ultra (examples/gcp-a3ultra.yaml) under Pulumi's mocks.

What Google's Cluster Toolkit makes for a3-ultragpu-8g (GoogleCloudPlatform/cluster-toolkit@1047080):
``examples/machine-learning/a3-ultragpu-8g/a3ultra-slurm-blueprint.yaml`` -- net-0 and net-1 (MTU
8896, each open to itself), ``a3ultra-slurm-rdma-net`` (``modules/network/gpu-rdma-vpc``: network
profile ``<zone>-vpc-roce``, 8 subnetworks, no firewall rules) and the nodeset's NICs: nic0 on
net-0 and nic1 on net-1 as GVNIC, then the RDMA interfaces (nic_type MRDMA); disk_type
hyperdisk-balanced; reservation_name. The same program also makes a GCP burst group's base and
nodes (stacks/burst).
"""

from __future__ import annotations

import copy
import ipaddress
import shutil
import sys
from pathlib import Path
from typing import Any

import pulumi
import pytest

from clusterctl.catalog.instances import INSTANCE_TYPES
from clusterctl.pipeline import load_and_validate
from clusterctl.plan import Plan
from tests.conftest import EXAMPLES
from tests.plan_edits import replaced
from tests.specs import example_data, group, write_spec
from tests.stacks.conftest import STACKS, RecordingMocks, example_plan, run, unsecret

if str(STACKS / "burst") not in sys.path:
    sys.path.insert(0, str(STACKS / "burst"))

from clusterctl_burst import BurstGroupArgs, burst_base, burst_group  # isort: skip
from clusterctl_gcp import GcpCluster, GcpClusterArgs  # isort: skip
from clusterctl_stack import HostKey  # isort: skip

NETWORK = "gcp:compute/network:Network"
SUBNET = "gcp:compute/subnetwork:Subnetwork"
FIREWALL = "gcp:compute/firewall:Firewall"
INSTANCE = "gcp:compute/instance:Instance"
POLICY = "gcp:compute/resourcePolicy:ResourcePolicy"
A3U = INSTANCE_TYPES["a3-ultragpu-8g"]
RESERVATION = "a3ultra-reservation"


def _keys(plan: Plan) -> dict[str, HostKey]:
    return {
        n.hostname: HostKey(private="PRIVATE-" + n.hostname, public="ssh-ed25519 AAAA" + n.hostname) for n in plan.nodes
    }


def _deploy(plan: Plan) -> RecordingMocks:
    def program() -> pulumi.Output:
        cluster = GcpCluster(
            plan.cluster.name, GcpClusterArgs(plan=plan, ssh_public_key="ssh-ed25519 AAAAk", host_keys=_keys(plan))
        )

        def check(nodes: dict[str, str]) -> None:
            assert nodes == {n.hostname: n.address for n in plan.nodes}

        return cluster.nodes.apply(check)

    return run(program)


def _with_reservation(tmp_path: Path) -> Plan:
    data = copy.deepcopy(example_data("gcp-a3ultra.yaml"))
    data["provider"]["reservation"] = RESERVATION
    return load_and_validate(write_spec(tmp_path, data)).plan


@pytest.fixture(scope="module")
def plan() -> Plan:
    return example_plan("gcp-a3ultra.yaml")


@pytest.fixture(scope="module")
def created(plan: Plan) -> RecordingMocks:
    return _deploy(plan)


def _by_id(mocks: RecordingMocks, typ: str) -> dict[str, Any]:
    """Resource id (the mocks answer ``<logical name>-id``) -> the recorded resource."""
    return {f"{r.name}-id": r for r in mocks.of_type(typ)}


def _roce(mocks: RecordingMocks):
    (roce,) = [n for n in mocks.of_type(NETWORK) if n.inputs.get("networkProfile")]
    return roce


def _gpu_instances(mocks: RecordingMocks, plan: Plan, group_name: str = "gpu") -> list:
    hosts = set(plan.cloud.group(group_name).hosts) if plan.cloud else set()
    return [r for r in mocks.of_type(INSTANCE) if r.inputs.get("hostname", "").split(".")[0] in hosts]


# --- networks ---------------------------------------------------------------------------------


def test_one_roce_network_with_the_zones_profile(created: RecordingMocks, plan: Plan) -> None:
    roce = _roce(created)
    cloud = plan.cloud
    assert roce.inputs["networkProfile"] == f"projects/{cloud.project}/global/networkProfiles/{cloud.zone}-vpc-roce"
    assert roce.inputs["name"] == "ultra-rdma-net"
    # gpu-rdma-vpc's defaults: MTU 8896, REGIONAL routing, no auto subnetworks.
    assert roce.inputs["mtu"] == 8896
    assert roce.inputs["routingMode"] == "REGIONAL"
    assert roce.inputs["autoCreateSubnetworks"] is False


def test_roce_network_has_one_subnet_per_rail_and_no_firewall(created: RecordingMocks) -> None:
    roce_id = f"{_roce(created).name}-id"
    rails = [s for s in created.of_type(SUBNET) if s.inputs["network"] == roce_id]
    assert len(rails) == A3U.rdma_nics == 8
    # (The mocks record registrations in no fixed order.)
    assert sorted(s.inputs["name"] for s in rails) == [f"ultra-mrdma-sub-{i}" for i in range(8)]
    ranges = [ipaddress.ip_network(s.inputs["ipCidrRange"]) for s in rails]
    assert all(a != b and not a.overlaps(b) for i, a in enumerate(ranges) for b in ranges[i + 1 :])
    assert all(s.inputs["region"] == "europe-west1" for s in rails)
    # gpu-rdma-vpc refuses firewall rules on the RoCE network: none is made there.
    assert not [f for f in created.of_type(FIREWALL) if f.inputs["network"] == roce_id]


def test_second_host_network_is_open_to_itself_only(created: RecordingMocks, plan: Plan) -> None:
    (hostnet,) = plan.cloud.host_networks
    (net,) = [n for n in created.of_type(NETWORK) if n.inputs["name"] == hostnet.name]
    assert net.inputs["mtu"] == 8896
    (sub,) = [s for s in created.of_type(SUBNET) if s.inputs["network"] == f"{net.name}-id"]
    assert sub.inputs["ipCidrRange"] == hostnet.cidr
    (rule,) = [f for f in created.of_type(FIREWALL) if f.inputs["network"] == f"{net.name}-id"]
    assert rule.inputs["sourceRanges"] == [hostnet.cidr]
    assert rule.inputs["direction"] == "INGRESS"


def test_host_vpc_mtu_is_the_blueprints(created: RecordingMocks) -> None:
    (host,) = [n for n in created.of_type(NETWORK) if n.inputs["name"] == "ultra-net"]
    assert host.inputs["mtu"] == 8896


def test_nic_networks_fit_gpu_network_cidr_and_not_management(created: RecordingMocks, plan: Plan) -> None:
    base = ipaddress.ip_network(str(plan.cloud.network_cidr))
    pool = ipaddress.ip_network("172.16.0.0/16")
    nic_ranges = [
        ipaddress.ip_network(s.inputs["ipCidrRange"])
        for s in created.of_type(SUBNET)
        if "mrdma" in s.inputs["name"] or "hostnet" in s.inputs["name"]
    ]
    assert len(nic_ranges) == 9
    assert all(r.subnet_of(pool) and not r.overlaps(base) for r in nic_ranges)


# --- instances --------------------------------------------------------------------------------


def test_gpu_nodes_have_two_gvnics_then_eight_mrdma_nics_in_order(created: RecordingMocks, plan: Plan) -> None:
    subnets = _by_id(created, SUBNET)
    networks = _by_id(created, NETWORK)
    gpu = _gpu_instances(created, plan)
    assert len(gpu) == len(plan.cloud.group("gpu").hosts) == 16
    for instance in gpu:
        nics = instance.inputs["networkInterfaces"]
        assert [n["nicType"] for n in nics] == ["GVNIC", "GVNIC"] + ["MRDMA"] * 8
        on = [subnets[n["subnetwork"]] for n in nics]
        assert on[0].inputs["name"] == "ultra-nodes"
        assert on[1].inputs["name"] == "ultra-hostnet-1-sub"
        # nic2..nic9: rail i on RoCE subnet i, all on the one RoCE network.
        assert [s.inputs["name"] for s in on[2:]] == [f"ultra-mrdma-sub-{i}" for i in range(8)]
        assert {networks[s.inputs["network"]].inputs.get("networkProfile") for s in on[2:]} == {
            plan.cloud.rdma_network.network_profile
        }
        host = instance.inputs["hostname"].split(".")[0]
        assert nics[0]["networkIp"] == plan.node(host).address


def test_other_nodes_have_one_nic_and_pd_ssd(created: RecordingMocks, plan: Plan) -> None:
    gpu = {r.name for r in _gpu_instances(created, plan)}
    others = [r for r in created.of_type(INSTANCE) if r.name not in gpu]
    assert others
    for instance in others:
        assert len(instance.inputs["networkInterfaces"]) == 1
        if not instance.name.endswith("-bastion"):
            assert instance.inputs["bootDisk"]["initializeParams"]["type"] == "pd-ssd"


def test_gpu_nodes_boot_from_hyperdisk_balanced(created: RecordingMocks, plan: Plan) -> None:
    for instance in _gpu_instances(created, plan):
        assert instance.inputs["bootDisk"]["initializeParams"]["type"] == "hyperdisk-balanced"
        assert instance.inputs["scheduling"]["onHostMaintenance"] == "TERMINATE"


def test_no_placement_policy_as_googles_nodeset_and_the_gpu_image(created: RecordingMocks, plan: Plan) -> None:
    # a3ultra-slurm-blueprint.yaml@1047080 line 623 (enable_placement: false), lines 28-30 (the image).
    assert created.of_type(POLICY) == []
    assert not any(i.inputs.get("resourcePolicies") for i in created.of_type(INSTANCE))
    gpu = {r.name for r in _gpu_instances(created, plan)}
    for instance in created.of_type(INSTANCE):
        image = instance.inputs["bootDisk"]["initializeParams"]["image"]
        assert ("ubuntu-accelerator-2404-amd64-with-nvidia-580" in image) == (instance.name in gpu), instance.name


def test_gpu_nodes_are_compactly_placed_when_asked(tmp_path: Path) -> None:
    data = copy.deepcopy(example_data("gcp-a3ultra.yaml"))
    data["provider"]["placement_policy"] = "compact"
    plan = load_and_validate(write_spec(tmp_path, data)).plan
    created = _deploy(plan)
    (policy,) = created.of_type(POLICY)
    assert policy.inputs["groupPlacementPolicy"]["collocation"] == "COLLOCATED"
    gpu = {r.name for r in _gpu_instances(created, plan)}
    for instance in created.of_type(INSTANCE):
        # The policy's self link (the mocks answer https://www.googleapis.com/compute/v1/<logical name>).
        placed = instance.inputs.get("resourcePolicies", "").endswith(f"/{policy.name}")
        assert placed == (instance.name in gpu), instance.name


def test_gpu_nodes_consume_the_reservation(tmp_path: Path) -> None:
    plan = _with_reservation(tmp_path)
    created = _deploy(plan)
    gpu = {r.name for r in _gpu_instances(created, plan)}
    for instance in created.of_type(INSTANCE):
        affinity = instance.inputs.get("reservationAffinity")
        if instance.name in gpu:
            assert affinity["type"] == "SPECIFIC_RESERVATION"
            assert affinity["specificReservation"] == {
                "key": "compute.googleapis.com/reservation-name",
                "values": [RESERVATION],
            }
        else:
            assert affinity is None


def test_cloud_defaults_hold(created: RecordingMocks) -> None:
    for instance in created.of_type(INSTANCE):
        secret, metadata = unsecret(instance.inputs["metadata"])
        assert secret
        assert metadata["enable-oslogin"] == "TRUE"
        assert metadata["block-project-ssh-keys"] == "TRUE"
        assert "ssh-keys" not in metadata
    for rule in created.of_type(FIREWALL):
        assert rule.inputs["sourceRanges"], rule.name
        assert all(ipaddress.ip_network(c).prefixlen > 0 for c in rule.inputs["sourceRanges"]), rule.name


def test_no_project_no_roce_network(plan: Plan) -> None:
    """Rule CLD017 refuses the spec; should it be skipped, the stack stops before creating anything wrong."""
    assert plan.cloud is not None
    assert plan.cloud.rdma_network is not None
    broken = replaced(plan, {"cloud.rdma_network.network_profile": None})
    with pytest.raises(ValueError, match=r"network profile is named by project.*CLD017"):
        _deploy(broken)


# --- the same on a GCP burst group ------------------------------------------------------------


def _burst_plan(tmp_path: Path) -> Plan:
    data = copy.deepcopy(example_data("aws-burst.yaml"))
    data["hardware"]["p5"].update(instance_type="a3-ultragpu-8g", gpus={"model": "H200-SXM-141GB", "count": 8})
    group(data, "gpu-b")["burst"]["provider"] = {
        "kind": "gcp",
        "project": "acme-ml",
        "region": "us-central1",
        "zone": "us-central1-b",
        "cidr": "10.60.0.0/24",
    }
    # The NCCL the pinned gIB plugin is built for (CLD016 checks a burst group's plugin too).
    data["versions"]["nccl"] = "2.27.5"
    path = write_spec(tmp_path, data)
    shutil.copy(EXAMPLES / "aws-burst-machines.csv", tmp_path / "aws-burst-machines.csv")
    return load_and_validate(path).plan


def test_burst_base_makes_the_roce_network_and_nodes_use_it_by_name(tmp_path: Path) -> None:
    plan = _burst_plan(tmp_path)
    base = run(lambda: burst_base(BurstGroupArgs(plan=plan, group="gpu-b")))
    roce = _roce(base)
    assert roce.inputs["networkProfile"] == "projects/acme-ml/global/networkProfiles/us-central1-b-vpc-roce"
    rails = [f"harbor-gpu-b-mrdma-sub-{i}" for i in range(8)]
    assert sorted(s.inputs["name"] for s in base.of_type(SUBNET) if s.inputs["network"] == f"{roce.name}-id") == rails
    made = {s.inputs["name"] for s in base.of_type(SUBNET)}

    nodes = run(
        lambda: burst_group(
            BurstGroupArgs(
                plan=plan,
                group="gpu-b",
                active_hosts=["gpu-b001"],
                ssh_public_key="ssh-ed25519 AAAAcontroller",
                host_keys=_keys(plan),
            )
        )
    )
    (instance,) = nodes.of_type(INSTANCE)
    nics = instance.inputs["networkInterfaces"]
    assert [n["nicType"] for n in nics] == ["GVNIC", "GVNIC"] + ["MRDMA"] * 8
    assert [n["subnetwork"] for n in nics[2:]] == rails
    assert {n["subnetwork"] for n in nics} <= made  # every NIC on a subnetwork the base made
    assert instance.inputs["bootDisk"]["initializeParams"]["type"] == "hyperdisk-balanced"
    # The controller's part makes no network and no firewall.
    assert not nodes.of_type(NETWORK)
    assert not nodes.of_type(FIREWALL)
