"""The NCCL transport: the network every NCCL process chose, from its ``NCCL_DEBUG=INFO`` log.

A job whose NCCL falls back to TCP sockets runs, an order of magnitude slower, and nothing
else says so. The verdict reads the network every NCCL process chose (see
`clusterctl.verify.parsers.nccl_debug`) and fails, naming the node and quoting the line,
when it is not the fabric's (`clusterctl.catalog.transports` says which that is). The check
runs one small all_reduce_perf per pair of nodes with ``NCCL_DEBUG=INFO`` and judges each log.

A single node connects its GPUs through P2P/SHM and never uses the network: such a log is
"intra-node only", a skip with the network NCCL picked, not a failure.

``judge_transport`` is pure (no plan, no pydantic) so the GPU-machine script in ``tests/gpu/``
uses it as is.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clusterctl.catalog.transports import ANY_RDMA, FABRIC_TRANSPORTS, ExpectedTransport, expected_transport
from clusterctl.hostlist import compress
from clusterctl.spec.findings import Finding
from clusterctl.verify.base import EMULATED, Check, VerifyContext, last_line, transport_problem
from clusterctl.verify.parsers.nccl_debug import NcclDebugLog, NcclLine, NcclProcess, network_family, parse_nccl_debug
from clusterctl.verify.result import ParseError, Verdict, failed, passed, skipped, with_figures, with_run
from clusterctl.verify.testplan import NcclOptions, NcclRun, eligible_nodes, fabric_groups, partition_of, srun_command

if TYPE_CHECKING:
    from clusterctl.plan.models import Plan

CHECK = "nccl.transport"

# Quoted lines are cut to this length in messages (a NET/IB line lists every HCA).
_QUOTE_MAX = 200

# Hosts named one by one in a message; the rest are counted.
_NAMED_MAX = 3

# Warnings that mean NCCL stopped before it had a network: a forced NCCL_NET that is not there
# (src/plugin/net.cc, "network %s not found" in older sources), no plugin that initialised, or
# aws-ofi-nccl finding no provider (src/nccl_ofi_net.cpp, src/nccl_ofi_rdma.cpp).
_INIT_FAILURE_RE = re.compile(
    r"network \S+ not found|Failed to initialize any NET plugin|Could(?: not|n't) find any optimal provider"
    r"|fi_getinfo\(\) call failed",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class TransportJudgement:
    """The verdict, and the nodes it is about.

    Attributes:
        result: The check result.
        failing_hosts: Nodes whose NCCL used the wrong transport (drain candidates).
    """

    result: Finding
    failing_hosts: tuple[str, ...] = ()


def _quote(line: NcclLine) -> str:
    text = line.text.strip()
    if len(text) > _QUOTE_MAX:
        text = text[: _QUOTE_MAX - 3] + "..."
    return f"line {line.line_no}: {text}"


def _who(process: NcclProcess, host: str, others: int = 0) -> str:
    """``gpu002 (task 9, rank 9)``; the pid when nothing else tells processes apart.

    ``others`` counts the host's other processes with a problem: ``(task 8 and 7 more)``.
    """
    details = []
    if process.task is not None:
        details.append(f"task {process.task}")
    if process.rank is not None:
        details.append(f"rank {process.rank}")
    if not details and process.pid:
        details.append(f"pid {process.pid}")
    name = host or "a process without host prefix"
    text = ", ".join(details)
    if others:
        text += f" and {others} more {'process' if others == 1 else 'processes'}"
    return f"{name} ({text})" if text else name


_LINK_LAYER_HINT = (
    "The link layer is the HCA port's (mlxconfig LINK_TYPE_P1: 1 InfiniBand, 2 Ethernet); if the ports are "
    "right, the spec's fabric.kind is not (roce for Ethernet, infiniband for IB)"
)


def _process_problem(process: NcclProcess, expected: ExpectedTransport) -> tuple[str, NcclLine] | None:
    """Why one process's transport is wrong, with the line that shows it; None when it is right."""
    used = process.used_network()
    if used is None:
        failed = [w for w in process.warnings if _INIT_FAILURE_RE.search(w.message)]
        if failed:
            # Init stopped before any network was chosen ("network gIB not found").
            return "NCCL found no network to use", failed[0]
        return None
    name, line, how = used
    family = network_family(name)
    if family not in expected.families:
        what = "fell back to sockets" if family == "socket" else f"used network {name}"
        if how == "inferred" and line is process.ib_missing:
            what = "found no IB device, so no RDMA network"
        return f"NCCL {what}" + ("" if expected is ANY_RDMA else f", not {expected.label}"), line
    if expected.provider and process.ofi_provider:
        provider = process.ofi_provider.split(";")[0].lower()
        if provider != expected.provider:
            return (
                f"aws-ofi-nccl selected libfabric provider {provider}, not {expected.provider}",
                process.ofi_line or line,
            )
    if expected.link_layer and process.ib_devices and family == "ib":
        layers = {d.link_layer for d in process.ib_devices}
        if expected.link_layer not in layers:
            found = "/".join(sorted(layers))
            return f"NCCL's HCAs run {found}, not {expected.link_layer} as the fabric does", process.ib_line or line
    return None


