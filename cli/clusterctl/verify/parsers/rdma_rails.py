"""Parse a node's rail map: ``/etc/clusterctl/rdma-rails.conf`` and the RDMA devices' GUIDs.

The rdma role writes the file at converge (roles/rdma/templates/rdma-rails.conf.j2, from the
sysfs lookup in clusterctl.node.rdma_rails), one line per rail of the hardware profile::

    # rail INDEX HCA IBDEV NETDEV LINK_LAYER NUMA_NODE
    rail 0 0000:18:00.0 ibp24s0 ibp24s0 InfiniBand 0
    rail 3 0000:5e:00.0 - - - -

``HCA`` is the rail as the spec names it (PCI address or RDMA device name), ``IBDEV`` the
node's RDMA device for it (``mlx5_0`` under the kernel's names, ``ibp24s0`` under rdma-core's
``NAME_FALLBACK`` rule); ``-`` marks what the lookup did not find. Extra columns a later
template appends are ignored.

The command verify and ``fabric check`` run (`clusterctl.verify.rails.RAILS_COMMAND`) prints
the file, or ``absent PATH`` when the node has none, then one line per RDMA device from
sysfs (``/sys/class/infiniband/<dev>/node_guid`` and ``ports/1/gids/0``, whose last 64 bits
are the port GUID on InfiniBand)::

    guid ibp24s0 a088:c203:0030:5e00 fe80:0000:0000:0000:a088:c203:0030:5e00
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from clusterctl.bounded import guarded, integer
from clusterctl.verify.parsers._text import numbered_lines
from clusterctl.verify.result import ParseError, unreadable

# sysfs prints GUIDs as four groups of four hex digits (a088:c203:0030:5e00).
_SYSFS_GUID_RE = re.compile(r"^[0-9a-fA-F]{4}(?::[0-9a-fA-F]{4}){3}$")
_GID_RE = re.compile(r"^[0-9a-fA-F]{4}(?::[0-9a-fA-F]{4}){7}$")
MISSING = "-"


@dataclass(frozen=True)
class RailEntry:
    """One ``rail`` line.

    Attributes:
        index: The rail's position in the hardware profile (GPU ``index``'s rail).
        hca: The rail as the spec named it when the node converged.
        ibdev: The node's RDMA device for it; None when the lookup found none.
        netdev: Its netdev (IPoIB or Ethernet); None when there is none.
        link_layer: ``InfiniBand`` or ``Ethernet``; None when unknown.
        numa_node: The PCI function's NUMA node; None when unknown.
        line_no: Where the line is in the input.
    """

    index: int
    hca: str
    ibdev: str | None
    netdev: str | None
    link_layer: str | None
    numa_node: int | None
    line_no: int


@dataclass(frozen=True)
class DeviceGuids:
    """The GUIDs of one RDMA device, in ``0x`` + 16 lower-case hex digits form."""

    ibdev: str
    node_guid: str | None
    port_guid: str | None


@dataclass(frozen=True)
class NodeRails:
    """What a node says about its rails.

    Attributes:
        present: Whether the node has the rails file (False: the rdma role has not run there).
        rails: The file's rail lines, in file order.
        guids: The node's RDMA devices with their GUIDs, by device name.
        path: The file the rails came from (for messages).
    """

    present: bool
    rails: tuple[RailEntry, ...] = ()
    guids: dict[str, DeviceGuids] = field(default_factory=dict)
    path: str = ""

    def rail(self, index: int) -> RailEntry | None:
        """The entry of rail ``index``."""
        return next((r for r in self.rails if r.index == index), None)


def sysfs_guid(text: str) -> str | None:
    """``a088:c203:0030:5e00`` (sysfs) -> ``0xa088c20300305e00``; None for anything else."""
    if not _SYSFS_GUID_RE.match(text):
        return None
    return "0x" + text.replace(":", "").lower()


def port_guid_of_gid(text: str) -> str | None:
    """The port GUID in an InfiniBand GID 0 (its low 64 bits); None for anything else."""
    if not _GID_RE.match(text):
        return None
    return "0x" + "".join(text.split(":")[4:]).lower()


def _value(token: str) -> str | None:
    return None if token == MISSING else token


@guarded(unreadable)
def parse_node_rails(text: str, path: str = "") -> NodeRails:
    """Parse the rails file (or the rails command's output) of one node.

    Args:
        text: The file, or what `clusterctl.verify.rails.RAILS_COMMAND` printed.
        path: The file's path on the node, for messages.

    Returns:
        The node's rails; ``present`` is False when the output says ``absent PATH``.

    Raises:
        ParseError: A line is neither a comment, a ``rail``/``guid`` line nor ``absent``,
            or a ``rail`` line is short or its index is not a number.
    """
    present = True
    rails: list[RailEntry] = []
    guids: dict[str, DeviceGuids] = {}
    for line_no, raw, line in numbered_lines(text):
        tokens = line.split()
        if not tokens or tokens[0].startswith("#"):
            continue
        kind = tokens[0]
        if kind == "absent":
            present = False
            path = tokens[1] if len(tokens) > 1 else path
        elif kind == "rail":
            if len(tokens) < 7 or not tokens[1].isdigit():
                raise ParseError(
                    "a rail line has INDEX HCA IBDEV NETDEV LINK_LAYER NUMA_NODE after 'rail'", line_no, raw
                )
            numa = tokens[6]
            rails.append(
                RailEntry(
                    index=integer(tokens[1]),
                    hca=tokens[2],
                    ibdev=_value(tokens[3]),
                    netdev=_value(tokens[4]),
                    link_layer=_value(tokens[5]),
                    numa_node=integer(numa) if numa.lstrip("-").isdigit() else None,
                    line_no=line_no,
                )
            )
        elif kind == "guid":
            if len(tokens) < 2:
                raise ParseError("a guid line names an RDMA device after 'guid'", line_no, raw)
            node_guid = sysfs_guid(tokens[2]) if len(tokens) > 2 else None
            port_guid = port_guid_of_gid(tokens[3]) if len(tokens) > 3 else None
            guids[tokens[1]] = DeviceGuids(tokens[1], node_guid, port_guid)
        else:
            raise ParseError(
                "not a line of /etc/clusterctl/rdma-rails.conf ('rail INDEX HCA IBDEV NETDEV LINK_LAYER NUMA_NODE')",
                line_no,
                raw,
            )
    return NodeRails(present=present, rails=tuple(rails), guids=guids, path=path)
