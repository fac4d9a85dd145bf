"""What the image of a hardware profile is made of, and its content hash.

An image holds what ``roles/site.yml``'s install stage puts on a node of one hardware profile. It
is built on one builder host that is in every inventory group the profile's nodes are in (so a
profile used by the controller and the login node gets both roles' packages). Its hash covers what
the install stage reads, and nothing that is only the cluster's, so an unchanged spec rebuilds
nothing, clusters with the same profile share an image, and a changed pin rebuilds only the
profiles whose roles read it:

- ``format``: :data:`clusterctl.image.IMAGE_FORMAT`;
- ``os``, ``arch``, ``base``: the spec's OS, the target's architecture and base image;
- ``groups``: the builder's groups that say what a node is (controller, login, compute, gpu,
  emulated_gpu, ...; not the placement groups ``group_*`` and ``rack_*``);
- ``host_roles``: whether a node of the profile is the accounting host or the Prometheus host
  (the roles install MariaDB and Prometheus there: the install stage compares host names);
- ``plays``: the plays of site.yml whose ``hosts`` pattern takes the builder (their data);
- ``roles``: per role those plays apply, the digest of its install-stage files
  (:func:`role_install_files`);
- ``versions``: the pins (``clusterctl_versions.<key>``) those files and plays read;
- ``vars``: the other inventory variables they read, projected onto the profile, except the
  cluster's own data (:data:`CLUSTER_DATA`) and the node's place (:data:`NODE_HOST_VARS`);
- ``engine``: for a profile whose nodes configure themselves, the versions of the agent's engine
  layer baked into the image (``clusterctl.run.engine``), so a node made from it fetches only the
  roles and its files.

So the NVIDIA driver's pin enters the hash of a profile whose nodes are in ``gpu`` (site.yml
applies the GPU roles there) and no other: not a CPU-only profile's, and not an emulated-GPU
profile's on the local cluster (those nodes are in ``emulated_gpu``, which the GPU plays leave out).
"""

from __future__ import annotations

import copy
import fnmatch
import functools
import hashlib
import json
import platform
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from clusterctl.image import IMAGE_FORMAT
from clusterctl.paths import roles_dir
from clusterctl.plan.models import Plan, PlanNode
from clusterctl.render.inventory import group_vars, inventory
from clusterctl.render.pulling import pulls
from clusterctl.run.engine import engine_key, used_collections

BUILDER_HOSTNAME = "clusterctl-image"
"""The builder's inventory name (and its container's host name): no node of any cluster."""

# Inventory groups that place a node (which node group, which rack), not what it is.
_PLACEMENT_GROUP = re.compile(r"^(group|rack)_")
CLUSTER_DATA = frozenset(
    {
        "clusterctl_cluster_name",
        "clusterctl_domain",
        "clusterctl_render_dir",
        "clusterctl_controllers",
        "clusterctl_prometheus_host",
        "clusterctl_slurm_dbd_host",
        "clusterctl_burst_groups",
    }
)
"""Variables that are the cluster's own (names, addresses, which host does what): never in a hash.
What the install stage needs from the host names is in ``host_roles``."""
NODE_HOST_VARS = frozenset(
    {
        "clusterctl_address",
        "clusterctl_group",
        "clusterctl_hardware",
        "clusterctl_rack",
        "clusterctl_spare",
        "clusterctl_burst",
        "clusterctl_ipoib_interfaces",
        "clusterctl_opensm_priority",
        "clusterctl_opensm_port",
    }
)
"""Host variables of one node (its address, place, name of its profile): never in a hash."""
_PER_PROFILE = (
    "clusterctl_nccl_fabrics",
    "clusterctl_nccl_topologies",
    "clusterctl_container_storage",
    "clusterctl_doca",
    "clusterctl_gpudirect",
)