def _intra_node_only(log: NcclDebugLog, nodes: int | None) -> bool:
    """True when the log shows (or the caller knows) that no connection left the node."""
    net_channels = [c for c in log.channels if c.inter_node]
    if net_channels:
        return False
    if nodes == 1 or log.nnodes == 1:
        return True
    # One host whose connections are all P2P/SHM: NCCL never used the network.
    return nodes is None and len(log.hosts) == 1 and bool(log.channels) and log.nnodes is None


def judge_transport(
    log: NcclDebugLog,
    fabric: str | None,
    *,
    nodes: int | None = None,
    hosts: Sequence[str] = (),
    task_hosts: Mapping[int, str] | None = None,
    target: str = "",
) -> TransportJudgement:
    """Judge the transport every NCCL process of a log chose against the fabric's.

    Args:
        log: The parsed ``NCCL_DEBUG=INFO`` output.
        fabric: The fabric kind (``infiniband``, ``efa``, ...); None fails only sockets.
        nodes: Nodes the run spanned, when known; 1 makes it an intra-node run.
        hosts: Nodes that must each show their transport (a node missing from the log fails).
        task_hosts: The node of each launcher task (``srun --label``), which names a process
            when NCCL's host name is not the node's name.
        target: What was tested, for the result.

    Returns:
        Fail naming each node (and task/rank) whose NCCL used another transport, quoting the
        line; skipped for an intra-node run or when no line says which network was used.
    """
    expected = expected_transport(fabric)
    figures: dict[str, float | int | str] = {"fabric": fabric or "not given", "expected": expected.label}

    def host_of(process: NcclProcess) -> str:
        if task_hosts and process.task is not None and process.task in task_hosts:
            return task_hosts[process.task]
        return process.host

    used = {id(p): p.used_network() for p in log.processes}
    networks = Counter(u[0] for u in used.values() if u is not None)
    if networks:
        figures["networks"] = ", ".join(f"{name} x{n}" for name, n in networks.most_common())
    figures["hosts"] = len({host_of(p) for p in log.processes if p.host or p.task is not None})
    figures["processes"] = len(log.processes)
    if log.nccl_version:
        figures["nccl_version"] = log.nccl_version
    if log.plugins:
        figures["plugins"] = ", ".join(log.plugins)
    providers = sorted({p.ofi_provider for p in log.processes if p.ofi_provider})
    if providers:
        figures["libfabric_provider"] = ", ".join(providers)
    net_channels = [c for c in log.channels if c.inter_node]
    if net_channels:
        figures["net_channels"] = len(net_channels)
        figures["net_channels_gdr"] = sum(c.gdr for c in net_channels)
    gdr_off = sorted({h for p in log.processes for h in p.gdr_disabled})
    if gdr_off:
        figures["gdr_disabled"] = ", ".join(gdr_off)

    if _intra_node_only(log, nodes):
        chosen = networks.most_common(1)[0][0] if networks else None
        figures["network_if_multinode"] = chosen or "not logged"
        kinds = sorted({c.via.split("/")[0] for c in log.channels})
        how = f"NCCL connected the GPUs through {'/'.join(kinds)}" if kinds else "the run stayed on one node"
        later = (
            f"it picked {chosen} for traffic between nodes"
            if chosen
            else "the log does not say which network it would use between nodes"
        )
        return TransportJudgement(
            skipped(
                CHECK,
                target,
                f"Intra-node only: {how} and used no network ({later}).",
                "Run NCCL across two nodes to check the fabric's transport.",
                figures,
            )
        )

    # Per host, the processes whose transport is wrong (first one quoted, the others counted).
    problems: dict[str, list[tuple[NcclProcess, str, NcclLine]]] = {}
    seen_ok: set[str] = set()
    for process in log.processes:
        host = host_of(process)
        problem = _process_problem(process, expected)
        if problem is not None:
            problems.setdefault(host, []).append((process, *problem))
        elif used[id(process)] is not None:
            seen_ok.add(host)
    failing = tuple(problems)
    missing = [h for h in hosts if h not in seen_ok and h not in failing]
    if missing:
        figures["hosts_without_transport_line"] = ", ".join(missing)

    if problems or missing:
        parts = []
        for host, found in list(problems.items())[:_NAMED_MAX]:
            process, why, line = found[0]
            parts.append(f"{_who(process, host, len(found) - 1)}: {why} ({_quote(line)})")
        if len(problems) > _NAMED_MAX:
            parts.append(f"and {len(problems) - _NAMED_MAX} more hosts")
        if missing:
            parts.append(f"{', '.join(missing)} printed no line that says which network NCCL used")
        figures["failing_hosts"] = ", ".join(h or "?" for h in failing + tuple(missing))
        hint = expected.hint or ANY_RDMA.hint
        whys = [why for found in problems.values() for _, why, _ in found]
        if whys and all(why.startswith("NCCL's HCAs run") for why in whys):
            hint = _LINK_LAYER_HINT
        if missing and not problems:
            hint = "Run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET; check that NCCL started on those nodes."
        return TransportJudgement(
            failed(CHECK, target, "; ".join(parts) + ".", hint[:1].upper() + hint[1:] + ".", **figures),
            failing_hosts=tuple(h for h in failing + tuple(missing) if h),
        )
    if not seen_ok:
        return TransportJudgement(
            skipped(
                CHECK,
                target,
                "No line of the log says which network NCCL used.",
                "Run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET (the 'Using network' and channel lines).",
                figures,
            )
        )
    without = [h for h in dict.fromkeys(host_of(p) for p in log.processes) if h and h not in seen_ok]
    note = f"; {', '.join(without)} logged no transport line" if without else ""
    names = ", ".join(name for name, _ in networks.most_common())
    hosts_text = f"{len(seen_ok)} {'host' if len(seen_ok) == 1 else 'hosts'}"
    what = f"{expected.label}, as {fabric} needs" if fabric in FABRIC_TRANSPORTS else "no socket fallback"
    return TransportJudgement(passed(CHECK, target, f"NCCL used {names} on {hosts_text} ({what}){note}.", figures))


