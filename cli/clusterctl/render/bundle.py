"""The bundles pulling nodes apply: content-addressed layers, built from the plan, the roles and the collection.

A compute node of a provider that delivers the agent at provisioning (``render.pulling``)
configures itself: it applies the bundle of its *kind* (the nodes that share their inventory
groups, hardware profile and health facts, so a thousand nodes of one profile share one bundle),
which has three layers, each a gzip'd tar named by its sha256:

- ``roles``: the roles with ``site.yml``, clusterctl's Ansible collection and the agent's own code
  (the agent updates itself from it); the same for every kind.
- ``files``: what the kind needs of the render and nothing whose size grows with the node count:
  its NCCL, enroot, storage and job files, the health check with one wildcard line of facts,
  plugstack.conf, the slurm.conf keys a configless slurmd starts from, the controllers' and
  login nodes' /etc/hosts lines, its group variables and ``bundle.json`` (its groups, the hosts
  the roles look up).
- ``engine``: ansible-core and its libraries, built on the control machine from the installed
  packages (``clusterctl.run.engine``), not here.

No secret is in any layer: the munge key (and the node's host key) reach the node through its
provider at provisioning. Pure and deterministic: the same plan, roles and collection give the
same bytes (sorted entries, fixed owners, modes and times, gzip without a timestamp).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib.resources import files as package_files
from pathlib import Path, PurePath
from typing import Any

from jinja2 import Environment

from clusterctl.agent import NODE_MODULES as AGENT_MODULES
from clusterctl.agent import SHIPPED
from clusterctl.hostlist import compress
from clusterctl.paths import collections_dir, roles_dir
from clusterctl.plan.models import Plan, PlanNode
from clusterctl.render import ansible_yaml
from clusterctl.render.health import HealthNode, health_nodes
from clusterctl.render.inventory import STANDARD_GROUPS, group_vars, host_groups, host_vars
from clusterctl.render.pulling import pull_nodes

# Where the agent and the bundle server live on the machines, and where the server serves from.
LIB_DIR = "/usr/local/lib/clusterctl/agent"
AGENT_PATH = "/usr/local/sbin/clusterctl-agent"
BUNDLES_PATH = "/usr/local/sbin/clusterctl-bundles"
SERVER_ROOT = "/srv/clusterctl/bundles"
SERVER_PORT = 8780
BUNDLES_DIR = "bundles"
LAYERS_DIR = f"{BUNDLES_DIR}/layers"
INDEX = f"{BUNDLES_DIR}/index.json"
# Host variables that differ node by node: they travel in each node's pointer, never in a bundle.
NODE_VARS = ("clusterctl_ipoib_interfaces", "clusterctl_opensm_priority", "clusterctl_opensm_port")
# Host variables that are the node itself or reach it otherwise (its address, rack, spare flag, connection).
_NOT_BUNDLED = frozenset({"clusterctl_address", "clusterctl_rack", "clusterctl_spare", "ansible_connection"})
_GROUP_SKIP = ("rack_",)
# The keys of slurm.conf a configless slurmd node needs before it fetches the rest from slurmctld
# (the slurm role reads its cluster name, user, directories and controllers from them).
CONFIGLESS_KEYS = (
    "ClusterName",
    "SlurmctldHost",
    "SlurmUser",
    "SlurmctldPort",
    "SlurmdPort",
    "SlurmdSpoolDir",
    "SlurmdLogFile",
    "SlurmctldParameters",
    "AccountingStorageType",
)
_ROLE_SKIP = ("molecule", "__pycache__")


@dataclass(frozen=True)
class Kind:
    """Nodes that apply the same bundle.

    Attributes:
        name: ``<group>-<hardware>-<8 hex>``, for people and file names.
        groups: The inventory groups its nodes are in (racks left out).
        hardware: Their hardware profile.
        host_vars: The host variables they share (group ``bundle`` of the bundle's inventory).
        health: Their health-check facts (host ``*``).
        nodes: Their hostnames, in plan order.
    """

    name: str
    groups: tuple[str, ...]
    hardware: str
    host_vars: Mapping[str, Any]
    health: HealthNode | None
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class Layer:
    """One layer: its name, the archive's bytes and their sha256."""

    name: str
    data: bytes

    @property
    def digest(self) -> str:
        """sha256 of the archive."""
        return hashlib.sha256(self.data).hexdigest()

    @property
    def path(self) -> str:
        """Where it is in the build directory."""
        return f"{LAYERS_DIR}/{self.digest}.tar.gz"


def node_facts(plan: Plan, node: PlanNode) -> dict[str, Any]:
    """What only the plan knows about this one node: it rides in the node's pointer."""
    return {k: v for k, v in host_vars(plan, node).items() if k in NODE_VARS}


def kinds(plan: Plan) -> list[Kind]:
    """The bundles of ``plan``: one per distinct (groups, hardware, shared host variables, health facts)."""
    health = {h.host: h for h in health_nodes(plan)}
    found: dict[str, dict[str, Any]] = {}
    for node in pull_nodes(plan):
        groups = tuple(g for g in sorted(host_groups(plan, node)) if not g.startswith(_GROUP_SKIP))
        shared = {
            k: v
            for k, v in sorted(host_vars(plan, node).items())
            if k not in NODE_VARS and k not in _NOT_BUNDLED and not k.startswith("ansible_")
        }
        entry = health.get(node.hostname)
        facts = (
            None if entry is None else HealthNode("*", entry.gpus, entry.gpu_check, entry.hcas, entry.mounts, entry.efa)
        )
        identity = json.dumps([groups, node.hardware, shared, facts and facts.__dict__], sort_keys=True, default=str)
        key = hashlib.sha256(identity.encode()).hexdigest()[:8]
        kind = found.setdefault(
            key,
            {
                "groups": groups,
                "hardware": node.hardware,
                "vars": shared,
                "health": facts,
                "nodes": [],
                "group": node.group,
            },
        )
        kind["nodes"].append(node.hostname)
    return [
        Kind(
            name=f"{k['group']}-{k['hardware']}-{key}",
            groups=k["groups"],
            hardware=k["hardware"],
            host_vars=k["vars"],
            health=k["health"],
            nodes=tuple(k["nodes"]),
        )
        for key, k in sorted(found.items(), key=lambda item: (item[1]["group"], item[0]))
    ]


def kind_of(plan: Plan) -> dict[str, Kind]:
    """Hostname -> its kind, for every pulling node."""
    return {host: kind for kind in kinds(plan) for host in kind.nodes}


def archive(entries: Iterable[tuple[str, bytes, int]]) -> bytes:
    """A gzip'd tar of ``(name, content, mode)``, deterministic: sorted, root-owned, time 0.

    Directories are implied by the names (the agent makes them); only regular files are written.
    """
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, content, mode in sorted(entries, key=lambda e: e[0]):
            info = tarfile.TarInfo(name)
            info.size = len(content)
            info.mode = mode
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            tar.addfile(info, io.BytesIO(content))
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=6) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def _tree(root: Path, prefix: str, skip: Sequence[str] = _ROLE_SKIP) -> list[tuple[str, bytes, int]]:
    out = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(part in skip for part in rel.parts) or path.suffix == ".pyc" or not path.is_file():
            continue
        mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
        out.append((f"{prefix}/{rel.as_posix()}", path.read_bytes(), mode))
    return out


