"""Pure parsers of tool outputs: text in, frozen dataclasses out, `ParseError` on bad input.

One module per tool: ``nccl_tests``, ``nccl_debug`` (``NCCL_DEBUG=INFO`` lines), ``dcgmi_diag``,
``nvidia_smi_topo``, ``ibstat``, ``fio``.
"""

from clusterctl.verify.parsers.dcgmi_diag import DcgmDiag, DcgmMessage, DcgmTest, DiagStatus, parse_dcgmi_diag
from clusterctl.verify.parsers.fio import FioDirection, FioJob, FioResult, parse_fio_json
from clusterctl.verify.parsers.ibstat import IbCa, IbPort, IbStat, parse_ibstat
from clusterctl.verify.parsers.nccl_debug import NcclDebugLog, NcclProcess, network_family, parse_nccl_debug
from clusterctl.verify.parsers.nccl_tests import NcclMeasurement, NcclRank, NcclRow, NcclTestsResult, parse_nccl_tests
from clusterctl.verify.parsers.nvidia_smi_topo import (
    NvidiaSmiTopo,
    nics_near_gpus,
    nics_without_gpu,
    parse_nvidia_smi_topo,
)

__all__ = [
    "DcgmDiag",
    "DcgmMessage",
    "DcgmTest",
    "DiagStatus",
    "FioDirection",
    "FioJob",
    "FioResult",
    "IbCa",
    "IbPort",
    "IbStat",
    "NcclDebugLog",
    "NcclMeasurement",
    "NcclProcess",
    "NcclRank",
    "NcclRow",
    "NcclTestsResult",
    "NvidiaSmiTopo",
    "network_family",
    "nics_near_gpus",
    "nics_without_gpu",
    "parse_dcgmi_diag",
    "parse_fio_json",
    "parse_ibstat",
    "parse_nccl_debug",
    "parse_nccl_tests",
    "parse_nvidia_smi_topo",
]