# --- which fabric a log is judged by ---------------------------------------------------------


class FabricChoiceError(ValueError):
    """The log cannot be tied to one fabric of the plan; the message says what to give."""


def group_fabrics(plan: Plan) -> dict[str, str]:
    """Hostname -> the fabric its node group's NCCL uses (a burst group's instance type's own)."""
    fabric = {g.name: g.fabric or plan.fabric.kind for g in plan.groups if g.role == "compute"}
    return {n.hostname: fabric[n.group] for n in plan.nodes if n.group in fabric}


def hosts_fabric(plan: Plan, hosts: Sequence[str]) -> str:
    """The fabric of the node group(s) ``hosts`` belong to (the cluster's when none is known)."""
    fabrics = group_fabrics(plan)
    found = {fabrics[h] for h in hosts if h in fabrics}
    return found.pop() if len(found) == 1 else plan.fabric.kind


def log_fabric(plan: Plan, log_hosts: Sequence[str], hardware: str | None = None) -> tuple[str, str]:
    """The fabric a saved NCCL_DEBUG log is judged by, and why: the node group its hosts are in.

    Args:
        plan: The cluster's plan.
        log_hosts: The host names the log's lines carry (``NcclDebugLog.hosts``).
        hardware: A GPU hardware profile named by the caller, which then decides.

    Raises:
        FabricChoiceError: the hosts are in groups on different fabrics, or none of them is a
            node of the plan and its GPU groups do not share one fabric.
    """
    compute = [g for g in plan.groups if g.role == "compute" and g.fabric]
    if hardware is not None:
        fabrics = sorted({g.fabric for g in compute if g.hardware == hardware and g.fabric})
        if len(fabrics) == 1:
            return fabrics[0], f"hardware {hardware}: fabric {fabrics[0]}"
    by_host = group_fabrics(plan)
    group_of = {n.hostname: n.group for n in plan.nodes}
    known = [h for h in dict.fromkeys(log_hosts) if h in by_host]
    groups = sorted({group_of[h] for h in known})
    fabrics = sorted({by_host[h] for h in known})
    if len(fabrics) > 1:
        raise FabricChoiceError(
            f"the log's hosts are in node groups on different fabrics ({', '.join(groups)}: {', '.join(fabrics)}); "
            "judge one group's log at a time, or give --fabric"
        )
    if fabrics:
        named = ", ".join(known[:3]) + (f" and {len(known) - 3} more" if len(known) > 3 else "")
        return fabrics[0], f"node group {', '.join(groups)} ({named}): fabric {fabrics[0]}"
    gpu_groups = [g for g in compute if any(n.gpus for n in plan.nodes if n.group == g.name)]
    gpu_fabrics = sorted({g.fabric for g in gpu_groups if g.fabric})
    if len(gpu_fabrics) == 1:
        names = ", ".join(g.name for g in gpu_groups)
        return gpu_fabrics[0], f"GPU node group {names}: fabric {gpu_fabrics[0]}"
    raise FabricChoiceError(
        f"the log names no node of the spec and its GPU groups are on different fabrics ({', '.join(gpu_fabrics)}); "
        "give --hardware or --fabric"
    )


