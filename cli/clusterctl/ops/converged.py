"""The record of the last converge: an unchanged cluster is checked instead of converged again.

After a configure run that succeeded on a cluster that then passed its readiness checks, ``up``
records in state.json the fingerprint of everything the configure stage reads (the build
directory, the roles, the Ansible collections, the secrets, each node's stage, clusterctl's
version) and, per node, a digest of what the roles leave on it: every path under /etc,
/usr/local and /opt with its type, size, mtime, mode and owner; dpkg's status file; the kernel;
the active services, timers, sockets and mounts. The next ``up`` with the same fingerprint reads
each node's digest again (one command per node, in parallel). When every node matches, the roles
would find nothing to change and the configure stage is skipped; anything else (a new or
replaced node, a file edited by hand, a stopped service, a package installed, a failed or
interrupted run) runs it as always. ``up --converge`` runs it anyway.

Why: Ansible's per-task cost makes a no-change run of the configure stage take half a minute
for six nodes on two cores, all of it spent finding that nothing differs.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterctl import __version__
from clusterctl.agent.digest import DIGEST_COMMAND
from clusterctl.image.hash import collections_hash, roles_hash
from clusterctl.paths import collections_dir
from clusterctl.remote import Executor, run_many
from clusterctl.run.ansible import REQUIRED_COLLECTIONS, AnsibleSetupError, collections_path

STATE_KEY = "converged"
DIGEST_TIMEOUT_S = 60.0
# Build-directory entries the configure stage does not read: its own log, and the command line
# ansible-runner records there on each run (made of the extravars' paths, which count below), and
# the bundles the nodes pull (ops/pull.py publishes them; no pushed role reads them).
_NOT_INPUT = frozenset({"logs", "ansible/env/cmdline", "bundles"})


@dataclass(frozen=True)
class Check:
    """Whether the configure stage may be skipped, and why (or why not)."""

    unchanged: bool
    reason: str


def _tree_lines(root: Path, skip: frozenset[str] = frozenset()) -> Iterable[str]:
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if rel.parts[0] in skip or rel.as_posix() in skip or path.is_dir():
            continue
        content = str(path.readlink()).encode() if path.is_symlink() else path.read_bytes()
        yield f"{rel.as_posix()}\0{hashlib.sha256(content).hexdigest()}\n"


def _file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "absent"


def fingerprint(build_dir: Path, extravars: Mapping[str, str], limit: Sequence[str] | None) -> str:
    """sha256 of everything a configure run reads; equal fingerprints run the same plays on the same inputs.

    ``extravars`` hold paths of secrets and bundles: their contents count, so a rotated secret
    converges again. No secret is stored: only this one digest of all inputs together.
    """
    digest = hashlib.sha256()
    digest.update(f"clusterctl {__version__}\nlimit {json.dumps(list(limit or []))}\n".encode())
    for line in _tree_lines(build_dir, _NOT_INPUT):
        digest.update(line.encode())
    for name, value in sorted(extravars.items()):
        digest.update(f"{name}\0{value}\0{_file_hash(Path(value))}\n".encode())
    digest.update(f"roles {roles_hash()}\n".encode())
    for line in _tree_lines(collections_dir()):
        digest.update(line.encode())
    try:
        paths = [Path(p) for p in collections_path().split(os.pathsep) if p]
    except AnsibleSetupError:  # the configure run says so
        paths = []
    digest.update(f"collections {collections_hash(paths, REQUIRED_COLLECTIONS)}\n".encode())
    return digest.hexdigest()


def node_digests(executor: Executor, hosts: Sequence[str]) -> dict[str, str]:
    """Each host's digest of what the roles manage on it; empty for a host that did not answer."""
    answers = run_many(executor, [(host, DIGEST_COMMAND, DIGEST_TIMEOUT_S) for host in hosts])
    out = {}
    for host, (rc, stdout, _err) in zip(hosts, answers, strict=True):
        text = stdout.strip()
        out[host] = text if rc == 0 and len(text) == 64 else ""
    return out


def record(fingerprint_: str, digests: Mapping[str, str]) -> dict[str, Any]:
    """What state.json keeps under ``converged`` (None while a configure run is under way or failed)."""
    return {
        "fingerprint": fingerprint_,
        "nodes": dict(sorted(digests.items())),
        "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def check(recorded: Any, fingerprint_: str, hosts: Sequence[str], executor: Executor) -> Check:
    """Compare the recorded converge with the inputs now and each node as it is now."""
    if not isinstance(recorded, dict) or not recorded.get("fingerprint"):
        return Check(False, "no completed converge is recorded")
    if recorded["fingerprint"] != fingerprint_:
        return Check(False, "the rendered files, roles, secrets or stages changed")
    nodes = recorded.get("nodes") or {}
    if sorted(nodes) != sorted(hosts):
        return Check(False, "the nodes changed")
    now = node_digests(executor, hosts)
    differ = [h for h in hosts if not now[h] or now[h] != nodes[h]]
    if differ:
        return Check(False, f"changed on the node since the last converge: {', '.join(differ)}")
    return Check(True, f"all {len(hosts)} nodes as the last converge ({recorded.get('at', '?')}) left them")
