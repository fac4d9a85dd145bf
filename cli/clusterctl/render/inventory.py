"""The Ansible inventory and group variables: the contract between the render and the roles.

Hosts carry ``clusterctl_*`` facts from the plan; groups exist per role (controller, login,
compute), per node group (``group_<name>``), per rack (``rack_<rack>``), and for GPU
nodes (``gpu`` real, ``emulated_gpu`` emulated; ``nccl_userspace``: emulated ones that get NCCL
from a CUDA repository mirror). group_vars/all.yml pins every version.
"""

from __future__ import annotations

import re
from typing import Any

from clusterctl.plan.models import Plan, PlanNode
from clusterctl.render.pulling import pull_nodes

# Ansible forks: one per node up to this cap; beyond it the controller's CPU and SSH
# connection setup dominate (see README, "Scaling").
MAX_FORKS = 50

# Groups every rendered inventory has, empty or not, so site.yml's host patterns always resolve.
STANDARD_GROUPS = (
    "controller",
    "login",
    "compute",
    "gpu",
    "emulated_gpu",
    "nccl_userspace",
    "burst",
    "static_compute",
    "opensm",
)


def _safe(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def container_name(plan: Plan, node: PlanNode) -> str:
    """Docker container name of a local-provider node (cluster-prefixed, so clusters never clash)."""
    return host_container(plan.cluster.name, node.hostname)


def host_container(cluster: str, hostname: str) -> str:
    """Docker container name of host ``hostname`` of ``cluster``, in the plan or no longer."""
    return f"clusterctl-{cluster}-{hostname}"


def host_vars(plan: Plan, node: PlanNode) -> dict[str, Any]:
    """The host variables of ``node`` in the rendered inventory."""
    host: dict[str, Any] = {
        "clusterctl_address": node.address,
        "clusterctl_group": node.group,
        "clusterctl_hardware": node.hardware,
        "clusterctl_rack": node.rack,
        "clusterctl_gpus": node.gpus,
        "clusterctl_emulated_gpus": node.emulated,
        "clusterctl_spare": node.spare,
        "clusterctl_burst": node.burst,
    }
    # A burst group on another provider has its own fabric (EFA for p5) and cloud: the roles read
    # these per host, over the cluster-wide values of group_vars/all.yml.
    group = next((g for g in plan.groups if g.name == node.group), None)
    if group is not None and group.burst and group.provider and group.provider != plan.cluster.provider:
        host["clusterctl_provider"] = group.provider
        if group.fabric and group.fabric != plan.fabric.kind:
            host["clusterctl_fabric_kind"] = group.fabric
    if node.gpus:
        host["clusterctl_gpu_model"] = node.gpu_model
        host["clusterctl_gres_type"] = node.gres_type
    if node.rails:
        host["clusterctl_rails"] = list(node.rails)
    if node.storage_nics:
        host["clusterctl_storage_nics"] = list(node.storage_nics)
    if node.ipoib:
        # roles/rdma names each interface after rail i's netdev, which the node finds in sysfs.
        mode = plan.fabric.ipoib_mode or "datagram"
        mtu = {"mtu": plan.fabric.ipoib_mtu} if plan.fabric.ipoib_mtu else {}
        host["clusterctl_ipoib_interfaces"] = [
            {"rail": i, "address": address, "mode": mode, **mtu} for i, address in enumerate(node.ipoib)
        ]
    if node.storage_netdevs:
        host["clusterctl_storage_netdevs"] = list(node.storage_netdevs)
    placement = next((p for p in plan.fabric.opensm if p.host == node.hostname), None)
    if placement is not None:
        host["clusterctl_opensm_priority"] = placement.priority
        if placement.port:
            host["clusterctl_opensm_port"] = placement.port
    provider = plan.cluster.provider
    if provider == "local" or (node.burst and node.emulated):
        host["ansible_connection"] = "community.docker.docker"
        host["ansible_host"] = container_name(plan, node)
    else:
        host["ansible_host"] = node.address
        host["ansible_user"] = plan.cluster.ssh_user
        if host["ansible_user"] != "root":
            host["ansible_become"] = True
    return host


def host_groups(plan: Plan, node: PlanNode) -> list[str]:
    """The inventory groups ``node`` is in (opensm placement aside): its role, node group, rack, GPUs, burst."""
    groups = [node.role, f"group_{_safe(node.group)}", f"rack_{_safe(node.rack)}"]
    if node.gpus:
        groups.append("emulated_gpu" if node.emulated else "gpu")
    # NCCL needs no GPU: emulated GPU nodes get it where the CUDA repository is mirrored (roles/site.yml).
    if node.gpus and node.emulated and plan.cluster.cuda_repo:
        groups.append("nccl_userspace")
    if node.burst:
        groups.append("burst")
    elif node.role == "compute":
        groups.append("static_compute")
    # The subnet manager's hosts (fabric.opensm_hosts), and nowhere else: roles/rdma runs opensm there.
    if any(p.host == node.hostname for p in plan.fabric.opensm):
        groups.append("opensm")
    return groups


def inventory(plan: Plan) -> dict[str, Any]:
    """The inventory (hosts.yml) for ``plan``."""
    children: dict[str, dict[str, Any]] = {}
    hosts: dict[str, Any] = {}
    for node in plan.nodes:
        hosts[node.hostname] = host_vars(plan, node)
        for group in host_groups(plan, node):
            children.setdefault(group, {"hosts": {}})["hosts"][node.hostname] = None
    for group in STANDARD_GROUPS:
        children.setdefault(group, {"hosts": {}})
    return {"all": {"hosts": hosts, "children": dict(sorted(children.items()))}}


def group_vars(plan: Plan) -> dict[str, Any]:
    """group_vars/all.yml: pinned versions and cluster-wide inputs of the roles."""
    versions = plan.cluster.versions
    return {
        "clusterctl_cluster_name": plan.cluster.name,
        "clusterctl_domain": plan.cluster.domain,
        "clusterctl_os": plan.cluster.os,
        "clusterctl_provider": plan.cluster.provider,
        "clusterctl_container_nodes": plan.slurm.container_nodes,
        # Files this inventory was rendered with; roles copy them from here.
        "clusterctl_render_dir": "{{ inventory_dir }}/../..",
        "clusterctl_versions": dict(sorted(versions.items())),
        # roles/nccl builds nccl-tests from this archive, checked against the checksum.
        "clusterctl_nccl_tests_source_url": plan.cluster.nccl_tests_url,
        "clusterctl_nccl_tests_source_checksum": plan.cluster.nccl_tests_checksum,
        "clusterctl_controllers": list(plan.slurm.controllers),
        "clusterctl_prometheus_host": plan.monitoring.prometheus_host,
        "clusterctl_fabric_kind": plan.fabric.kind,
        "clusterctl_fabric_speed_gbps": plan.fabric.speed_gbps,
        "clusterctl_subnet_manager": plan.fabric.subnet_manager,
        "clusterctl_container_runtime": plan.cluster.container_runtime,
        "clusterctl_slurm_accounting": plan.slurm.accounting,
        "clusterctl_slurm_dbd_host": plan.slurm.dbd_host,
        "clusterctl_monitoring": {
            "prometheus": plan.monitoring.prometheus,
            "node_exporter": bool(plan.monitoring.node_exporter_targets),
            "dcgm_exporter": bool(plan.monitoring.dcgm_exporter_targets),
        },
        "clusterctl_burst_groups": [b.group for b in plan.slurm.burst],
        # The controllers serve the bundles of the nodes that configure themselves (roles/bundle_server).
        "clusterctl_bundle_server": bool(pull_nodes(plan)),
        "clusterctl_slurm_health_check": plan.slurm.health_check_program is not None,
        "clusterctl_slurm_heal_timer": plan.slurm.heal_interval_s is not None,
        "clusterctl_slurm_dcgm_epilog": plan.slurm.dcgm_epilog,
        "clusterctl_storage": [
            {
                "name": t.name,
                "kind": t.kind,
                "mount": t.mount,
                "unit": t.unit_name,
                "requires_lnet": t.requires_lnet,
                "managed": t.managed,
            }
            for t in plan.storage
        ],
        **_ssh_user_vars(plan),
        **_efa_vars(plan),
        **_mirror_vars(plan),
        **_site_vars(plan),
        **_names_vars(plan),
        **_nccl_topologies(plan),
        **_nccl_fabric_vars(plan),
    }


def _ssh_user_vars(plan: Plan) -> dict[str, Any]:
    """The user clusterctl logs in as, let into compute nodes without a job (pam_slurm_adopt's exemption).

    Why: readiness, verify, heal and the next ``up`` reach every node over SSH as this user; without
    it pam_slurm_adopt refuses them ("you have no active jobs on this node") once Slurm is configured.
    """
    user = plan.cluster.ssh_user
    return {} if user == "root" else {"slurm_pam_adopt_exempt_users": ["root", user]}


def _site_vars(plan: Plan) -> dict[str, Any]:
    """The site's name and time servers, as the common role's variables, and the storage tier slurmctld's
    state is on (site.yml mounts it on the controllers before Slurm starts); only what the spec sets."""
    site = plan.site
    out: dict[str, Any] = {}
    if site.dns_servers:
        out["common_dns_servers"] = list(site.dns_servers)
    if site.search_domains:
        out["common_dns_search"] = list(site.search_domains)
    if site.ntp_servers:
        out["common_chrony_servers"] = list(site.ntp_servers)
    if plan.slurm.state_save_tier:
        out["clusterctl_slurm_state_tier"] = plan.slurm.state_save_tier
    return out


def _names_vars(plan: Plan) -> dict[str, Any]:
    """Bare metal with pulling nodes: the controllers serve the cluster's names over DNS (roles/bundle_server).

    Why: a pulling node's /etc/hosts lists only the controllers and login nodes (one file per node that
    grows with the cluster is what pull mode avoids), and on bare metal no provider DNS knows the other
    nodes: `torchrun --rdzv-endpoint=$(first node of the job)` and MPI launchers resolve them by name.
    Every node asks the controllers first, then the site's servers (resolv.conf keeps three).
    """
    bm = plan.baremetal
    if bm is None or not pull_nodes(plan):
        return {}
    controllers = [n.address for n in plan.nodes if n.role == "controller"]
    servers = controllers + [s for s in bm.dns if s not in controllers]
    search = [plan.cluster.domain] + [d for d in plan.site.search_domains if d != plan.cluster.domain]
    return {
        "clusterctl_serve_names": True,
        "clusterctl_names_upstream": [s for s in bm.dns if s not in controllers],
        "common_dns_servers": servers[:3],
        "common_dns_search": search,
    }


def _mirror_vars(plan: Plan) -> dict[str, Any]:
    """The CUDA repository mirror, as the nvidia_driver role's variables (the cuda, nccl and dcgm roles
    configure the repository through it)."""
    if not plan.cluster.cuda_repo:
        return {}
    out: dict[str, Any] = {"nvidia_driver_cuda_repo_base_url": plan.cluster.cuda_repo.rstrip("/")}
    if plan.cluster.cuda_repo_key:
        out["nvidia_driver_cuda_repo_key_url"] = plan.cluster.cuda_repo_key
    if plan.cluster.cuda_repo_key_sha256:
        out["nvidia_driver_cuda_repo_key_checksum"] = plan.cluster.cuda_repo_key_sha256
    return out


def _nccl_fabric_vars(plan: Plan) -> dict[str, Any]:
    """The cloud fabric of each GPU hardware profile (gpudirect-tcpxo, gcp-rdma, efa, ...), when any.

    The vendor-specific roles (roles/gpudirect) pick their nodes by ``clusterctl_hardware`` with it.
    """
    fabrics = {p.hardware: p.fabric for p in plan.nccl if p.fabric}
    out: dict[str, Any] = {"clusterctl_nccl_fabrics": dict(sorted(fabrics.items()))} if fabrics else {}
    # roles/container_runtime: where enroot keeps its data on these profiles (A3 Mega: the local SSDs).
    storage = {p.hardware: p.container_storage for p in plan.nccl if p.container_storage}
    if storage:
        out["clusterctl_container_storage"] = dict(sorted(storage.items()))
    # roles/rdma installs DOCA-OFED and roles/nvidia_driver takes the vendor's GPUDirect path (Azure ND).
    doca = {
        p.hardware: {"version": p.doca.version, "url": p.doca.url, "checksum": p.doca.checksum}
        for p in plan.nccl
        if p.doca
    }
    if doca:
        out["clusterctl_doca"] = dict(sorted(doca.items()))
    gpudirect = {p.hardware: p.gpudirect for p in plan.nccl if p.gpudirect}
    if gpudirect:
        out["clusterctl_gpudirect"] = dict(sorted(gpudirect.items()))
    return out


def _nccl_topologies(plan: Plan) -> dict[str, Any]:
    """roles/nccl's topology file per hardware profile: the rendered file, where it goes, and the
    link NCCL_TOPO_FILE names when the vendor's layout has one (Azure's /opt/microsoft/<family>/topo.xml)."""
    topologies = {
        p.hardware: {
            "src": f"nccl/{p.topo_xml}",
            "dest": p.topo_file or p.topo_path,
            "link": p.topo_path if p.topo_file else "",
        }
        for p in plan.nccl
        if p.topo_xml and p.topo_path
    }
    return {"clusterctl_nccl_topologies": dict(sorted(topologies.items()))} if topologies else {}


def _efa_vars(plan: Plan) -> dict[str, Any]:
    """roles/efa's inputs on AWS EFA clusters: the releases (also in clusterctl_versions) and checksums."""
    stack = next((p.efa for p in plan.nccl if p.efa is not None), None)
    if stack is None:
        return {}
    return {
        "clusterctl_efa": {
            "installer_checksum": stack.installer_checksum or "",
            "ofi_nccl_from_installer": stack.ofi_nccl_from_installer,
            "ofi_nccl_checksum": stack.ofi_nccl_checksum or "",
            "ofi_nccl_libdir": stack.ofi_nccl_libdir,
            "ofi_nccl_files": list(stack.ofi_nccl_files),
            "gdrcopy_checksum": stack.gdrcopy_checksum,
        }
    }


def forks(plan: Plan) -> int:
    """Ansible forks for this cluster: one per node, capped."""
    return max(5, min(len(plan.nodes), MAX_FORKS))
