"""NVIDIA DOCA-OFED as Azure's HPC images install it on ND-series VMs.

Azure/azhpc-images@8e9d055 ``versions.json`` (lines 33-46, ``doca``) pins, per OS, the ``doca-host``
repository package with its sha256; ``components/install_doca.sh`` installs it (``dpkg -i``, line 39),
keeps the distribution's dkms over DOCA's (an apt pin, lines 42-46), then ``apt-get install
doca-ofed`` (line 107). ``components/customizations/ndv5.sh`` then loads nvidia-peermem (line 31):
on Azure's image GPUDirect RDMA goes through nvidia-peermem and DOCA's ib_core, not DMA-BUF.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DocaRelease:
    """The DOCA host repository package of one OS: version, URL and sha256."""

    version: str
    url: str
    sha256: str


# Azure/azhpc-images@8e9d055 versions.json, doca.<os>.x86_64 (lines 34-46).
AZURE_DOCA: dict[str, DocaRelease] = {
    "ubuntu-22.04": DocaRelease(
        "3.2.1",
        "https://www.mellanox.com/downloads/DOCA/DOCA_v3.2.1/host/doca-host_3.2.1-044000-25.10-ubuntu2204_amd64.deb",
        "75b8d4258b7239ef5021abaa25e7eeb4fcbc0c8117cab89ce1a766d2d218c8a0",
    ),
    "ubuntu-24.04": DocaRelease(
        "3.2.3",
        "https://www.mellanox.com/downloads/DOCA/DOCA_v3.2.3/host/doca-host_3.2.3-019000-25.10-ubuntu2404_amd64.deb",
        "762a3dbc1c8c1e4b03867b022ccafcfafa95bffe461a58a5b6e38fc678263614",
    ),
}
AZURE_DOCA_SOURCE = "Azure/azhpc-images:versions.json@8e9d055 (doca), components/install_doca.sh@8e9d055"
