"""Resolve a validated spec into a ``Plan``: nodes, racks, fabric, Slurm, storage, sizing.

Pure: reads the spec (and machines.csv for bare metal), computes, returns. Rules have run
before this, so references resolve and names are unique; ``build_plan`` still never
raises on a spec that only has warnings.

One pass, by concern, each part computed before the model that holds it is built (the plan's
models are frozen): the nodes' seats (plan/nodes.py), the fabric laid out over them
(plan/fabric.py, with its RDMA parts from plan/rdma.py), the nodes themselves, then NCCL,
Slurm (plan/slurm.py), storage (plan/storage.py), sizing (plan/sizing.py) and provisioning
(plan/cloud.py, plan/burst.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from ipaddress import IPv4Address
from pathlib import Path

from clusterctl.catalog.compat import OS_CODENAME
from clusterctl.catalog.tools import nccl_tests_checksum, nccl_tests_url
from clusterctl.plan.burst import resolve_burst_cloud
from clusterctl.plan.cloud import resolve_baremetal, resolve_cloud
from clusterctl.plan.fabric import resolve_fabric
from clusterctl.plan.models import ClusterInfo, MonitoringPlan, NcclProfile, Plan, PlanNode, SitePlan
from clusterctl.plan.nccl import nccl_profiles
from clusterctl.plan.nccl_cloud import gcp_versions
from clusterctl.plan.nodes import make_nodes, node_groups, place_nodes
from clusterctl.plan.rdma import ipoib_addresses
from clusterctl.plan.service import Swap
from clusterctl.plan.sizing import checkpoint_bytes, resolve_gpus, resolve_power, resolve_workload
from clusterctl.plan.slurm import resolve_slurm
from clusterctl.plan.storage import resolve_storage, systemd_mount_unit
from clusterctl.spec.models import Spec


def _monitoring(spec: Spec, nodes: list[PlanNode]) -> MonitoringPlan:
    """Prometheus on the first controller; exporters on the fixed nodes (DCGM on real GPUs only)."""
    controllers = [n for n in nodes if n.role == "controller"]
    wanted = spec.monitoring
    return MonitoringPlan(
        prometheus=wanted.prometheus,
        prometheus_host=controllers[0].hostname if controllers and wanted.prometheus else None,
        node_exporter_targets=[n.hostname for n in nodes if wanted.node_exporter and not n.burst],
        dcgm_exporter_targets=[
            n.hostname for n in nodes if wanted.dcgm_exporter and n.gpus and not n.emulated and not n.burst
        ],
    )


def _versions(spec: Spec, nccl: list[NcclProfile]) -> dict[str, str]:
    """The software versions the roles install, with what the plan derives (fabric manager, EFA, GCP)."""
    # The nccl-tests archive and its checksum are not versions: they go to the cluster facts.
    versions = spec.versions.model_dump(exclude={"nccl_tests_url", "nccl_tests_checksum"})
    versions["fabric_manager"] = spec.versions.fabric_manager or spec.versions.nvidia_driver
    # AWS EFA nodes: the EFA installer and aws-ofi-nccl releases the efa role installs.
    for stack in (p.efa for p in nccl if p.efa is not None):
        versions["efa_installer"] = stack.installer
        versions["aws_ofi_nccl"] = stack.aws_ofi_nccl
        versions["gdrcopy"] = stack.gdrcopy
    versions.update(gcp_versions(spec))
    return versions


def _cluster_info(spec: Spec, spec_file: str, nodes: list[PlanNode], nccl: list[NcclProfile]) -> ClusterInfo:
    network = spec.network
    gateway = network.gateway or IPv4Address(int(network.management_cidr.network_address) + 1)
    return ClusterInfo(
        name=spec.name,
        domain=network.domain,
        os=spec.os,
        os_codename=OS_CODENAME[spec.os],
        provider=spec.provider.kind,
        provider_config=spec.provider,
        spec_file=spec_file,
        management_cidr=str(network.management_cidr),
        gateway=str(gateway),
        versions=_versions(spec, nccl),
        container_runtime=spec.container_runtime,
        emulated_gpus=any(n.emulated for n in nodes),
        nccl_tests_url=spec.versions.nccl_tests_url or nccl_tests_url(spec.versions.nccl_tests),
        # The spec refuses a release without a known or given checksum (Versions).
        nccl_tests_checksum=(spec.versions.nccl_tests_checksum or nccl_tests_checksum(spec.versions.nccl_tests) or ""),
        cuda_repo=spec.mirrors.cuda_repo,
        cuda_repo_key=spec.mirrors.cuda_repo_key,
        cuda_repo_key_sha256=spec.mirrors.cuda_repo_key_sha256,
        container_check_image=spec.acceptance.container_image if spec.container_runtime == "enroot" else None,
    )


def build_plan(spec: Spec, base_dir: Path, spec_file: str = "spec.yaml", swaps: Sequence[Swap] = ()) -> Plan:
    """Resolve ``spec`` into a plan.

    Args:
        spec: a spec that passed validation.
        base_dir: directory relative paths in the spec (machines.csv) are resolved against.
        spec_file: how the spec is named in generated files.
        swaps: the spares put in service so far (the cluster's state; plan/service.py).
    """
    seats, assumptions = place_nodes(spec, base_dir)
    fabric = resolve_fabric(spec, seats)
    nodes = make_nodes(spec, seats, fabric.links, {s.hostname: ipoib_addresses(spec, s) for s in seats}, swaps)
    nccl = nccl_profiles(spec)
    gpus = resolve_gpus(nodes)
    storage, lnet = resolve_storage(spec, nodes, checkpoint_bytes(spec))
    return Plan(
        cluster=_cluster_info(spec, spec_file, nodes, nccl),
        nodes=nodes,
        groups=node_groups(spec, nodes),
        fabric=fabric.plan,
        slurm=resolve_slurm(spec, nodes, fabric, nccl),
        storage=storage,
        lnet=lnet,
        nccl=nccl,
        power=resolve_power(nodes, fabric.plan, assumptions),
        gpus=gpus,
        workload=resolve_workload(spec, nodes, gpus),
        monitoring=_monitoring(spec, nodes),
        cloud=resolve_cloud(spec, nodes),
        baremetal=resolve_baremetal(spec, nodes, base_dir),
        burst_cloud=resolve_burst_cloud(spec, nodes),
        site=SitePlan(
            dns_servers=[str(a) for a in spec.site.dns_servers],
            search_domains=list(spec.site.search_domains),
            ntp_servers=list(spec.site.ntp_servers),
        ),
    )


# systemd_mount_unit moved to plan/storage.py; importable here too until every caller imports it there.
__all__ = ["build_plan", "systemd_mount_unit"]
