"""The Azure program under Pulumi's mocks, from examples/azure-ndv5.yaml."""

from __future__ import annotations

import ipaddress

import pulumi
import pytest

from tests.stacks.conftest import RecordingMocks, example_plan, run, takes_param, unsecret

from clusterctl_azure import AzureCluster, AzureClusterArgs  # isort: skip
from clusterctl_stack import HostKey  # isort: skip

CLUSTER_TAG = "clusterctl-cluster"
VM = "azure-native:compute:VirtualMachine"


@pytest.fixture(scope="module")
def plan():
    return example_plan("azure-ndv5.yaml")


@pytest.fixture(scope="module")
def created(plan) -> RecordingMocks:
    keys = {
        n.hostname: HostKey(private="PRIVATE-" + n.hostname, public="ssh-ed25519 AAAA" + n.hostname) for n in plan.nodes
    }

    def program() -> pulumi.Output:
        cluster = AzureCluster(
            plan.cluster.name, AzureClusterArgs(plan=plan, ssh_public_key="ssh-ed25519 AAAAk", host_keys=keys)
        )
        expected = {n.hostname: n.address for n in plan.nodes}
        return cluster.nodes.apply(lambda nodes: _equal(nodes, expected))

    return run(program)


def _equal(got: dict[str, str], want: dict[str, str]) -> None:
    assert got == want


def _node_vms(created: RecordingMocks) -> list:
    return [r for r in created.of_type(VM) if not r.name.endswith("-bastion")]


def test_vms_match_plan(created: RecordingMocks, plan) -> None:
    vms = _node_vms(created)
    assert len(vms) == len(plan.nodes)
    nics = {r.inputs["networkInterfaceName"]: r for r in created.of_type("azure-native:network:NetworkInterface")}
    for node in plan.nodes:
        config = nics[f"{plan.cluster.name}-{node.hostname}"].inputs["ipConfigurations"][0]
        assert config["privateIPAllocationMethod"] == "Static"
        assert config["privateIPAddress"] == node.address


def test_gpu_nodes_in_one_single_placement_group(created: RecordingMocks, plan) -> None:
    scale_sets = created.of_type("azure-native:compute:VirtualMachineScaleSet")
    assert len(scale_sets) == 1
    vmss = scale_sets[0]
    assert vmss.inputs["singlePlacementGroup"] is True
    assert vmss.inputs["platformFaultDomainCount"] == 1
    gpu = set(plan.cloud.group("gpu").hosts)
    members = [vm for vm in _node_vms(created) if vm.inputs.get("virtualMachineScaleSet")]
    assert {vm.inputs["vmName"] for vm in members} == gpu
    assert all(vm.inputs["hardwareProfile"]["vmSize"] == "Standard_ND96isr_H100_v5" for vm in members)
    assert len(members) <= 100


def test_ssh_not_open_to_the_world(created: RecordingMocks, plan) -> None:
    for nsg in created.of_type("azure-native:network:NetworkSecurityGroup"):
        for rule in nsg.inputs["securityRules"]:
            if rule["access"] != "Allow" or rule["direction"] != "Inbound":
                continue
            sources = rule.get("sourceAddressPrefixes") or [rule.get("sourceAddressPrefix")]
            for source in sources:
                assert source not in ("*", "Internet", "0.0.0.0/0"), rule
                if source != "VirtualNetwork":
                    assert ipaddress.ip_network(source).prefixlen > 0
                    assert source in plan.cloud.bastion.allowed_cidrs


def test_every_resource_tagged(created: RecordingMocks, plan) -> None:
    untagged = [
        (r.typ, r.name)
        for r in created.resources
        if r.custom and takes_param(r.typ, "tags") and r.inputs.get("tags", {}).get(CLUSTER_TAG) != plan.cluster.name
    ]
    assert not untagged


def test_managed_lustre_meets_bandwidth(created: RecordingMocks, plan) -> None:
    filesystems = created.of_type("azure-native:storagecache:AmlFilesystem")
    assert len(filesystems) == 1
    fs = filesystems[0]
    per_tib = int(fs.inputs["sku"]["name"].rsplit("-", 1)[1])
    capacity_tib = fs.inputs["storageCapacityTiB"]
    tier = next(t for t in plan.storage if t.name == "datasets")
    needed = max(tier.read_bytes_per_s, tier.write_bytes_per_s)
    assert per_tib * capacity_tib * 1e6 >= needed
    assert capacity_tib % {40: 48, 125: 16, 250: 8, 500: 4}[per_tib] == 0


def test_custom_data_is_secret(created: RecordingMocks) -> None:
    # The secret custom data makes the whole os profile secret in what the engine receives.
    secret, profile = unsecret(_node_vms(created)[0].inputs["osProfile"])
    assert secret
    assert profile["customData"]
