"""The acceptance checks of ``clusterctl verify``, in the order they run.

Order matters: Slurm first (cheap, and a node Slurm cannot reach would hang an srun), then the
per-node checks, storage, the NCCL transport and the NCCL test plan, and last each node's
packages against clusterctl.lock. Each check lives with its command, parser, threshold and
judgement in the module of its concern; what they share is in `clusterctl.verify.base`.
"""

from __future__ import annotations

from clusterctl.verify.base import Check
from clusterctl.verify.fabric import IbCheck, TopoCheck
from clusterctl.verify.gpu import DcgmCheck, GpuInventoryCheck
from clusterctl.verify.nccl import NcclCheck
from clusterctl.verify.packages import PackagesCheck
from clusterctl.verify.slurm import SlurmCheck
from clusterctl.verify.storage import StorageCheck
from clusterctl.verify.timesync import TimeSyncCheck
from clusterctl.verify.transport import TransportCheck

CHECKS: tuple[type[Check], ...] = (
    SlurmCheck,
    TimeSyncCheck,
    GpuInventoryCheck,
    TopoCheck,
    IbCheck,
    DcgmCheck,
    StorageCheck,
    TransportCheck,
    NcclCheck,
    PackagesCheck,
)
CHECK_NAMES: tuple[str, ...] = tuple(c.name for c in CHECKS)
