"""Fat-tree (folded Clos) sizing for leaf/spine/core InfiniBand or Ethernet fabrics.

Math from techref §4.2 and checked against NVIDIA's DGX SuperPOD tables (§4.3):
- A leaf with radix k and N:1 oversubscription has ``k - k//(N+1)`` down and ``k//(N+1)`` up ports.
- Two tiers hold at most k leaves (each spine port reaches a different leaf): k²/2 endpoints at 1:1.
- In two tiers each leaf spreads its uplinks evenly over the spines, so the spine count is the
  smallest divisor of the leaf's uplink count that gives enough spine ports (3 SUs of H100: 16
  spines, not 12).
- Three tiers: spines use half their ports down, half up to the core; at most k²/2 leaves,
  k³/4 endpoints at 1:1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class FatTree:
    """Switch and cable counts of a fabric."""

    radix: int
    down_ports: int
    up_ports: int
    leaves: int
    spines: int
    cores: int
    tiers: int
    node_links: int
    leaf_spine_links: int
    spine_core_links: int
    max_endpoints_2tier: int
    max_endpoints_3tier: int

    @property
    def oversubscription(self) -> float:
        """Down:up bandwidth ratio at the leaf (1.0 = non-blocking)."""
        return self.down_ports / self.up_ports if self.up_ports else math.inf


def leaf_ports(radix: int, oversubscription: int) -> tuple[int, int]:
    """(down, up) ports of one leaf for ``oversubscription``:1."""
    up = radix // (oversubscription + 1)
    return radix - up, up


def size_fat_tree(radix: int, oversubscription: int, leaves: int, node_links: int) -> FatTree:
    """Size the spine and core layers above ``leaves`` leaves.

    Args:
        radix: ports per switch (k).
        oversubscription: N in N:1 at the leaf.
        leaves: leaf switches, partial scalable units counted with all their leaves.
        node_links: cables from nodes to leaves.
    """
    down, up = leaf_ports(radix, oversubscription)
    half = radix // 2
    max2 = radix * down
    max3 = (radix * half) * down  # k²/2 leaves in three tiers
    if leaves <= 1:
        return FatTree(radix, down, up, leaves, 0, 0, 1, node_links, 0, 0, max2, max3)
    uplinks = leaves * up
    if leaves <= radix:
        needed = math.ceil(uplinks / radix)
        spines = next((d for d in range(needed, up + 1) if up % d == 0), needed)
        return FatTree(radix, down, up, leaves, spines, 0, 2, node_links, uplinks, 0, max2, max3)
    spines = math.ceil(uplinks / half)
    spine_core = spines * half
    cores = math.ceil(spine_core / radix)
    tiers = 3 if leaves <= radix * half else 4
    return FatTree(radix, down, up, leaves, spines, cores, tiers, node_links, uplinks, spine_core, max2, max3)