_INCLUDE_TASKS = {"import_tasks", "include_tasks", "ansible.builtin.import_tasks", "ansible.builtin.include_tasks"}
_INCLUDE_ROLE = {"import_role", "include_role", "ansible.builtin.import_role", "ansible.builtin.include_role"}
_TASK_LISTS = ("pre_tasks", "tasks", "post_tasks", "handlers", "block", "rescue", "always")
_SKIPPED_DIRS = {"molecule", "tests", "__pycache__"}
_VERSION_REF = re.compile(
    r"clusterctl_versions(?:\s*\.\s*(?P<attr>[A-Za-z_][A-Za-z0-9_]*)"
    r"|\s*\[\s*['\"](?P<item>[^'\"]+)['\"]\s*\]"
    r"|\s*\.\s*get\(\s*['\"](?P<get>[^'\"]+)['\"])?"
)
_VAR_REF = re.compile(r"\bclusterctl_[a-z0-9_]+\b")
_QUOTED_NAME = re.compile(r"['\"]([A-Za-z0-9_.-]+)['\"]")


class ImageInputError(Exception):
    """The roles cannot be read to hash them; the message names the file."""


@dataclass(frozen=True)
class Builder:
    """The one host an image of ``profile`` is built on.

    Attributes:
        profile: The hardware profile.
        hostname: Its inventory name (:data:`BUILDER_HOSTNAME`).
        nodes: The nodes of the plan the image is for.
        groups: Every inventory group those nodes are in.
        host_vars: The ``clusterctl_*`` host variables of the first of them (the install stage may
            validate them; only the profile's own enter the hash).
        group_vars: The render's group variables, with the nodes' names replaced by the builder's
            (so a check ``inventory_hostname == clusterctl_slurm_dbd_host`` holds on the builder).
    """

    profile: str
    hostname: str
    nodes: tuple[str, ...]
    groups: tuple[str, ...]
    host_vars: dict[str, Any]
    group_vars: dict[str, Any]

    @property
    def kind_groups(self) -> tuple[str, ...]:
        """The groups that say what the nodes are (not where they sit)."""
        return tuple(g for g in self.groups if not _PLACEMENT_GROUP.match(g))


@dataclass(frozen=True)
class ImageHash:
    """The content hash of one profile's image and the inputs it covers.

    Attributes:
        profile: The hardware profile.
        hash: sha256 (hex) of the canonical JSON of ``inputs``.
        inputs: What the hash covers, compact: versions and scalar variables by value, files and
            larger values by digest (kept in the lock, so a mismatch can say what changed).
        roles: The roles site.yml applies to the builder, in play order.
    """

    profile: str
    hash: str
    inputs: dict[str, Any] = field(default_factory=dict)
    roles: tuple[str, ...] = ()

    @property
    def short(self) -> str:
        """The first 12 hex digits (image tags)."""
        return self.hash[:12]


def canonical_json(data: Any) -> str:
    """JSON with sorted keys and no spaces: the same data always gives the same text."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)


def _digest(data: Any) -> str:
    return hashlib.sha256(canonical_json(data).encode()).hexdigest()


def normalize_arch(machine: str) -> str:
    """Debian's architecture name for a kernel's or Docker's (``x86_64`` -> ``amd64``)."""
    value = machine.strip().lower()
    return {"x86_64": "amd64", "x64": "amd64", "aarch64": "arm64", "armv8": "arm64"}.get(value, value)


def host_arch() -> str:
    """This machine's architecture, Debian's name (the local target builds for it)."""
    return normalize_arch(platform.machine())


# --- the plan side: profiles and their builder ------------------------------------------------


def profile_nodes(plan: Plan, profile: str) -> list[PlanNode]:
    """The nodes an image of ``profile`` is for: its static nodes, else its burst nodes."""
    nodes = [n for n in plan.nodes if n.hardware == profile]
    static = [n for n in nodes if not n.burst]
    return static or nodes


def profiles(plan: Plan) -> list[str]:
    """The hardware profiles the plan's nodes use, sorted."""
    return sorted({n.hardware for n in plan.nodes})


def _rename_hosts(value: Any, names: frozenset[str], to: str) -> Any:
    if isinstance(value, str):
        return to if value in names else value
    if isinstance(value, list):
        return [_rename_hosts(v, names, to) for v in value]
    if isinstance(value, dict):
        return {k: _rename_hosts(v, names, to) for k, v in value.items()}
    return value


