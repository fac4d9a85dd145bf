"""Slurm as planned: node and gres lines, partitions, topology, power saving and job scripts.

Everything ``SlurmPlan`` holds is computed here before it is built, the cloud vendors' settings
for their GPU machine types (``NcclProfile.slurm``, from plan.nccl_cloud) included.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from clusterctl.catalog.compat import SLURM_SUSPEND_EXC_STATES, at_least
from clusterctl.catalog.gpus import GPU_MODELS
from clusterctl.hostlist import compress
from clusterctl.plan.fabric import FabricLayout
from clusterctl.plan.gres import gres_gpu_lines
from clusterctl.plan.models import (
    BurstGroupPlan,
    GresLine,
    NcclProfile,
    NcclVendorSlurm,
    PlanNode,
    SlurmNodeLine,
    SlurmParam,
    SlurmPartitionPlan,
    SlurmPlan,
    TopologyBlock,
    TopologySwitch,
)
from clusterctl.plan.nodes import burst_switch
from clusterctl.spec.models import HardwareProfile, Partition, Spec

# slurm.conf RealMemory leaves this share to the OS so small differences in what the kernel
# reports do not make nodes INVAL.
REAL_MEMORY_SHARE = 0.97
# Where the roles install the per-job scripts (see templates/slurm/*.d and templates/health).
PROLOG_DIR = "/etc/slurm/prolog.d"
EPILOG_DIR = "/etc/slurm/epilog.d"
TASK_PROLOG = "/etc/slurm/task_prolog.sh"
HEALTHCHECK_PROGRAM = "/usr/local/sbin/clusterctl-healthcheck"

# What `scontrol reboot` runs on a node (the rolling upgrade reboots nodes whose driver changed).
REBOOT_PROGRAM = "/usr/sbin/reboot"


@dataclass(frozen=True)
class _ComputeLines:
    """The node, gres and burst lines of the compute groups, and the burst groups' topology."""

    node_lines: list[SlurmNodeLine]
    gres_lines: list[GresLine]
    burst: list[BurstGroupPlan]
    switches: list[TopologySwitch]
    blocks: list[TopologyBlock]


@dataclass(frozen=True)
class _JobScripts:
    """Prolog/Epilog/TaskProlog and HealthCheckProgram, only where something is installed to run."""

    prolog: str | None
    epilog: str | None
    task_prolog: str | None
    dcgm_epilog: bool
    health_check_program: str | None
    health_check_interval_s: int
    heal_interval_s: int | None


def _real_memory(profile: HardwareProfile) -> int:
    return int(profile.memory_gib * 1024 * REAL_MEMORY_SHARE)


def _block_sizes(base: int, blocks: int) -> list[int]:
    sizes = [base]
    count = 1
    while count * 2 <= blocks:
        count *= 2
        sizes.append(base * count)
    return sizes


def _compute_lines(spec: Spec, by_group: dict[str, list[PlanNode]]) -> _ComputeLines:
    node_lines: list[SlurmNodeLine] = []
    gres_lines: list[GresLine] = []
    burst: list[BurstGroupPlan] = []
    switches: list[TopologySwitch] = []
    blocks: list[TopologyBlock] = []
    for group in spec.nodes:
        if group.role != "compute":
            continue
        profile = spec.hardware[group.hardware]
        hosts = compress(n.hostname for n in by_group[group.group])
        gres = None
        if profile.gpus:
            gres = f"gpu:{GPU_MODELS[profile.gpus.model].gres_type}:{profile.gpus.count}"
            # One line per GPU with the cores of its NUMA node (plan/gres.py).
            gres_lines.extend(gres_gpu_lines(hosts, group.hardware, profile, cloud=group.burst is not None))
        node_lines.append(
            SlurmNodeLine(
                hosts=hosts,
                cpus=profile.cpus.sockets * profile.cpus.cores_per_socket * profile.cpus.threads_per_core,
                sockets=profile.cpus.sockets,
                cores_per_socket=profile.cpus.cores_per_socket,
                threads_per_core=profile.cpus.threads_per_core,
                real_memory_mb=_real_memory(profile),
                gres=gres,
                features=[group.group, group.hardware, *(["burst"] if group.burst else [])],
                state="CLOUD" if group.burst else "UNKNOWN",
                # Burst nodes cost money: schedule on-prem nodes first.
                weight=100 if group.burst else 1,
            )
        )
        if group.burst:
            switch = burst_switch(group.group)
            switches.append(TopologySwitch(name=switch, nodes=hosts))
            blocks.append(TopologyBlock(name=f"block-{switch}", nodes=hosts))
            burst.append(
                BurstGroupPlan(
                    group=group.group,
                    provider=group.burst.provider.kind,
                    hosts=hosts,
                    resume_timeout_s=group.burst.resume_timeout.seconds,
                    suspend_time_s=group.burst.suspend_after.seconds,
                    topology_switch=switch,
                )
            )
    return _ComputeLines(node_lines, gres_lines, burst, switches, blocks)


