"""A node's rails as its own RDMA devices: what the rail checks judge instead of the spec's names.

Why: a rail in the spec is a PCI address (``0000:18:00.0``) or an RDMA device name
(``mlx5_0``), but ``ibstat`` and ``nvidia-smi topo -m`` list the node's device names, which
depend on the image: the kernel's ``mlx5_N`` (DOCA/MOFED, DGX OS, RHEL) or rdma-core's
``NAME_FALLBACK`` names (``ibp24s0``, ``rocep41s0f1``; linux-rdma/rdma-core
kernel-boot/rdma-persistent-naming.rules). The rdma role records each rail's device at
converge in ``/etc/clusterctl/rdma-rails.conf``, the same map ``NCCL_IB_HCA`` and the
health check use; verify reads that file through its executor and judges by it.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Literal

from clusterctl.catalog.tools import RAILS_PATH
from clusterctl.verify.parsers.rdma_rails import NodeRails, RailEntry


def rails_command(path: str = RAILS_PATH, sysfs: str = "/sys") -> str:
    """The node command: the rails file (or ``absent PATH``), then each RDMA device's GUIDs.

    Why one command: the rail checks and ``fabric check`` need both, and a node answers
    once. sysfs is read as the kernel lays it out (Documentation/ABI/stable/sysfs-class-infiniband);
    tests point ``sysfs`` at the fixture trees.
    """
    q = shlex.quote(path)
    return (
        f"if [ -e {q} ]; then cat {q} || exit 1; else echo absent {q}; fi; "
        f'for d in {shlex.quote(sysfs.rstrip("/") + "/class/infiniband")}/*; do [ -e "$d" ] || continue; '
        'echo "guid ${d##*/} $(cat "$d/node_guid" 2>/dev/null || echo -) '
        '$(cat "$d/ports/1/gids/0" 2>/dev/null || echo -)"; done'
    )


RAILS_COMMAND = rails_command()


@dataclass(frozen=True)
class RailDevices:
    """The node's RDMA device of each rail, or why they cannot be known.

    Attributes:
        devices: The device of rail 0, 1, ... (empty when ``problem`` is set).
        problem: One sentence saying why the rails cannot be judged; empty when they can.
        hint: What to do about the problem.
        renamed: Whether some device differs from the name in the spec (the checks then
            say which device stands for which rail).
        path: The rails file the devices come from.
        kind: What the problem is: ``absent`` (no file: not converged), ``stale`` (written
            for other rails) or ``unfound`` (a rail had no device at converge; the others
            did); empty without a problem.
    """

    devices: tuple[str, ...] = ()
    problem: str = ""
    hint: str = ""
    renamed: bool = False
    path: str = RAILS_PATH
    kind: Literal["", "absent", "stale", "unfound"] = ""

    def mapping(self, rails: list[str]) -> str:
        """``rail 0 0000:18:00.0 = ibp24s0, ...`` for messages."""
        pairs = zip(rails, self.devices, strict=False)
        return ", ".join(f"rail {i} {ref} = {dev}" for i, (ref, dev) in enumerate(pairs))


def _same(spec_ref: str, recorded: str) -> bool:
    # PCI addresses compare without case (lspci prints lower case, a spec may not).
    return spec_ref.lower() == recorded.lower() if ":" in spec_ref else spec_ref == recorded


def rail_devices(host: str, rails: list[str], node_rails: NodeRails) -> RailDevices:
    """Map the plan's rails of ``host`` to the devices its rails file records.

    Args:
        host: The node.
        rails: The plan's rails of the node, in GPU order.
        node_rails: What the node's rails command printed, parsed.

    Returns:
        The devices; or a problem when the node has no rails file (not converged), the
        file was written for other rails (the spec changed since), or a rail was not
        found on the node at converge.
    """
    path = node_rails.path or RAILS_PATH
    if not node_rails.present:
        return RailDevices(
            problem=(
                f"{host} has no {path}, so its rails' RDMA device names are unknown: "
                "the rdma role has not run there (the node is not converged)."
            ),
            hint=(
                "Converge the node (clusterctl up SPEC): the rdma role maps each rail to the node's RDMA device "
                "from sysfs and records it there."
            ),
            path=path,
            kind="absent",
        )
    entries: list[RailEntry | None] = [node_rails.rail(i) for i in range(len(rails))]
    stale = [
        f"rail {i} is {entry.hca if entry else 'missing'} there, {ref} in the plan"
        for i, (ref, entry) in enumerate(zip(rails, entries, strict=True))
        if entry is None or not _same(ref, entry.hca)
    ]
    if stale or len(node_rails.rails) > len(rails):
        if not stale:
            stale = [f"it has {len(node_rails.rails)} rails, the plan {len(rails)}"]
        return RailDevices(
            problem=f"{path} on {host} was written for other rails than the plan's: {'; '.join(stale)}.",
            hint="Converge again (clusterctl up SPEC) so the rdma role maps the rails the spec names now.",
            path=path,
            kind="stale",
        )
    unfound = [f"rail {e.index} ({e.hca})" for e in entries if e is not None and e.ibdev is None]
    if unfound:
        return RailDevices(
            problem=(
                f"{', '.join(unfound)} had no RDMA device on {host} when the rdma role ran "
                f"({path} records '-' for {'it' if len(unfound) == 1 else 'them'})."
            ),
            hint=(
                "Check the HCA on the node (lspci -D, ls /sys/class/infiniband, is mlx5_ib loaded?) and the rail "
                "in the spec, then converge again."
            ),
            path=path,
            kind="unfound",
        )
    devices = tuple(e.ibdev or "" for e in entries if e is not None)
    return RailDevices(devices=devices, renamed=any(d != r for d, r in zip(devices, rails, strict=True)), path=path)
