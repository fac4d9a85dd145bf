"""Fat-tree sizing against NVIDIA's published DGX SuperPOD tables (techref §4.3).

The expected rows are NVIDIA's numbers, not values read from our code: H100 SuperPOD
(RA-11333-001, 32-node SUs, one node slot per SU used by UFM) and B200 SuperPOD.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clusterctl.plan import build_plan
from clusterctl.plan.fattree import size_fat_tree
from clusterctl.spec import load_spec
from tests.specs import example_data, group, write_spec

# SUs, nodes, leaves, spines, spine-leaf cables (H100 RA compute fabric table).
H100_SUPERPOD = [(1, 31, 8, 4, 256), (2, 63, 16, 8, 512), (3, 95, 24, 16, 768), (4, 127, 32, 16, 1024)]
# SUs, nodes, leaves, spines, cores (B200 RA); cables per layer = GPUs.
B200_SUPERPOD = [
    (2, 64, 16, 8, 0),
    (4, 128, 32, 16, 0),
    (8, 256, 64, 32, 0),
    (16, 512, 128, 128, 64),
    (32, 1024, 256, 256, 128),
    (64, 2048, 512, 512, 256),
]


def _plan_for(tmp_path: Path, nodes: int, gpu_model: str = "H100-SXM-80GB") -> Any:
    data = example_data()
    data["provider"] = {"kind": "local"}
    data["network"]["management_cidr"] = "10.0.0.0/16"
    data["hardware"]["dgx-h100"]["gpus"]["model"] = gpu_model
    group(data, "gpu").update(count=nodes, spares=0)
    data.pop("workload")
    loaded = load_spec(write_spec(tmp_path, data))
    return build_plan(loaded.spec, loaded.base_dir)


@pytest.mark.parametrize(("sus", "nodes", "leaves", "spines", "leaf_spine"), H100_SUPERPOD)
def test_h100_superpod_rows(tmp_path: Path, sus: int, nodes: int, leaves: int, spines: int, leaf_spine: int) -> None:
    fabric = _plan_for(tmp_path, nodes).fabric
    assert len(fabric.sus) == sus
    assert fabric.leaf_switches == leaves
    assert fabric.spine_switches == spines
    assert fabric.leaf_spine_links == leaf_spine
    # NVIDIA counts compute + UFM cables: 8 per node plus one node slot's worth (4 links here) for UFM.
    assert fabric.node_links == 8 * nodes
    assert fabric.tiers == 2


@pytest.mark.parametrize(("sus", "nodes", "leaves", "spines", "cores"), B200_SUPERPOD)
def test_b200_superpod_rows(tmp_path: Path, sus: int, nodes: int, leaves: int, spines: int, cores: int) -> None:
    fabric = _plan_for(tmp_path, nodes, "B200-SXM-180GB").fabric
    gpus = 8 * nodes
    assert len(fabric.sus) == sus
    assert (fabric.leaf_switches, fabric.spine_switches, fabric.core_switches) == (leaves, spines, cores)
    assert fabric.node_links == gpus
    assert fabric.leaf_spine_links == gpus
    assert fabric.spine_core_links == (gpus if cores else 0)
    assert fabric.tiers == (3 if cores else 2)


def test_partial_su_gets_full_leaves(tmp_path: Path) -> None:
    fabric = _plan_for(tmp_path, 40).fabric  # one full SU and 8 nodes of the second
    assert fabric.leaf_switches == 16
    assert fabric.leaf_spine_links == 16 * 32
    assert fabric.node_links == 40 * 8


@pytest.mark.parametrize(("radix", "oversub", "down", "up"), [(64, 1, 32, 32), (64, 3, 48, 16), (40, 1, 20, 20)])
def test_leaf_ports(radix: int, oversub: int, down: int, up: int) -> None:
    tree = size_fat_tree(radix, oversub, leaves=2, node_links=2 * down)
    assert (tree.down_ports, tree.up_ports) == (down, up)
    assert tree.oversubscription == pytest.approx(down / up)


@pytest.mark.parametrize(("radix", "two_tier", "three_tier"), [(64, 2048, 65536), (40, 800, 16000)])
def test_tier_capacities_are_k2_over_2_and_k3_over_4(radix: int, two_tier: int, three_tier: int) -> None:
    tree = size_fat_tree(radix, 1, leaves=2, node_links=1)
    assert tree.max_endpoints_2tier == two_tier
    assert tree.max_endpoints_3tier == three_tier
