"""NCCL system configuration (/etc/nccl.conf) per GPU hardware profile.

Only system-description variables go into /etc/nccl.conf (NCCL's docs: tuning and debug
variables "should not be used in production"); each carries the reason it is set.
Sources: techref §1.1-1.4 (NCCL env.rst), vendor files for cloud fabrics.
"""

from __future__ import annotations

from clusterctl.catalog.compat import at_least
from clusterctl.plan.models import NcclProfile, NcclSetting
from clusterctl.plan.nccl_cloud import cloud_nccl_profile
from clusterctl.spec.models import HardwareProfile, Spec


def _ib_hca(profile: HardwareProfile) -> NcclSetting:
    hcas = ",".join(f"{hca}:1" for hca in profile.rails)
    excluded = f"; storage NICs {', '.join(profile.storage_nics)} stay out" if profile.storage_nics else ""
    return NcclSetting(
        name="NCCL_IB_HCA",
        value=f"={hcas}",
        why=f"exact (=) rail HCA names: a bare mlx5_1 would also match mlx5_10-19{excluded}",
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
            out.append(cloud)
            continue
        out.append(
            NcclProfile(hardware=name, gpu_model=profile.gpus.model, settings=nccl_settings(spec, name, profile))
        )
    return out
