"""Render the continuous node health checks the roles install: ``health/`` in the build directory.

Build-directory layout added here::

    health/clusterctl-healthcheck   Slurm HealthCheckProgram (NHC style): GPUs present, driver
                                    loaded, InfiniBand ports up, mounts present; drains on failure
    health/clusterctl-dcgm-diag     Slurm Prolog/Epilog: dcgmi diag -r 1; drains on failure
    health/health.conf              per-node facts both scripts read (one line per Slurm node)
    health/clusterctl-slurm         runs clusterctl's Slurm module on the node: the health check asks
                                    it for the node's drain reason, the heal timer runs its rounds
    health/lib/clusterctl/slurm/    that module (clusterctl.slurm's NODE_MODULES, as this clusterctl
                                    has them): one Slurm parser and heal decision everywhere
    health/heal.json                the heal timer's config: the key, the pinned host keys, the
                                    plan's address of each compute node (only with slurm.heal_every)
    health/clusterctl-heal.service  one round of the controller's heal timer, and its .timer

The scripts are the same on every node; what differs per node lives in ``health.conf``, so
one file set serves the whole cluster. Pure like ``render.tree``, which calls
:func:`health_files` once.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.resources import files
from typing import Any

from jinja2 import Environment

from clusterctl import __version__
from clusterctl.catalog.tools import RAILS_PATH
from clusterctl.hostlist import HostlistError, expand
from clusterctl.plan.models import Plan, PlanNode
from clusterctl.render.escape import Escaped, RenderError, show
from clusterctl.slurm import NODE_MODULES
from clusterctl.slurm.commands import SCONTROL_TIMEOUT_S
from clusterctl.slurm.reasons import HEALTH

# (path, text, mode) -- tree.py wraps these in RenderedFile.
FileSpec = tuple[str, str, int]

EXECUTABLE = 0o755
PUBLIC = 0o644
# Where the roles install the files (the scripts' defaults point here).
CONF_PATH = "/etc/clusterctl/health.conf"
HEALTHCHECK_PATH = "/usr/local/sbin/clusterctl-healthcheck"
DCGM_DIAG_PATH = "/usr/local/sbin/clusterctl-dcgm-diag"
# clusterctl's Slurm module on the nodes, and the command that runs it.
SLURM_TOOL_PATH = "/usr/local/sbin/clusterctl-slurm"
LIB_DIR = "/usr/local/lib/clusterctl/python"
# The controller's key for the health check on the nodes (their authorized_keys force that command).
HEAL_KEY_PATH = "/etc/clusterctl/heal/id_ed25519"
HEAL_KNOWN_HOSTS_PATH = "/etc/clusterctl/heal/known_hosts"
HEAL_CONFIG_PATH = "/etc/clusterctl/heal/heal.json"
HEAL_CHECK_TIMEOUT_S = 120
# Drains by these scripts carry this prefix; the health check resumes only its own drains.
REASON_PREFIX = HEALTH
# Fabrics whose HCAs appear under /sys/class/infiniband with an ACTIVE/DOWN port state.
_IB_FABRICS = ("infiniband", "roce")


@dataclass(frozen=True)
class HealthNode:
    """One line of health.conf.

    Attributes:
        host: The node's hostname (``hostname -s`` on the node).
        gpus: GPUs it must have.
        gpu_check: ``nvidia-smi`` for real GPUs, ``devices`` for emulated ones, ``none``.
        hcas: Rail HCAs (PCI addresses or RDMA device names, as the spec names them) whose ports
            must be ACTIVE; the script finds each one's device in the node's sysfs.
        mounts: Mount points that must be mounted.
        efa: EFA devices an AWS EFA node must have (0: not an EFA node).
    """

    host: str
    gpus: int
    gpu_check: str
    hcas: tuple[str, ...]
    mounts: tuple[str, ...]
    efa: int = 0


def _gpu_check(node: PlanNode) -> str:
    if not node.gpus:
        return "none"
    return "devices" if node.emulated else "nvidia-smi"


def health_nodes(plan: Plan) -> list[HealthNode]:
    """The health.conf entries: every Slurm node (compute role), in plan order.

    IB ports are checked on real nodes of an InfiniBand or RoCE fabric only; mounts are
    the plan's storage tiers that list the node among their hosts.
    """
    mounts_of: dict[str, list[str]] = {}
    for tier in plan.storage:
        try:
            hosts = expand(tier.hosts) if tier.hosts else []
        except HostlistError as exc:
            raise RenderError("health.conf", tier.hosts, f"it is not a host list: {show(str(exc), 80)}") from None
        for host in hosts:
            mounts_of.setdefault(host, []).append(tier.mount)
    ib = plan.fabric.kind in _IB_FABRICS
    # The EFA devices of each AWS EFA node's instance type (the cluster's groups and burst groups).
    efa: dict[str, int] = {}
    for cloud in [plan.cloud, *plan.burst_cloud.values()]:
        for group in cloud.groups if cloud is not None else []:
            if group.fabric == "efa":
                efa.update(dict.fromkeys(group.hosts, group.efa_interfaces))
    return [
        HealthNode(
            host=node.hostname,
            gpus=node.gpus,
            gpu_check=_gpu_check(node),
            hcas=tuple(node.rails) if ib and not node.emulated else (),
            mounts=tuple(mounts_of.get(node.hostname, [])),
            efa=0 if node.emulated else efa.get(node.hostname, 0),
        )
        for node in plan.nodes
        if node.role == "compute"
    ]


def heal_config(plan: Plan) -> dict[str, object]:
    """The heal timer's config: where its key and pinned host keys are, and each compute node's plan address.

    The timer connects to these addresses only, never to the NodeAddr Slurm reports.
    """
    return {
        "key": HEAL_KEY_PATH,
        "known_hosts": HEAL_KNOWN_HOSTS_PATH,
        "check_timeout_s": HEAL_CHECK_TIMEOUT_S,
        "scontrol_timeout_s": SCONTROL_TIMEOUT_S,
        "addresses": {n.hostname: n.address for n in plan.nodes if n.role == "compute" and not n.burst},
    }


def module_files(env: Environment, ctx: dict[str, Any]) -> list[FileSpec]:
    """clusterctl.slurm's node modules, each under the render's header, as this clusterctl has them."""
    package = files("clusterctl.slurm")
    template = env.get_template("health/lib/module.py.j2")
    out = [
        (
            "health/lib/clusterctl/__init__.py",
            env.get_template("health/lib/clusterctl/__init__.py.j2").render(**ctx),
            PUBLIC,
        )
    ]
    for name in NODE_MODULES:
        # clusterctl's own code, not a value from the spec: written as it is.
        source = Escaped(package.joinpath(name).read_text(encoding="utf-8").rstrip("\n"))
        text = template.render(**ctx, module=name, version=__version__, source=source)
        out.append((f"health/lib/clusterctl/slurm/{name}", text, PUBLIC))
    return out


def health_files(plan: Plan, env: Environment, ctx: dict[str, Any]) -> list[FileSpec]:
    """The ``health/`` files of the build directory for ``plan``.

    Args:
        plan: The resolved plan.
        env: The render's Jinja environment.
        ctx: The render context every template gets (``plan``, ``header``, ...).

    Returns:
        ``(path, text, mode)`` for the two scripts and their config, clusterctl's Slurm module and
        its command, and the heal timer's files.
    """
    extra: dict[str, object] = {
        "nodes": health_nodes(plan),
        "driver_pin": plan.cluster.versions.get("nvidia_driver", "-"),
        "conf_path": CONF_PATH,
        "rails_path": RAILS_PATH,
        "reason_prefix": REASON_PREFIX,
        "tool_path": SLURM_TOOL_PATH,
        "lib_dir": LIB_DIR,
    }

    def tpl(name: str) -> str:
        return env.get_template(name).render(**ctx, **extra)

    files = [
        ("health/health.conf", tpl("health/health.conf.j2"), PUBLIC),
        ("health/clusterctl-healthcheck", tpl("health/clusterctl-healthcheck.sh.j2"), EXECUTABLE),
        ("health/clusterctl-dcgm-diag", tpl("health/clusterctl-dcgm-diag.sh.j2"), EXECUTABLE),
        ("health/clusterctl-slurm", tpl("health/clusterctl-slurm.j2"), EXECUTABLE),
        *module_files(env, ctx),
    ]
    if plan.slurm.heal_interval_s is not None:
        extra |= {
            "interval_s": plan.slurm.heal_interval_s,
            "config_path": HEAL_CONFIG_PATH,
            "check_timeout_s": HEAL_CHECK_TIMEOUT_S,
            "scontrol_timeout_s": int(SCONTROL_TIMEOUT_S),
            "config": {"_comment": ctx["header"], **heal_config(plan)},
        }
        files += [
            ("health/heal.json", tpl("health/heal.json.j2"), PUBLIC),
            ("health/clusterctl-heal.service", tpl("health/clusterctl-heal.service.j2"), PUBLIC),
            ("health/clusterctl-heal.timer", tpl("health/clusterctl-heal.timer.j2"), PUBLIC),
        ]
    return files
