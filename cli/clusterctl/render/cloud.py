"""Render what provisioning and the cloud fabrics need: the Pulumi stack configuration, the
PXE boot files for bare metal, and the per-job NCCL environment, Slurm prologs and topology
XML of cloud GPU profiles.

Pure like ``render.tree``: every file comes from the plan through the shared Jinja
environment. ``tree.render_files`` calls :func:`provisioning_files` once.

Build-directory layout added here::

    pulumi/Pulumi.<cluster>.yaml            stack configuration for stacks/<provider>
    pxe/dnsmasq.conf                        DHCP (one static lease per MAC) + TFTP
    pxe/tftp/grub/grub.cfg                  unknown machines boot their local disk
    pxe/tftp/grub/grub.cfg-01-<mac>         known machines install their group's autoinstall
    pxe/tftp/pxelinux.cfg/01-<mac>          the same for legacy BIOS
    pxe/http/autoinstall/<group>/user-data  Ubuntu autoinstall (cloud-init) per node group
    pxe/http/autoinstall/<group>/meta-data
    (with a bare-metal image in the lock, the per-machine boot files boot it: render/pxe_image.py)
    nccl/<hw>.env                           per-job NCCL environment (documented, KEY=value)
    nccl/<topology>-topo.xml                NCCL_TOPO_FILE for VM types whose PCI tree is hidden
    slurm/prolog.d/nccl-<hw>.sh             starts the vendor's per-job daemon (GCP RxDM)
    slurm/epilog.d/nccl-<hw>.sh             stops it
    slurm/task_prolog.d/nccl-<hw>.sh        exports the job environment into each task
    enroot/mounts.d/<hw>.fstab              what every pyxis container gets from the node (plan/containers.py)
    enroot/hooks.d/50-clusterctl-nccl.sh    the TaskProlog's NCCL defaults inside every container
"""

from __future__ import annotations

from typing import Any

from jinja2 import Environment

from clusterctl.plan.models import BaremetalMachinePlan, NcclProfile, Plan
from clusterctl.render.escape import RenderError, file_name
from clusterctl.render.health import SLURM_TOOL_PATH
from clusterctl.render.pxe_image import image_pxe_files

# (path, text, mode) -- tree.py wraps these in RenderedFile.
FileSpec = tuple[str, str, int]

EXECUTABLE = 0o755
PUBLIC = 0o644

# The key under which the rendered stack configuration names the plan file. The Pulumi
# programs read the same key (stacks/common/clusterctl_stack.py).
PLAN_CONFIG_KEY = "clusterctl:plan"


def _mac_file(mac: str) -> str:
    """GRUB and PXELINUX look for a per-machine file named 01-<mac with dashes> (01 = Ethernet)."""
    return "01-" + mac.lower().replace(":", "-")


def _provider_config(plan: Plan) -> dict[str, str]:
    cloud = plan.cloud
    config = {PLAN_CONFIG_KEY: "../plan.json"}
    if cloud is None:
        return config
    if cloud.provider == "aws":
        config["aws:region"] = cloud.region
    elif cloud.provider == "gcp":
        config["gcp:region"] = cloud.region
        if cloud.project:
            config["gcp:project"] = cloud.project
        if cloud.zone:
            config["gcp:zone"] = cloud.zone
    else:
        config["azure-native:location"] = cloud.region
    return config