def _partition(
    part: Partition,
    members: list[PlanNode],
    burst: list[BurstGroupPlan],
    vendor: dict[str, NcclVendorSlurm],
) -> SlurmPartitionPlan:
    """A partition with the vendor's settings for the GPU machine types among its nodes.

    Where several types meet, the strictest settings win; a burst partition's resume timeout is
    never shorter than what the spec's burst groups need to boot and be configured.
    """
    suspend = [b.suspend_time_s for b in burst if b.group in part.groups]
    wanted = [vendor[hw] for hw in sorted({n.hardware for n in members} & vendor.keys())]
    resume = [v.resume_timeout_s for v in wanted if v.resume_timeout_s]
    if resume and suspend:
        resume += [b.resume_timeout_s for b in burst]
    vendor_suspend = [v.suspend_timeout_s for v in wanted if v.suspend_timeout_s]
    return SlurmPartitionPlan(
        name=part.name,
        hosts=compress(n.hostname for n in members),
        default=part.default,
        max_time=part.max_time,
        max_nodes=part.max_nodes,
        burst=bool(suspend),
        suspend_time_s=min(suspend) if suspend else None,
        oversubscribe="EXCLUSIVE" if any(v.oversubscribe for v in wanted) else None,
        resume_timeout_s=max(resume) if resume else None,
        suspend_timeout_s=max(vendor_suspend) if vendor_suspend else None,
        vendor_sources=sorted({v.partition_source for v in wanted}),
    )


def _job_scripts(spec: Spec, nodes: list[PlanNode], nccl: list[NcclProfile], container: bool) -> _JobScripts:
    daemons = any(p.job_daemon is not None for p in nccl)
    dcgm_epilog = spec.slurm.dcgm_epilog and any(n.gpus and not n.emulated for n in nodes)
    health = spec.slurm.health_check
    return _JobScripts(
        prolog=f"{PROLOG_DIR}/*" if daemons else None,
        epilog=f"{EPILOG_DIR}/*" if daemons or dcgm_epilog else None,
        task_prolog=TASK_PROLOG if any(p.job_env or p.job_env_profile for p in nccl) else None,
        dcgm_epilog=dcgm_epilog,
        health_check_program=HEALTHCHECK_PROGRAM if health else None,
        # Containers fail and return in seconds; real nodes are checked every 5 minutes (NHC's usual pace).
        health_check_interval_s=60 if health and container else 300,
        # The controller's timer runs the health check on nodes clusterctl drained: nothing to run without it.
        heal_interval_s=spec.slurm.heal_every.seconds if health and spec.slurm.heal_every else None,
    )


def _largest(values: list[int | None]) -> int | None:
    """The largest of the vendors' long-prolog timeouts (they are cluster-wide), None when none asks."""
    present = [v for v in values if v]
    return max(present) if present else None


def resolve_slurm(spec: Spec, nodes: list[PlanNode], fabric: FabricLayout, nccl: list[NcclProfile]) -> SlurmPlan:
    """Everything slurm.conf, gres.conf, topology.conf and cgroup.conf need."""
    controllers = [n for n in nodes if n.role == "controller"]
    by_group: dict[str, list[PlanNode]] = {}
    for node in nodes:
        by_group.setdefault(node.group, []).append(node)
    compute = _compute_lines(spec, by_group)
    switches = [*fabric.switches, *compute.switches]
    blocks = [*fabric.blocks, *compute.blocks]
    # The cloud vendor's settings for its GPU machine types (plan.nccl_cloud: GCP A3 Mega/Ultra).
    vendor = {p.hardware: p.slurm for p in nccl if p.slurm is not None}
    partitions = [
        _partition(part, [n for g in part.groups for n in by_group.get(g, []) if n.in_service], compute.burst, vendor)
        for part in spec.slurm.partitions
    ]
    spares = [n.hostname for n in nodes if n.spare]
    replaced = [n.hostname for n in nodes if n.replaced_by]
    block_sizes: list[int] = []
    if spec.slurm.topology == "block" and blocks:
        block_sizes = _block_sizes(fabric.plan.su_size or spec.fabric.nodes_per_rack or 1, len(blocks))
    container = spec.provider.kind == "local"
    timeouts_sources = sorted({v.timeouts_source for v in vendor.values() if v.timeouts_source})
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
        node_lines=compute.node_lines,
        gres_lines=compute.gres_lines,
        partitions=partitions,
        spares=compress(spares) if spares else None,
        replaced=compress(replaced) if replaced else None,
        burst=compute.burst,
        suspend_exclude=compress(n.hostname for n in nodes if not n.burst) if compute.burst else None,
        suspend_exclude_states=at_least(spec.versions.slurm, SLURM_SUSPEND_EXC_STATES),
        **asdict(_job_scripts(spec, nodes, nccl, container)),
        # Containers die and come back in seconds; a short timeout shows a dead node quickly.
        slurmd_timeout_s=30 if container else 300,
        container_nodes=container,
        reboot_program=None if container else REBOOT_PROGRAM,
        pyxis=spec.container_runtime == "enroot",
        tree_width=65533 if compute.burst else None,
        message_timeout_s=_largest([v.message_timeout_s for v in vendor.values()]),
        batch_start_timeout_s=_largest([v.batch_start_timeout_s for v in vendor.values()]),
        prolog_epilog_timeout_s=_largest([v.prolog_epilog_timeout_s for v in vendor.values()]),
        cred_expire_s=_largest([v.cred_expire_s for v in vendor.values()]),
        timeouts_source="; ".join(timeouts_sources) or None,
        **_state_save(spec),
        site_params=[
            SlurmParam(name=name, value=_conf_value(value)) for name, value in sorted(spec.site.slurm_conf.items())
        ],
    )


def _conf_value(value: bool | int | str) -> str:
    """A site value as slurm.conf writes it: YES/NO for true/false."""
    if isinstance(value, bool):
        return "YES" if value else "NO"
    return str(value)


def _state_save(spec: Spec) -> dict[str, str | None]:
    """StateSaveLocation and the storage tier it is on (rules SLU004: on one, with two controllers)."""
    location = spec.slurm.state_save_location
    if location is None:
        return {}
    tier = next((t.name for t in spec.storage if location.startswith(t.mount.rstrip("/") + "/")), None)
    return {"state_save_location": location, "state_save_tier": tier}
