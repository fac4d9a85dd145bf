"""Parse ``nvidia-smi --query-gpu=name,driver_version --format=csv,noheader``.

One line per GPU, fields separated by ``", "``: ``NVIDIA H100 80GB HBM3, 570.133.20``.
nvidia-smi prints an error sentence instead (``NVIDIA-SMI has failed because it couldn't
communicate with the NVIDIA driver...``) when the driver is not loaded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from clusterctl.bounded import guarded, integer
from clusterctl.verify.parsers._text import numbered_lines, split_launcher_prefix
from clusterctl.verify.result import ParseError, unreadable

QUERY_COMMAND = "nvidia-smi --query-gpu=name,driver_version --format=csv,noheader"
_DRIVER_RE = re.compile(r"^\d+(\.\d+)+$")
_MEMORY_RE = re.compile(r"(\d+)\s*GB", re.IGNORECASE)


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as nvidia-smi names it."""

    index: int
    name: str
    driver_version: str
    line_no: int


@dataclass(frozen=True)
class GpuQuery:
    """Every GPU of one node, in nvidia-smi's order."""

    gpus: tuple[GpuInfo, ...]

    @property
    def names(self) -> tuple[str, ...]:
        """Distinct GPU names."""
        return tuple(dict.fromkeys(g.name for g in self.gpus))

    @property
    def driver_versions(self) -> tuple[str, ...]:
        """Distinct driver versions (one on a healthy node)."""
        return tuple(dict.fromkeys(g.driver_version for g in self.gpus))


@guarded(unreadable)
def parse_gpu_query(text: str) -> GpuQuery:
    """Parse the CSV nvidia-smi prints for ``--query-gpu=name,driver_version``.

    Args:
        text: The captured output; blank lines and launcher prefixes are skipped.

    Returns:
        One entry per GPU line.

    Raises:
        ParseError: A line is not ``name, driver`` (nvidia-smi's error sentences included)
            or there is no GPU line at all.
    """
    gpus: list[GpuInfo] = []
    lines = numbered_lines(text)
    for line_no, raw, cleaned in lines:
        line = split_launcher_prefix(cleaned)[1].strip()
        if not line:
            continue
        name, sep, driver = line.rpartition(",")
        driver = driver.strip()
        if not sep or not name.strip() or not _DRIVER_RE.match(driver):
            raise ParseError("expected 'name, driver_version' (is the NVIDIA driver loaded?)", line_no, raw)
        gpus.append(GpuInfo(index=len(gpus), name=name.strip(), driver_version=driver, line_no=line_no))
    if not gpus:
        raise ParseError("nvidia-smi listed no GPUs", len(lines), "")
    return GpuQuery(gpus=tuple(gpus))


def name_matches_model(name: str, model: str) -> bool:
    """Whether an nvidia-smi GPU name is the spec's GPU model.

    nvidia-smi names do not follow the catalog's ``FAMILY-FORM-MEMORY`` form
    (``NVIDIA H100 80GB HBM3`` is the SXM part, ``NVIDIA H100 PCIe`` the PCIe card,
    ``NVIDIA A100-SXM4-80GB``, ``NVIDIA H200``), so the family must appear, PCIe must
    agree, and a memory size, where the name has one, must equal the model's.

    Args:
        name: As nvidia-smi prints it.
        model: The catalog model (``H100-SXM-80GB``).

    Returns:
        True when the name can be that model.
    """
    upper = name.upper()
    parts = model.upper().split("-")
    family, form = parts[0], parts[1] if len(parts) > 1 else ""
    if family not in upper:
        return False
    if ("PCIE" in upper) != (form == "PCIE"):
        return False
    model_memory = next((integer(m[1]) for p in parts[1:] if (m := _MEMORY_RE.fullmatch(p))), None)
    name_memory = _MEMORY_RE.search(upper)
    return model_memory is None or name_memory is None or integer(name_memory[1]) == model_memory
