"""clusterctl.node.rdma_rails against sysfs trees of the same DGX H100 under both naming schemes.

The trees (tests/fixtures/sysfs, README there) differ only in the RDMA device names: the kernel's
mlx5_N (DOCA/MOFED, DGX OS) and rdma-core's NAME_FALLBACK names (ibp24s0, rocep41s0f1). Rails named by
PCI address resolve on both; rails named mlx5_N resolve only where the image keeps those names, and
the module says so instead of letting NCCL match no HCA.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import RDMA_RAILS_MODULE

ROOT = Path(__file__).resolve().parents[3]
SYSFS = ROOT / "tests" / "fixtures" / "sysfs"
MODULE = RDMA_RAILS_MODULE

# DGX H100/H200 User Guide, "Network Modules": GPU i's ConnectX-7 (bus) and its names.
RAILS_PCI = [
    "0000:18:00.0",
    "0000:40:00.0",
    "0000:4f:00.0",
    "0000:5e:00.0",
    "0000:9a:00.0",
    "0000:c0:00.0",
    "0000:ce:00.0",
    "0000:dc:00.0",
]
RAILS_MLX5 = ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"]
RAILS_IBP = ["ibp24s0", "ibp64s0", "ibp79s0", "ibp94s0", "ibp154s0", "ibp192s0", "ibp206s0", "ibp220s0"]
STORAGE_PCI = ["0000:29:00.0", "0000:aa:00.0"]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("rdma_rails", MODULE)
    assert spec
    assert spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


rdma_rails = _load()


def _tree(name: str) -> str:
    return str(SYSFS / name)


@pytest.mark.parametrize(
    ("tree", "naming", "ibdevs", "netdevs", "link_layer"),
    [
        ("dgx-h100-mlx5", "kernel", RAILS_MLX5, RAILS_IBP, "InfiniBand"),
        ("dgx-h100-rdma-core", "rdma-core", RAILS_IBP, RAILS_IBP, "InfiniBand"),
        (
            "dgx-h100-roce-rdma-core",
            "rdma-core",
            [n.replace("ib", "roce", 1) for n in RAILS_IBP],
            [n.replace("ib", "en", 1) + "np0" for n in RAILS_IBP],
            "Ethernet",
        ),
    ],
)
def test_rails_by_pci_address_resolve_under_every_naming_scheme(
    tree: str, naming: str, ibdevs: list[str], netdevs: list[str], link_layer: str
) -> None:
    fact = rdma_rails.rails_fact(RAILS_PCI, STORAGE_PCI, "", _tree(tree))

    assert fact["missing"] == []
    assert fact["naming"] == naming
    assert [r["ibdev"] for r in fact["rails"]] == ibdevs
    assert [r["netdev"] for r in fact["rails"]] == netdevs
    assert [r["pci"] for r in fact["rails"]] == RAILS_PCI
    assert {r["link_layer"] for r in fact["rails"]} == {link_layer}
    assert {r["state"] for r in fact["rails"]} == {"ACTIVE"}
    # nvidia-smi topo -m (8xH100 fixture): NIC0-3 on NUMA 0, NIC4-7 on NUMA 1.
    assert [r["numa_node"] for r in fact["rails"]] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert fact["nccl_ib_hca"] == "=" + ",".join(f"{d}:1" for d in ibdevs)
    # Storage port 1 of each dual-port card is InfiniBand (multi-function: f0 in the rdma-core name).
    assert [s["ibdev"] for s in fact["storage_nics"]] == (
        ["mlx5_1", "mlx5_7"] if naming == "kernel" else ["ibp41s0f0", "ibp170s0f0"]
    )


def test_rdma_core_names_the_ethernet_storage_port_roce() -> None:
    devices = rdma_rails.scan(_tree("dgx-h100-rdma-core"))

    assert devices["rocep41s0f1"]["pci"] == "0000:29:00.1"
    assert devices["rocep41s0f1"]["link_layer"] == "Ethernet"
    assert devices["rocep41s0f1"]["netdev"] == "enp41s0f1np1"
    assert devices["rocep41s0f1"]["port_guid"] is None  # RoCE has no port GUID to bind an SM to
    assert len(devices) == 12


def test_rails_by_name_resolve_where_the_image_keeps_them() -> None:
    fact = rdma_rails.rails_fact(RAILS_MLX5, [], "", _tree("dgx-h100-mlx5"))

    assert fact["missing"] == []
    assert fact["nccl_ib_hca"] == "=mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1"


def test_mlx5_names_on_an_rdma_core_image_are_reported_with_the_pci_address_to_use() -> None:
    fact = rdma_rails.rails_fact(RAILS_MLX5, [], "", _tree("dgx-h100-rdma-core"))

    assert [m["ref"] for m in fact["missing"]] == RAILS_MLX5
    assert fact["nccl_ib_hca"] == ""  # never a partial list: NCCL would silently use fewer rails
    why = fact["missing"][0]["why"]
    assert "no RDMA device named mlx5_0" in why
    assert "ibp24s0 (0000:18:00.0)" in why
    assert "rdma-core-style" in why
    assert "name the rail by its PCI address" in why


def test_unknown_pci_address_and_function_without_rdma_device() -> None:
    fact = rdma_rails.rails_fact(["0000:18:00.0", "0000:17:01.0", "0000:77:00.0"], [], "", _tree("dgx-h100-mlx5"))

    assert [m["index"] for m in fact["missing"]] == [1, 2]
    assert fact["missing"][0]["why"].startswith("no PCI function 0000:17:01.0")
    assert fact["missing"][1]["why"].startswith("no PCI function 0000:77:00.0")


def test_pci_function_without_rdma_device(tmp_path: Path) -> None:
    function = tmp_path / "devices" / "pci0000:00" / "0000:00:1f.0"
    function.mkdir(parents=True)
    (tmp_path / "bus" / "pci" / "devices").mkdir(parents=True)
    (tmp_path / "bus" / "pci" / "devices" / "0000:00:1f.0").symlink_to(
        os.path.relpath(function, tmp_path / "bus/pci/devices")
    )

    fact = rdma_rails.rails_fact(["0000:00:1f.0"], [], "", str(tmp_path))

    assert "has no RDMA device" in fact["missing"][0]["why"]
    assert "none (no /sys/class/infiniband entries" in fact["missing"][0]["why"]


def test_opensm_port_guid_comes_from_gid_0() -> None:
    for tree in ("dgx-h100-mlx5", "dgx-h100-rdma-core"):
        fact = rdma_rails.rails_fact(RAILS_PCI, [], "0000:18:00.0", _tree(tree))
        assert fact["opensm_port"]["port_guid"] == "0xa088c20300101800", tree
        assert fact["opensm_port"]["node_guid"] == "0xa088c20300101800", tree


def test_ipoib_interfaces_are_named_after_their_rails_netdev() -> None:
    wanted = [
        {"rail": 0, "address": "10.40.0.13/16", "mode": "datagram"},
        {"rail": 7, "address": "10.47.0.13/16", "mtu": 4092},
        {"name": "ibs9", "address": "10.49.0.13/16"},
    ]
    for tree in ("dgx-h100-mlx5", "dgx-h100-rdma-core"):
        fact = rdma_rails.rails_fact(RAILS_PCI, [], "", _tree(tree), ipoib_interfaces=wanted)
        assert [i["name"] for i in fact["ipoib"]] == ["ibp24s0", "ibp220s0", "ibs9"], tree
        assert fact["ipoib"][1]["mtu"] == 4092


def test_ipoib_rail_that_is_not_there_is_missing() -> None:
    fact = rdma_rails.rails_fact(RAILS_PCI[:1], [], "", _tree("dgx-h100-mlx5"), ipoib_interfaces=[{"rail": 3}])

    assert fact["ipoib"] == []
    assert fact["missing"] == [{"kind": "ipoib", "index": 0, "ref": "3", "why": "rail 3 is not on this node"}]


def test_no_sysfs_means_every_rail_missing(tmp_path: Path) -> None:
    fact = rdma_rails.rails_fact(RAILS_PCI[:2], [], "", str(tmp_path))

    assert fact["naming"] == "none"
    assert len(fact["missing"]) == 2


def _run_module(args: dict[str, object], tmp_path: Path) -> tuple[int, dict[str, object]]:
    """Run the file the way Ansible does (arguments in a JSON file) and read its JSON answer."""
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    result = subprocess.run(
        [sys.executable, str(MODULE), str(args_file)], capture_output=True, text=True, check=False, timeout=60
    )
    return result.returncode, json.loads(result.stdout)


def test_module_returns_the_fact(tmp_path: Path) -> None:
    rc, out = _run_module({"rails": RAILS_PCI, "sysfs_root": _tree("dgx-h100-rdma-core")}, tmp_path)

    assert rc == 0
    assert out["changed"] is False
    assert out["ansible_facts"]["rdma_sysfs"]["rails"][0]["ibdev"] == "ibp24s0"


def test_module_fails_on_a_missing_rail_unless_not_required(tmp_path: Path) -> None:
    rc, out = _run_module({"rails": RAILS_MLX5, "sysfs_root": _tree("dgx-h100-rdma-core")}, tmp_path)
    assert rc == 1
    assert out["failed"] is True
    assert out["msg"].startswith("Some HCAs of the hardware profile are not on this node: rail 0 (mlx5_0)")

    rc, out = _run_module({"rails": RAILS_MLX5, "sysfs_root": str(tmp_path), "required": False}, tmp_path)
    assert rc == 0
    assert len(out["ansible_facts"]["rdma_sysfs"]["missing"]) == 8


def test_checked_in_trees_are_what_make_trees_writes(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("make_trees", SYSFS / "make_trees.py")
    assert spec
    assert spec.loader
    make_trees = importlib.util.module_from_spec(spec)
    sys.modules["make_trees"] = make_trees  # dataclasses look their module up there
    try:
        spec.loader.exec_module(make_trees)
    finally:
        del sys.modules["make_trees"]

    def listing(root: Path) -> dict[str, str]:
        out = {}
        for path in sorted(root.rglob("*")):
            rel = str(path.relative_to(root))
            out[rel] = f"-> {path.readlink()}" if path.is_symlink() else path.read_text() if path.is_file() else "/"
        return out

    for tree in make_trees.TREES:
        make_trees.build(tree, tmp_path / tree.name)
        assert listing(tmp_path / tree.name) == listing(SYSFS / tree.name), tree.name
