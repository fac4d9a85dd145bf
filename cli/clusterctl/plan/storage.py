"""Storage as mounted on the nodes: one systemd mount unit per tier, LNet for Lustre over RDMA.

Which nodes mount a tier, with which options per hardware profile (a WEKA mount names each
storage NIC), and how long a checkpoint takes to write at the tier's bandwidth.
"""

from __future__ import annotations

from collections import OrderedDict

from clusterctl.hostlist import compress
from clusterctl.plan.models import LnetNetwork, LnetProfile, PlanNode, StorageMount, StoragePlan
from clusterctl.plan.storage_net import storage_interfaces
from clusterctl.spec.models import LustreStorage, NfsStorage, Spec, WekaStorage


def systemd_mount_unit(mount: str) -> str:
    """systemd's unit name for a mount point (``systemd-escape --path --suffix=mount``).

    As systemd's unit_name_path_escape: slashes collapse, ``/`` becomes ``-``, every byte other
    than ASCII letters, digits, ``:``, ``_`` and ``.`` becomes ``\\xNN``, and so does a leading ``.``.
    """
    path = "/".join(p for p in mount.split("/") if p)
    if not path:
        return "-.mount"
    out = ""
    for index, char in enumerate(path):
        if char == "/":
            out += "-"
        elif (char.isascii() and char.isalnum()) or char in ":_" or (char == "." and index > 0):
            out += char
        else:
            out += "".join(f"\\x{b:02x}" for b in char.encode())
    return out + ".mount"


# Managed Lustre units name their tier in What= until roles/storage_clients puts the stack's
# "<mgs>@tcp:/<fsname>" there (the role matches this prefix).
MANAGED_LUSTRE_SOURCE = "clusterctl-managed-lustre:"
# Mount options each cloud's own client setup uses for its managed Lustre:
# - AWS FSx: ParallelCluster's (aws/aws-parallelcluster-cookbook:cookbooks/aws-parallelcluster-environment/
#   resources/lustre/partial/_mount_unmount.rb@f75d84c: defaults _netdev flock user_xattr noatime, plus the
#   fstab-only noauto/x-systemd.automount a mount unit does not need);
# - Azure Managed Lustre: `mount -t lustre -o noatime,flock` (Azure docs, "Connect clients to an Azure
#   Managed Lustre file system").
MANAGED_LUSTRE_OPTIONS: dict[str, list[str]] = {
    "aws": ["flock", "user_xattr", "noatime"],
    "azure": ["flock", "noatime"],
}


def _lnet_networks(storage: LustreStorage) -> list[str]:
    nets: list[str] = []
    for nid in storage.mgs:
        net = nid.rsplit("@", 1)[-1] if "@" in nid else "tcp"
        if net not in nets:
            nets.append(net)
    return nets


def _by_hardware(nodes: list[PlanNode]) -> OrderedDict[str, list[PlanNode]]:
    out: OrderedDict[str, list[PlanNode]] = OrderedDict()
    for node in nodes:
        out.setdefault(node.hardware, []).append(node)
    return out


