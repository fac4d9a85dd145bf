"""Storage interfaces the node names: put each storage HCA's netdev into the rendered files.

Where a hardware profile names its storage HCAs (``storage_nics``, by PCI address or RDMA
device) but not their interfaces, the render writes ``clusterctl:storage_nic:<i>`` in the LNet
configuration and the WEKA ``net=`` options (clusterctl.plan.storage_net). The role reads the
netdev of each storage HCA from the node's sysfs with the collection's lookup (clusterctl.node.rdma_rails,
the one the rdma role maps the rails with) and these filters write it in, on the controller, before
the files are sent to the node.
"""

from __future__ import annotations

import re

MARKER = re.compile(r"clusterctl:storage_nic:(\d+)")


def storage_nic_markers(texts: object) -> list[int]:
    """The storage HCA indexes a text (or the values of a dict of texts) asks for, sorted."""
    values = texts.values() if isinstance(texts, dict) else [texts]
    return sorted({int(m.group(1)) for text in values for m in MARKER.finditer(str(text))})


def storage_nic_netdevs(texts: object, netdevs: list[str]) -> object:
    """``texts`` (a text, or a dict of texts) with marker ``i`` replaced by ``netdevs[i]``.

    Raises:
        ValueError: A marker names a storage HCA without a netdev (the role checks before).
    """

    def netdev(match: re.Match[str]) -> str:
        index = int(match.group(1))
        if index >= len(netdevs) or not netdevs[index]:
            raise ValueError(f"storage NIC {index} has no netdev on this node (found: {netdevs})")
        return netdevs[index]

    if isinstance(texts, dict):
        return {key: MARKER.sub(netdev, str(text)) for key, text in texts.items()}
    return MARKER.sub(netdev, str(texts))


def storage_nic_netdev_list(fact: object, count: int) -> list[str]:
    """The netdev of storage HCA 0..count-1 from a ``rdma_sysfs`` result, ``""`` where it has none."""
    entries = (fact or {}).get("storage_nics", []) if isinstance(fact, dict) else []
    found = {int(e["index"]): e.get("netdev") or "" for e in entries}
    return [found.get(index, "") for index in range(int(count))]


class FilterModule:
    """Ansible filters of the storage_clients role."""

    def filters(self) -> dict[str, object]:
        return {
            "storage_nic_markers": storage_nic_markers,
            "storage_nic_netdevs": storage_nic_netdevs,
            "storage_nic_netdev_list": storage_nic_netdev_list,
        }
