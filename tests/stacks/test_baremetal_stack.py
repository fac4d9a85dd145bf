"""The bare-metal program under Pulumi's mocks, from examples/onprem-h100-256.yaml."""

from __future__ import annotations

import pulumi
import pytest

from tests.stacks.conftest import RecordingMocks, example_plan, run, unsecret

from clusterctl_baremetal import BaremetalCluster, BaremetalClusterArgs  # isort: skip


@pytest.fixture(scope="module")
def plan():
    return example_plan("onprem-h100-256.yaml")


@pytest.fixture(scope="module")
def created(plan) -> RecordingMocks:
    def program() -> pulumi.Output:
        cluster = BaremetalCluster(
            plan.cluster.name, BaremetalClusterArgs(plan=plan, bmc_username="admin", bmc_password="from-pulumi-secret")
        )
        expected = {n.hostname: n.address for n in plan.nodes}
        return cluster.nodes.apply(lambda nodes: _equal(nodes, expected))

    return run(program)


def _equal(got: dict[str, str], want: dict[str, str]) -> None:
    assert got == want


def _nodes(created: RecordingMocks) -> list:
    return [r for r in created.resources if r.typ.endswith(":RedfishNode")]


def test_one_redfish_node_per_machine(created: RecordingMocks, plan) -> None:
    nodes = _nodes(created)
    assert len(nodes) == len(plan.nodes) == len(plan.baremetal.machines) == 35
    by_host = {n.inputs["hostname"]: n.inputs for n in nodes}
    for machine in plan.baremetal.machines:
        props = by_host[machine.hostname]
        assert (props["bmc"], props["mac"], props["address"]) == (machine.bmc, machine.mac, machine.address)
        assert props["ready_port"] == 22
        assert props["boot_mode"] == "UEFI"


def test_bmc_credentials_are_secret(created: RecordingMocks) -> None:
    for node in _nodes(created):
        secret, value = unsecret(node.inputs["bmc_password"])
        assert secret
        assert value == "from-pulumi-secret"
        assert unsecret(node.inputs["bmc_username"])[0]


def test_credentials_are_optional(plan) -> None:
    mocks = run(lambda: BaremetalCluster("atlas", BaremetalClusterArgs(plan=plan)))
    assert all(n.inputs.get("bmc_password") is None for n in _nodes(mocks))