def builder_for(plan: Plan, profile: str) -> Builder:
    """The builder host of ``profile``'s image (see :class:`Builder`).

    Raises:
        KeyError: no node of the plan uses ``profile``.
    """
    nodes = profile_nodes(plan, profile)
    if not nodes:
        raise KeyError(profile)
    names = frozenset(n.hostname for n in nodes)
    inv = inventory(plan)["all"]
    groups = sorted(g for g, members in inv["children"].items() if names & set(members.get("hosts") or {}))
    host_vars = {k: v for k, v in inv["hosts"][nodes[0].hostname].items() if k.startswith("clusterctl_")}
    return Builder(
        profile=profile,
        hostname=BUILDER_HOSTNAME,
        nodes=tuple(sorted(names)),
        groups=tuple(groups),
        host_vars=host_vars,
        group_vars=_rename_hosts(group_vars(plan), names, BUILDER_HOSTNAME),
    )


def _host_roles(plan: Plan, builder: Builder) -> dict[str, bool]:
    names = set(builder.nodes)
    return {
        "slurm_dbd_host": bool(plan.slurm.accounting) and plan.slurm.dbd_host in names,
        "prometheus_host": plan.monitoring.prometheus_host in names,
    }


# --- the roles side: site.yml's plays and each role's install stage ----------------------------


def _load_yaml(path: Path) -> Any:
    try:
        info = path.stat()
    except OSError as exc:
        raise ImageInputError(f"{path} cannot be read: {exc}") from None
    return copy.deepcopy(_parse_yaml(path, info.st_mtime_ns, info.st_size))


@functools.lru_cache(maxsize=512)
def _parse_yaml(path: Path, mtime_ns: int, size: int) -> Any:
    """A YAML file's data, parsed once per version of the file (the key holds its time and size)."""
    try:
        return YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, YAMLError) as exc:
        raise ImageInputError(f"{path} cannot be read: {exc}") from None


def site_plays(roles_root: Path) -> list[dict[str, Any]]:
    """The plays of ``site.yml`` (``import_playbook`` expanded), in order.

    Raises:
        ImageInputError: site.yml (or a playbook it imports) is missing or not YAML.
    """

    def read(path: Path, depth: int) -> list[dict[str, Any]]:
        data = _load_yaml(path)
        if not isinstance(data, list):
            raise ImageInputError(f"{path} is not a list of plays")
        plays: list[dict[str, Any]] = []
        for play in data:
            if not isinstance(play, dict):
                continue
            imported = play.get("import_playbook") or play.get("ansible.builtin.import_playbook")
            if isinstance(imported, str) and depth < 8 and "{{" not in imported:
                plays.extend(read(path.parent / imported, depth + 1))
            else:
                plays.append(play)
        return plays

    return read(roles_root / "site.yml", 0)


def host_matches(pattern: Any, hostname: str, groups: Iterable[str]) -> bool:
    """Whether Ansible's host ``pattern`` (``a:b:&c:!d``, or a list) takes ``hostname`` in ``groups``.

    Patterns Ansible templates, or regular expressions (``~``), are taken to match: a host the
    image might need is never left out.
    """
    member = {"all", "*", hostname, *groups}
    if isinstance(pattern, list):
        terms = [str(t).strip() for t in pattern]
    else:
        text = str(pattern or "")
        if "{{" in text:
            return True
        terms = [t.strip() for t in re.split(r"[:,]", text)]

    def concrete(term: str) -> bool:
        return not term.startswith("~") and "{{" not in term

    def hit(term: str) -> bool:
        return not concrete(term) or any(fnmatch.fnmatchcase(m, term) for m in member)

    plain = [t for t in terms if t and t[0] not in "!&"]
    required = [t[1:] for t in terms if t.startswith("&")]
    # Only a concrete exclusion leaves the host out.
    excluded = [t[1:] for t in terms if t.startswith("!") and concrete(t[1:])]
    return any(hit(t) for t in plain) and all(hit(t) for t in required) and not any(hit(t) for t in excluded)


def _tasks(items: Any) -> Iterator[dict[str, Any]]:
    """Every task of a task list, blocks' tasks included."""
    if not isinstance(items, list):
        return
    for task in items:
        if not isinstance(task, dict):
            continue
        yield task
        for key in ("block", "rescue", "always"):
            yield from _tasks(task.get(key))


def _strings(data: Any) -> Iterator[str]:
    if isinstance(data, str):
        yield data
    elif isinstance(data, dict):
        for key, value in data.items():
            yield str(key)
            yield from _strings(value)
    elif isinstance(data, list):
        for value in data:
            yield from _strings(value)


