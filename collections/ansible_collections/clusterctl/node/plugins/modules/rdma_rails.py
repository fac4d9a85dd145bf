#!/usr/bin/python
"""Ansible module: map a hardware profile's rails to this node's RDMA devices and netdevs (sysfs).

clusterctl.node.rdma_rails: the lookup the rdma role maps the rails with (roles/rdma/library/rdma_rails.py,
same functions; tests/unit/collection keeps them equal) and the storage_clients role finds the storage
HCAs' netdevs with, in the collection so that no role reads another role's files.

Why: the RDMA device names differ by image. rdma-core's udev rule
(linux-rdma/rdma-core kernel-boot/rdma-persistent-naming.rules: ``rdma_rename %k NAME_FALLBACK``)
renames devices by bus path (``ibp24s0``, ``rocep41s0f1``; kernel-boot/rdma_rename.c by_pci())
on distributions that keep it, while DOCA/MOFED, DGX OS and RHEL keep the kernel's ``mlx5_N``.
A rail named by PCI address is the same on every image; this module finds its device from the
kernel's sysfs layout (Documentation/ABI/stable/sysfs-class-infiniband):

    /sys/class/infiniband/<dev>/device        -> the PCI function (../../../0000:18:00.0)
    /sys/class/infiniband/<dev>/device/net/   the function's netdevs (IPoIB or Ethernet)
    /sys/class/infiniband/<dev>/ports/1/      link_layer, state, rate, gids/0 (port GUID on IB)
    /sys/bus/pci/devices/<bdf>/numa_node      the NUMA node of the function
"""

from __future__ import annotations

import re
from pathlib import Path

DOCUMENTATION = r"""
module: rdma_rails
short_description: Map rails (PCI addresses or RDMA device names) to this node's RDMA devices and netdevs
description:
  - Reads /sys/class/infiniband and the PCI functions behind it, and resolves each rail, storage NIC and
    the subnet manager port to the node's RDMA device name, netdev, link layer, port state, NUMA node and
    port GUID. Returns them as the C(rdma_sysfs) fact.
  - A reference with a C(:) is a PCI address (C(0000:18:00.0)); anything else is an RDMA device name (C(mlx5_0)).
options:
  rails:
    description: Rail HCAs in GPU order.
    type: list
    elements: str
    default: []
  storage_nics:
    description: Storage HCAs.
    type: list
    elements: str
    default: []
  opensm_port:
    description: HCA whose port the subnet manager binds to (resolved like a rail); empty for none.
    type: str
    default: ""
  ipoib_interfaces:
    description:
      - IPoIB interfaces; an entry with C(rail) (index into I(rails)) and no C(name) is named after that rail's
        netdev. Other keys (address, mode, mtu) are passed through.
    type: list
    elements: dict
    default: []
  port:
    description: The HCA port that carries the fabric.
    type: int
    default: 1
  sysfs_root:
    description: Where sysfs is mounted (tests point it at a fixture tree).
    type: path
    default: /sys
  required:
    description: Fail when a reference does not resolve (off in containers, which have no RDMA devices).
    type: bool
    default: true
  as_fact:
    description: Return the result as the C(rdma_sysfs) fact; false returns it as C(rdma_sysfs) in the result only.
    type: bool
    default: true
author: clusterctl
"""

RETURN = r"""
rdma_sysfs:
  description: The same as the fact, when C(as_fact) is false.
  returned: when as_fact is false
  type: dict
ansible_facts:
  description: C(rdma_sysfs) with C(rails), C(storage_nics), C(opensm_port), C(ipoib), C(devices), C(missing),
    C(naming) and C(nccl_ib_hca).
  returned: when as_fact is true
  type: dict
"""

# rdma_rename.c name shapes (prefix by protocol, then onboard o<n>, PCI [P<domain>]p<bus>s<slot>[f<fn>...]
# or s<slot>..., GUID x<16 hex>): the names the NAME_FALLBACK rule gives.
_RDMA_CORE_NAME = re.compile(r"^(ib|roce|iw|opa|rdma)(o\d+|(P\d+)?(p\d+)?s\d+(f\d+)?(v\d+)?(S\d+)?|x[0-9a-f]{16})$")
_PCI = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-1][0-9a-f]\.[0-7]$")


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None


