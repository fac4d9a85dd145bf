"""Version compatibility tables: driver vs CUDA, NCCL vs CUDA, Slurm per OS, Slurm features.

Sources:
- Driver minimum per CUDA toolkit: CUDA release notes Table 3 (techref §5.1).
- CUDA per architecture: NVIDIA's CUDA/driver/architecture matrix (techref §5.2).
- NCCL per CUDA: NVIDIA publishes ``libnccl2=<nccl>-1+cuda<X.Y>`` builds per release; the first
  release with a build for each CUDA minor is taken from NVIDIA's package index (redist listings)
  and NCCL's makefiles (sm_100 needs CUDA >= 12.8, so Blackwell-ready NCCL starts at 2.25).
- Slurm per OS: the distributions' slurm-wlm packages (Ubuntu jammy 21.08, noble 23.11,
  Debian bookworm 22.05).
- Slurm features: SchedMD changelogs (techref §3.2).
"""

from __future__ import annotations

# CUDA toolkit (major.minor) -> minimum Linux x86_64 driver of its GA release.
MIN_DRIVER_FOR_CUDA: dict[str, str] = {
    "11.8": "520.61.05",
    "12.0": "525.60.13",
    "12.1": "530.30.02",
    "12.2": "535.54.03",
    "12.3": "545.23.06",
    "12.4": "550.54.14",
    "12.5": "555.42.02",
    "12.6": "560.28.03",
    "12.8": "570.26",
    "12.9": "575.51.03",
    "13.0": "580.65.06",
    "13.1": "590.44.01",
    "13.2": "595.45.04",
}

# Architecture -> first CUDA toolkit that supports it.
MIN_CUDA_FOR_ARCH: dict[str, str] = {
    "ampere": "11.0",
    "ada": "11.8",
    "hopper": "11.8",
    "blackwell": "12.8",
}

# CUDA minor -> first NCCL release published with a build for it.
MIN_NCCL_FOR_CUDA: dict[str, str] = {
    "11.8": "2.15.5",
    "12.0": "2.16.2",
    "12.1": "2.17.1",
    "12.2": "2.18.3",
    "12.3": "2.19.3",
    "12.4": "2.20.5",
    "12.5": "2.22.3",
    "12.6": "2.22.3",
    "12.8": "2.25.1",
    "12.9": "2.26.5",
    "13.0": "2.27.7",
    "13.1": "2.28.9",
    "13.2": "2.29.3",
}

# CUDA major -> last NCCL series still published for it (None: still current).
LAST_NCCL_FOR_CUDA_MAJOR: dict[str, str | None] = {"11": "2.21.5", "12": None, "13": None}

# What each OS's own archive ships as slurm-wlm (major.minor).
OS_SLURM: dict[str, str] = {"ubuntu-22.04": "21.08", "ubuntu-24.04": "23.11", "debian-12": "22.05"}
OS_CODENAME: dict[str, str] = {"ubuntu-22.04": "jammy", "ubuntu-24.04": "noble", "debian-12": "bookworm"}

# Slurm feature landmarks.
SLURM_BLOCK_TOPOLOGY = "23.11"  # topology/block plugin added
SLURM_BLOCK_SIZES = "24.05"  # BlockSizes replaces BlockLevels
SLURM_CONS_TRES_DEFAULT = "23.11"
SLURM_TREEWIDTH_16 = "23.11"  # TreeWidth default went from 50 to 16
SLURM_SUSPEND_EXC_STATES = "23.02"  # SuspendExcStates added (older slurmctld refuses the line)
# `scontrol reconfigure` adds and removes nodes (slurmctld re-executes itself); before, a changed node
# list needs slurmctld and every slurmd restarted (both keep running jobs).
SLURM_RECONFIGURE_NODES = "23.11"


def version_tuple(version: str) -> tuple[int, ...]:
    """``"570.133.20"`` -> ``(570, 133, 20)``; non-numeric parts compare as 0."""
    out: list[int] = []
    for part in version.split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        out.append(int(digits) if digits else 0)
    return tuple(out)


def major_minor(version: str) -> str:
    """``"12.8.1"`` -> ``"12.8"``."""
    return ".".join(version.split(".")[:2])


def at_least(version: str, minimum: str) -> bool:
    """True when ``version >= minimum`` numerically."""
    return version_tuple(version) >= version_tuple(minimum)
