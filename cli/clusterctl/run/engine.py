"""The ``engine`` layer of a pulled bundle: the Ansible clusterctl runs here, for the nodes to run there.

A node applies its bundle with ``ansible-playbook -c local``. The engine is the control machine's
own: ansible-core and the pure-Python libraries it imports (Jinja2, MarkupSafe, PyYAML,
packaging, resolvelib; their C speedups left out, so the node's Python 3 runs them whatever its
architecture) and the third-party collections the roles name (community.general, ...), so push
and pull run the same versions of the same code. Nodes need only ``python3``.

The archive is built once per set of versions and kept in the user's cache
(``$XDG_CACHE_HOME/clusterctl/engine/``); the same versions give the same bytes, so the same
digest, and a node (or an image) that has it never fetches it again.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path

from clusterctl.paths import roles_dir
from clusterctl.render.bundle import Layer, archive
from clusterctl.run.collections import AnsibleSetupError, collections_path

# The distributions ansible-playbook imports (cryptography only for vault, which the roles never use).
DISTRIBUTIONS = ("ansible-core", "jinja2", "markupsafe", "pyyaml", "packaging", "resolvelib")
_FQCN = re.compile(r"\b(community|ansible)\.([a-z_]+)\.[a-z_]+\b")
_NOT_COLLECTIONS = frozenset({("ansible", "builtin"), ("ansible", "legacy")})


def cache_dir() -> Path:
    """Where built engines are kept, per user."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "clusterctl" / "engine"


def used_collections(roots: Iterable[Path] = ()) -> list[str]:
    """``namespace/name`` of every third-party collection the roles name (by FQCN), sorted."""
    found: set[tuple[str, str]] = set()
    for root in roots or [roles_dir()]:
        for path in sorted(root.rglob("*.yml")):
            if "molecule" in path.parts:
                continue
            found.update(_FQCN.findall(path.read_text(encoding="utf-8", errors="replace")))
    return sorted(f"{ns}/{name}" for ns, name in found - _NOT_COLLECTIONS)


def _distribution_files(name: str) -> list[tuple[str, Path]]:
    dist = importlib.metadata.distribution(name)
    out = []
    for item in dist.files or []:
        rel = str(item)
        if rel.startswith("..") or rel.endswith((".so", ".pyc")) or "__pycache__" in rel or rel.startswith("_yaml/"):
            continue
        path = Path(str(dist.locate_file(item)))
        if path.is_file():
            out.append((f"python/{rel}", path))
    return out


def _collection_files(names: Iterable[str]) -> list[tuple[str, Path]]:
    bases = [Path(p) for p in collections_path().split(os.pathsep) if p]
    out = []
    for name in names:
        base = next((b for b in bases if (b / "ansible_collections" / name).is_dir()), None)
        if base is None:
            raise AnsibleSetupError(f"the collection {name.replace('/', '.')} the roles use is on no collections path")
        root = base / "ansible_collections" / name
        for path in sorted(root.rglob("*")):
            rel = path.relative_to(root)
            if path.is_file() and "__pycache__" not in rel.parts and rel.parts[0] not in ("tests", "docs"):
                out.append((f"collections/ansible_collections/{name}/{rel.as_posix()}", path))
    return out


def engine_key(collections: Iterable[str]) -> str:
    """What the engine is made of: each distribution's and collection's version."""
    versions = {name: importlib.metadata.version(name) for name in DISTRIBUTIONS}
    bases = [Path(p) for p in collections_path().split(os.pathsep) if p]
    for name in collections:
        for base in bases:
            manifest = base / "ansible_collections" / name / "MANIFEST.json"
            if manifest.is_file():
                info = json.loads(manifest.read_text()).get("collection_info", {})
                versions[name] = str(info.get("version", "?"))
                break
    return hashlib.sha256(json.dumps(versions, sort_keys=True).encode()).hexdigest()[:16]


def engine_layer() -> Layer:
    """The engine layer, from the cache or built now (a few seconds, once per set of versions).

    Raises:
        AnsibleSetupError: a distribution or collection it needs is not installed here.
    """
    collections = used_collections()
    try:
        key = engine_key(collections)
    except importlib.metadata.PackageNotFoundError as exc:
        raise AnsibleSetupError(f"{exc} is not installed: the nodes' engine is built from this machine's") from None
    cached = cache_dir() / f"engine-{key}.tar.gz"
    if cached.is_file():
        return Layer("engine", cached.read_bytes())
    files = [entry for name in DISTRIBUTIONS for entry in _distribution_files(name)]
    files += _collection_files(collections)
    entries = [(name, path.read_bytes(), 0o755 if path.stat().st_mode & 0o111 else 0o644) for name, path in files]
    layer = Layer("engine", archive(entries))
    cached.parent.mkdir(parents=True, exist_ok=True)
    temporary = cached.with_name(f".{cached.name}.{os.getpid()}")
    temporary.write_bytes(layer.data)
    temporary.replace(cached)
    return layer
