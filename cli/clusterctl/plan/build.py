"""Resolve a validated spec into a ``Plan``: nodes, racks, fabric, Slurm, storage, sizing.

Pure: reads the spec (and machines.csv for bare metal), computes, returns. Rules have run
before this, so references resolve and names are unique; ``build_plan`` still never
raises on a spec that only has warnings.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from ipaddress import IPv4Address
from pathlib import Path

from clusterctl.catalog.compat import OS_CODENAME, SLURM_SUSPEND_EXC_STATES, at_least
from clusterctl.catalog.gpus import ASSUMED_CPU_SERVER_W, ASSUMED_GPU_SERVER_OVERHEAD_W, GPU_MODELS
from clusterctl.catalog.tools import nccl_tests_checksum, nccl_tests_url
from clusterctl.hostlist import compress, expand
from clusterctl.plan.burst import resolve_burst_cloud
from clusterctl.plan.cloud import resolve_baremetal, resolve_cloud
from clusterctl.plan.fattree import FatTree, size_fat_tree
from clusterctl.plan.gres import gres_gpu_lines
from clusterctl.plan.models import (
    BurstGroupPlan,
    ClusterInfo,
    FabricPlan,
    GpuPlan,
    GresLine,
    LeafPlan,
    LnetNetwork,
    LnetProfile,
    MonitoringPlan,
    NcclProfile,
    NodeGroupPlan,
    Plan,
    PlanNode,
    PowerPlan,
    ScalableUnit,
    SlurmNodeLine,
    SlurmPartitionPlan,
    SlurmPlan,
    StorageMount,
    StoragePlan,
    TopologyBlock,
    TopologySwitch,
    WorkloadPlan,
)
from clusterctl.plan.nccl import nccl_profiles
from clusterctl.plan.nccl_cloud import gcp_versions
from clusterctl.plan.rdma import apply_rdma
from clusterctl.plan.storage_net import storage_interfaces
from clusterctl.spec.machines import Machine, MachinesError, read_machines
from clusterctl.spec.models import HardwareProfile, LustreStorage, NfsStorage, Spec, WekaStorage

# Addresses .1-.9 of the management network stay free for gateways, DNS and storage heads.
FIRST_HOST_OFFSET = 10
# Default rack density when neither machines.csv nor fabric.nodes_per_rack says: four
# 8-GPU servers (~10 kW each) is the common air-cooled DGX/HGX H100 rack.
DEFAULT_GPU_NODES_PER_RACK = 4
DEFAULT_CPU_NODES_PER_RACK = 16
# Per-switch power with optics for a 64-port NDR switch (QM9700 class); assumption.
ASSUMED_SWITCH_W = 1500
# Bytes per parameter: mixed-precision Adam model state (ZeRO paper) and a resumable checkpoint.
STATE_BYTES_PER_PARAM = 16
CHECKPOINT_BYTES_PER_PARAM = 14
# slurm.conf RealMemory leaves this share to the OS so small differences in what the kernel
# reports do not make nodes INVAL.
REAL_MEMORY_SHARE = 0.97


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


def _load_machines(spec: Spec, base_dir: Path) -> dict[str, Machine]:
    if spec.provider.kind != "baremetal":
        return {}
    try:
        return {m.hostname: m for m in read_machines(base_dir, spec.provider.machines)}
    except MachinesError:
        return {}


def _node_power_w(profile: HardwareProfile) -> tuple[int, str | None]:
    if profile.power_w:
        return profile.power_w, None
    if profile.gpus is None:
        return ASSUMED_CPU_SERVER_W, f"CPU servers without power_w: {ASSUMED_CPU_SERVER_W} W each (assumed)"
    model = GPU_MODELS[profile.gpus.model]
    if model.system_kw_8gpu is not None:
        return int(model.system_kw_8gpu * 1000 * profile.gpus.count / 8), None
    watts = model.tdp_w * profile.gpus.count + ASSUMED_GPU_SERVER_OVERHEAD_W
    return watts, f"{model.name} servers: GPU TDP + {ASSUMED_GPU_SERVER_OVERHEAD_W} W for the rest (assumed)"


def _resolve_nodes(spec: Spec, base_dir: Path) -> tuple[list[PlanNode], list[str]]:
    machines = _load_machines(spec, base_dir)
    network = spec.network.management_cidr
    emulate = spec.provider.kind == "local"
    nodes: list[PlanNode] = []
    assumptions: list[str] = []
    offset = FIRST_HOST_OFFSET
    racked_gpu = racked_cpu = 0
    per_rack = spec.fabric.nodes_per_rack
    for group in spec.nodes:
        profile = spec.hardware[group.hardware]
        power, assumption = _node_power_w(profile)
        if assumption and assumption not in assumptions:
            assumptions.append(assumption)
        gpu = GPU_MODELS[profile.gpus.model] if profile.gpus else None
        burst = group.burst is not None
        for index in range(1, group.count + 1):
            hostname = group.hostname.format(group=group.group, index=index)
            machine = machines.get(hostname)
            if machine is not None:
                rack = machine.rack
            elif burst:
                rack = f"burst-{group.group}"
            elif group.role != "compute":
                rack = "r00"
            elif profile.gpus:
                rack = f"r{racked_gpu // (per_rack or DEFAULT_GPU_NODES_PER_RACK) + 1:02d}"
                racked_gpu += 1
            else:
                base = math.ceil(racked_gpu / (per_rack or DEFAULT_GPU_NODES_PER_RACK))
                rack = f"r{base + racked_cpu // (per_rack or DEFAULT_CPU_NODES_PER_RACK) + 1:02d}"
                racked_cpu += 1
            provider_kind = group.burst.provider.kind if group.burst else spec.provider.kind
            nodes.append(
                PlanNode(
                    hostname=hostname,
                    fqdn=f"{hostname}.{spec.network.domain}",
                    group=group.group,
                    role=group.role,
                    hardware=group.hardware,
                    index=index,
                    address=str(IPv4Address(int(network.network_address) + offset)),
                    rack=rack,
                    spare=index > group.count - group.spares,
                    burst=burst,
                    emulated=bool(profile.gpus) and (emulate if not group.burst else provider_kind == "local"),
                    gpus=profile.gpus.count if profile.gpus else 0,
                    gpu_model=profile.gpus.model if profile.gpus else None,
                    gres_type=gpu.gres_type if gpu else None,
                    rails=list(profile.rails),
                    storage_nics=list(profile.storage_nics),
                    storage_netdevs=list(profile.storage_netdevs),
                    power_w=power,
                    bmc=machine.bmc if machine else None,
                    mac=machine.mac if machine else None,
                )
            )
            offset += 1
    if per_rack is None and any(n.role == "compute" and not n.burst for n in nodes) and not machines:
        assumptions.append(
            f"racks: {DEFAULT_GPU_NODES_PER_RACK} GPU or {DEFAULT_CPU_NODES_PER_RACK} CPU nodes per rack "
            "(set fabric.nodes_per_rack or machines.csv racks)"
        )
    return nodes, assumptions


def _fabric_hcas(node: PlanNode) -> list[str]:
    return node.rails or ["port1"]


def _parents(children: list[str], per_parent: int, prefix: str) -> list[TopologySwitch]:
    """Group switches under parents, ``per_parent`` children each, then a root above them."""
    if len(children) <= 1:
        return []
    if len(children) <= per_parent:
        return [TopologySwitch(name=f"{prefix}-root", switches=compress(children))]
    groups = [children[i : i + per_parent] for i in range(0, len(children), per_parent)]
    pods = [TopologySwitch(name=f"pod{i + 1}", switches=compress(g)) for i, g in enumerate(groups)]
    return [*pods, TopologySwitch(name=f"{prefix}-root", switches=compress([p.name for p in pods]))]


def _block_sizes(base: int, blocks: int) -> list[int]:
    sizes = [base]
    count = 1
    while count * 2 <= blocks:
        count *= 2
        sizes.append(base * count)
    return sizes


def _resolve_fabric(spec: Spec, nodes: list[PlanNode]) -> tuple[FabricPlan, list[TopologySwitch], list[TopologyBlock]]:
    fabric = spec.fabric
    radix = fabric.switch_ports
    down = radix - radix // (fabric.oversubscription + 1)
    members = [n for n in nodes if n.role == "compute" and not n.burst]
    leaves: list[LeafPlan] = []
    sus: list[ScalableUnit] = []
    switches: list[TopologySwitch] = []
    blocks: list[TopologyBlock] = []
    su_size: int | None = None
    if fabric.layout == "rail-optimized":
        su_size = down
        rails = max((len(_fabric_hcas(n)) for n in members), default=0)
        for su_index in range(math.ceil(len(members) / su_size) if members else 0):
            su_nodes = members[su_index * su_size : (su_index + 1) * su_size]
            su_name = f"su{su_index + 1}"
            su_leaves = [f"{su_name}-leaf{r + 1}" for r in range(rails)]
            for rail, leaf_name in enumerate(su_leaves):
                ports = [(n.hostname, _fabric_hcas(n)[rail]) for n in su_nodes if rail < len(_fabric_hcas(n))]
                leaves.append(LeafPlan(name=leaf_name, su=su_index + 1, rail=rail, ports=ports))
            for node in su_nodes:
                node.su = su_index + 1
                node.leaves = su_leaves[: len(_fabric_hcas(node))]
                node.topology_switch = su_name
            hosts = compress(n.hostname for n in su_nodes)
            sus.append(ScalableUnit(index=su_index + 1, name=su_name, hosts=hosts, leaves=su_leaves))
            switches.append(TopologySwitch(name=su_name, nodes=hosts))
            blocks.append(TopologyBlock(name=f"block-{su_name}", nodes=hosts))
        children_per_parent = max(1, (radix // 2) // max(rails, 1))
    else:
        racks: OrderedDict[str, list[PlanNode]] = OrderedDict()
        for node in members:
            racks.setdefault(node.rack, []).append(node)
        for rack, rack_nodes in racks.items():
            links = sum(len(_fabric_hcas(n)) for n in rack_nodes)
            count = max(1, math.ceil(links / down))
            names = [f"leaf-{rack}"] if count == 1 else [f"leaf-{rack}-{i + 1}" for i in range(count)]
            rack_leaves = [LeafPlan(name=name, rack=rack) for name in names]
            port = 0
            for node in rack_nodes:
                node.leaves = []
                for hca in _fabric_hcas(node):
                    leaf = rack_leaves[port // down]
                    leaf.ports.append((node.hostname, hca))
                    node.leaves.append(leaf.name)
                    port += 1
                node.topology_switch = names[0] if count == 1 else f"leafgroup-{rack}"
            leaves.extend(rack_leaves)
            hosts = compress(n.hostname for n in rack_nodes)
            switches.append(TopologySwitch(name=rack_nodes[0].topology_switch or rack, nodes=hosts))
            blocks.append(TopologyBlock(name=f"block-{rack}", nodes=hosts))
        children_per_parent = max(1, radix // 2)
    node_links = sum(len(_fabric_hcas(n)) for n in members)
    tree: FatTree = size_fat_tree(radix, fabric.oversubscription, len(leaves), node_links)
    switches.extend(_parents([s.name for s in switches], children_per_parent, "fabric"))
    plan = FabricPlan(
        kind=fabric.kind,
        layout=fabric.layout,
        speed_gbps=fabric.speed_gbps,
        radix=radix,
        tiers=tree.tiers,
        su_size=su_size,
        down_ports_per_leaf=tree.down_ports,
        uplinks_per_leaf=tree.up_ports,
        leaf_switches=tree.leaves,
        spine_switches=tree.spines,
        core_switches=tree.cores,
        node_links=tree.node_links,
        leaf_spine_links=tree.leaf_spine_links,
        spine_core_links=tree.spine_core_links,
        oversubscription=round(tree.oversubscription, 3),
        max_endpoints_2tier=tree.max_endpoints_2tier,
        max_endpoints_3tier=tree.max_endpoints_3tier,
        endpoints=node_links,
        subnet_manager=fabric.subnet_manager,
        sharp=fabric.sharp,
        sus=sus,
        leaves=leaves,
    )
    return plan, switches, blocks


def _real_memory(profile: HardwareProfile) -> int:
    return int(profile.memory_gib * 1024 * REAL_MEMORY_SHARE)


def _resolve_slurm(
    spec: Spec, nodes: list[PlanNode], switches: list[TopologySwitch], blocks: list[TopologyBlock], fabric: FabricPlan
) -> SlurmPlan:
    controllers = [n for n in nodes if n.role == "controller"]
    node_lines: list[SlurmNodeLine] = []
    gres_lines: list[GresLine] = []
    burst_plans: list[BurstGroupPlan] = []
    by_group: dict[str, list[PlanNode]] = {}
    for node in nodes:
        by_group.setdefault(node.group, []).append(node)
    for group in spec.nodes:
        if group.role != "compute":
            continue
        profile = spec.hardware[group.hardware]
        members = by_group[group.group]
        hosts = compress(n.hostname for n in members)
        gres = None
        if profile.gpus:
            gtype = GPU_MODELS[profile.gpus.model].gres_type
            gres = f"gpu:{gtype}:{profile.gpus.count}"
            # One line per GPU with the cores of its NUMA node (plan/gres.py).
            gres_lines.extend(gres_gpu_lines(hosts, group.hardware, profile, cloud=group.burst is not None))
        features = [group.group, group.hardware]
        if group.burst:
            features.append("burst")
        node_lines.append(
            SlurmNodeLine(
                hosts=hosts,
                cpus=profile.cpus.sockets * profile.cpus.cores_per_socket * profile.cpus.threads_per_core,
                sockets=profile.cpus.sockets,
                cores_per_socket=profile.cpus.cores_per_socket,
                threads_per_core=profile.cpus.threads_per_core,
                real_memory_mb=_real_memory(profile),
                gres=gres,
                features=features,
                state="CLOUD" if group.burst else "UNKNOWN",
                # Burst nodes cost money: schedule on-prem nodes first.
                weight=100 if group.burst else 1,
            )
        )
        if group.burst:
            switch = f"burst-{group.group}"
            switches.append(TopologySwitch(name=switch, nodes=hosts))
            for node in members:
                node.topology_switch = switch
            burst_plans.append(
                BurstGroupPlan(
                    group=group.group,
                    provider=group.burst.provider.kind,
                    hosts=hosts,
                    resume_timeout_s=group.burst.resume_timeout.seconds,
                    suspend_time_s=group.burst.suspend_after.seconds,
                    topology_switch=switch,
                )
            )
            blocks.append(TopologyBlock(name=f"block-{switch}", nodes=hosts))
    burst_groups = {b.group: b for b in burst_plans}
    partitions: list[SlurmPartitionPlan] = []
    for part in spec.slurm.partitions:
        members = [n for g in part.groups for n in by_group.get(g, []) if not n.spare]
        suspend = [burst_groups[g].suspend_time_s for g in part.groups if g in burst_groups]
        partitions.append(
            SlurmPartitionPlan(
                name=part.name,
                hosts=compress(n.hostname for n in members),
                default=part.default,
                max_time=part.max_time,
                max_nodes=part.max_nodes,
                burst=bool(suspend),
                suspend_time_s=min(suspend) if suspend else None,
            )
        )
    spares = [n.hostname for n in nodes if n.spare]
    block_sizes: list[int] = []
    if spec.slurm.topology == "block" and blocks:
        base = fabric.su_size or spec.fabric.nodes_per_rack or 1
        block_sizes = _block_sizes(base, len(blocks))
    container = spec.provider.kind == "local"
    return SlurmPlan(
        version=spec.versions.slurm,
        cluster_name=spec.name,
        controllers=[n.hostname for n in controllers],
        controller_addresses=[n.address for n in controllers],
        accounting=spec.slurm.accounting,
        dbd_host=controllers[0].hostname if spec.slurm.accounting and controllers else None,
        topology=spec.slurm.topology,
        switches=switches if spec.slurm.topology == "tree" else [],
        blocks=blocks if spec.slurm.topology == "block" else [],
        block_sizes=block_sizes,
        node_lines=node_lines,
        gres_lines=gres_lines,
        partitions=partitions,
        spares=compress(spares) if spares else None,
        burst=burst_plans,
        suspend_exclude=compress(n.hostname for n in nodes if not n.burst) if burst_plans else None,
        suspend_exclude_states=at_least(spec.versions.slurm, SLURM_SUSPEND_EXC_STATES),
        # Containers die and come back in seconds; a short timeout shows a dead node quickly.
        slurmd_timeout_s=30 if container else 300,
        container_nodes=container,
        pyxis=spec.container_runtime == "enroot",
        tree_width=65533 if burst_plans else None,
    )


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


def _resolve_storage(
    spec: Spec, nodes: list[PlanNode], checkpoint_bytes: float | None
) -> tuple[list[StoragePlan], list[LnetProfile]]:
    out: list[StoragePlan] = []
    fixed = [n for n in nodes if not n.burst]
    lnet_nets: list[str] = []
    lnet_hosts: dict[str, PlanNode] = {}
    for tier in spec.storage:
        extra: dict[str, list[str]] = {}
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
            hosts = [n for n in fixed if n.storage_netdevs or n.storage_nics] if rdma else fixed
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
            hosts = fixed
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


def _resolve_power(nodes: list[PlanNode], fabric: FabricPlan, assumptions: list[str]) -> PowerPlan:
    racks: dict[str, float] = {}
    for node in nodes:
        if node.burst:
            continue
        racks[node.rack] = racks.get(node.rack, 0.0) + node.power_w / 1000
    switches = fabric.leaf_switches + fabric.spine_switches + fabric.core_switches
    switches_kw = switches * ASSUMED_SWITCH_W / 1000
    notes = list(assumptions)
    if switches:
        notes.append(f"fabric switches: {ASSUMED_SWITCH_W} W each with optics (assumed)")
    return PowerPlan(
        it_kw=round(sum(racks.values()) + switches_kw, 1),
        max_rack_kw=round(max(racks.values(), default=0.0), 1),
        racks={k: round(v, 1) for k, v in sorted(racks.items())},
        switches_kw=round(switches_kw, 1),
        assumptions=notes,
    )


def _resolve_gpus(nodes: list[PlanNode]) -> GpuPlan:
    by_model: dict[str, int] = {}
    total = active = 0
    hbm = peak = 0.0
    for node in nodes:
        if not node.gpus or node.burst or node.gpu_model is None:
            continue
        model = GPU_MODELS[node.gpu_model]
        by_model[model.name] = by_model.get(model.name, 0) + node.gpus
        total += node.gpus
        hbm += node.gpus * model.hbm_gib
        if not node.spare:
            active += node.gpus
            peak += node.gpus * model.bf16_dense_tflops / 1000
    return GpuPlan(total=total, active=active, hbm_gib=hbm, by_model=by_model, peak_bf16_pflops=round(peak, 2))


def _resolve_workload(spec: Spec, nodes: list[PlanNode], gpus: GpuPlan) -> WorkloadPlan | None:
    work = spec.workload
    if work is None:
        return None
    params = work.model_params_b * 1e9
    flops = 6 * params * work.train_tokens_t * 1e12
    state = STATE_BYTES_PER_PARAM * params
    hbm_values = [GPU_MODELS[n.gpu_model].hbm_gib for n in nodes if n.gpu_model and not n.burst]
    smallest_hbm = min(hbm_values) if hbm_values else 0
    days = None
    if gpus.peak_bf16_pflops:
        days = round(flops / (gpus.peak_bf16_pflops * 1e15 * work.target_mfu) / 86400, 1)
    return WorkloadPlan(
        model_params_b=work.model_params_b,
        train_tokens_t=work.train_tokens_t,
        target_mfu=work.target_mfu,
        training_flops=flops,
        model_state_tib=round(state / 2**40, 3),
        min_gpus_for_state=math.ceil(state / (smallest_hbm * 2**30)) if smallest_hbm else 0,
        train_days=days,
        checkpoint_tib=round(CHECKPOINT_BYTES_PER_PARAM * params / 2**40, 3),
        checkpoint_every_min=work.checkpoint_every_min,
    )


# Where the roles install the per-job scripts (see templates/slurm/*.d and templates/health).
PROLOG_DIR = "/etc/slurm/prolog.d"
EPILOG_DIR = "/etc/slurm/epilog.d"
TASK_PROLOG = "/etc/slurm/task_prolog.sh"
HEALTHCHECK_PROGRAM = "/usr/local/sbin/clusterctl-healthcheck"


def _job_scripts(spec: Spec, nodes: list[PlanNode], nccl: list[NcclProfile], slurm: SlurmPlan) -> None:
    """Prolog/Epilog/TaskProlog and HealthCheckProgram, only where something is installed to run."""
    daemons = any(p.job_daemon is not None for p in nccl)
    real_gpus = any(n.gpus and not n.emulated for n in nodes)
    slurm.dcgm_epilog = spec.slurm.dcgm_epilog and real_gpus
    if daemons or slurm.dcgm_epilog:
        slurm.epilog = f"{EPILOG_DIR}/*"
    if daemons:
        slurm.prolog = f"{PROLOG_DIR}/*"
    if any(p.job_env or p.job_env_profile for p in nccl):
        slurm.task_prolog = TASK_PROLOG
    if spec.slurm.health_check:
        slurm.health_check_program = HEALTHCHECK_PROGRAM
        # Containers fail and return in seconds; real nodes are checked every 5 minutes (NHC's usual pace).
        slurm.health_check_interval_s = 60 if slurm.container_nodes else 300


def _vendor_slurm(nodes: list[PlanNode], nccl: list[NcclProfile], slurm: SlurmPlan) -> None:
    """The cloud vendor's Slurm settings for its GPU machine types (plan.nccl_cloud: GCP A3 Mega/Ultra).

    Every partition holding such nodes gets the vendor's partition settings (the strictest when
    several types meet); the long-prolog timeouts are cluster-wide, the largest asked for.
    """
    vendor = {p.hardware: p.slurm for p in nccl if p.slurm is not None}
    if not vendor:
        return
    by_host = {n.hostname: n.hardware for n in nodes}
    for part in slurm.partitions:
        wanted = [vendor[hw] for hw in sorted({by_host[h] for h in expand(part.hosts)} & vendor.keys())]
        if not wanted:
            continue
        if any(v.oversubscribe for v in wanted):
            part.oversubscribe = "EXCLUSIVE"
        resume = [v.resume_timeout_s for v in wanted if v.resume_timeout_s]
        if resume and part.burst:
            # Never shorter than what the spec's burst groups need to boot and be configured.
            resume += [b.resume_timeout_s for b in slurm.burst]
        suspend = [v.suspend_timeout_s for v in wanted if v.suspend_timeout_s]
        if resume:
            part.resume_timeout_s = max(resume)
        if suspend:
            part.suspend_timeout_s = max(suspend)
        part.vendor_sources = sorted({v.partition_source for v in wanted})
    for attr in ("message_timeout_s", "batch_start_timeout_s", "prolog_epilog_timeout_s"):
        values = [getattr(v, attr) for v in vendor.values() if getattr(v, attr)]
        if values:
            setattr(slurm, attr, max(values))
    sources = sorted({v.timeouts_source for v in vendor.values() if v.timeouts_source})
    slurm.timeouts_source = "; ".join(sources) or None


def build_plan(spec: Spec, base_dir: Path, spec_file: str = "spec.yaml") -> Plan:
    """Resolve ``spec`` into a plan.

    Args:
        spec: a spec that passed validation.
        base_dir: directory relative paths in the spec (machines.csv) are resolved against.
        spec_file: how the spec is named in generated files.
    """
    nodes, assumptions = _resolve_nodes(spec, base_dir)
    fabric, switches, blocks = _resolve_fabric(spec, nodes)
    apply_rdma(spec, nodes, fabric)
    slurm = _resolve_slurm(spec, nodes, switches, blocks, fabric)
    nccl = nccl_profiles(spec)
    _job_scripts(spec, nodes, nccl, slurm)
    _vendor_slurm(nodes, nccl, slurm)
    gpus = _resolve_gpus(nodes)
    workload = _resolve_workload(spec, nodes, gpus)
    checkpoint_bytes = CHECKPOINT_BYTES_PER_PARAM * spec.workload.model_params_b * 1e9 if spec.workload else None
    storage, lnet = _resolve_storage(spec, nodes, checkpoint_bytes)
    controllers = [n for n in nodes if n.role == "controller"]
    monitoring = MonitoringPlan(
        prometheus=spec.monitoring.prometheus,
        prometheus_host=controllers[0].hostname if controllers and spec.monitoring.prometheus else None,
        node_exporter_targets=[n.hostname for n in nodes if spec.monitoring.node_exporter and not n.burst],
        dcgm_exporter_targets=[
            n.hostname for n in nodes if spec.monitoring.dcgm_exporter and n.gpus and not n.emulated and not n.burst
        ],
    )
    groups = []
    for group in spec.nodes:
        members = [n for n in nodes if n.group == group.group]
        groups.append(
            NodeGroupPlan(
                name=group.group,
                role=group.role,
                hardware=group.hardware,
                count=group.count,
                spares=group.spares,
                hosts=compress(n.hostname for n in members),
                active_hosts=compress(n.hostname for n in members if not n.spare),
                burst=group.burst is not None,
            )
        )
    network = spec.network
    gateway = network.gateway or IPv4Address(int(network.management_cidr.network_address) + 1)
    # The nccl-tests archive and its checksum are not versions: they go to the cluster facts.
    versions = spec.versions.model_dump(exclude={"nccl_tests_url", "nccl_tests_checksum"})
    versions["fabric_manager"] = spec.versions.fabric_manager or spec.versions.nvidia_driver
    # AWS EFA nodes: the EFA installer and aws-ofi-nccl releases the efa role installs.
    for stack in (p.efa for p in nccl if p.efa is not None):
        versions["efa_installer"] = stack.installer
        versions["aws_ofi_nccl"] = stack.aws_ofi_nccl
    versions.update(gcp_versions(spec))
    return Plan(
        cluster=ClusterInfo(
            name=spec.name,
            domain=network.domain,
            os=spec.os,
            os_codename=OS_CODENAME[spec.os],
            provider=spec.provider.kind,
            provider_config=spec.provider.model_dump(mode="json"),
            spec_file=spec_file,
            management_cidr=str(network.management_cidr),
            gateway=str(gateway),
            versions=versions,
            container_runtime=spec.container_runtime,
            emulated_gpus=any(n.emulated for n in nodes),
            nccl_tests_url=spec.versions.nccl_tests_url or nccl_tests_url(spec.versions.nccl_tests),
            # The spec refuses a release without a known or given checksum (Versions).
            nccl_tests_checksum=(
                spec.versions.nccl_tests_checksum or nccl_tests_checksum(spec.versions.nccl_tests) or ""
            ),
        ),
        nodes=nodes,
        groups=groups,
        fabric=fabric,
        slurm=slurm,
        storage=storage,
        lnet=lnet,
        nccl=nccl,
        power=_resolve_power(nodes, fabric, assumptions),
        gpus=gpus,
        workload=workload,
        monitoring=monitoring,
        cloud=resolve_cloud(spec, nodes),
        baremetal=resolve_baremetal(spec, nodes, base_dir),
        burst_cloud=resolve_burst_cloud(spec, nodes),
    )


__all__ = ["at_least", "build_plan", "systemd_mount_unit"]
