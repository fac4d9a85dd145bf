"""Parse the ``nvidia-smi topo -m`` matrix: GPU/NIC connections, CPU and NUMA affinity.

The header names the devices (``GPU0``.., ``NIC0``.., or ``mlx5_0``.. on older drivers),
then ``CPU Affinity``, ``NUMA Affinity`` and, on newer drivers, ``GPU NUMA ID``. Cells
are tab-separated in the raw output and space-aligned in many copies; NIC rows leave the
affinity columns empty. The ``NIC Legend`` below the matrix maps ``NICn`` to the RDMA
device name (``mlx5_n``). Connection types, nearest first: ``X`` (self), ``NV#``
(bonded NVLinks), ``PIX``, ``PXB``, ``PHB``, ``NODE``, ``SYS`` (``SOC`` on old drivers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from clusterctl.bounded import guarded
from clusterctl.verify.parsers._text import numbered_lines, split_launcher_prefix
from clusterctl.verify.result import ParseError, unreadable

# PCIe distance rank, nearest first; NCCL treats PIX/PXB as "same switch" for GPUDirect RDMA.
PCIE_DISTANCE = ("PIX", "PXB", "PHB", "NODE", "SYS")
NEAR = ("PIX", "PXB")
_CONNECTION_RE = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC)$")
# Older drivers name NICs by their RDMA device (mlx5_0, bnxt_re0) instead of NICn.
_DEVICE_RE = re.compile(r"^[A-Za-z][\w.-]*\d$")
_TRAILING_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_LEGEND_RE = re.compile(r"^\s*(NIC\d+):\s*(\S+)\s*$")


@dataclass(frozen=True)
class NvidiaSmiTopo:
    """The parsed matrix.

    Attributes:
        devices: Column names in order (``GPU0``.., then ``NIC0``..).
        links: ``links[a][b]`` is the connection type between devices a and b.
        cpu_affinity: Per GPU, e.g. ``0-47,96-143``.
        numa_affinity: Per GPU, e.g. ``0`` (``N/A`` where nvidia-smi says so).
        gpu_numa_id: Per GPU, where the column exists (newer drivers).
        nic_names: ``NIC0`` -> ``mlx5_0`` from the legend.
    """

    devices: tuple[str, ...]
    links: dict[str, dict[str, str]]
    cpu_affinity: dict[str, str] = field(default_factory=dict)
    numa_affinity: dict[str, str] = field(default_factory=dict)
    gpu_numa_id: dict[str, str] = field(default_factory=dict)
    nic_names: dict[str, str] = field(default_factory=dict)

    @property
    def gpus(self) -> tuple[str, ...]:
        """GPU column names (``GPU0``, ``GPU1``, ...)."""
        return tuple(d for d in self.devices if d.startswith("GPU"))

    @property
    def nics(self) -> tuple[str, ...]:
        """NIC column names (``NIC0``.. or ``mlx5_0``.. on drivers without a legend)."""
        return tuple(d for d in self.devices if not d.startswith("GPU"))

    def nic_name(self, nic: str) -> str:
        """The RDMA device name of a NIC column (``NIC3`` -> ``mlx5_3``)."""
        return self.nic_names.get(nic, nic)

    def nic_column(self, name: str) -> str | None:
        """The column of a NIC given as ``mlx5_3`` or ``NIC3``; None when absent."""
        if name in self.nics:
            return name
        for column, device in self.nic_names.items():
            if device == name:
                return column
        return None

    def link(self, a: str, b: str) -> str:
        """Connection type between two columns."""
        return self.links[a][b]


def nics_near_gpus(topo: NvidiaSmiTopo, near: tuple[str, ...] = NEAR) -> dict[str, list[str]]:
    """For each GPU, the NICs (RDMA names) reachable within ``near`` PCIe distances.

    Args:
        topo: A parsed matrix.
        near: Connection types that count as near; PIX and PXB by default (under the same
            PCIe switch, the pairing GPUDirect RDMA needs).

    Returns:
        ``{"GPU0": ["mlx5_0"], ...}``, every GPU present, in column order.
    """
    return {gpu: [topo.nic_name(nic) for nic in topo.nics if topo.link(gpu, nic) in near] for gpu in topo.gpus}


def nics_without_gpu(topo: NvidiaSmiTopo, near: tuple[str, ...] = NEAR) -> list[str]:
    """NICs (RDMA names) that no GPU reaches within ``near``: storage or management NICs."""
    return [topo.nic_name(nic) for nic in topo.nics if all(topo.link(gpu, nic) not in near for gpu in topo.gpus)]


def _header(line: str) -> tuple[list[str], list[str]] | None:
    """Device and trailing column names when ``line`` is the matrix header."""
    if not line[:1].isspace():
        return None
    cut = len(line)
    for name in _TRAILING_COLUMNS:
        idx = line.find(name)
        if idx >= 0:
            cut = min(cut, idx)
    devices = line[:cut].split()
    if not devices or devices[0] != "GPU0" or not all(_DEVICE_RE.match(d) for d in devices):
        return None
    trailing = [name for name in _TRAILING_COLUMNS if name in line[cut:]]
    return devices, trailing


@guarded(unreadable)
def parse_nvidia_smi_topo(text: str) -> NvidiaSmiTopo:
    """Parse ``nvidia-smi topo -m`` output; the matrix may sit inside a longer capture.

    Args:
        text: The output, with or without ANSI underline escapes, tab- or space-separated.

    Returns:
        The device list, the connection matrix, per-GPU affinities and the NIC legend.

    Raises:
        ParseError: No matrix header is found, a row is missing or malformed, or a cell is
            not a known connection type.
    """
    lines = numbered_lines(text)
    start = None
    devices: list[str] = []
    trailing: list[str] = []
    for idx, (_, _, cleaned) in enumerate(lines):
        found = _header(split_launcher_prefix(cleaned)[1])
        if found is not None:
            devices, trailing = found
            start = idx
            break
    if start is None:
        raise ParseError("no nvidia-smi topo -m matrix header (a line of GPU0 GPU1 ...) found", len(lines), "")

    links: dict[str, dict[str, str]] = {}
    affinity: dict[str, dict[str, str]] = {name: {} for name in _TRAILING_COLUMNS}
    idx = start + 1
    while idx < len(lines):
        line_no, raw, cleaned = lines[idx]
        tokens = split_launcher_prefix(cleaned)[1].split()
        if not tokens or tokens[0] == "Legend:":
            break
        label = tokens[0]
        if label not in devices:
            raise ParseError(f"row {label!r} is not a device named in the header", line_no, raw)
        cells, extra = tokens[1 : 1 + len(devices)], tokens[1 + len(devices) :]
        if len(cells) < len(devices):
            raise ParseError(f"row {label} has {len(cells)} cells for {len(devices)} devices", line_no, raw)
        for cell in cells:
            if not _CONNECTION_RE.match(cell):
                raise ParseError(f"unknown connection type {cell!r} in row {label}", line_no, raw)
        if len(extra) > len(trailing):
            raise ParseError(f"row {label} has {len(extra) - len(trailing)} cells too many", line_no, raw)
        links[label] = dict(zip(devices, cells, strict=True))
        for column, value in zip(trailing, extra, strict=False):
            affinity[column][label] = value
        idx += 1

    missing = [d for d in devices if d not in links]
    if missing:
        line_no, raw, _ = lines[idx] if idx < len(lines) else (len(lines), "", "")
        raise ParseError(f"the matrix has no row for {', '.join(missing)}", line_no, raw)

    nic_names: dict[str, str] = {}
    in_legend = False
    for _, _, cleaned in lines[idx:]:
        line = split_launcher_prefix(cleaned)[1]
        if line.strip() == "NIC Legend:":
            in_legend = True
        elif in_legend and (legend := _LEGEND_RE.match(line)):
            nic_names[legend[1]] = legend[2]
        elif in_legend and nic_names and line.strip():
            break
    return NvidiaSmiTopo(
        devices=tuple(devices),
        links=links,
        cpu_affinity=affinity["CPU Affinity"],
        numa_affinity=affinity["NUMA Affinity"],
        gpu_numa_id=affinity["GPU NUMA ID"],
        nic_names=nic_names,
    )
