"""Helpers for verify tests: a replaying fake executor, tool outputs in their documented formats,
and the 2-SU plan (64 nodes) the test-plan and runner tests share.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clusterctl.pipeline import load_and_validate
from clusterctl.plan import Plan
from clusterctl.slurm import commands as slurm_commands
from clusterctl.spec.providers import BaremetalProvider
from tests.specs import example_data, group, write_spec

Response = tuple[int, str, str]
Handler = Callable[[str, str], Response | None]


class ReplayExecutor:
    """An `Executor` that answers from a handler and records every call.

    The handler gets ``(host, command)`` and returns ``(rc, stdout, stderr)``, or None for
    "not found" (rc 127), which is what a missing program gives on a real node.
    """

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.calls: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def run(self, host: str, command: str, timeout: float) -> Response:
        with self._lock:
            self.calls.append((host, command))
        answer = self.handler(host, command)
        return answer if answer is not None else (127, "", f"bash: {command.split()[0]}: command not found")

    def commands(self, prefix: str) -> list[tuple[str, str]]:
        """Calls whose command starts with ``prefix``."""
        return [(h, c) for h, c in self.calls if c.startswith(prefix)]


# --- tool outputs, in the formats their sources print -------------------------------------------


def gpu_query(count: int = 8, name: str = "NVIDIA H100 80GB HBM3", driver: str = "570.133.20") -> str:
    """``nvidia-smi --query-gpu=name,driver_version --format=csv,noheader``."""
    return "".join(f"{name}, {driver}\n" for _ in range(count))


def ibstat(hcas: list[str], *, down: tuple[str, ...] = (), rate: str = "400") -> str:
    """``ibstat`` (infiniband-diags ``ca_dump``/``port_dump`` layout), one port per CA."""
    blocks = []
    for index, hca in enumerate(hcas):
        state, phys = ("Down", "Polling") if hca in down else ("Active", "LinkUp")
        blocks.append(
            f"CA '{hca}'\n"
            "\tCA type: MT4129\n"
            "\tNumber of ports: 1\n"
            "\tFirmware version: 28.39.1002\n"
            "\tHardware version: 0\n"
            f"\tNode GUID: 0xa088c2030000{index:04x}\n"
            f"\tSystem image GUID: 0xa088c2030000{index:04x}\n"
            "\tPort 1:\n"
            f"\t\tState: {state}\n"
            f"\t\tPhysical state: {phys}\n"
            f"\t\tRate: {rate}\n"
            f"\t\tBase lid: {index + 1}\n"
            "\t\tLMC: 0\n"
            "\t\tSM lid: 1\n"
            "\t\tCapability mask: 0xa751e84a\n"
            f"\t\tPort GUID: 0xa088c2030000{index:04x}\n"
            "\t\tLink layer: InfiniBand\n"
        )
    return "".join(blocks)


def rails_conf(hcas: list[str], devices: list[str] | None = None, *, link_layer: str = "InfiniBand") -> str:
    """``/etc/clusterctl/rdma-rails.conf`` as roles/rdma/templates/rdma-rails.conf.j2 writes it.

    ``hcas`` are the rails as the spec names them, ``devices`` the node's RDMA device of each
    (the spec's names when None; ``-`` for a rail the lookup did not find).
    """
    lines = ["#", "# rail INDEX HCA IBDEV NETDEV LINK_LAYER NUMA_NODE"]
    for index, (hca, dev) in enumerate(zip(hcas, devices or hcas, strict=True)):
        if dev == "-":
            lines.append(f"rail {index} {hca} - - - -")
        else:
            lines.append(f"rail {index} {hca} {dev} ib{index} {link_layer} {index * 2 // max(len(hcas), 1)}")
    return "\n".join(lines) + "\n"


def chronyc(offset_s: float = 0.000012, *, leap: str = "Normal", reference: str = "C0A80001 (192.168.0.1)") -> str:
    """``chronyc -n tracking`` (chrony ``client.c`` ``process_cmd_tracking``)."""
    direction = "fast" if offset_s >= 0 else "slow"
    return (
        f"Reference ID    : {reference}\n"
        "Stratum         : 3\n"
        "Ref time (UTC)  : Sat Nov 30 04:00:00 2026\n"
        f"System time     : {abs(offset_s):.9f} seconds {direction} of NTP time\n"
        "Last offset     : -0.000011234 seconds\n"
        "RMS offset      : 0.000020123 seconds\n"
        "Frequency       : 6.123 ppm fast\n"
        "Residual freq   : -0.001 ppm\n"
        "Skew            : 0.016 ppm\n"
        "Root delay      : 0.000487 seconds\n"
        "Root dispersion : 0.000254 seconds\n"
        "Update interval : 64.2 seconds\n"
        f"Leap status     : {leap}\n"
    )


def scontrol_node(
    name: str,
    *,
    state: str = "IDLE",
    gres: str = "gpu:h100:8",
    reason: str = "",
    partitions: str = "train",
    extra: str = "",
) -> str:
    """One ``scontrol show node -o`` line (Slurm 22.05 ``slurm_sprint_node_table`` with one_liner)."""
    line = (
        f"NodeName={name} Arch=x86_64 CoresPerSocket=56 CPUAlloc=0 CPUEfctv=224 CPUTot=224 CPULoad=0.01 "
        f"AvailableFeatures=gpu,dgx-h100 ActiveFeatures=gpu,dgx-h100 Gres={gres} NodeAddr={name} "
        f"NodeHostName={name} Version=22.05.8 OS=Linux 6.1.0-18-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 "
        "RealMemory=2034073 AllocMem=0 FreeMem=2000000 Sockets=2 Boards=1 "
        f"State={state} ThreadsPerCore=2 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A "
        + (f"Extra={extra} " if extra else "")
        + f"Partitions={partitions} "
        "BootTime=2026-11-30T03:00:00 SlurmdStartTime=2026-11-30T03:05:00 LastBusyTime=2026-11-30T03:05:00 "
        "CfgTRES=cpu=224,mem=2034073M,billing=224,gres/gpu=8 AllocTRES= CapWatts=n/a CurrentWatts=0 "
        "AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s"
    )
    if reason:
        line += f" Reason={reason} [root@2026-11-30T04:00:00]"
    return line + "\n"


def scontrol_partition(name: str, nodes: str, state: str = "UP") -> str:
    """One ``scontrol show partition -o`` line."""
    return (
        f"PartitionName={name} AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL AllocNodes=ALL Default=YES "
        "QoS=N/A DefaultTime=NONE DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden=NO MaxNodes=UNLIMITED "
        f"MaxTime=UNLIMITED MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED Nodes={nodes} PriorityJobFactor=1 "
        f"PriorityTier=1 RootOnly=NO ReqResv=NO OverSubscribe=NO OverTimeLimit=NONE PreemptMode=OFF State={state} "
        "TotalCPUs=224 TotalNodes=1 SelectTypeParameters=NONE JobDefaults=(null) DefMemPerNode=UNLIMITED "
        "MaxMemPerNode=UNLIMITED\n"
    )


# --- plans -----------------------------------------------------------------------------------

RAILS = [f"mlx5_{i}" for i in range(8)]


def two_su_spec(tmp_path: Path, sus: int = 2) -> Path:
    """examples/onprem-h100-256.yaml on the local provider with 32 x ``sus`` GPU nodes and no spares."""
    data = copy.deepcopy(example_data())
    data["provider"] = {"kind": "local"}
    gpu = group(data, "gpu")
    gpu["count"] = 32 * sus
    gpu["spares"] = 0
    return write_spec(tmp_path, data)


def two_su_plan(tmp_path: Path, sus: int = 2) -> Plan:
    """The plan of ``two_su_spec``."""
    return load_and_validate(two_su_spec(tmp_path, sus)).plan


def real_gpu_plan(tmp_path: Path) -> Plan:
    """The 2-SU plan as if its GPUs were real (bare-metal style): every check runs for real.

    Why patch the plan: a bare-metal spec needs a machines.csv row per node; the checks only
    read the plan, so turning emulation off there gives the same nodes with real GPUs.
    """
    data = copy.deepcopy(example_data())
    data["provider"] = {"kind": "local"}
    gpu = group(data, "gpu")
    gpu["count"] = 64
    gpu["spares"] = 0
    # Rails named like the real topo fixture's NICs (mlx5_0..7); the storage NICs move out of the way.
    data["hardware"]["dgx-h100"]["rails"] = list(RAILS)
    data["hardware"]["dgx-h100"]["storage_nics"] = ["mlx5_8", "mlx5_9"]
    plan = load_and_validate(write_spec(tmp_path, data)).plan
    bare_metal = BaremetalProvider(kind="baremetal", machines="machines.csv")
    return with_real_gpus(plan, provider="baremetal", provider_config=bare_metal)


def with_real_gpus(plan: Plan, **cluster: Any) -> Plan:
    """A copy of ``plan`` whose GPUs are real: no node emulated, no container nodes.

    ``cluster`` replaces cluster facts besides (the provider). A copy: plans are frozen.
    """
    return plan.model_copy(
        update={
            "nodes": [n.model_copy(update={"emulated": False}) for n in plan.nodes],
            "cluster": plan.cluster.model_copy(update={"emulated_gpus": False, **cluster}),
            "slurm": plan.slurm.model_copy(update={"container_nodes": False}),
        }
    )


# --- NCCL_DEBUG=INFO output of a transport run ---------------------------------------------------


def nccl_debug_run(hosts: tuple[str, ...], gpus: int = 8, *, sockets: tuple[str, ...] = ()) -> str:
    """What ``srun --label ... env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET all_reduce_perf`` prints.

    The lines have the formats of the real logs in tests/unit/verify/data/nccl_debug (NCCL
    2.19: NVIDIA/nccl-tests#185 for IB, NVIDIA/nccl#1053 and #352 for the socket fallback);
    hosts in ``sockets`` find no HCA and fall back to sockets. Task t runs on hosts[t // gpus].
    """
    width = len(str(len(hosts) * gpus - 1))
    hcas = " ".join(f"[{i}]mlx5_{i}:1/IB" for i in range(gpus))
    lines = []
    for node, host in enumerate(hosts):
        for dev in range(gpus):
            task = node * gpus + dev
            prefix = f"{task:>{width}}: {host}:{4000 + dev}:{4100 + dev} [{dev}] NCCL INFO "
            ip = f"10.40.0.{node + 1}"
            if host in sockets:
                lines += [
                    prefix + "NET/IB : No device found.",
                    prefix + f"NET/Socket : Using [0]eth0:{ip}<0>",
                    prefix + "Using network Socket",
                ]
                via = "NET/Socket/0"
            else:
                lines += [prefix + f"NET/IB : Using {hcas} [RO]; OOB ib0:{ip}<0>", prefix + "Using network IB"]
                via = f"NET/IB/{dev}/GDRDMA"
            peer = (task + gpus) % (len(hosts) * gpus)
            lines.append(prefix + f"Channel 00/0 : {task}[{dev}] -> {peer}[{dev}] [send] via {via}")
    return "\n".join(lines) + "\n"


# The command lines clusterctl.slurm sends through an executor, as a replaying executor sees them.
NODES_COMMAND = slurm_commands.shell(slurm_commands.show_nodes())
PARTITIONS_COMMAND = slurm_commands.shell(slurm_commands.show_partitions())


def resume_command(host: str) -> str:
    """``scontrol update nodename=HOST state=resume`` as the executor gets it."""
    return slurm_commands.shell(slurm_commands.resume(host))


def drain_command(host: str, reason: str) -> str:
    """``scontrol update nodename=HOST state=drain reason=...`` as the executor gets it."""
    return slurm_commands.shell(slurm_commands.drain(host, reason))


def jobs_command(nodes: tuple[str, ...] | list[str] = ()) -> str:
    """``squeue`` for the jobs holding nodes, as the executor gets it."""
    return slurm_commands.shell(slurm_commands.jobs(nodes))


JOBS_COMMAND = jobs_command()
