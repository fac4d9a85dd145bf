"""Parse ``NCCL_DEBUG=INFO`` output: which network each NCCL process chose, and how it connected.

NCCL prefixes every debug line with ``<host>:<pid>:<tid> [<cudaDev>]``, then ``NCCL INFO``
(warnings also carry ``<file>:<line>`` before ``NCCL WARN``); launchers may add their own
label in front (``srun --label``: `` 3: ``; ``mpirun --tag-output``: ``[1,3]<stdout>:``) and
log collectors a timestamp column. The lines that say which transport NCCL uses:

``Using network <name>``
    One per communicator, from ``src/init.cc`` (``INFO(NCCL_INIT, "Using network %s",
    comm->ncclNet->name)``): ``IB`` (NCCL's own verbs transport, InfiniBand and RoCE),
    ``Socket``, or a plugin's name: ``IBext``/``IBext_v8`` (HPC-X nccl-rdma-sharp-plugins),
    ``Libfabric`` (aws-ofi-nccl; ``AWS Libfabric`` before v1.13.0-aws, ``OFI`` when asked for
    by that name), ``FasTrak`` (GPUDirect-TCPXO), ``GPUDirectTCPX_v7`` (GPUDirect-TCPX),
    ``gIB`` (Google's RDMA plugin). NCCL before 2.5 printed no such line.
``Channel 00/0 : 0[0] -> 8[0] [send] via NET/<name>/<dev>[/GDRDMA][/Shared]``
    Each connection, from ``src/transport/net.cc``; ``via P2P/...`` and ``via SHM/...`` stay
    inside the node (``src/transport/p2p.cc``, ``shm.cc``). Older NCCL wrote ``Ring 00 :``.
``NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB ib0:10.0.0.1<0>``
    The HCAs NCCL's verbs transport found, with link layer (``src/transport/net_ib/init.cc``);
    ``NET/IB : No device found.`` when it found none.
``NET/Socket : Using [0]eth0:10.0.0.1<0>``
    The interfaces of the socket transport (``src/transport/net_socket.cc``). NCCL before
    2.5 printed it on every rank whatever the transport, so it only counts when nothing
    else was chosen.
``NET/OFI Selected Provider is efa (found 16 nics)``
    aws-ofi-nccl's libfabric provider; current sources print ``Selected provider is %s,
    fabric is %s (found %d nics)`` (``src/nccl_ofi_net.cpp``), so it is matched
    case-insensitively.

The parser is pure: it reads lines and records what each process (host and pid) said; the
judgement against a fabric is `clusterctl.verify.transport`.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from clusterctl.bounded import guarded, integer
from clusterctl.catalog.transports import Family
from clusterctl.verify.parsers._text import numbered_lines, split_launcher_prefix
from clusterctl.verify.result import ParseError, unreadable

# host:pid:tid [dev] [file:line ]NCCL LEVEL message. The host is anything without blanks,
# colons or a "|" (log collectors put timestamps in "|" columns before it); the GPU index may
# be padded ("[ 6 ]" in pages that render logs).
_LINE_RE = re.compile(
    r"(?:^|(?<=[\s|]))(?P<host>[^\s|:]+):(?P<pid>\d+):(?P<tid>\d+) \[\s*(?P<dev>\d+)\s*\] "
    r"(?:(?P<src>\S+:\d+) )?NCCL (?P<level>INFO|WARN|TRACE)\b ?(?P<msg>.*)$"
)
# A quoted line whose prefix the poster cut off ("NCCL WARN NET/FasTrak ...: ...").
_BARE_RE = re.compile(r"^\s*NCCL (?P<level>INFO|WARN)\b ?(?P<msg>.*)$")
_VERSION_RE = re.compile(r"\bNCCL version (?P<version>\d+\.\d+\.\d+)")

# Matched against stripped messages: a greedy tail, never a lazy one before `\s*$` (quadratic on blanks).
_NETWORK_RE = re.compile(r"^Using network (?P<name>\S.*)$")
_IB_USING_RE = re.compile(r"^NET/IB ?: Using(?P<devs>.*?);\s*OOB (?P<oob>\S+)")
# [0]mlx5_0:1/IB, [1]mlx5_1:1/RoCE, [0]mlx5_0:1/IB/SHARP (HPC-X), [0]mlx5_0:1:0:0/IB (rail, plane: NCCL 2.30).
_IB_DEV_RE = re.compile(
    r"\[(?P<index>\d+)\](?P<name>[^\s:\[\]]+):(?P<port>\d+)(?::\d*)*/(?P<link>[A-Za-z]+)(?P<flags>(?:/[A-Za-z]+)*)"
)
_IB_NONE_RE = re.compile(r"^NET/IB ?: No device found")
_SOCKET_RE = re.compile(r"^NET/Socket ?: Using(?P<ifs>(?: \[\d+\]\S+)+)\s*$")
_SOCKET_IF_RE = re.compile(r"\[\d+\](?P<name>[^\s:]+):")
_OFI_PROVIDER_RE = re.compile(
    r"^NET/OFI Selected provider is (?P<provider>[^\s,(]+)(?:, fabric is (?P<fabric>[^\s,(]+))?"
    r"(?: \(found (?P<nics>\d+) nics\))?",
    re.IGNORECASE,
)
_PLUGIN_VERSION_RES = (
    re.compile(r"^NET/OFI (?:Initializing|Using) (?P<plugin>aws-ofi-nccl) (?P<version>\S+)"),
    re.compile(r"^NET/(?P<plugin>gIB) ?: Initializing gIB v?(?P<version>\S+)"),
    re.compile(r"^NET/(?P<plugin>FasTrak) .*Initializing network FasTrak, version: (?P<version>\S+)"),
)
_CHANNEL_RE = re.compile(r"^(?:Channel|Ring|Tree) \d+(?:/\d+)? : .*? via (?P<via>\S.*)$")
# NCCL's lines are short; a longer line in the same output is someone else's and is skipped.
MAX_LINE = 16384
MAX_VIA = 256
_NET_VIA_RE = re.compile(r"^NET/(?P<name>.+?)/(?P<dev>\d+)(?:\(\d+\))?(?P<flags>(?:/[^/]+)*)$")
_RANK_RE = re.compile(r"\bcomm 0x[0-9a-fA-F]+ rank (?P<rank>\d+) n[Rr]anks (?P<nranks>\d+)(?: nNodes (?P<nnodes>\d+))?")
_GDR_OFF_RE = re.compile(r"GPU Direct RDMA Disabled for HCA \d+ '(?P<hca>[^']+)'")


def network_family(name: str) -> Family:
    """What kind of transport a network name (``Using network <name>``) stands for.

    ``IB`` and the HPC-X plugin's ``IBext``/``IBext_v8`` are verbs over InfiniBand or RoCE;
    aws-ofi-nccl has called itself ``AWS Libfabric`` (up to v1.12), ``Libfabric`` (from
    v1.13.0-aws, commit 7c014f0d) and answers to ``OFI``; GPUDirect-TCPXO's plugin is
    ``FasTrak`` (nccl-plugin-gpudirect-tcpxo ``fastrak_plugin.cc``), GPUDirect-TCPX's
    ``GPUDirectTCPX_v7``, Google's RDMA plugin ``gIB``.
    """
    if name == "IB" or name.startswith("IBext"):
        return "ib"
    if name in ("Libfabric", "AWS Libfabric", "OFI"):
        return "ofi"
    if name == "FasTrak":
        return "fastrak"
    if name.startswith("GPUDirectTCPX"):
        return "tcpx"
    if name == "gIB":
        return "gib"
    if name == "Socket":
        return "socket"
    return "other"


@dataclass(frozen=True)
class NcclLine:
    """One NCCL debug line.

    Attributes:
        line_no: 1-based line number in the input.
        text: The line as it appeared (without the trailing newline).
        host: Host name from NCCL's prefix ("" when the poster cut the prefix off).
        pid: Process id from the prefix (0 without one).
        task: The launcher's task label (``srun --label``), None without one.
        level: ``INFO``, ``WARN`` or ``TRACE``.
        message: The text after ``NCCL <level>``.
    """

    line_no: int
    text: str
    host: str
    pid: int
    task: int | None
    level: str
    message: str


@dataclass(frozen=True)
class IbDevice:
    """One HCA of a ``NET/IB : Using`` line: ``[0]mlx5_0:1/IB/SHARP``."""

    index: int
    name: str
    port: int
    link_layer: str
    flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Channel:
    """One connection line: what it goes through (``NET/IB/5/GDRDMA``, ``P2P/IPC/read``)."""

    via: str
    line: NcclLine
    net: str | None = None
    gdr: bool = False

    @property
    def inter_node(self) -> bool:
        """True when the connection goes through a network transport."""
        return self.net is not None


@dataclass(frozen=True)
class NcclProcess:
    """What one NCCL process (host and pid) logged about its transport.

    Attributes:
        host: Host name from the prefix.
        pid: Process id.
        task: The launcher's task label on its first line, when there is one.
        rank: Its rank in the (last) communicator it logged, when it logged one.
        nranks: That communicator's size.
        nnodes: The node count NCCL reported for it (NCCL 2.20 and later).
        network_line: The ``Using network`` line (the last one when there are several).
        ib_devices: The HCAs of the ``NET/IB : Using`` line.
        ib_line: That line.
        ib_missing: The ``NET/IB : No device found`` line.
        socket_ifs: The interfaces of the ``NET/Socket : Using`` line.
        socket_line: That line.
        ofi_provider: aws-ofi-nccl's libfabric provider (``efa``, ``tcp``).
        ofi_fabric: Its fabric, when the plugin says (``efa``, ``efa-direct``).
        ofi_nics: NICs the plugin found.
        ofi_line: The provider line.
        plugin: Plugin and version from its banner (``aws-ofi-nccl 1.12.1-aws``).
        channels: Every connection line, in order.
        gdr_disabled: HCAs NCCL said GPU Direct RDMA is disabled for.
        warnings: ``NCCL WARN`` lines.
    """

    host: str
    pid: int
    task: int | None = None
    rank: int | None = None
    nranks: int | None = None
    nnodes: int | None = None
    network_line: NcclLine | None = None
    ib_devices: tuple[IbDevice, ...] = ()
    ib_line: NcclLine | None = None
    ib_missing: NcclLine | None = None
    socket_ifs: tuple[str, ...] = ()
    socket_line: NcclLine | None = None
    ofi_provider: str | None = None
    ofi_fabric: str | None = None
    ofi_nics: int | None = None
    ofi_line: NcclLine | None = None
    plugin: str | None = None
    channels: tuple[Channel, ...] = ()
    gdr_disabled: tuple[str, ...] = ()
    warnings: tuple[NcclLine, ...] = ()

    @property
    def network(self) -> str | None:
        """The name on its ``Using network`` line."""
        if self.network_line is None:
            return None
        match = _NETWORK_RE.match(self.network_line.message)
        return match["name"] if match else None

    def used_network(self) -> tuple[str, NcclLine, str] | None:
        """The network the process used, the line that shows it, and how it was found.

        In order of strength: its ``Using network`` line; the network its connections went
        through (``via NET/<name>``); aws-ofi-nccl's provider line (the plugin initialised);
        the ``NET/IB : Using`` line; the ``NET/Socket : Using`` line, which NCCL before 2.5
        printed on every rank and so counts only when nothing above is there; last,
        ``NET/IB : No device found`` (no plugin was in use, and no HCA found: sockets).

        Returns:
            ``(name, line, how)`` with ``how`` one of ``"Using network"``, ``"channels"``,
            ``"inferred"``; None when the process said nothing about its network.
        """
        if self.network_line is not None and self.network is not None:
            return self.network, self.network_line, "Using network"
        net_channels = [c for c in self.channels if c.net is not None]
        if net_channels:
            name = Counter(c.net for c in net_channels).most_common(1)[0][0]
            first = next(c for c in net_channels if c.net == name)
            return str(name), first.line, "channels"
        if self.ofi_line is not None:
            return "Libfabric", self.ofi_line, "inferred"
        if self.ib_line is not None:
            return "IB", self.ib_line, "inferred"
        if self.socket_line is not None:
            return "Socket", self.socket_line, "inferred"
        if self.ib_missing is not None:
            # NCCL tries plugins first, then IB, then sockets (src/plugin/net.cc ncclNetInit):
            # a process that looked for IB devices has no plugin network, and found no HCA.
            return "Socket", self.ib_missing, "inferred"
        return None


@dataclass(frozen=True)
class NcclDebugLog:
    """Every NCCL process of a debug log, in first-seen order.

    Attributes:
        processes: One entry per (host, pid); lines without a prefix go to a process with
            host "" and pid 0.
        nccl_version: The ``NCCL version x.y.z`` printed, when it is.
        lines_read: Lines in the input.
        nccl_lines: Lines recognised as NCCL debug lines.
    """

    processes: tuple[NcclProcess, ...]
    nccl_version: str | None
    lines_read: int
    nccl_lines: int

    @property
    def hosts(self) -> tuple[str, ...]:
        """Named hosts, in first-seen order."""
        return tuple(dict.fromkeys(p.host for p in self.processes if p.host))

    @property
    def channels(self) -> list[Channel]:
        """Every connection line of every process."""
        return [c for p in self.processes for c in p.channels]

    @property
    def nnodes(self) -> int | None:
        """The largest node count NCCL reported, when it reported one."""
        counts = [p.nnodes for p in self.processes if p.nnodes is not None]
        return max(counts) if counts else None

    @property
    def plugins(self) -> tuple[str, ...]:
        """Plugin banners seen (``aws-ofi-nccl 1.12.1-aws``), each once."""
        return tuple(dict.fromkeys(p.plugin for p in self.processes if p.plugin))


@dataclass
class _Process:
    """A process while its lines are read; `freeze` gives the `NcclProcess`."""

    host: str
    pid: int
    task: int | None
    fields: dict[str, object] = field(default_factory=dict)
    channels: list[Channel] = field(default_factory=list)
    gdr_disabled: list[str] = field(default_factory=list)
    warnings: list[NcclLine] = field(default_factory=list)

    def freeze(self) -> NcclProcess:
        return NcclProcess(
            host=self.host,
            pid=self.pid,
            task=self.task,
            channels=tuple(self.channels),
            gdr_disabled=tuple(self.gdr_disabled),
            warnings=tuple(self.warnings),
            **self.fields,  # type: ignore[arg-type]
        )


def _channel(via: str, line: NcclLine) -> Channel:
    # NCCL's "via" is a few words; a longer one is not NCCL's (and the pattern is not linear on it).
    match = _NET_VIA_RE.match(via) if len(via) <= MAX_VIA else None
    if match is None:
        return Channel(via=via, line=line)
    flags = {f for f in match["flags"].split("/") if f}
    return Channel(via=via, line=line, net=match["name"], gdr=any(f.startswith("GDRDMA") for f in flags))


def _record(process: _Process, line: NcclLine) -> None:
    """Note what one line says about its process."""
    msg = line.message
    f = process.fields
    if line.level == "WARN":
        process.warnings.append(line)
        return
    if _NETWORK_RE.match(msg):
        f["network_line"] = line
    elif match := _IB_USING_RE.match(msg):
        f["ib_line"] = line
        f["ib_devices"] = tuple(
            IbDevice(
                index=integer(d["index"]),
                name=d["name"],
                port=integer(d["port"]),
                link_layer=d["link"],
                flags=tuple(f for f in d["flags"].split("/") if f),
            )
            for d in _IB_DEV_RE.finditer(match["devs"])
        )
    elif _IB_NONE_RE.match(msg):
        f["ib_missing"] = line
    elif match := _SOCKET_RE.match(msg):
        f["socket_line"] = line
        f["socket_ifs"] = tuple(m["name"] for m in _SOCKET_IF_RE.finditer(match["ifs"]))
    elif match := _OFI_PROVIDER_RE.match(msg):
        f["ofi_line"] = line
        f["ofi_provider"] = match["provider"]
        f["ofi_fabric"] = match["fabric"]
        f["ofi_nics"] = integer(match["nics"]) if match["nics"] else None
    elif match := _CHANNEL_RE.match(msg):
        process.channels.append(_channel(match["via"], line))
    elif match := _RANK_RE.search(msg):
        f["rank"], f["nranks"] = integer(match["rank"]), integer(match["nranks"])
        if match["nnodes"]:
            f["nnodes"] = integer(match["nnodes"])
    elif match := _GDR_OFF_RE.search(msg):
        process.gdr_disabled.append(match["hca"])
    else:
        for regex in _PLUGIN_VERSION_RES:
            if found := regex.match(msg):
                f["plugin"] = f"{found['plugin']} {found['version']}"
                break


@guarded(unreadable)
def parse_nccl_debug(text: str) -> NcclDebugLog:
    """Parse ``NCCL_DEBUG=INFO`` output (any mix of ranks, launcher labels and other output).

    Args:
        text: The log: a job's stdout/stderr, or ``NCCL_DEBUG_FILE`` files put together.

    Returns:
        The processes in first-seen order with what each logged about its transport.

    Raises:
        ParseError: No NCCL debug line at all (the run lacked ``NCCL_DEBUG=INFO``).
    """
    processes: dict[tuple[str, int], _Process] = {}
    version: str | None = None
    count = 0
    rows = numbered_lines(text)
    for line_no, raw, cleaned in rows:
        if len(cleaned) > MAX_LINE:
            continue
        if version is None and (found := _VERSION_RE.search(cleaned)):
            version = found["version"]
        task, rest = split_launcher_prefix(cleaned)
        match = _LINE_RE.search(rest)
        if match is not None:
            host, pid = match["host"], integer(match["pid"])
            level, message = match["level"], match["msg"]
        elif bare := _BARE_RE.match(rest):
            host, pid = "", 0
            level, message = bare["level"], bare["msg"]
        else:
            continue
        count += 1
        line = NcclLine(line_no, raw.rstrip("\n"), host, pid, task, level, message.strip())
        process = processes.get((host, pid))
        if process is None:
            process = processes[(host, pid)] = _Process(host=host, pid=pid, task=task)
        _record(process, line)
    if count == 0:
        raise ParseError(
            "no NCCL debug lines found (run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET)", len(rows), ""
        )
    return NcclDebugLog(
        processes=tuple(p.freeze() for p in processes.values()),
        nccl_version=version,
        lines_read=len(rows),
        nccl_lines=count,
    )
