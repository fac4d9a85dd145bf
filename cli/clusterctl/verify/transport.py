"""Which NCCL transport each fabric must use, and the verdict on an ``NCCL_DEBUG=INFO`` log.

A job whose NCCL falls back to TCP sockets runs, an order of magnitude slower, and nothing
else says so. The verdict reads the network every NCCL process chose (see
`clusterctl.verify.parsers.nccl_debug`) and fails, naming the node and quoting the line,
when it is not the fabric's:

==================  =========================================================================
fabric              transport NCCL must use (network names as NCCL prints them)
==================  =========================================================================
infiniband, roce    ``IB`` (NCCL's verbs transport) or ``IBext``/``IBext_vN`` (HPC-X plugin),
                    over HCAs whose link layer is the fabric's (``/IB`` or ``/RoCE``)
efa                 ``Libfabric`` (``AWS Libfabric`` before aws-ofi-nccl v1.13.0-aws, or
                    ``OFI``) with libfabric's ``efa`` provider
gpudirect-tcpxo     ``FasTrak`` (the GPUDirect-TCPXO plugin, A3 Mega)
gpudirect-tcpx      ``GPUDirectTCPX_v7`` (the GPUDirect-TCPX plugin, A3 High)
gcp-rdma            ``gIB`` (Google's RDMA plugin, A3 Ultra / A4)
ethernet            ``Socket`` (no RDMA fabric), or ``IB`` where the NICs do RoCE
==================  =========================================================================

Sources: NCCL ``src/init.cc`` ("Using network %s"), ``src/transport/net_ib/init.cc``
("NET/IB : Using ...", "No device found"); aws-ofi-nccl ``src/nccl_ofi_interface_nvidia.cpp``
(``.name = "Libfabric"``, commit 7c014f0d, first in v1.13.0-aws) and ``src/nccl_ofi_net.cpp``
("Selected provider is %s, fabric is %s (found %d nics)"); google/nccl-plugin-gpudirect-tcpxo
``tcpdirect_plugin/fastrak_offload/fastrak_plugin.cc`` (``ncclNetPlugin_v7 = {"FasTrak", ...}``);
Google Cloud "Run NCCL on Compute Engine instances" (NCCL/gIB: "Using network gIB").

A single node connects its GPUs through P2P/SHM and never uses the network: such a log is
"intra-node only", a skip with the network NCCL picked, not a failure.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from clusterctl.catalog.instances import instance_type
from clusterctl.verify.parsers.nccl_debug import Family, NcclDebugLog, NcclLine, NcclProcess, network_family
from clusterctl.verify.result import CheckResult, Verdict

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
class ExpectedTransport:
    """What NCCL must use on one fabric.

    Attributes:
        families: Network families that pass (`network_family`).
        label: The transport in words, for messages.
        link_layer: The HCA link layer NCCL's verbs transport must report (``IB``, ``RoCE``).
        provider: The libfabric provider aws-ofi-nccl must select.
        hint: What to look at when a node uses something else.
    """

    families: tuple[Family, ...]
    label: str
    link_layer: str | None = None
    provider: str | None = None
    hint: str = ""


_IB_HINT = (
    "NCCL found no usable HCA there: check ibv_devinfo (ports Active), that the RDMA stack and "
    "the node's NCCL_IB_HCA names match its devices (ls /sys/class/infiniband), and NCCL_IB_DISABLE"
)
FABRIC_TRANSPORTS: dict[str, ExpectedTransport] = {
    "infiniband": ExpectedTransport(("ib",), "NET/IB over InfiniBand (IB or IBext)", link_layer="IB", hint=_IB_HINT),
    "roce": ExpectedTransport(("ib",), "NET/IB over RoCE (IB or IBext)", link_layer="RoCE", hint=_IB_HINT),
    "efa": ExpectedTransport(
        ("ofi",),
        "the aws-ofi-nccl plugin (Libfabric) on libfabric's efa provider",
        provider="efa",
        hint=(
            "check that the EFA installer and aws-ofi-nccl are installed on the node, that the plugin's lib "
            "directory is on LD_LIBRARY_PATH, that fi_info -p efa lists the EFA devices (containers need "
            "/dev/infiniband), and that FI_PROVIDER is not set to another provider"
        ),
    ),
    "gpudirect-tcpxo": ExpectedTransport(
        ("fastrak",),
        "the GPUDirect-TCPXO plugin (FasTrak)",
        hint=(
            "check that /var/lib/tcpxo/lib64 is on LD_LIBRARY_PATH, that the job sourced nccl-env-profile.sh, "
            "and that the RxDM daemon runs on the node"
        ),
    ),
    "gpudirect-tcpx": ExpectedTransport(
        ("tcpx",),
        "the GPUDirect-TCPX plugin (GPUDirectTCPX_v7)",
        hint="check that /var/lib/tcpx/lib64 is on LD_LIBRARY_PATH and that the RxDM daemon runs on the node",
    ),
    "gcp-rdma": ExpectedTransport(
        ("gib",),
        "Google's NCCL/gIB plugin",
        hint="check that /usr/local/gib/lib64 is on LD_LIBRARY_PATH and that the job sourced set_nccl_env.sh",
    ),
    "ethernet": ExpectedTransport(("socket", "ib"), "sockets (no RDMA fabric) or NET/IB on RoCE NICs"),
}
# Without a fabric (check-output with no --spec or --fabric) only a socket fallback fails.
_ANY_RDMA = ExpectedTransport(
    ("ib", "ofi", "fastrak", "tcpx", "gib", "other"),
    "any network but sockets",
    hint="NCCL fell back to TCP sockets; the fabric's transport (RDMA NIC, plugin) is missing on that node",
)


def expected_transport(fabric: str | None) -> ExpectedTransport:
    """The transport a fabric kind needs; without one, anything but sockets."""
    return FABRIC_TRANSPORTS.get(fabric or "", _ANY_RDMA)


def fabric_for(fabric_kind: str, instance_type_name: str | None = None) -> tuple[str, str]:
    """The fabric a hardware profile's nodes are on, and where that comes from.

    A cloud GPU instance type brings its own fabric (``p5.48xlarge``: efa), which differs
    from the spec's ``fabric.kind`` for burst groups of an on-prem cluster; otherwise the
    spec's fabric.

    Args:
        fabric_kind: The spec's ``fabric.kind``.
        instance_type_name: The hardware profile's ``instance_type``, when it has one.

    Returns:
        ``(fabric kind, source)``, e.g. ``("efa", "instance type p5.48xlarge")``.
    """
    itype = instance_type(instance_type_name)
    if itype is not None and itype.is_gpu and itype.fabric in FABRIC_TRANSPORTS:
        return itype.fabric, f"instance type {itype.name}"
    return fabric_kind, "fabric.kind"


@dataclass(frozen=True)
class TransportJudgement:
    """The verdict, and the nodes it is about.

    Attributes:
        result: The check result.
        failing_hosts: Nodes whose NCCL used the wrong transport (drain candidates).
    """

    result: CheckResult
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
        return f"NCCL {what}" + ("" if expected is _ANY_RDMA else f", not {expected.label}"), line
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
            CheckResult(
                CHECK,
                target,
                Verdict.SKIPPED,
                figures,
                f"Intra-node only: {how} and used no network ({later}).",
                "Run NCCL across two nodes to check the fabric's transport.",
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
        hint = expected.hint or _ANY_RDMA.hint
        whys = [why for found in problems.values() for _, why, _ in found]
        if whys and all(why.startswith("NCCL's HCAs run") for why in whys):
            hint = _LINK_LAYER_HINT
        if missing and not problems:
            hint = "Run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET; check that NCCL started on those nodes."
        return TransportJudgement(
            CheckResult(
                CHECK, target, Verdict.FAIL, figures, "; ".join(parts) + ".", hint[:1].upper() + hint[1:] + "."
            ),
            failing_hosts=tuple(h for h in failing + tuple(missing) if h),
        )
    if not seen_ok:
        return TransportJudgement(
            CheckResult(
                CHECK,
                target,
                Verdict.SKIPPED,
                figures,
                "No line of the log says which network NCCL used.",
                "Run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET (the 'Using network' and channel lines).",
            )
        )
    without = [h for h in dict.fromkeys(host_of(p) for p in log.processes) if h and h not in seen_ok]
    note = f"; {', '.join(without)} logged no transport line" if without else ""
    names = ", ".join(name for name, _ in networks.most_common())
    hosts_text = f"{len(seen_ok)} {'host' if len(seen_ok) == 1 else 'hosts'}"
    what = f"{expected.label}, as {fabric} needs" if fabric in FABRIC_TRANSPORTS else "no socket fallback"
    return TransportJudgement(
        CheckResult(CHECK, target, Verdict.PASS, figures, f"NCCL used {names} on {hosts_text} ({what}){note}.")
    )
