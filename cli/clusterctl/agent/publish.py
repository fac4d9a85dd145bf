"""What ``up`` runs on the controller to publish: layers and pointers into the bundle server's directory.

``publish ROOT --have`` prints the digests of the layers the server has (so ``up`` sends only the
others). ``publish ROOT`` reads a tar on stdin: ``layers/<sha256>.tar.gz`` (each checked against
its name), ``nodes/<node>.json`` (the signed pointers) and ``nodes.json`` (every node that has a
pointer now). Layers are renamed into place first, then each pointer (a rename: a waiting node
never reads half a file), then the pointers of nodes no longer listed are removed and the layers
no pointer names are deleted. It prints what it did as one JSON line.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
import tarfile
from pathlib import Path

from ..bounded import BoundsError, json_document

_LAYER = re.compile(r"layers/(?P<digest>[0-9a-f]{64})\.tar\.gz")
_POINTER = re.compile(r"nodes/(?P<node>[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?)\.json")
MAX_POINTER_BYTES = 64 * 1024
MAX_LAYER_BYTES = 1024 * 1024 * 1024
MAX_MEMBERS = 200_000


class PublishError(Exception):
    """The input is not what ``up`` sends."""


def have(root: Path) -> list[str]:
    """The layers the server has."""
    folder = root / "layers"
    return sorted(
        found.group("digest") for p in folder.glob("*.tar.gz") if (found := _LAYER.fullmatch(f"layers/{p.name}"))
    )


def _referenced(root: Path) -> set[str]:
    """Every layer digest a pointer in ``nodes/`` names (the pointer's signature is the nodes' business)."""
    wanted: set[str] = set()
    for path in (root / "nodes").glob("*.json"):
        try:
            document = json_document(path.read_text(encoding="utf-8")[:MAX_POINTER_BYTES], "pointer", max_depth=8)
            layers = document["pointer"]["layers"]
        except (OSError, UnicodeDecodeError, BoundsError, KeyError, TypeError):
            continue
        wanted.update(str(layer[1]) for layer in layers if isinstance(layer, list) and len(layer) == 2)
    return wanted


def publish(root: Path, stream: object) -> dict[str, object]:
    """Take the tar in ``stream`` (a binary file) into ``root``; returns what was done.

    Raises:
        PublishError: A member that is not a layer, a pointer or the node list; a layer whose content
            is not its digest (nothing of this input is published then).
    """
    incoming = root / ".incoming"
    shutil.rmtree(incoming, ignore_errors=True)
    (incoming / "layers").mkdir(parents=True)
    (incoming / "nodes").mkdir()
    (root / "layers").mkdir(parents=True, exist_ok=True)
    (root / "nodes").mkdir(parents=True, exist_ok=True)
    layers: list[str] = []
    pointers: list[str] = []
    listed: list[str] | None = None
    try:
        with tarfile.open(fileobj=stream, mode="r|") as archive:  # type: ignore[call-overload]
            for count, member in enumerate(archive):
                if count > MAX_MEMBERS or not member.isfile():
                    raise PublishError(f"unexpected entry {member.name[:80]!r}")
                source = archive.extractfile(member)
                if source is None:
                    raise PublishError(f"entry {member.name[:80]!r} has no content")
                if layer := _LAYER.fullmatch(member.name):
                    if member.size > MAX_LAYER_BYTES:
                        raise PublishError(f"layer {member.name[:80]!r} is too large")
                    target = incoming / member.name
                    hasher = hashlib.sha256()
                    with open(target, "wb") as out:
                        while chunk := source.read(1024 * 1024):
                            hasher.update(chunk)
                            out.write(chunk)
                    if hasher.hexdigest() != layer.group("digest"):
                        raise PublishError(f"{member.name} does not have that digest")
                    layers.append(member.name)
                elif _POINTER.fullmatch(member.name) and member.size <= MAX_POINTER_BYTES:
                    (incoming / member.name).write_bytes(source.read(MAX_POINTER_BYTES))
                    pointers.append(member.name)
                elif member.name == "nodes.json" and member.size <= 16 * 1024 * 1024:
                    data = json_document(source.read().decode("utf-8"), "node list")
                    if not isinstance(data, list) or not all(isinstance(n, str) for n in data):
                        raise PublishError("nodes.json is not a list of node names")
                    listed = data
                else:
                    raise PublishError(f"unexpected entry {member.name[:80]!r}")
        if listed is None:
            raise PublishError("the input has no nodes.json")
        for name in [*layers, *pointers]:
            (incoming / name).chmod(0o644)
            (incoming / name).replace(root / name)
    except (tarfile.TarError, OSError, UnicodeDecodeError, BoundsError) as exc:
        raise PublishError(str(exc)[:200]) from None
    finally:
        shutil.rmtree(incoming, ignore_errors=True)
    keep = {f"{node}.json" for node in listed}
    removed = []
    for path in (root / "nodes").glob("*.json"):
        if path.name not in keep:
            path.unlink(missing_ok=True)
            removed.append(path.name.removesuffix(".json"))
    referenced = _referenced(root)
    dropped: list[str] = []
    for digest in have(root):
        if digest not in referenced:
            (root / "layers" / f"{digest}.tar.gz").unlink(missing_ok=True)
            dropped.append(digest)
    return {"layers": len(layers), "pointers": len(pointers), "removed": sorted(removed), "dropped": dropped}


def main(argv: list[str]) -> int:
    """``publish ROOT [--have]``."""
    if len(argv) not in (1, 2) or (len(argv) == 2 and argv[1] != "--have"):
        sys.stderr.write("usage: python3 -m clusterctl.agent publish ROOT [--have]\n")
        return 2
    root = Path(argv[0])
    if len(argv) == 2:
        sys.stdout.write(json.dumps(have(root)) + "\n")
        return 0
    try:
        done = publish(root, sys.stdin.buffer)
    except PublishError as exc:
        sys.stderr.write(f"publish: {exc}\n")
        return 1
    sys.stdout.write(json.dumps(done) + "\n")
    return 0