def play_roles(play: Mapping[str, Any], known: Iterable[str]) -> list[str]:
    """The roles a play applies (``roles:``, ``include_role``/``import_role``), in order.

    A role named by a template (``name: "{{ item }}"``) is looked up in the task's loop: every
    known role named there counts, whatever the task's conditions (over-including is safe).
    """
    names = set(known)
    found: list[str] = []

    def add(name: Any) -> None:
        if isinstance(name, str) and name and name not in found:
            found.append(name)

    for entry in play.get("roles") or []:
        add(entry.get("role") or entry.get("name") if isinstance(entry, dict) else entry)
    for key in ("pre_tasks", "tasks", "post_tasks", "handlers"):
        for task in _tasks(play.get(key)):
            for module in _INCLUDE_ROLE & set(task):
                args = task[module]
                name = args.get("name") if isinstance(args, dict) else args
                if isinstance(name, str) and "{{" in name:
                    loop = task.get("loop", task.get("with_items", task.get("with_list")))
                    for text in _strings(loop):
                        for word in [text, *_QUOTED_NAME.findall(text)]:
                            if word in names:
                                add(word)
                else:
                    add(name)
    return found


def _role_files(role: Path) -> list[str]:
    """The role's files (relative POSIX paths, sorted), without tests, docs and byte code."""
    out: list[str] = []
    for path in role.rglob("*"):
        rel = path.relative_to(role)
        if any(part in _SKIPPED_DIRS or part.startswith(".") for part in rel.parts):
            continue
        if path.is_file() and not path.is_symlink() and path.suffix not in (".md", ".pyc"):
            out.append(rel.as_posix())
    return sorted(out)


def _tags(task: Mapping[str, Any], inherited: frozenset[str]) -> frozenset[str]:
    tags = task.get("tags", [])
    if isinstance(tags, str):
        tags = [t.strip() for t in tags.split(",")]
    return inherited | frozenset(str(t) for t in tags or [])


def _includes(task: Mapping[str, Any]) -> list[str]:
    """Task files a task imports or includes, by their literal name (templated names are unknown)."""
    out: list[str] = []
    for module in _INCLUDE_TASKS & set(task):
        args = task[module]
        name = args.get("file") if isinstance(args, dict) else args
        if isinstance(name, str) and "{{" not in name:
            out.append(name if name.endswith((".yml", ".yaml")) else f"{name}.yml")
    return out


def _is_configure(tags: frozenset[str]) -> bool:
    """A stage tag says configure or run, and none says install (``always`` and validate count as install)."""
    stage = {t for t in tags if t.endswith(("_install", "_configure", "_run")) or t == "always"}
    return bool(stage) and not any(t.endswith("_install") or t == "always" for t in stage)


def role_install_files(role: Path) -> list[str]:
    """The files of ``role`` that its install stage uses (relative paths, sorted).

    Every file of the role except: Molecule scenarios, tests and docs; the task files that
    ``tasks/main.yml`` imports only under the ``<role>_configure``/``<role>_run`` tags (and what
    only they include); and templates and files only those task files name. What cannot be told
    apart (a file no task names, a task file included by a templated name) stays in: an image
    rebuilt once too often is cheap, one built from stale inputs is not.

    Raises:
        ImageInputError: a task file is not YAML.
    """
    files = _role_files(role)
    task_files = [f.removeprefix("tasks/") for f in files if f.startswith("tasks/") and f.endswith((".yml", ".yaml"))]
    data = {name: _load_yaml(role / "tasks" / name) for name in task_files}
    edges = {name: [i for task in _tasks(data[name]) for i in _includes(task)] for name in task_files}

    install_roots: set[str] = {"main.yml"}
    configure_roots: set[str] = set()

    def classify(items: Any, inherited: frozenset[str]) -> None:
        for task in items if isinstance(items, list) else []:
            if not isinstance(task, dict):
                continue
            tags = _tags(task, inherited)
            for name in _includes(task):
                (configure_roots if _is_configure(tags) else install_roots).add(name)
            for key in ("block", "rescue", "always"):
                classify(task.get(key), tags)

    classify(data.get("main.yml"), frozenset())

    def closure(roots: set[str]) -> set[str]:
        seen: set[str] = set()
        todo = list(roots)
        while todo:
            name = todo.pop()
            if name in seen or name not in edges:
                continue
            seen.add(name)
            todo.extend(edges[name])
        return seen

    # main.yml's own imports are classified above; the files it names are followed from there.
    edges["main.yml"] = []
    install = closure(install_roots)
    configure = closure(configure_roots) - install
    # Templates and files named only by configure-stage task files.
    assets = [f for f in files if f.startswith(("templates/", "files/"))]
    named_by: dict[str, set[str]] = {a: set() for a in assets}
    for name in task_files:
        text = "\n".join(_strings(data[name]))
        for asset in assets:
            short = asset.split("/", 1)[1]
            if short in text:
                named_by[asset].add(name)
    configure_assets = {a for a, users in named_by.items() if users and users <= configure}
    excluded = {f"tasks/{n}" for n in configure} | configure_assets
    return [f for f in files if f not in excluded]


