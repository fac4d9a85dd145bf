"""NCCL system configuration (/etc/nccl.conf) per GPU hardware profile.

Only system-description variables go into /etc/nccl.conf (NCCL's docs: tuning and debug
variables "should not be used in production"); each carries the reason it is set.
Sources: techref §1.1-1.4 (NCCL env.rst), vendor files for cloud fabrics.
"""

from __future__ import annotations

from clusterctl.catalog.compat import at_least
from clusterctl.plan.containers import with_containers
from clusterctl.plan.models import NcclProfile, NcclSetting
from clusterctl.plan.nccl_cloud import cloud_nccl_profile
from clusterctl.spec.models import HardwareProfile, Spec

# The line the render leaves for each node to fill in (roles/nccl vars/main.yml __nccl_ib_hca_marker).
NODE_IB_HCA_MARKER = "#NCCL_IB_HCA=<per node>"

# GA kernel of each OS the spec allows (Ubuntu and Debian release notes): all have dma-buf in RDMA (5.12+).
OS_KERNEL = {"ubuntu-22.04": "5.15", "ubuntu-24.04": "6.8", "debian-12": "6.1"}
# The nvidia_driver role installs the open kernel modules from this branch on (NVIDIA's default flavour
# from R560: techref 5.3); DMA-BUF needs them.
OPEN_MODULES_FROM_BRANCH = 560


def _ib_hca(profile: HardwareProfile) -> NcclSetting:
    """NCCL_IB_HCA with exact names, resolved on each node: the names depend on the node's image."""
    excluded = f"; storage NICs {', '.join(profile.storage_nics)} stay out" if profile.storage_nics else ""
    return NcclSetting(
        name="NCCL_IB_HCA",
        value="",
        per_node=True,
        why=(
            f"exact (=) RDMA device names of the rails {', '.join(profile.rails)}, port 1 (a bare mlx5_1 would "
            f"also match mlx5_10-19){excluded}. The names depend on the node's image (rdma-core's udev rule "
            "kernel-boot/rdma-persistent-naming.rules names them ibp24s0/rocep24s0, DOCA/MOFED mlx5_N), so the "
            "nccl role writes the line below on each node with the names its sysfs gives for these rails "
            "(clusterctl.node.rdma_rails)"
        ),
    )


def gpudirect_note(spec: Spec) -> str:
    """What GPUDirect RDMA path the nodes are expected to choose, and why (they decide at converge)."""
    versions = spec.versions
    branch = int(versions.nvidia_driver.split(".")[0])
    kernel = OS_KERNEL.get(spec.os, "")
    blockers = []
    if branch < OPEN_MODULES_FROM_BRANCH:
        blockers.append(f"driver {versions.nvidia_driver} gets the proprietary kernel modules")
    if not kernel or not at_least(kernel, "5.12"):
        blockers.append(f"{spec.os}'s kernel {kernel or 'unknown'} < 5.12")
    if not at_least(versions.cuda, "11.7"):
        blockers.append(f"CUDA {versions.cuda} < 11.7")
    if not at_least(versions.nccl, "2.13.4"):
        blockers.append(f"NCCL {versions.nccl} < 2.13.4")
    tail = (
        "Each node decides at converge (roles/nvidia_driver tasks/gpudirect.yml) and the nccl role appends "
        "its choice at the end of this file."
    )
    if not blockers:
        return (
            f"GPUDirect RDMA: DMA-BUF expected (open kernel modules from driver R{OPEN_MODULES_FROM_BRANCH}: "
            f"{versions.nvidia_driver}; {spec.os}'s kernel {kernel} >= 5.12; CUDA {versions.cuda} >= 11.7; "
            f"NCCL {versions.nccl} >= 2.13.4), so nvidia-peermem is not loaded. {tail}"
        )
    return (
        f"GPUDirect RDMA: DMA-BUF is out ({'; '.join(blockers)}): nvidia-peermem where DOCA/MOFED is installed, "
        f"else none (inbox rdma-core cannot load nvidia-peermem: it needs MOFED's peer-memory API). {tail}"
    )


def nccl_settings(spec: Spec, name: str, profile: HardwareProfile) -> list[NcclSetting]:
    """The /etc/nccl.conf lines for one hardware profile on the spec's fabric."""
    fabric = spec.fabric
    settings: list[NcclSetting] = []
    if fabric.kind in ("infiniband", "roce") and profile.rails:
        settings.append(_ib_hca(profile))
    if fabric.kind == "roce" and not at_least(spec.versions.nccl, "2.21"):
        settings.append(
            NcclSetting(
                name="NCCL_IB_GID_INDEX",
                value="3",
                why="NCCL < 2.21 cannot pick the RoCEv2 GID itself; index 3 is RoCEv2/IPv4 on ConnectX",
            )
        )
    if fabric.kind == "ethernet":
        settings.append(
            NcclSetting(
                name="NCCL_IB_DISABLE",
                value="1",
                why="no RDMA on this fabric: use the socket transport instead of probing verbs devices",
            )
        )
    if fabric.sharp and fabric.kind == "infiniband":
        settings.append(
            NcclSetting(
                name="NCCL_COLLNET_ENABLE",
                value="1",
                why="SHARP switches are present: let NCCL offload reductions through the CollNet plugin",
            )
        )
    if "management_netdev" in profile.model_fields_set:
        settings.append(
            NcclSetting(
                name="NCCL_SOCKET_IFNAME",
                value=f"={profile.management_netdev}",
                why="bootstrap over the management network, not IPoIB storage links or container bridges",
            )
        )
    return settings


def nccl_profiles(spec: Spec) -> list[NcclProfile]:
    """One NCCL profile per GPU hardware profile, sorted by name."""
    out: list[NcclProfile] = []
    for name in sorted(spec.hardware):
        profile = spec.hardware[name]
        if profile.gpus is None:
            continue
        # Cloud fabrics (EFA, GPUDirect-TCPX/TCPXO, Azure ND) follow their vendors' settings.
        cloud = cloud_nccl_profile(spec, name, profile)
        if cloud is not None:
            out.append(with_containers(cloud))
            continue
        notes = [gpudirect_note(spec)] if spec.fabric.kind in ("infiniband", "roce") else []
        out.append(
            with_containers(
                NcclProfile(
                    hardware=name,
                    gpu_model=profile.gpus.model,
                    settings=nccl_settings(spec, name, profile),
                    notes=notes,
                )
            )
        )
    return out
