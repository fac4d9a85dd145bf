"""The AWS program under Pulumi's mocks, from examples/aws-p5.yaml."""

from __future__ import annotations

import base64
import ipaddress

import pulumi
import pytest

from clusterctl.catalog.instances import INSTANCE_TYPES
from tests.plan_edits import replaced
from tests.stacks.conftest import RecordingMocks, example_plan, run, takes_param, unsecret

from clusterctl_aws import AwsCluster, AwsClusterArgs  # isort: skip
from clusterctl_stack import HostKey, WorldOpenSshError  # isort: skip

CLUSTER_TAG = "clusterctl-cluster"


@pytest.fixture(scope="module")
def plan():
    return example_plan("aws-p5.yaml")


@pytest.fixture(scope="module")
def created(plan) -> RecordingMocks:
    keys = {
        n.hostname: HostKey(private="PRIVATE-" + n.hostname, public="ssh-ed25519 AAAA" + n.hostname) for n in plan.nodes
    }

    def program() -> pulumi.Output:
        cluster = AwsCluster(
            plan.cluster.name, AwsClusterArgs(plan=plan, ssh_public_key="ssh-ed25519 AAAAclusterctl", host_keys=keys)
        )

        def check(nodes: dict[str, str]) -> None:
            # Assertions inside apply run once the outputs resolve; a wrong one fails the test.
            assert nodes == {n.hostname: n.address for n in plan.nodes}

        return cluster.nodes.apply(check)

    return run(program)


def test_instances_match_plan(created: RecordingMocks, plan) -> None:
    instances = created.of_type("aws:ec2/instance:Instance")
    node_instances = [r for r in instances if not r.name.endswith("-bastion")]
    assert len(node_instances) == len(plan.nodes)
    gpu = plan.cloud.group("gpu")
    templates = created.of_type("aws:ec2/launchTemplate:LaunchTemplate")
    assert len(templates) == len(gpu.hosts)
    assert {t.inputs["instanceType"] for t in templates} == {"p5.48xlarge"}


def test_efa_interfaces_per_catalog(created: RecordingMocks, plan) -> None:
    expected = INSTANCE_TYPES["p5.48xlarge"].efa_interfaces
    assert expected == 32
    for template in created.of_type("aws:ec2/launchTemplate:LaunchTemplate"):
        nics = template.inputs["networkInterfaces"]
        efa = [n for n in nics if n["interfaceType"] in ("efa", "efa-only")]
        assert len(efa) == expected
        # one EFA device per network card, and the ENA primary carries the planned address
        assert sorted(n["networkCardIndex"] for n in efa) == list(range(expected))
        primary = [n for n in nics if n["interfaceType"] == "interface"]
        assert len(primary) == 1
        assert primary[0]["deviceIndex"] == 0
        assert primary[0]["privateIpAddress"] in {n.address for n in plan.nodes}


def test_placement_group_is_cluster(created: RecordingMocks) -> None:
    groups = created.of_type("aws:ec2/placementGroup:PlacementGroup")
    assert len(groups) == 1
    assert groups[0].inputs["strategy"] == "cluster"
    for template in created.of_type("aws:ec2/launchTemplate:LaunchTemplate"):
        assert template.inputs["placement"]["groupName"] == groups[0].name


def test_ssh_not_open_to_the_world(created: RecordingMocks, plan) -> None:
    allowed = set(plan.cloud.bastion.allowed_cidrs)
    ssh_rules = [
        r
        for r in created.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
        if r.inputs["ipProtocol"] in ("-1", "tcp")
        and r.inputs.get("fromPort", 0) <= 22 <= r.inputs.get("toPort", 65535)
    ]
    assert ssh_rules
    for rule in ssh_rules:
        cidr = rule.inputs.get("cidrIpv4")
        if cidr is None:
            assert rule.inputs["referencedSecurityGroupId"]  # the cluster's own group
            continue
        assert ipaddress.ip_network(cidr).prefixlen > 0, f"{rule.name} opens SSH to {cidr}"
        assert cidr in allowed or cidr == plan.cloud.network_cidr


def test_world_ssh_only_when_spec_allows(run_program, plan) -> None:
    opened = replaced(plan, {"cloud.bastion.allowed_cidrs": ["0.0.0.0/0"]})
    with pytest.raises(WorldOpenSshError, match="allow_world_ssh"):
        run_program(lambda: AwsCluster("forge", AwsClusterArgs(plan=opened, ssh_public_key="k")))
    allowed = replaced(opened, {"cloud.allow_world_ssh": True})
    mocks = run_program(lambda: AwsCluster("forge", AwsClusterArgs(plan=allowed, ssh_public_key="k")))
    rules = mocks.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    assert [r.name for r in rules if r.inputs.get("cidrIpv4") == "0.0.0.0/0"] == ["forge-net-bastion-ssh-0"]


def test_every_resource_tagged(created: RecordingMocks, plan) -> None:
    untagged = [
        (r.typ, r.name)
        for r in created.resources
        if r.custom and takes_param(r.typ, "tags") and r.inputs.get("tags", {}).get(CLUSTER_TAG) != plan.cluster.name
    ]
    assert not untagged
    # what instances launch from the templates (volumes, ENIs) is tagged too
    for template in created.of_type("aws:ec2/launchTemplate:LaunchTemplate"):
        kinds = {spec["resourceType"] for spec in template.inputs["tagSpecifications"]}
        assert kinds == {"instance", "volume", "network-interface"}


def test_fsx_throughput_meets_bandwidth(created: RecordingMocks, plan) -> None:
    filesystems = created.of_type("aws:fsx/lustreFileSystem:LustreFileSystem")
    assert len(filesystems) == len(plan.cloud.managed_lustre) == 2
    tiers = {t.name: t for t in plan.storage}
    for fs in filesystems:
        name = next(m.name for m in plan.cloud.managed_lustre if fs.name.endswith(m.name + "-fsx"))
        tier = tiers[name]
        throughput_bytes = fs.inputs["perUnitStorageThroughput"] * fs.inputs["storageCapacity"] / 1024 * 1e6
        needed = max(b for b in (tier.read_bytes_per_s, tier.write_bytes_per_s) if b)
        assert throughput_bytes >= needed
        assert fs.inputs["storageCapacity"] == 1200 or fs.inputs["storageCapacity"] % 2400 == 0


def test_user_data_carries_host_key_as_secret(created: RecordingMocks) -> None:
    template = created.of_type("aws:ec2/launchTemplate:LaunchTemplate")[0]
    secret, value = unsecret(template.inputs["userData"])
    assert secret, "user data with a private host key must be a Pulumi secret"
    text = base64.b64decode(value).decode()
    assert text.startswith("#cloud-config")
    assert "ed25519_private: PRIVATE-gpu" in text
    head = next(r for r in created.of_type("aws:ec2/instance:Instance") if r.name.endswith("ctl001"))
    assert unsecret(head.inputs["userData"])[0]