def _guid(text: str | None) -> str | None:
    """``a088:c203:0011:8000`` (sysfs) -> ``0xa088c20300118000`` (what ibstat -p and opensm -g take)."""
    if not text:
        return None
    digits = text.replace(":", "")
    return f"0x{digits}" if re.fullmatch(r"[0-9a-f]{16}", digits) else None


def _pci_of(function: Path) -> str | None:
    """The PCI function ``<dev>/device`` resolves to, or the PCI parent of a sub-function."""
    if _PCI.match(function.name):
        return function.name
    # A sub-function (SF) hangs off an auxiliary device one level below its PCI parent
    # (rdma_rename.c detect_sf()).
    return function.parent.name if _PCI.match(function.parent.name) else None


def _netdev(function: Path, port_dir: Path, port: int) -> tuple[str | None, list[str]]:
    """The netdev of ``port``: RoCE names it in gid_attrs/ndevs/0; else the function's own netdev."""
    net_dir = function / "net"
    names = sorted(p.name for p in net_dir.iterdir()) if net_dir.is_dir() else []
    gid_ndev = _read(port_dir / "gid_attrs" / "ndevs" / "0")
    if gid_ndev and gid_ndev in names:
        return gid_ndev, names
    # mlx4-style: both ports on one function, dev_port tells them apart; IPoIB child interfaces
    # (pkeys, "ib0.8001") share the function too, so the parent comes first.
    ranked = sorted(names, key=lambda n: (_read(net_dir / n / "dev_port") != str(port - 1), "." in n, n))
    return (ranked[0] if ranked else None), names


def scan(sysfs_root: str, port: int = 1) -> dict[str, dict[str, object]]:
    """Every RDMA device under ``<sysfs_root>/class/infiniband``, keyed by name."""
    class_dir = Path(sysfs_root) / "class" / "infiniband"
    devices: dict[str, dict[str, object]] = {}
    if not class_dir.is_dir():
        return devices
    for dev_dir in sorted(class_dir.iterdir()):
        # Relative links, as the kernel makes them: a copied tree still resolves inside itself.
        function = (dev_dir / "device").resolve()
        port_dir = dev_dir / "ports" / str(port)
        netdev, netdevs = _netdev(function, port_dir, port)
        link_layer = _read(port_dir / "link_layer")
        state = _read(port_dir / "state") or ""
        numa = _read(function / "numa_node")
        gid0 = _read(port_dir / "gids" / "0")
        devices[dev_dir.name] = {
            "ibdev": dev_dir.name,
            "pci": _pci_of(function),
            "netdev": netdev,
            "netdevs": netdevs,
            "port": port,
            "link_layer": link_layer,
            # "4: ACTIVE" -> ACTIVE
            "state": state.split(":", 1)[-1].strip(),
            "rate": _read(port_dir / "rate"),
            "numa_node": int(numa) if numa and numa.lstrip("-").isdigit() else -1,
            "node_guid": _guid(_read(dev_dir / "node_guid")),
            # On InfiniBand GID 0 is the subnet prefix and the port GUID; RoCE GIDs come from addresses.
            "port_guid": _guid(":".join(gid0.split(":")[4:])) if gid0 and link_layer == "InfiniBand" else None,
        }
    return devices


def naming(devices: dict[str, dict[str, object]]) -> str:
    """``rdma-core`` when every name is a rdma_rename name, ``kernel`` when none is, else ``mixed``."""
    if not devices:
        return "none"
    renamed = [bool(_RDMA_CORE_NAME.match(n)) for n in devices]
    if all(renamed):
        return "rdma-core"
    return "mixed" if any(renamed) else "kernel"


def _known(devices: dict[str, dict[str, object]]) -> str:
    listed = ", ".join(f"{n} ({d['pci']})" for n, d in sorted(devices.items(), key=lambda i: str(i[1]["pci"])))
    return listed or "none (no /sys/class/infiniband entries: is the HCA driver loaded?)"


