"""Storage HCAs named without their interfaces: the render leaves a marker, the node writes in its netdev.

examples/onprem-h100-256.yaml with ``storage_netdevs`` removed and the storage HCAs named by PCI
address: the plan and render put ``clusterctl:storage_nic:<i>`` in the LNet configuration and the
WEKA ``net=`` options; roles/storage_clients runs the sysfs lookup of clusterctl.node.rdma_rails (run
here on the fixture sysfs trees of tests/fixtures/sysfs under both naming schemes)
and its filter writes the netdevs in. Explicit ``storage_netdevs`` still render as given.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from clusterctl.pipeline import load_and_validate
from clusterctl.plan import Plan
from clusterctl.plan.storage_net import MARKER, is_marker, storage_interfaces
from clusterctl.render.tree import render_files
from tests.conftest import EXAMPLES, REPO_ROOT
from tests.specs import mutated

ROLE = REPO_ROOT / "roles" / "storage_clients"
SYSFS = REPO_ROOT / "tests" / "fixtures" / "sysfs"
STORAGE_PCI = ["0000:29:00.0", "0000:aa:00.0"]
# Port 1 of each dual-port storage card is InfiniBand; its netdev is the same under both schemes
# (udev names netdevs; rdma-core renames only the RDMA devices): tests/fixtures/sysfs/README.md.
STORAGE_NETDEVS = ["ibp41s0f0", "ibp170s0f0"]


def _filters() -> ModuleType:
    path = ROLE / "filter_plugins" / "storage_nics.py"
    spec = importlib.util.spec_from_file_location("storage_nics", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


filters = _filters()


def _by_hca(data: dict[str, Any]) -> None:
    profile = data["hardware"]["dgx-h100"]
    profile["storage_nics"] = list(STORAGE_PCI)
    del profile["storage_netdevs"]


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    return load_and_validate(mutated(tmp_path_factory.mktemp("spec"), _by_hca)).plan


@pytest.fixture(scope="module")
def files(plan: Plan) -> dict[str, str]:
    return {f.path: f.text for f in render_files(plan)}


def _rdma_rails() -> ModuleType:
    """The lookup the role runs (clusterctl.node.rdma_rails, the one the rdma role maps the rails with)."""
    path = (
        REPO_ROOT
        / "collections"
        / "ansible_collections"
        / "clusterctl"
        / "node"
        / "plugins"
        / "modules"
        / "rdma_rails.py"
    )
    spec = importlib.util.spec_from_file_location("clusterctl_node_rdma_rails", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def lookup(nics: list[str], tree: str) -> dict[str, Any]:
    """What the role's lookup gives on a node whose /sys is ``tree``: each storage HCA's netdev and RDMA
    device in order ('' where it has none), why any was not found."""
    fact = _rdma_rails().rails_fact([], nics, "", str(SYSFS / tree))
    found = {e["index"]: e for e in fact["storage_nics"]}
    return {
        "netdevs": filters.storage_nic_netdev_list(fact, len(nics)),
        "ibdevs": [found[i]["ibdev"] if i in found else "" for i in range(len(nics))],
        "missing": [m["why"] for m in fact["missing"]],
    }


# --- plan and render ---------------------------------------------------------------------------


def test_plan_puts_a_marker_per_storage_hca(plan: Plan) -> None:
    (lnet,) = plan.lnet
    (network,) = lnet.networks
    weka = next(t for t in plan.storage if t.kind == "weka")
    lustre = next(t for t in plan.storage if t.kind == "lustre")

    assert network.interfaces == ["clusterctl:storage_nic:0", "clusterctl:storage_nic:1"]
    assert all(is_marker(i) for i in network.interfaces)
    (dgx,) = [m for m in weka.mounts if m.hardware == "dgx-h100"]
    assert dgx.options[-2:] == ["net=clusterctl:storage_nic:0", "net=clusterctl:storage_nic:1"]
    # The GPU nodes still mount the parallel file systems.
    assert lustre.hosts == weka.hosts == "gpu[001-032]"


def test_render_writes_the_markers_and_says_who_fills_them(files: dict[str, str]) -> None:
    lnet = files["storage/lnet/dgx-h100.conf"]
    unit = files["storage/units/dgx-h100/mnt-ckpt.mount"]

    assert '0: "clusterctl:storage_nic:0"' in lnet
    assert "roles/storage_clients writes in from the node's sysfs" in lnet
    assert yaml.safe_load(lnet)["net"][0]["local NI(s)"][1]["interfaces"] == {0: "clusterctl:storage_nic:1"}
    assert "Options=num_cores=1,_netdev,net=clusterctl:storage_nic:0,net=clusterctl:storage_nic:1\n" in unit
    assert "# net=clusterctl:storage_nic:<i> is the interface of the profile's storage HCA i" in unit


def test_explicit_storage_netdevs_render_as_given() -> None:
    plan = load_and_validate(EXAMPLES / "onprem-h100-256.yaml").plan
    lnet = {f.path: f.text for f in render_files(plan)}["storage/lnet/dgx-h100.conf"]

    assert plan.lnet[0].networks[0].interfaces == ["ibs1", "ibs2"]
    assert MARKER not in lnet
    assert "storage_nic" not in lnet
    assert storage_interfaces(["ibs1"], ["0000:29:00.0", "0000:aa:00.0"]) == ["ibs1"]
    assert storage_interfaces([], []) == []


# --- the role's lookup and filter ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tree", "ibdevs"),
    [("dgx-h100-mlx5", ["mlx5_1", "mlx5_7"]), ("dgx-h100-rdma-core", ["ibp41s0f0", "ibp170s0f0"])],
)
def test_lookup_finds_the_storage_netdevs_under_both_naming_schemes(tree: str, ibdevs: list[str]) -> None:
    found = lookup(STORAGE_PCI, tree)

    assert found["netdevs"] == STORAGE_NETDEVS
    assert found["ibdevs"] == ibdevs
    assert found["missing"] == []


def test_lookup_says_what_is_missing() -> None:
    found = lookup(["mlx5_1", "0000:29:00.0"], "dgx-h100-rdma-core")

    assert found["netdevs"] == ["", "ibp41s0f0"]
    assert found["missing"][0].startswith("no RDMA device named mlx5_1 on this node")


def test_filter_writes_the_netdevs_into_the_rendered_files(files: dict[str, str]) -> None:
    netdevs = lookup(STORAGE_PCI, "dgx-h100-rdma-core")["netdevs"]
    lnet = files["storage/lnet/dgx-h100.conf"]
    units = {"mnt-ckpt.mount": files["storage/units/dgx-h100/mnt-ckpt.mount"]}

    assert filters.storage_nic_markers(lnet) == [0, 1]
    assert filters.storage_nic_markers(units) == [0, 1]
    installed = filters.storage_nic_netdevs(lnet, netdevs)
    assert [ni["interfaces"][0] for ni in yaml.safe_load(installed)["net"][0]["local NI(s)"]] == STORAGE_NETDEVS
    unit = filters.storage_nic_netdevs(units, netdevs)["mnt-ckpt.mount"]
    assert "Options=num_cores=1,_netdev,net=ibp41s0f0,net=ibp170s0f0\n" in unit
    with pytest.raises(ValueError, match="storage NIC 1 has no netdev on this node"):
        filters.storage_nic_netdevs(lnet, ["ibp41s0f0", ""])


def test_files_without_markers_pass_through_unchanged() -> None:
    text = "net:\n  - net type: o2ib\n    local NI(s):\n      - interfaces:\n          0: ibs1\n"

    assert filters.storage_nic_markers(text) == []
    assert filters.storage_nic_netdevs(text, []) == text
    assert filters.storage_nic_markers(Path(__file__).name) == []
