"""gres.conf GPU lines: one per GPU, each bound to the cores of its NUMA node (``Cores=``).

Slurm's ``Cores=`` takes *logical* core indexes, not Linux CPU numbers: gres.conf(5) says
"the core numbers are specified as logical core indexes (as reported by ``lstopo -l``)";
slurmd maps them through ``xcpuinfo_abs_to_mac`` (src/slurmd/common/xcpuinfo.c, 22.05), whose
abstract cores run 0 .. sockets x cores_per_socket - 1, socket by socket, hardware threads
not counted. A NUMA node of a socket split in k nodes (AMD NPS, Intel SNC) holds the next
cores_per_socket / k of them, in the order hwloc numbers cores. So on a DGX H100 (2 x 56
cores, GPUs 0-3 on node 0) GPU 0 gets ``Cores=0-55``, not the ``0-55,112-167`` of
``nvidia-smi topo -m``'s CPU Affinity; DeepOps builds Cores= from ``cpulistaffinity``, which
gives those Linux CPU numbers (targets.md §6).

The map comes from the hardware profile's ``gpus.numa``, else the cloud instance type's
``gpu_numa`` in the catalog; without either the lines have no ``Cores=`` and say why.
"""

from __future__ import annotations

from clusterctl.catalog.gpus import GPU_MODELS
from clusterctl.catalog.instances import instance_type
from clusterctl.plan.models import GresLine
from clusterctl.spec.models import HardwareProfile


def numa_core_ranges(sockets: int, cores_per_socket: int, numa_nodes: int | None = None) -> list[str]:
    """The logical core indexes of each NUMA node, as gres.conf ranges (``0-55``).

    Args:
        sockets: CPU sockets.
        cores_per_socket: Physical cores per socket.
        numa_nodes: NUMA nodes in all (default: one per socket); a multiple of ``sockets``
            whose per-socket share divides ``cores_per_socket``.

    Raises:
        ValueError: The nodes do not split the sockets evenly.
    """
    nodes = numa_nodes or sockets
    per_socket = nodes // sockets
    if nodes % sockets or cores_per_socket % per_socket:
        raise ValueError(f"{nodes} NUMA nodes do not split {sockets} sockets of {cores_per_socket} cores evenly")
    size = cores_per_socket // per_socket
    return [f"{n * size}-{(n + 1) * size - 1}" if size > 1 else str(n * size) for n in range(nodes)]


def gpu_numa_map(profile: HardwareProfile) -> tuple[tuple[int, ...], str]:
    """The NUMA node of each GPU of a profile, and where it comes from ("" when unknown)."""
    if profile.gpus is None:
        return (), ""
    if profile.gpus.numa is not None:
        return tuple(profile.gpus.numa), "the hardware profile's gpus.numa"
    itype = instance_type(profile.instance_type)
    if itype is not None and len(itype.gpu_numa) == profile.gpus.count:
        return itype.gpu_numa, f"clusterctl's catalog for {itype.name}"
    return (), ""


def gres_gpu_lines(hosts: str, hardware: str, profile: HardwareProfile, *, cloud: bool) -> list[GresLine]:
    """The gres.conf lines of a group's GPUs: one per GPU, with ``Cores=`` where the map is known.

    Args:
        hosts: The group's nodes as a hostlist.
        hardware: The hardware profile's name (for the comment).
        profile: The profile.
        cloud: Burst (State=CLOUD) nodes: AutoDetect is off for them (gres.conf(5): it cannot be
            used with cloud nodes).
    """
    if profile.gpus is None:
        return []
    gtype = GPU_MODELS[profile.gpus.model].gres_type
    numa, source = gpu_numa_map(profile)
    cpus = profile.cpus
    ranges = numa_core_ranges(cpus.sockets, cpus.cores_per_socket, cpus.numa_nodes) if numa else []
    if numa:
        note = (
            f"{hosts} ({hardware}): GPU NUMA nodes {','.join(map(str, numa))} from {source}; "
            f"Cores= are logical core indexes of {cpus.sockets} x {cpus.cores_per_socket} cores"
        )
    else:
        note = f"{hosts} ({hardware}): no GPU-NUMA map (set gpus.numa in the hardware profile), so no Cores="
    return [
        GresLine(
            hosts=hosts,
            type=gtype,
            count=1,
            file=f"/dev/nvidia{index}",
            cores=ranges[numa[index]] if numa else None,
            note=note,
            autodetect="off" if cloud else None,
        )
        for index in range(profile.gpus.count)
    ]
