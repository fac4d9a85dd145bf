"""Pure parsers of tool outputs: text in, frozen dataclasses out, `ParseError` on bad input.

One module per tool: ``nccl_tests``, ``dcgmi_diag``, ``nvidia_smi_topo``, ``ibstat``, ``fio``.
"""

from clusterctl.verify.parsers.dcgmi_diag import DcgmDiag, DcgmMessage, DcgmTest, DiagStatus, parse_dcgmi_diag
from clusterctl.verify.parsers.fio import FioDirection, FioJob, FioResult, parse_fio_json
from clusterctl.verify.parsers.ibstat import IbCa, IbPort, IbStat, parse_ibstat
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
    "NcclMeasurement",
    "NcclRank",
    "NcclRow",
    "NcclTestsResult",
    "NvidiaSmiTopo",
    "nics_near_gpus",
    "nics_without_gpu",
    "parse_dcgmi_diag",
    "parse_fio_json",
    "parse_ibstat",
    "parse_nccl_tests",
    "parse_nvidia_smi_topo",
]
