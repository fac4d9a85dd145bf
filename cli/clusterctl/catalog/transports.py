"""Which NCCL transport each fabric must use: the network names NCCL prints for it.

A job whose NCCL falls back to TCP sockets runs, an order of magnitude slower, and nothing
else says so; verify's transport check (`clusterctl.verify.transport`) judges a log by this table:

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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# The kinds of network NCCL can report (clusterctl.verify.parsers.nccl_debug.network_family).
Family = Literal["ib", "ofi", "fastrak", "tcpx", "gib", "socket", "other"]


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
ANY_RDMA = ExpectedTransport(
    ("ib", "ofi", "fastrak", "tcpx", "gib", "other"),
    "any network but sockets",
    hint="NCCL fell back to TCP sockets; the fabric's transport (RDMA NIC, plugin) is missing on that node",
)


def expected_transport(fabric: str | None) -> ExpectedTransport:
    """The transport a fabric kind needs; without one, anything but sockets."""
    return FABRIC_TRANSPORTS.get(fabric or "", ANY_RDMA)