def agent_files_raw() -> list[tuple[str, bytes, int]]:
    """The agent's code as it runs on the nodes: clusterctl/agent/* and the modules it imports."""
    base = package_files("clusterctl")
    names = ["__init__.py", *SHIPPED, *(f"agent/{name}" for name in AGENT_MODULES)]
    return [(f"clusterctl/{name}", base.joinpath(name).read_bytes(), 0o644) for name in sorted(names)]


@cache
def _roles_layer(stamp: tuple[tuple[str, int, int], ...]) -> Layer:
    del stamp  # the cache key: every file's path, size and mtime
    node_collection = collections_dir() / "ansible_collections" / "clusterctl" / "node"
    entries = _tree(roles_dir(), "roles")
    entries += _tree(node_collection, "collections/ansible_collections/clusterctl/node")
    entries += [(f"agent/{name}", data, mode) for name, data, mode in agent_files_raw()]
    return Layer("roles", archive(entries))


def roles_layer() -> Layer:
    """The roles layer (cached in this process until a file under roles/ or collections/ changes)."""
    roots = [roles_dir(), collections_dir()]
    stamp = tuple(
        (str(p), p.stat().st_size, p.stat().st_mtime_ns)
        for root in roots
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    )
    return _roles_layer(stamp)


def configless_conf(slurm_conf: str, header: str) -> str:
    """The lines of slurm.conf whose keys are in ``CONFIGLESS_KEYS``, under ``header``."""
    keep = [line for line in slurm_conf.splitlines() if line.split("=", 1)[0] in CONFIGLESS_KEYS]
    return (
        f"# {header}\n"
        "# The slurm.conf keys a configless node starts from; slurmd fetches the whole configuration from\n"
        "# slurmctld (--conf-server). Read by the slurm role, never installed.\n" + "\n".join(keep) + "\n"
    )