def resolve(
    ref: str, devices: dict[str, dict[str, object]], sysfs_root: str
) -> tuple[dict[str, object] | None, str | None]:
    """``(device, None)`` for the device ``ref`` names, or ``(None, why)`` when the node has none."""
    if ":" in ref:
        found = [d for d in devices.values() if d["pci"] == ref.lower()]
        if found:
            return found[0], None
        known = _known(devices)
        if not (Path(sysfs_root) / "bus" / "pci" / "devices" / ref.lower()).exists():
            return None, f"no PCI function {ref} on this node (lspci -D lists them); RDMA devices: {known}"
        return None, f"PCI function {ref} has no RDMA device (is mlx5_ib loaded?); RDMA devices: {known}"
    if ref in devices:
        return devices[ref], None
    return None, (
        f"no RDMA device named {ref} on this node, which has {_known(devices)}; the image names RDMA devices "
        f"{naming(devices)}-style: name the rail by its PCI address instead (the one in parentheses)"
    )


def rails_fact(
    rails: list[str],
    storage_nics: list[str],
    opensm_port: str,
    sysfs_root: str,
    port: int = 1,
    ipoib_interfaces: list[dict[str, object]] | None = None,
) -> dict[str, object]:
    """The ``rdma_sysfs`` fact: every reference resolved, and what did not resolve (``missing``)."""
    devices = scan(sysfs_root, port)
    missing: list[dict[str, object]] = []

    def entries(kind: str, refs: list[str]) -> list[dict[str, object]]:
        out: list[dict[str, object]] = []
        for index, ref in enumerate(refs):
            device, why = resolve(ref, devices, sysfs_root)
            if device is None:
                missing.append({"kind": kind, "index": index, "ref": ref, "why": why})
                continue
            out.append({"index": index, "ref": ref, **device})
        return out

    rail_entries = entries("rail", rails)
    storage_entries = entries("storage_nic", storage_nics)
    sm = entries("opensm_port", [opensm_port]) if opensm_port else []
    resolved = len(rail_entries) == len(rails)
    netdev_of = {e["index"]: e["netdev"] for e in rail_entries}
    ipoib: list[dict[str, object]] = []
    for i, interface in enumerate(ipoib_interfaces or []):
        rail = interface.get("rail")
        name = interface.get("name") or (netdev_of.get(rail) if isinstance(rail, int) else None)
        if not name:
            why = f"rail {rail} is not on this node" if isinstance(rail, int) else "it has neither name nor rail"
            missing.append({"kind": "ipoib", "index": i, "ref": str(rail), "why": why})
            continue
        ipoib.append({**interface, "name": name})
    return {
        "sysfs_root": sysfs_root,
        "naming": naming(devices),
        "devices": devices,
        "rails": rail_entries,
        "storage_nics": storage_entries,
        "opensm_port": sm[0] if sm else None,
        "ipoib": ipoib,
        "missing": missing,
        # NCCL_IB_HCA: exact names ("=", a bare mlx5_1 would also match mlx5_10..19) with the port,
        # NVIDIA/nccl docs/userguide/source/env.rst NCCL_IB_HCA.
        "nccl_ib_hca": ("=" + ",".join(f"{e['ibdev']}:{port}" for e in rail_entries)) if rails and resolved else "",
    }


def main() -> None:
    """Run as an Ansible module."""
    from ansible.module_utils.basic import AnsibleModule

    module = AnsibleModule(
        argument_spec={
            "rails": {"type": "list", "elements": "str", "default": []},
            "storage_nics": {"type": "list", "elements": "str", "default": []},
            "opensm_port": {"type": "str", "default": ""},
            "ipoib_interfaces": {"type": "list", "elements": "dict", "default": []},
            "port": {"type": "int", "default": 1},
            "sysfs_root": {"type": "path", "default": "/sys"},
            "required": {"type": "bool", "default": True},
            "as_fact": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    params = module.params
    fact = rails_fact(
        params["rails"],
        params["storage_nics"],
        params["opensm_port"],
        params["sysfs_root"],
        params["port"],
        params["ipoib_interfaces"],
    )
    missing: list[dict[str, object]] = fact["missing"]  # type: ignore[assignment]
    if missing and params["required"]:
        lines = "; ".join(f"{m['kind']} {m['index']} ({m['ref']}): {m['why']}" for m in missing)
        module.fail_json(msg=f"Some HCAs of the hardware profile are not on this node: {lines}", rdma_sysfs=fact)
    if not params["as_fact"]:
        module.exit_json(changed=False, rdma_sysfs=fact)
    module.exit_json(changed=False, ansible_facts={"rdma_sysfs": fact})


if __name__ == "__main__":
    main()
