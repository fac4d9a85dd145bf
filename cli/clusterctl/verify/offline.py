"""Judge one saved tool output without a cluster (``clusterctl check-output``).

The marks come from the caller: the spec's thresholds for one hardware profile, or the
per-GPU-model defaults (with the model read from the output where it names one), and
explicit values on top. ``judge_output`` parses and judges; `ParseError` goes to the caller,
which reports the line that broke it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from clusterctl.catalog.gpus import GPU_MODELS
from clusterctl.spec.findings import Finding
from clusterctl.verify.fabric import judge_ibstat, judge_topo
from clusterctl.verify.gpu import judge_dcgm
from clusterctl.verify.nccl import judge_nccl
from clusterctl.verify.parsers.dcgmi_diag import parse_dcgmi_diag
from clusterctl.verify.parsers.fio import parse_fio_json
from clusterctl.verify.parsers.gpu_query import name_matches_model
from clusterctl.verify.parsers.ibstat import parse_ibstat
from clusterctl.verify.parsers.nccl_debug import parse_nccl_debug
from clusterctl.verify.parsers.nccl_tests import NcclTestsResult, parse_nccl_tests
from clusterctl.verify.parsers.nvidia_smi_topo import parse_nvidia_smi_topo
from clusterctl.verify.result import ParseError
from clusterctl.verify.storage import judge_fio
from clusterctl.verify.thresholds import AcceptanceThresholds
from clusterctl.verify.transport import judge_transport

Kind = Literal["nccl-tests", "nccl-debug", "dcgmi-diag", "nvidia-smi-topo", "ibstat", "fio"]
KINDS: tuple[Kind, ...] = ("nccl-tests", "nccl-debug", "dcgmi-diag", "nvidia-smi-topo", "ibstat", "fio")
# The reference node when neither a spec nor the output says otherwise: an 8-GPU HGX/DGX
# H100 with eight NDR rails, the node most acceptance figures were published for.
DEFAULT_GPU_MODEL = "H100-SXM-80GB"
DEFAULT_GPUS = 8
DEFAULT_NICS = 8
DEFAULT_SPEED_GBPS = 400


@dataclass(frozen=True)
class Marks:
    """The pass marks a saved output is judged against, and where they come from.

    Attributes:
        source: One line naming the origin (``spec x.yaml, hardware dgx-h100`` or the defaults used).
        thresholds: The acceptance thresholds.
        rails: Rail NICs of GPU0.. (topo, ibstat); empty when unknown.
        ib_rate_gbps: The port rate ibstat must show; None checks states only.
        read_bw_bytes: fio read mark in bytes/s; None for no mark.
        write_bw_bytes: fio write mark in bytes/s; None for no mark.
        min_busbw_gbps: An explicit nccl-tests mark that replaces the thresholds'.
        fabric: The fabric kind an NCCL_DEBUG log is judged for; None fails only sockets.
        notes: Extra lines for the reader (what was inferred).
    """

    source: str
    thresholds: AcceptanceThresholds
    rails: tuple[str, ...] = ()
    ib_rate_gbps: float | None = None
    read_bw_bytes: float | None = None
    write_bw_bytes: float | None = None
    min_busbw_gbps: float | None = None
    fabric: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)


def model_from_name(name: str) -> str | None:
    """The catalog GPU model an nvidia-smi/nccl-tests GPU name stands for, if exactly one fits."""
    fits = [model for model in GPU_MODELS if name_matches_model(name, model)]
    return fits[0] if len(fits) == 1 else None


def gpu_model_in(kind: Kind, text: str) -> str | None:
    """The GPU model a saved output names: nccl-tests device lines, dcgmi's PCI device IDs.

    Returns None when the output does not say, cannot be parsed, or is ambiguous; the
    caller falls back to a default and says so.
    """
    try:
        if kind == "nccl-tests":
            names = parse_nccl_tests(text).gpu_names
            models = {model_from_name(n) for n in names}
            return models.pop() if len(models) == 1 else None
        if kind == "dcgmi-diag":
            ids = set(parse_dcgmi_diag(text).gpu_device_ids)
            models = {m.name for m in GPU_MODELS.values() if m.pci_device_id in {i.lower() for i in ids}}
            return models.pop() if len(models) == 1 else None
    except ParseError:  # the real parse reports it later, with its line
        return None
    return None


def nccl_nodes(result: NcclTestsResult, given: int | None) -> tuple[int, str]:
    """How many nodes an nccl-tests run spanned, and how that was found."""
    if given is not None:
        return given, "--nodes"
    if result.hosts:
        return len(result.hosts), "the rank lines"
    return 1, "no rank lines in the output and no --nodes: judged as a single-node run"


def judge_nccl_debug_output(text: str, fabric: str | None, *, nodes: int | None = None) -> Finding:
    """Judge a saved ``NCCL_DEBUG=INFO`` log: the transport every NCCL process chose.

    Args:
        text: The log.
        fabric: The fabric kind the nodes are on; None fails only a socket fallback.
        nodes: Nodes the run spanned, when known (1: intra-node only).

    Raises:
        ParseError: The text has no NCCL debug line.
    """
    return judge_transport(parse_nccl_debug(text), fabric, nodes=nodes, target="").result


def judge_output(kind: Kind, text: str, marks: Marks, *, nodes: int | None = None) -> tuple[Finding, list[str]]:
    """Parse and judge one saved output.

    Args:
        kind: What the output is.
        text: The output.
        marks: The marks to judge against.
        nodes: Nodes an nccl-tests run spanned (picks the intra- or inter-node mark);
            read from the output's rank lines when None.

    Returns:
        The verdict and notes on how the marks were chosen.

    Raises:
        ParseError: The output cannot be parsed.
    """
    t = marks.thresholds
    notes = list(marks.notes)
    if kind == "nccl-tests":
        result = parse_nccl_tests(text, collective="all_reduce")
        n_nodes, how = nccl_nodes(result, nodes)
        notes.append(f"nodes: {n_nodes} ({how})")
        mark = marks.min_busbw_gbps if marks.min_busbw_gbps is not None else t.nccl_busbw_gbps(n_nodes)
        return judge_nccl(result, mark, t.nccl_min_size_bytes), notes
    if kind == "nccl-debug":
        return judge_nccl_debug_output(text, marks.fabric, nodes=nodes), notes
    if kind == "dcgmi-diag":
        return judge_dcgm(parse_dcgmi_diag(text), min_level=t.dcgm_diag_level), notes
    if kind == "nvidia-smi-topo":
        return judge_topo(parse_nvidia_smi_topo(text), list(marks.rails)), notes
    if kind == "ibstat":
        return judge_ibstat(parse_ibstat(text), marks.ib_rate_gbps, list(marks.rails) or None), notes
    return judge_fio(parse_fio_json(text), marks.read_bw_bytes, marks.write_bw_bytes), notes
