"""How a host's HCAs, as the fabric names them, map to the rails of its hardware profile.

``ibnetdiscover`` names a host CA by its node description: ``<host> <device>`` as rdma-ndd
writes it (``gpu001 mlx5_0``, or ``gpu001 ibp24s0`` under rdma-core's NAME_FALLBACK names)
or ``<host> HCA-<n>`` as older OFED does, plus the CA's node GUID and its port GUIDs. The
plan names a rail as the spec does: an RDMA device name or a PCI address. Where the two
differ, each node's rails file (``/etc/clusterctl/rdma-rails.conf``, rail -> device) and its
devices' GUIDs (sysfs) bridge them; `clusterctl.fabric.compare` uses this map and says
which HCAs it could not map and why.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

# Descriptions older OFED gives every CA ("node018 HCA-1"): a position, not a device name.
_OFED_HCA_RE = re.compile(r"^HCA-\d+$")


@dataclass(frozen=True)
class HostHcas:
    """One host's map from fabric names to its rails.

    Attributes:
        by_device: RDMA device name -> the rail as the plan names it.
        by_guid: Node or port GUID (``0x`` + 16 lower-case hex digits) -> the rail.
        source: Where the map came from, for messages (``gpu001:/etc/clusterctl/rdma-rails.conf``).
        problem: Why the host has no map (not converged, not reachable); empty when it has one.
    """

    by_device: Mapping[str, str] = field(default_factory=dict)
    by_guid: Mapping[str, str] = field(default_factory=dict)
    source: str = ""
    problem: str = ""

    def rail_of(self, hca: str, guids: tuple[str | None, ...] = ()) -> str | None:
        """The rail a discovered HCA is, by its device name first, then by any of its GUIDs."""
        if self.problem:
            return None
        found = self.by_device.get(hca)
        if found is not None:
            return found
        return next((self.by_guid[g] for g in guids if g is not None and g in self.by_guid), None)


def names_a_device(hca: str) -> bool:
    """Whether a description's HCA part is a device name (``mlx5_0``), not ``HCA-1`` or nothing."""
    return bool(hca) and not _OFED_HCA_RE.match(hca)