def _file_digest(root: Path, files: Iterable[str]) -> str:
    lines = []
    for rel in files:
        lines.append(f"{rel}\0{hashlib.sha256((root / rel).read_bytes()).hexdigest()}\n")
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def _text(root: Path, files: Iterable[str]) -> str:
    return "\n".join((root / rel).read_bytes().decode("utf-8", errors="ignore") for rel in files)


def _compact(value: Any) -> Any:
    """Scalars as they are; lists and maps by digest (the lock keeps the inputs small)."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return "sha256:" + _digest(value)[:16]


def _project(name: str, value: Any, profile: str) -> Any:
    """The part of an inventory variable that concerns one profile's install stage."""
    if name in _PER_PROFILE and isinstance(value, dict):
        return value.get(profile)
    if name == "clusterctl_storage" and isinstance(value, list):
        # Which clients to install, not where they mount.
        kinds = {(t.get("kind"), bool(t.get("requires_lnet")), bool(t.get("managed"))) for t in value}
        return [{"kind": k, "requires_lnet": lnet, "managed": managed} for k, lnet, managed in sorted(kinds)]
    return value


def known_roles(roles_root: Path) -> list[str]:
    """The roles under ``roles_root`` (directories with ``tasks/``)."""
    if not roles_root.is_dir():
        return []
    return sorted(p.name for p in roles_root.iterdir() if (p / "tasks").is_dir())


def profile_hash(
    plan: Plan,
    profile: str,
    *,
    arch: str | None = None,
    base: str = "",
    roles_root: Path | None = None,
) -> ImageHash:
    """The content hash of ``profile``'s image (see the module docstring for what it covers).

    Args:
        plan: The cluster.
        profile: One of :func:`profiles`.
        arch: The target's architecture (Debian's name); this machine's by default.
        base: The target's base image (local: the provider's image name).
        roles_root: The roles and site.yml (clusterctl's own by default).

    Raises:
        KeyError: no node uses ``profile``.
        ImageInputError: site.yml or a role's task file cannot be read.
    """
    root = roles_root or roles_dir()
    builder = builder_for(plan, profile)
    known = known_roles(root)
    plays = [p for p in site_plays(root) if host_matches(p.get("hosts"), builder.hostname, builder.groups)]
    applied: list[str] = []
    for play in plays:
        applied.extend(r for r in play_roles(play, known) if r not in applied)
    role_digests: dict[str, str] = {}
    texts = [canonical_json(plays)]
    for role in applied:
        role_dir = root / role
        if not (role_dir / "tasks").is_dir():
            # A role from a collection: named, not hashed (the lock's collections_hash covers it).
            role_digests[role] = "external"
            continue
        files = role_install_files(role_dir)
        role_digests[role] = _file_digest(role_dir, files)
        texts.append(_text(role_dir, files))
    text = "\n".join(texts)

    versions = plan.cluster.versions
    keys: set[str] = set()
    for match in _VERSION_REF.finditer(text):
        key = match.group("attr") or match.group("item") or match.group("get")
        if key is None or key == "get":
            keys = set(versions)  # the whole map is read
            break
        keys.add(key)
    read = {k: versions[k] for k in sorted(keys) if k in versions}

    variables: dict[str, Any] = {}
    for name in sorted(set(_VAR_REF.findall(text))):
        if name == "clusterctl_versions" or name in CLUSTER_DATA or name in NODE_HOST_VARS:
            continue
        if name in builder.group_vars:
            variables[name] = _compact(_project(name, builder.group_vars[name], profile))
        elif name in builder.host_vars:
            variables[name] = _compact(builder.host_vars[name])

    # The nodes of a profile that configure themselves find the agent's engine in their image.
    engine = (
        engine_key(used_collections([root]))
        if any(pulls(plan, n) for n in plan.nodes if n.hardware == profile and not n.burst)
        else None
    )
    inputs: dict[str, Any] = {
        "format": IMAGE_FORMAT,
        "os": plan.cluster.os,
        "arch": arch or host_arch(),
        "base": base,
        "groups": list(builder.kind_groups),
        "host_roles": _host_roles(plan, builder),
        "plays": "sha256:" + _digest(plays)[:16],
        "roles": role_digests,
        "versions": read,
        "vars": variables,
        **({"engine": engine} if engine else {}),
    }
    # The role digests are full sha256 in the hash; the inputs the lock keeps are short.
    digest = _digest(inputs)
    compact = {**inputs, "roles": {r: d if d == "external" else d[:16] for r, d in role_digests.items()}}
    return ImageHash(profile=profile, hash=digest, inputs=compact, roles=tuple(applied))


