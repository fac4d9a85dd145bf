"""The pointer: what one node should apply now, signed so only the cluster's control machine can say it.

``up`` writes one pointer per node into the bundle server's ``nodes/`` directory: the cluster, the
node, the request's generation (higher on every ``up``), the bundle (its layers by digest), the
stage to run (``configure`` on a node made from its baked image, ``all`` otherwise), whether to
apply even when nothing changed, and the few facts only the plan knows about that node (its IPoIB
addresses, its opensm placement). It costs the same for every node, whatever the cluster's size.

The server speaks plain HTTP on the management network, so anyone there could answer a node in
its place. The pointer therefore carries an HMAC-SHA256 under a key derived from the munge key,
which every node receives at provisioning through its provider (never from the server) and which
already lets its holder act as any user of the cluster. A node applies only a pointer that
verifies, for itself, with a generation not lower than the last it applied (no replay of an older
configuration); the layers it names are then checked against their sha256 digests.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..bounded import BoundsError, json_document

VERSION = 1
STAGES = ("all", "configure")
LAYER_NAMES = ("engine", "roles", "files")
MAX_POINTER_BYTES = 64 * 1024
_KEY_CONTEXT = b"clusterctl pull pointer v1"
_HEX64 = re.compile(r"[0-9a-f]{64}")
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?")
_VAR_NAME = re.compile(r"clusterctl_[a-z0-9_]{1,60}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
MAX_VAR_TEXT = 256
MAX_VAR_ITEMS = 64
# One-off instructions of the `up` that published the pointer (restart slurmd: nodes joined), not a
# part of what the node should look like: left out of its identity, applied once per generation.
ONE_TIME_VARS = frozenset({"clusterctl_slurm_config_change_action"})


class PointerError(ValueError):
    """A pointer that is not one, not for this node, or not signed with this cluster's key."""