def _nccl_files(plan: Plan, env: Environment, ctx: dict[str, Any]) -> list[FileSpec]:
    out: list[FileSpec] = []
    topologies: set[str] = set()

    def render(name: str, profile: NcclProfile) -> str:
        return env.get_template(name).render(**ctx, profile=profile, slurm_tool=SLURM_TOOL_PATH)

    for profile in plan.nccl:
        hw = profile.hardware
        if profile.job_env or profile.job_env_profile:
            out.append((f"nccl/{hw}.env", render("nccl/job.env.j2", profile), PUBLIC))
            out.append(
                (f"slurm/task_prolog.d/nccl-{hw}.sh", render("slurm/task_prolog.d/nccl.sh.j2", profile), EXECUTABLE)
            )
        if profile.job_daemon is not None:
            out.append((f"slurm/prolog.d/nccl-{hw}.sh", render("slurm/prolog.d/nccl.sh.j2", profile), EXECUTABLE))
            out.append((f"slurm/epilog.d/nccl-{hw}.sh", render("slurm/epilog.d/nccl.sh.j2", profile), EXECUTABLE))
        if plan.slurm.pyxis and profile.container_mounts:
            out.append((f"enroot/mounts.d/{hw}.fstab", render("enroot/mounts.d/nccl.fstab.j2", profile), PUBLIC))
        if profile.topology is not None and profile.topo_xml and profile.topo_xml not in topologies:
            if not file_name(profile.topo_xml).endswith(".xml"):
                raise RenderError("NCCL topology file name", profile.topo_xml, "it must end in .xml")
            topologies.add(profile.topo_xml)
            out.append((f"nccl/{profile.topo_xml}", render("nccl/topo.xml.j2", profile), PUBLIC))
    if plan.slurm.pyxis and plan.slurm.task_prolog:
        text = env.get_template("enroot/hooks.d/nccl.sh.j2").render(**ctx, task_prolog=plan.slurm.task_prolog)
        out.append(("enroot/hooks.d/50-clusterctl-nccl.sh", text, EXECUTABLE))
    return out


def _pxe_files(plan: Plan, env: Environment, ctx: dict[str, Any]) -> list[FileSpec]:
    bm = plan.baremetal
    if bm is None:
        return []
    out: list[FileSpec] = []
    network = plan.cluster.management_cidr.split("/")[0]
    out.append(
        ("pxe/dnsmasq.conf", env.get_template("pxe/dnsmasq.conf.j2").render(**ctx, bm=bm, network=network), PUBLIC)
    )
    out.append(("pxe/tftp/grub/grub.cfg", env.get_template("pxe/grub.cfg.j2").render(**ctx, bm=bm), PUBLIC))
    # Groups with a baked image in the lock boot it (render/pxe_image.py) instead of the installer.
    image_files, imaged = image_pxe_files(bm, env, ctx)
    out.extend(image_files)
    machine: BaremetalMachinePlan
    for machine in (m for m in bm.machines if m.hostname not in imaged):
        name = _mac_file(machine.mac)
        if bm.boot_mode == "UEFI":
            text = env.get_template("pxe/grub-host.cfg.j2").render(**ctx, bm=bm, machine=machine)
            out.append((f"pxe/tftp/grub/grub.cfg-{name}", text, PUBLIC))
        else:
            text = env.get_template("pxe/pxelinux-host.cfg.j2").render(**ctx, bm=bm, machine=machine)
            out.append((f"pxe/tftp/pxelinux.cfg/{name}", text, PUBLIC))
    for group in bm.autoinstall:
        if not group.hosts:
            continue
        base = f"pxe/http/autoinstall/{group.group}"
        out.append(
            (f"{base}/user-data", env.get_template("pxe/user-data.j2").render(**ctx, bm=bm, group=group), PUBLIC)
        )
        out.append(
            (f"{base}/meta-data", env.get_template("pxe/meta-data.j2").render(**ctx, bm=bm, group=group), PUBLIC)
        )
    return out


def provisioning_files(plan: Plan, env: Environment, ctx: dict[str, Any]) -> list[FileSpec]:
    """The provisioning and cloud-fabric files of the build directory for ``plan``.

    Args:
        plan: the resolved plan.
        env: the render's Jinja environment (StrictUndefined, templates/ mirrors the tree).
        ctx: the render context every template gets (``plan``, ``header``, ...).

    Returns:
        ``(path, text, mode)`` for each file; empty for a local cluster without cloud GPUs.
    """
    out: list[FileSpec] = []
    if plan.cloud is not None or plan.baremetal is not None:
        text = env.get_template("pulumi/Pulumi.stack.yaml.j2").render(**ctx, config=_provider_config(plan))
        out.append((f"pulumi/Pulumi.{plan.cluster.name}.yaml", text, PUBLIC))
    out.extend(_nccl_files(plan, env, ctx))
    out.extend(_pxe_files(plan, env, ctx))
    return out
