"""The GCP program under Pulumi's mocks, from examples/gcp-a3mega.yaml."""

from __future__ import annotations

import ipaddress

import pulumi
import pytest

from clusterctl.catalog.instances import INSTANCE_TYPES
from tests.stacks.conftest import RecordingMocks, example_plan, run, takes_param, unsecret

from clusterctl_gcp import GcpCluster, GcpClusterArgs  # isort: skip
from clusterctl_stack import HostKey  # isort: skip

CLUSTER_LABEL = "clusterctl-cluster"


@pytest.fixture(scope="module")
def plan():
    return example_plan("gcp-a3mega.yaml")


@pytest.fixture(scope="module")
def created(plan) -> RecordingMocks:
    keys = {
        n.hostname: HostKey(private="PRIVATE-" + n.hostname, public="ssh-ed25519 AAAA" + n.hostname) for n in plan.nodes
    }

    def program() -> pulumi.Output:
        cluster = GcpCluster(
            plan.cluster.name, GcpClusterArgs(plan=plan, ssh_public_key="ssh-ed25519 AAAAk", host_keys=keys)
        )
        return cluster.nodes.apply(lambda nodes: _check_nodes(nodes, plan))

    return run(program)


def _check_nodes(nodes: dict[str, str], plan) -> None:
    assert nodes == {n.hostname: n.address for n in plan.nodes}


def _instances(created: RecordingMocks) -> list:
    return [r for r in created.of_type("gcp:compute/instance:Instance") if not r.name.endswith("-bastion")]


def test_instances_match_plan(created: RecordingMocks, plan) -> None:
    instances = _instances(created)
    assert len(instances) == len(plan.nodes)
    by_host = {r.inputs["hostname"].split(".")[0]: r for r in instances}
    for node in plan.nodes:
        nic0 = by_host[node.hostname].inputs["networkInterfaces"][0]
        assert nic0["networkIp"] == node.address


def test_gpu_nics_per_catalog(created: RecordingMocks, plan) -> None:
    a3 = INSTANCE_TYPES["a3-megagpu-8g"]
    gpu_hosts = set(plan.cloud.group("gpu").hosts)
    networks = [r for r in created.of_type("gcp:compute/network:Network") if "gpunet" in r.name]
    assert len(networks) == len(a3.gpu_nics) == 8
    assert all(n.inputs["mtu"] == 8244 for n in networks)
    for instance in _instances(created):
        host = instance.inputs["hostname"].split(".")[0]
        expected = 1 + (len(a3.gpu_nics) if host in gpu_hosts else 0)
        assert len(instance.inputs["networkInterfaces"]) == expected
        if host in gpu_hosts:
            assert instance.inputs["scheduling"]["onHostMaintenance"] == "TERMINATE"


def test_compact_placement(created: RecordingMocks, plan) -> None:
    policies = created.of_type("gcp:compute/resourcePolicy:ResourcePolicy")
    assert len(policies) == 1
    assert policies[0].inputs["groupPlacementPolicy"]["collocation"] == "COLLOCATED"
    gpu_hosts = set(plan.cloud.group("gpu").hosts)
    for instance in _instances(created):
        host = instance.inputs["hostname"].split(".")[0]
        assert bool(instance.inputs.get("resourcePolicies")) == (host in gpu_hosts)


def test_ssh_not_open_to_the_world(created: RecordingMocks, plan) -> None:
    for rule in created.of_type("gcp:compute/firewall:Firewall"):
        opens_ssh = any(
            a["protocol"] == "all" or (a["protocol"] == "tcp" and "22" in a.get("ports", ["22"]))
            for a in rule.inputs["allows"]
        )
        if not opens_ssh:
            continue
        for cidr in rule.inputs["sourceRanges"]:
            assert ipaddress.ip_network(cidr).prefixlen > 0, f"{rule.name} opens SSH to {cidr}"
    bastion_rules = [r for r in created.of_type("gcp:compute/firewall:Firewall") if r.inputs.get("targetTags")]
    assert [r.inputs["sourceRanges"] for r in bastion_rules] == [plan.cloud.bastion.allowed_cidrs]


def test_every_resource_labelled_or_named(created: RecordingMocks, plan) -> None:
    name = plan.cluster.name
    for r in created.resources:
        if not r.custom or r.typ.startswith("pulumi:providers"):
            continue
        if takes_param(r.typ, "labels"):
            assert r.inputs.get("labels", {}).get(CLUSTER_LABEL) == name, (r.typ, r.name)
        elif "name" in r.inputs:
            assert r.inputs["name"].startswith(name), (r.typ, r.inputs["name"])


def test_managed_lustre_meets_bandwidth(created: RecordingMocks, plan) -> None:
    instances = created.of_type("gcp:lustre/instance:Instance")
    assert len(instances) == 2
    tiers = {t.name: t for t in plan.storage}
    for inst in instances:
        tier = tiers[inst.inputs["instanceId"].removeprefix(plan.cluster.name + "-")]
        capacity = int(inst.inputs["capacityGib"])
        per_unit = int(inst.inputs["perUnitStorageThroughput"])
        needed = max(b for b in (tier.read_bytes_per_s, tier.write_bytes_per_s) if b)
        assert per_unit * capacity / 1024 * 1e6 >= needed
        assert capacity % {125: 72000, 250: 36000, 500: 18000, 1000: 9000}[per_unit] == 0
    assert created.of_type("gcp:servicenetworking/connection:Connection")


def test_metadata_is_secret(created: RecordingMocks) -> None:
    secret, metadata = unsecret(_instances(created)[0].inputs["metadata"])
    assert secret
    assert metadata["user-data"].startswith("#cloud-config")