@dataclass(frozen=True)
class Pointer:
    """What ``node`` should apply for request ``generation``."""

    cluster: str
    node: str
    generation: int
    layers: tuple[tuple[str, str], ...]
    stage: str
    force: bool = False
    vars: Mapping[str, Any] = field(default_factory=dict)

    @property
    def bundle(self) -> str:
        """The bundle's digest: its layers, in order."""
        return bundle_digest(self.layers)

    @property
    def identity(self) -> str:
        """What the node applies: the bundle, the stage and the facts (a change of any is a new apply).

        One-off instructions are not in it: the `up` after the one that joined nodes publishes none, and
        its nodes, as the earlier apply left them, have nothing to do.
        """
        kept = {k: v for k, v in self.vars.items() if k not in ONE_TIME_VARS}
        facts = json.dumps(kept, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(f"{self.bundle}\n{self.stage}\n{facts}".encode()).hexdigest()

    @property
    def one_time(self) -> bool:
        """Whether it carries a one-off instruction (to carry out once, for this generation)."""
        return any(k in ONE_TIME_VARS for k in self.vars)

    def body(self) -> dict[str, Any]:
        """The signed document."""
        return {
            "v": VERSION,
            "cluster": self.cluster,
            "node": self.node,
            "generation": self.generation,
            "layers": [list(layer) for layer in self.layers],
            "stage": self.stage,
            "force": self.force,
            "vars": dict(self.vars),
        }


def bundle_digest(layers: Sequence[tuple[str, str]]) -> str:
    """sha256 over the layers' names and digests, in order: what a node reports it applied."""
    return hashlib.sha256("".join(f"{name} {digest}\n" for name, digest in layers).encode()).hexdigest()


def signing_key(munge_key: bytes) -> bytes:
    """The pointers' HMAC key, derived from the cluster's munge key (which never leaves its owners)."""
    if len(munge_key) < 32:
        raise PointerError("the munge key is shorter than 32 bytes; it cannot sign pointers")
    return hmac.new(munge_key, _KEY_CONTEXT, hashlib.sha256).digest()


def _canonical(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def _check_vars(value: Any, depth: int = 0) -> None:
    """Plan facts only: names, numbers, booleans, short plain strings, small lists and maps."""
    if depth > 4:
        raise PointerError("a pointer variable nests too deep")
    if isinstance(value, bool | int):
        return
    if isinstance(value, str):
        if len(value) > MAX_VAR_TEXT or _CONTROL.search(value) or "{" in value or "%" in value:
            raise PointerError("a pointer variable holds text that is not a plain value")
        return
    if isinstance(value, list):
        if len(value) > MAX_VAR_ITEMS:
            raise PointerError("a pointer variable lists too many items")
        for item in value:
            _check_vars(item, depth + 1)
        return
    if isinstance(value, dict):
        if len(value) > MAX_VAR_ITEMS:
            raise PointerError("a pointer variable maps too many keys")
        for key, item in value.items():
            if not isinstance(key, str) or not re.fullmatch(r"[a-z][a-z0-9_]{0,40}", key):
                raise PointerError("a pointer variable has a key that is not a plain name")
            _check_vars(item, depth + 1)
        return
    raise PointerError(f"a pointer variable is a {type(value).__name__}")


def _checked(body: Mapping[str, Any]) -> Pointer:
    if body.get("v") != VERSION:
        raise PointerError(f"pointer version {str(body.get('v'))[:20]!r} is not {VERSION}")
    cluster, node, stage = body.get("cluster"), body.get("node"), body.get("stage")
    generation, force, layers, variables = (
        body.get("generation"),
        body.get("force"),
        body.get("layers"),
        body.get("vars"),
    )
    if not isinstance(cluster, str) or not _NAME.fullmatch(cluster):
        raise PointerError("the pointer names no cluster")
    if not isinstance(node, str) or not _NAME.fullmatch(node):
        raise PointerError("the pointer names no node")
    if not isinstance(generation, int) or isinstance(generation, bool) or not 0 < generation < 10**15:
        raise PointerError("the pointer's generation is not a positive number")
    if stage not in STAGES:
        raise PointerError(f"the pointer's stage is not one of {', '.join(STAGES)}")
    if not isinstance(force, bool):
        raise PointerError("the pointer's force is not true or false")
    if (
        not isinstance(layers, list)
        or [layer[0] if isinstance(layer, list) and layer else None for layer in layers] != list(LAYER_NAMES)
        or not all(len(layer) == 2 and isinstance(layer[1], str) and _HEX64.fullmatch(layer[1]) for layer in layers)
    ):
        raise PointerError(f"the pointer's layers are not {', '.join(LAYER_NAMES)} by sha256")
    if not isinstance(variables, dict) or not all(isinstance(k, str) and _VAR_NAME.fullmatch(k) for k in variables):
        raise PointerError("the pointer's variables are not clusterctl_* facts")
    _check_vars(variables)
    return Pointer(cluster, node, generation, tuple((str(n), str(d)) for n, d in layers), stage, force, variables)


def sign(pointer: Pointer, key: bytes) -> bytes:
    """The file the server serves for ``pointer``: the body and its HMAC, one JSON document."""
    body = pointer.body()
    _checked(json.loads(_canonical(body)))
    mac = hmac.new(key, _canonical(body), hashlib.sha256).hexdigest()
    return json.dumps({"pointer": body, "mac": mac}, sort_keys=True).encode() + b"\n"


def verify(data: bytes, key: bytes, *, cluster: str, node: str) -> Pointer:
    """The pointer in ``data`` when it is signed with ``key`` and addressed to ``node`` of ``cluster``.

    Raises:
        PointerError: anything else (the message says what, never echoing more than a few characters).
    """
    if len(data) > MAX_POINTER_BYTES:
        raise PointerError(f"the pointer is {len(data)} bytes, more than {MAX_POINTER_BYTES}")
    try:
        document = json_document(data.decode("utf-8"), "pointer", max_depth=8)
    except (UnicodeDecodeError, BoundsError) as exc:
        raise PointerError(f"the pointer is not JSON: {str(exc)[:120]}") from None
    if (
        not isinstance(document, dict)
        or set(document) != {"pointer", "mac"}
        or not isinstance(document["pointer"], dict)
    ):
        raise PointerError("the document is not a signed pointer")
    mac = document["mac"]
    want = hmac.new(key, _canonical(document["pointer"]), hashlib.sha256).hexdigest()
    if not isinstance(mac, str) or not hmac.compare_digest(mac, want):
        raise PointerError("the pointer's signature does not verify with this cluster's key")
    pointer = _checked(document["pointer"])
    if pointer.cluster != cluster or pointer.node != node:
        raise PointerError(f"the pointer is for {pointer.node} of {pointer.cluster}, not {node} of {cluster}")
    return pointer
