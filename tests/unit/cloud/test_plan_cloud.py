"""The plan's cloud and bare-metal sections, from the example specs."""

from __future__ import annotations

from ipaddress import IPv4Network, ip_address

import pytest

from clusterctl.catalog.cloud_services import FSX_TIERS
from clusterctl.pipeline import load_and_validate
from clusterctl.plan.cloud import size_managed_lustre, split_network
from tests.conftest import EXAMPLES


def plan_of(name: str):
    return load_and_validate(EXAMPLES / name).plan


@pytest.mark.parametrize("name", ["aws-p5.yaml", "gcp-a3mega.yaml", "azure-ndv5.yaml"])
def test_every_node_in_the_node_subnet(name: str) -> None:
    plan = plan_of(name)
    cloud = plan.cloud
    assert cloud is not None
    nodes_net = IPv4Network(next(s.cidr for s in cloud.subnets if s.purpose == "nodes"))
    planned = [n for n in plan.nodes]
    assert sum(len(g.hosts) for g in cloud.groups) == len(planned)
    for group in cloud.groups:
        for host, address in zip(group.hosts, group.addresses, strict=True):
            assert ip_address(address) in nodes_net
            assert plan.node(host).address == address
    others = [IPv4Network(s.cidr) for s in cloud.subnets if s.purpose != "nodes" and s.cidr]
    assert all(not nodes_net.overlaps(o) for o in others)
    assert cloud.labels == {"clusterctl-cluster": plan.cluster.name, "managed-by": "clusterctl"}


def test_aws_plan() -> None:
    cloud = plan_of("aws-p5.yaml").cloud
    gpu = cloud.group("gpu")
    assert (gpu.instance_type, gpu.efa_interfaces, gpu.placement) == ("p5.48xlarge", 32, True)
    assert cloud.placement_strategy == "cluster"
    assert cloud.image.startswith("resolve:ssm:/aws/service/canonical/ubuntu/server/24.04/")
    assert cloud.bastion is not None
    assert cloud.bastion.allowed_cidrs == ["203.0.113.0/24"]
    assert cloud.plugins == {"aws_ofi_nccl": "1.14.2", "efa_installer": "1.41.0"}
    assert not cloud.group("ctl").placement


def test_gcp_plan() -> None:
    cloud = plan_of("gcp-a3mega.yaml").cloud
    assert [IPv4Network(n.cidr).prefixlen for n in cloud.gpu_networks] == [20] * 8
    assert cloud.placement_strategy == "compact"
    assert cloud.plugins["rxdm_image"].endswith(":v1.0.23")
    assert cloud.group("gpu").gpu_nics[0] == "enp6s0"


def test_azure_plan() -> None:
    cloud = plan_of("azure-ndv5.yaml").cloud
    assert cloud.group("gpu").scale_set == "nimbus-gpu"
    assert cloud.group("ctl").scale_set is None
    assert cloud.placement_strategy == "single-placement-group"
    (fs,) = cloud.managed_lustre
    assert (fs.service, fs.tier, fs.fsname) == ("amlfs", "AMLFS-Durable-Premium-250", "lustrefs")
    assert fs.capacity_gib % (8 * 1024) == 0


@pytest.mark.parametrize("name", ["aws-p5.yaml", "gcp-a3mega.yaml", "azure-ndv5.yaml"])
def test_managed_lustre_meets_bandwidth_and_capacity(name: str) -> None:
    plan = plan_of(name)
    for fs in plan.cloud.managed_lustre:
        assert fs.throughput_mbps == pytest.approx(fs.per_unit_mbps_per_tib * fs.capacity_gib / 1024, abs=0.1)
        assert fs.required_mbps is not None
        assert fs.throughput_mbps >= fs.required_mbps
    spec_tiers = {t.name: t for t in load_and_validate(EXAMPLES / name).loaded.spec.storage}
    for fs in plan.cloud.managed_lustre:
        wanted = spec_tiers[fs.name].capacity_tib
        if wanted:
            assert fs.capacity_gib >= wanted * 1024


def test_sizing_prefers_the_lowest_tier_that_holds_the_data() -> None:
    tiers = FSX_TIERS["PERSISTENT_2"]
    tier, capacity, _ = size_managed_lustre(tiers, required_mbps=10_000, data_gib=100 * 1024, fixed=None)
    assert tier.mbps_per_tib == 125
    assert capacity >= 100 * 1024
    tier, capacity, _ = size_managed_lustre(tiers, required_mbps=40_000, data_gib=0, fixed=None)
    assert tier.mbps_per_tib == 1000
    assert tier.throughput_mbps(capacity) >= 40_000
    tier, capacity, why = size_managed_lustre(tiers, required_mbps=None, data_gib=0, fixed=None)
    assert (tier.mbps_per_tib, capacity) == (125, 1200)
    assert "no bandwidth" in why


def test_split_network() -> None:
    nodes, public, storage = split_network(IPv4Network("10.40.0.0/16"))
    assert (str(nodes), str(public), str(storage)) == ("10.40.0.0/17", "10.40.128.0/24", "10.40.129.0/24")
    nodes, public, storage = split_network(IPv4Network("10.0.0.0/24"))
    assert (str(nodes), str(public), storage) == ("10.0.0.0/25", "10.0.0.128/25", None)


def test_baremetal_plan() -> None:
    plan = plan_of("onprem-h100-256.yaml")
    bm = plan.baremetal
    assert plan.cloud is None
    assert bm is not None
    assert len(bm.machines) == len(plan.nodes) == 35
    assert bm.pxe_server == "10.20.0.2"
    assert bm.http_url == "http://10.20.0.2:8080"
    assert bm.installer_iso.startswith("ubuntu-24.04")
    gpu = next(a for a in bm.autoinstall if a.group == "gpu")
    assert len(gpu.hosts) == 32
    assert gpu.macs["3c:ec:ef:10:00:04"] == "gpu001"
    assert bm.ready_timeout_s == 45 * 60


def test_local_plan_has_no_provisioning() -> None:
    plan = plan_of("local.yaml")
    assert plan.cloud is None
    assert plan.baremetal is None