def _kind_files(plan: Plan, kind: Kind, rendered: Mapping[str, tuple[str, int]]) -> list[tuple[str, str, int]]:
    """The render's files a node of ``kind`` reads (build-directory path, text, mode)."""
    hw = kind.hardware
    topologies = {p.hardware: p.topo_xml for p in plan.nccl if p.topo_xml}
    wanted = {
        "slurm/plugstack.conf",
        "slurm/configless.conf",
        f"slurm/prolog.d/nccl-{hw}.sh",
        f"slurm/epilog.d/nccl-{hw}.sh",
        f"slurm/task_prolog.d/nccl-{hw}.sh",
        f"nccl/{hw}.conf",
        f"enroot/mounts.d/{hw}.fstab",
        f"storage/lnet/{hw}.conf",
        "health/clusterctl-healthcheck",
        "health/clusterctl-dcgm-diag",
        "health/clusterctl-slurm",
    }
    if hw in topologies:
        wanted.add(f"nccl/{topologies[hw]}")
    prefixes = ("slurm/plugstack.conf.d/", "enroot/hooks.d/", f"storage/units/{hw}/", "health/lib/")
    return [
        (path, text, mode)
        for path, (text, mode) in sorted(rendered.items())
        if path in wanted or path.startswith(prefixes)
    ]


def files_layer(plan: Plan, kind: Kind, rendered: Mapping[str, tuple[str, int]], hosts: str, health: str) -> Layer:
    """The ``files`` layer of ``kind`` from the rendered build directory (``path -> (text, mode)``)."""
    spec = PurePath(plan.cluster.spec_file).name  # not its folders: the same bundle wherever the spec sits
    header = f"generated by clusterctl from {spec} for the nodes of kind {kind.name}; do not edit"
    variables = {k: v for k, v in group_vars(plan).items() if k not in ansible_yaml.TEMPLATED}
    others = {
        "controller": [n.hostname for n in plan.nodes if n.role == "controller"],
        "login": [n.hostname for n in plan.nodes if n.role == "login"],
    }
    bundle = {
        "kind": kind.name,
        "groups": list(kind.groups),
        "others": others,
        "empty_groups": sorted(set(STANDARD_GROUPS) - set(kind.groups) - set(others)),
    }
    entries: list[tuple[str, bytes, int]] = [
        (f"render/{path}", text.encode(), mode) for path, text, mode in _kind_files(plan, kind, rendered)
    ]
    entries += [
        # The build directory's marker, without the render's own path (the bundle is the same wherever it was made).
        ("render/DO_NOT_EDIT", f"# {header}\n".encode(), 0o644),
        ("render/hosts", hosts.encode(), 0o644),
        ("render/health/health.conf", health.encode(), 0o644),
        ("inventory/group_vars/all.yml", ansible_yaml.dump(variables, f"# {header}").encode(), 0o644),
        ("inventory/group_vars/bundle.yml", ansible_yaml.dump(dict(kind.host_vars), f"# {header}").encode(), 0o644),
        ("bundle.json", (json.dumps(bundle, indent=1, sort_keys=True) + "\n").encode(), 0o644),
    ]
    return Layer("files", archive(entries))


def index(plan: Plan, built: Sequence[tuple[Kind, Layer]], roles: Layer) -> str:
    """``bundles/index.json``: each kind, its nodes (a hostlist) and its layers (read by ``up``, never sent)."""
    data = {
        "roles": roles.digest,
        "kinds": {
            kind.name: {"files": layer.digest, "nodes": compress(kind.nodes), "hardware": kind.hardware}
            for kind, layer in built
        },
    }
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def server_urls(plan: Plan) -> list[str]:
    """The bundle servers a node asks, in order: every controller's."""
    return [f"http://{address}:{SERVER_PORT}" for address in plan.slurm.controller_addresses]


def agent_files(plan: Plan, env: Environment, ctx: Mapping[str, Any]) -> list[tuple[str, str, int]]:
    """``agent/`` of the build directory: the agent's and the server's commands and units, and their code.

    Only for a plan with pulling nodes. The code (``agent/lib/``) is clusterctl's own, byte for byte
    as the roles layer carries it: the agent compares the two to update itself.
    """
    if not pull_nodes(plan):
        return []
    extra = {
        "lib_dir": LIB_DIR,
        "agent_path": AGENT_PATH,
        "bundles_path": BUNDLES_PATH,
        "server_root": SERVER_ROOT,
        "server_port": SERVER_PORT,
    }

    def tpl(name: str, **more: Any) -> str:
        return env.get_template(name).render(**ctx, **extra, **more)

    out = [
        ("agent/clusterctl-agent", tpl("agent/clusterctl-agent.j2"), 0o755),
        ("agent/clusterctl-agent.service", tpl("agent/clusterctl-agent.service.j2"), 0o644),
        ("agent/clusterctl-bundles", tpl("agent/clusterctl-bundles.j2"), 0o755),
    ]
    # Each controller serves on its own management address (the nodes try them in turn).
    for host, address in zip(plan.slurm.controllers, plan.slurm.controller_addresses, strict=True):
        unit = tpl("agent/clusterctl-bundles.service.j2", server_address=address)
        out.append((f"agent/controllers/{host}/clusterctl-bundles.service", unit, 0o644))
    out += [(f"agent/lib/{name}", data.decode("utf-8"), mode) for name, data, mode in agent_files_raw()]
    return out