def resolve_storage(
    spec: Spec, nodes: list[PlanNode], checkpoint_bytes: float | None
) -> tuple[list[StoragePlan], list[LnetProfile]]:
    """Each tier as the nodes mount it, and the LNet networks of the profiles that mount Lustre.

    Burst nodes mount the tiers their group's ``burst.mounts`` lists (NFS, Lustre over TCP);
    RDMA tiers (Lustre over o2ib, WEKA) are mounted by the nodes that have storage NICs;
    ``checkpoint_bytes`` gives a checkpoint tier its write time.
    """
    out: list[StoragePlan] = []
    fixed = [n for n in nodes if not n.burst]
    # Burst groups mount what their `burst.mounts` lists (rule BUR005 keeps it to what they reach).
    listed = {g.group: set(g.burst.mounts or []) for g in spec.nodes if g.burst is not None}
    lnet_nets: list[str] = []
    lnet_hosts: dict[str, PlanNode] = {}
    for tier in spec.storage:
        extra: dict[str, list[str]] = {}
        burst = [n for n in nodes if n.burst and tier.name in listed.get(n.group, set())]
        if isinstance(tier, LustreStorage) and tier.managed:
            # A cloud's managed Lustre: its address exists only once the stack made it, so the unit
            # names the tier and roles/storage_clients puts in the source `clusterctl up` read from
            # the stack outputs (clusterctl_managed_lustre). The service's client needs no LNet setup.
            hosts = fixed
            source = MANAGED_LUSTRE_SOURCE + tier.name
            options = ["_netdev", *MANAGED_LUSTRE_OPTIONS.get(spec.provider.kind, ["flock"]), *tier.mount_options]
            fstype, requires_lnet = "lustre", False
        elif isinstance(tier, LustreStorage):
            nets = _lnet_networks(tier)
            rdma = any(not net.startswith("tcp") for net in nets)
            # Nodes on the storage network: named interfaces, or storage HCAs whose netdevs they find.
            hosts = [n for n in fixed if n.storage_netdevs or n.storage_nics] if rdma else [*fixed, *burst]
            lnet_nets.extend(n for n in nets if n not in lnet_nets)
            lnet_hosts.update((n.hostname, n) for n in hosts)
            source = ":".join(tier.mgs) + f":/{tier.fsname}"
            options = ["flock", "_netdev", *tier.mount_options]
            fstype, requires_lnet = "lustre", True
        elif isinstance(tier, WekaStorage):
            hosts = [n for n in fixed if n.storage_netdevs or n.storage_nics]
            source = ",".join(str(b) for b in tier.backends) + f"/{tier.filesystem}"
            options = [f"num_cores={tier.num_cores}", "_netdev", *tier.mount_options]
            # One net= per storage NIC so the WEKA frontend uses every storage link.
            extra = {
                h: [f"net={d}" for d in storage_interfaces(p.storage_netdevs, p.storage_nics)]
                for h, p in spec.hardware.items()
            }
            fstype, requires_lnet = "wekafs", False
        else:
            assert isinstance(tier, NfsStorage)
            hosts = [*fixed, *burst]
            source = f"{tier.server}:{tier.export}"
            options = [f"vers={tier.version}", "hard", "_netdev", *tier.mount_options]
            fstype, requires_lnet = "nfs", False
        write_s = None
        if tier.purpose == "checkpoint" and tier.write_bw and checkpoint_bytes:
            write_s = round(checkpoint_bytes / tier.write_bw.bytes_per_s, 1)
        mounts = [
            StorageMount(
                hardware=hw,
                hosts=compress(n.hostname for n in members),
                options=[*options, *extra.get(hw, [])],
            )
            for hw, members in _by_hardware(hosts).items()
        ]
        out.append(
            StoragePlan(
                name=tier.name,
                kind=tier.kind,
                mount=tier.mount,
                purpose=tier.purpose,
                fstype=fstype,
                source=source,
                options=options,
                unit_name=systemd_mount_unit(tier.mount),
                hosts=compress(n.hostname for n in hosts),
                requires_lnet=requires_lnet,
                managed=isinstance(tier, LustreStorage) and tier.managed,
                mounts=mounts,
                read_bw=str(tier.read_bw) if tier.read_bw else None,
                write_bw=str(tier.write_bw) if tier.write_bw else None,
                read_bytes_per_s=tier.read_bw.bytes_per_s if tier.read_bw else None,
                write_bytes_per_s=tier.write_bw.bytes_per_s if tier.write_bw else None,
                checkpoint_write_s=write_s,
            )
        )
    lnet: list[LnetProfile] = []
    for hw, members in _by_hardware(list(lnet_hosts.values())).items():
        profile = spec.hardware[hw]
        networks = [
            LnetNetwork(
                net=net,
                interfaces=(
                    storage_interfaces(profile.storage_netdevs, profile.storage_nics)
                    if not net.startswith("tcp")
                    else [profile.management_netdev]
                ),
            )
            for net in lnet_nets
        ]
        lnet.append(LnetProfile(hardware=hw, hosts=compress(n.hostname for n in members), networks=networks))
    return out, lnet
