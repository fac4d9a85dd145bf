"""The storage network's interfaces, where the spec names them and where only the node knows them.

A hardware profile's ``storage_netdevs`` are interface names the spec asserts (``ibs1``).
Where the profile names the storage HCAs instead (``storage_nics``, by PCI address or RDMA
device) and leaves ``storage_netdevs`` empty, the interface of storage NIC ``i`` is whatever
the node calls it: the render writes the marker ``clusterctl:storage_nic:<i>`` in the LNet
configuration and the WEKA ``net=`` options, and roles/storage_clients writes in the netdev
the rdma role's sysfs lookup finds for that HCA (clusterctl.node.rdma_rails). A ``:``
is never in an interface name (the kernel's dev_valid_name allows it, but ip and udev names
never carry one, and the spec's NetdevName refuses it), so a marker cannot be a real name.
"""

from __future__ import annotations

MARKER = "clusterctl:storage_nic:"


def storage_interfaces(storage_netdevs: list[str], storage_nics: list[str]) -> list[str]:
    """The spec's interface names, else one marker per storage HCA (empty when it names neither)."""
    if storage_netdevs:
        return list(storage_netdevs)
    return [f"{MARKER}{index}" for index in range(len(storage_nics))]


def is_marker(name: str) -> bool:
    """Whether ``name`` stands for a storage HCA's netdev that the node fills in."""
    return name.startswith(MARKER)
