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


def test_each_machine_boots_by_its_firmware_and_keeps_the_right_device(plan) -> None:
    """machines.csv's firmware per machine; after the PXE boot an installed machine keeps its disk
    (installer or image installed), one running the image from RAM keeps network boot."""
    from clusterctl.image.baremetal import with_archives
    from clusterctl.image.lock import LockedImage

    first, *rest = plan.baremetal.machines
    legacy = first.model_copy(update={"boot_mode": "Legacy"})
    bm = plan.baremetal.model_copy(update={"machines": [legacy, *rest], "image_boot": {"gpu": "stateless"}})
    locked = LockedImage(
        profile="dgx-h100", hash="5e" * 32, target="baremetal", ref="sha256:" + "a1" * 32, os="ubuntu-24.04",
        arch="amd64", tag="clusterctl-ubuntu-2404-5e5e5e5e5e5e.tar.zst",
    )  # fmt: skip
    imaged = with_archives(plan.model_copy(update={"baremetal": bm}), {"dgx-h100": locked})
    mocks = run(lambda: BaremetalCluster("atlas", BaremetalClusterArgs(plan=imaged)))
    by_host = {n.inputs["hostname"]: n.inputs for n in _nodes(mocks)}
    assert by_host[first.hostname]["boot_mode"] == "Legacy"
    assert {h: p["boot_mode"] for h, p in by_host.items() if h != first.hostname} == dict.fromkeys(
        [m.hostname for m in rest], "UEFI"
    )
    groups = {m.hostname: m.group for m in bm.machines}
    for host, props in by_host.items():
        assert props["boot_after"] == ("Pxe" if groups[host] == "gpu" else "Hdd"), host