def explain(locked: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """What differs between the inputs a lock recorded and the current ones, one phrase each."""
    out: list[str] = []
    for key in ("format", "os", "arch", "base"):
        if locked.get(key) != current.get(key):
            out.append(f"{key} {locked.get(key) or '(none)'} -> {current.get(key) or '(none)'}")
    if locked.get("groups") != current.get("groups"):
        out.append(f"inventory groups {locked.get('groups')} -> {current.get('groups')}")
    if locked.get("host_roles") != current.get("host_roles"):
        out.append("which of its nodes hosts accounting or Prometheus")
    if locked.get("plays") != current.get("plays"):
        out.append("site.yml's plays for it")
    for section, what in (("versions", "versions."), ("vars", "")):
        out += _entry_changes(
            locked.get(section) or {},
            current.get(section) or {},
            gone=what + "{name} no longer read",
            added=what + "{name} {new} now read",
            changed=what + "{name} {old} -> {new}",
        )
    out += _entry_changes(
        locked.get("roles") or {},
        current.get("roles") or {},
        gone="role {name} no longer applied",
        added="role {name} now applied",
        changed="roles/{name}'s install stage changed",
    )
    return out


def _entry_changes(old: Mapping[str, Any], new: Mapping[str, Any], *, gone: str, added: str, changed: str) -> list[str]:
    """One phrase per name whose entry went, came or changed; the phrases are formats of name, old and new."""
    out: list[str] = []
    for name in sorted(set(old) | set(new)):
        if name not in new:
            out.append(gone.format(name=name))
        elif name not in old:
            out.append(added.format(name=name, new=new[name]))
        elif old[name] != new[name]:
            out.append(changed.format(name=name, old=old[name], new=new[name]))
    return out


def roles_hash(roles_root: Path | None = None) -> str:
    """sha256 over every file of the roles and site.yml (tests and docs left out)."""
    root = roles_root or roles_dir()
    return _file_digest(root, _role_files(root))


def collections_hash(paths: Iterable[Path], names: Iterable[str]) -> str:
    """sha256 over the Ansible collections the roles use: each one's name, version and file list digest.

    ``paths`` are collection roots (directories holding ``ansible_collections``); the first that
    holds a collection wins, as in Ansible. A collection found nowhere counts as ``missing``.
    """
    parts: dict[str, Any] = {}
    for name in sorted(names):
        entry: Any = "missing"
        for base in paths:
            folder = base / "ansible_collections" / name
            manifest = folder / "MANIFEST.json"
            if manifest.is_file():
                try:
                    info = json.loads(manifest.read_text(encoding="utf-8")).get("collection_info", {})
                except ValueError:
                    info = {}
                listing = folder / "FILES.json"
                entry = {
                    "version": info.get("version", ""),
                    "files": hashlib.sha256(listing.read_bytes()).hexdigest() if listing.is_file() else "",
                }
                break
        parts[name] = entry
    return _digest(parts)