# --- the check ------------------------------------------------------------------------------

# Set in every task: NCCL_DEBUG=INFO prints the transport lines; INIT,NET keeps just those
# subsystems ("Using network", "NET/IB : Using", channel lines are INIT|NET in NCCL's sources).
TRANSPORT_TASK_ENV = ("NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT,NET")

# Small messages: the transport is chosen at init; the run only has to connect.
_TRANSPORT_BYTES = (1 << 20, 16 << 20)


def transport_pairs(ctx: VerifyContext) -> list[tuple[str, str]]:
    """Two-node runs that give every schedulable GPU node a partner, neighbours first.

    Nodes follow the fabric's groups (SU or leaf), so most pairs share a leaf; with an odd
    count the last node is paired with the first. Nodes an earlier check blamed sit out.
    """
    _kind, groups = fabric_groups(ctx.plan)
    hosts = [h for members in groups.values() for h in members if h not in ctx.failed_nodes]
    pairs = [(hosts[i], hosts[i + 1]) for i in range(0, len(hosts) - 1, 2)]
    if len(hosts) % 2 and len(hosts) > 1:
        pairs.append((hosts[-1], hosts[0]))
    return pairs


def judge_transport_run(ctx: VerifyContext, run: NcclRun, rc: int, out: str, err: str) -> TransportJudgement:
    """Judge one two-node ``NCCL_DEBUG=INFO`` run: each node's NCCL on the fabric's transport."""
    target = run.hostlist
    problem = transport_problem(CHECK, ctx.launcher, "srun", rc, err)
    if problem is not None:
        return TransportJudgement(dataclasses.replace(problem, node=target))
    # srun --label numbers tasks 0..n-1, gpus_per_node per node in --nodelist order (block distribution).
    task_hosts = {t: run.hosts[t // run.gpus_per_node] for t in range(len(run.hosts) * run.gpus_per_node)}
    try:
        log = parse_nccl_debug(f"{out}\n{err}")
    except ParseError:
        why = last_line(err) or "no output"
        return TransportJudgement(
            failed(
                CHECK,
                target,
                f"all_reduce_perf printed no NCCL debug line (srun exit {rc}): {why}",
                "Run the srun command from the report by hand on the login node; check the NCCL install.",
                rc=rc,
            )
        )
    judgement = judge_transport(
        log,
        hosts_fabric(ctx.plan, run.hosts),
        nodes=len(run.hosts),
        hosts=run.hosts,
        task_hosts=task_hosts,
        target=target,
    )
    if rc != 0 and Verdict.of(judgement.result) is Verdict.PASS:
        result = with_figures(judgement.result, rc=rc)
        message = result.message[:-1] + f"; srun exited {rc} afterwards (see the nccl check)."
        return dataclasses.replace(judgement, result=dataclasses.replace(result, message=message))
    return judgement


# --- the same inside a container -----------------------------------------------------------

CONTAINER_CHECK = "nccl.transport.container"
# A small NCCL all_reduce through the image's own PyTorch and NCCL, one rank per GPU (srun starts
# them; Slurm's task ids give rank, world size and GPU): what a training job in the image does at start.
TORCH_ALL_REDUCE = (
    "import os, torch, torch.distributed as dist\n"
    'rank, world, local = (int(os.environ[k]) for k in ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"))\n'
    "torch.cuda.set_device(local)\n"
    'dist.init_process_group("nccl", rank=rank, world_size=world)\n'
    'x = torch.ones(1 << 20, device="cuda")\n'
    "dist.all_reduce(x)\n"
    "torch.cuda.synchronize()\n"
    'assert int(x[0].item()) == world, "all_reduce gave a wrong sum"\n'
    "dist.destroy_process_group()\n"
)
TORCH_PORT = 29500


def pyxis_image(reference: str) -> str:
    """enroot's form of a Docker reference: ``nvcr.io/nvidia/pytorch:24.09-py3`` -> ``nvcr.io#nvidia/pytorch:...``.

    Why: enroot reads ``[REGISTRY#]IMAGE[:TAG]`` (NVIDIA/enroot:doc/cmd/import.md); without ``#`` the
    registry host would be taken for a Docker Hub namespace.
    """
    first, sep, rest = reference.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return f"{first}#{rest}"
    return reference


def container_command(run: NcclRun, image: str, options: NcclOptions | None = None) -> str:
    """The srun that runs :data:`TORCH_ALL_REDUCE` in ``image`` through pyxis on ``run``'s nodes."""
    opts = options or NcclOptions()
    args = [
        "srun",
        "--job-name=clusterctl-verify-transport-container",
        *([f"--partition={run.partition}"] if run.partition else []),
        f"--nodelist={run.hostlist}",
        f"--nodes={len(run.hosts)}",
        f"--ntasks-per-node={run.gpus_per_node}",
        f"--gpus-per-node={run.gpus_per_node}",
        "--exclusive",
        f"--time={opts.time_limit_min}",
        "--label",
        "--export=ALL",
        f"--container-image={pyxis_image(image)}",
        *opts.extra_srun_args,
        "env",
        *TRANSPORT_TASK_ENV,
        f"MASTER_ADDR={run.hosts[0]}",
        f"MASTER_PORT={TORCH_PORT}",
        "python3",
        "-c",
        TORCH_ALL_REDUCE,
    ]
    return " ".join(shlex.quote(a) for a in args)


def in_container(judgement: TransportJudgement, image: str) -> TransportJudgement:
    """A judgement of a run inside ``image``: its own check name, and the message says where it ran."""
    result = judgement.result
    message = f"In a container of {image}: {result.message}"
    return dataclasses.replace(judgement, result=dataclasses.replace(result, code=CONTAINER_CHECK, message=message))


class TransportCheck(Check):
    """The transport NCCL chose between two nodes, from ``NCCL_DEBUG=INFO``: never a socket fallback."""

    name = "transport"
    title = "NCCL transport"

    def run(self, ctx: VerifyContext) -> list[Finding]:
        """One small all_reduce_perf per pair of nodes, every pair at once, each log judged."""
        nodes = eligible_nodes(ctx.plan)
        if any(n.emulated for n in nodes):
            return [with_run(skipped(CHECK, compress(n.hostname for n in nodes), EMULATED), self.name)]
        pairs = transport_pairs(ctx)
        if not pairs:
            reason = "skipped: needs two schedulable GPU nodes"
            return [with_run(skipped(CHECK, "", reason), self.name)]
        by_name = {n.hostname: n for n in nodes}
        options = dataclasses.replace(ctx.options.nccl, min_bytes=_TRANSPORT_BYTES[0], max_bytes=_TRANSPORT_BYTES[1])
        runs = [
            NcclRun(
                phase="pairs",
                hosts=pair,
                groups=(),
                gpus_per_node=min(by_name[h].gpus for h in pair),
                partition=partition_of(ctx.plan, pair),
            )
            for pair in pairs
        ]
        commands = [srun_command(run, options, job="transport", task_env=TRANSPORT_TASK_ENV) for run in runs]
        ctx.progress(f"{self.title}: {len(runs)} two-node runs with NCCL_DEBUG=INFO")
        jobs = [(ctx.launcher, command, ctx.options.nccl_timeout_s) for command in commands]
        outcomes: list[Finding] = []
        for run, command, (rc, out, err) in zip(runs, commands, ctx.run(jobs), strict=True):
            judgement = judge_transport_run(ctx, run, rc, out, err)
            blame = tuple(h for h in judgement.failing_hosts if h in run.hosts)
            outcomes.append(with_run(judgement.result, self.name, run.hosts, blame, command=command))
        return outcomes + self._in_containers(ctx, runs, options)

    def _in_containers(self, ctx: VerifyContext, runs: list[NcclRun], options: NcclOptions) -> list[Finding]:
        """The same pairs again inside a stock image started through pyxis: a node fails if either falls back.

        Why: training runs in containers, where the plugin, /etc/nccl.conf and the vendor's
        environment come only from the node's enroot configuration (plan/containers.py); the
        host run cannot see a container that falls back to sockets.
        """
        image = ctx.plan.cluster.container_check_image
        if not image or not ctx.plan.slurm.pyxis:
            return []
        commands = [container_command(run, image, options) for run in runs]
        ctx.progress(f"{self.title}: {len(runs)} two-node runs in a container of {image} (pyxis)")
        jobs = [(ctx.launcher, command, ctx.options.nccl_timeout_s) for command in commands]
        outcomes: list[Finding] = []
        for run, command, (rc, out, err) in zip(runs, commands, ctx.run(jobs), strict=True):
            judgement = in_container(judge_transport_run(ctx, run, rc, out, err), image)
            blame = tuple(h for h in judgement.failing_hosts if h in run.hosts)
            outcomes.append(with_run(judgement.result, self.name, run.hosts, blame, command=command))
        return outcomes
