"""The stand-in CUDA repository (tests/standin-repo) served over HTTP to the local cluster's nodes.

examples/local.yaml with ``mirrors.cuda_repo`` pointing here gets NCCL on its emulated GPU nodes,
so a rolling upgrade of the NCCL pin installs a real package on every node. The repository is built
once per machine into :data:`CACHE` (its signing key stays the same while build.py does), and the
URLs carry the key's fingerprint: a rebuilt repository has a new key, so the image that trusts the
old one is not reused (the image's hash covers the repository's URL).
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import ipaddress
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import REPO_ROOT

_CACHE_ROOT = Path("/var/cache") if os.geteuid() == 0 else Path.home() / ".cache"
CACHE = Path(os.environ.get("CLUSTERCTL_STANDIN_CACHE", str(_CACHE_ROOT / "clusterctl-tests" / "standin-repo")))
PORT = int(os.environ.get("CLUSTERCTL_STANDIN_PORT", "18473"))


@dataclass(frozen=True)
class Mirror:
    """Where the nodes find the stand-in CUDA repository and its key."""

    cuda_repo: str
    cuda_repo_key: str
    cuda_repo_key_sha256: str

    def spec_lines(self) -> str:
        """The ``mirrors`` block of a spec that uses it (served over plain http: the key's sha256 is checked)."""
        return (
            f"mirrors: {{cuda_repo: {self.cuda_repo}, cuda_repo_key: {self.cuda_repo_key}, "
            f"cuda_repo_key_sha256: '{self.cuda_repo_key_sha256}'}}\n"
        )


def docker_host_address() -> str:
    """The host's address on Docker's default bridge: every container reaches the host there.

    The bridge's gateway, or the first address of its subnet when the engine does not list the
    gateway (a dockerd restarted without --bip leaves it out of `network inspect`).
    """
    config = json.loads(
        subprocess.run(
            ["docker", "network", "inspect", "bridge", "-f", "{{json (index .IPAM.Config 0)}}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    if config.get("Gateway"):
        return str(config["Gateway"])
    return str(next(ipaddress.ip_network(config["Subnet"]).hosts()))


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def serve_standin_repo() -> Iterator[Mirror]:
    """Build the stand-in repositories (skipped while up to date) and serve them until the block ends."""
    CACHE.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, str(REPO_ROOT / "tests" / "standin-repo" / "build.py"), "--out", str(CACHE)],
        check=True,
        capture_output=True,
    )
    key = (CACHE / "keys" / "clusterctl-standin.asc").read_bytes()
    tag = hashlib.sha256(key).hexdigest()[:12]
    # The key's digest as the first path segment: /<tag>/cuda/... serves CACHE/cuda/...
    root = CACHE.parent / "served"
    root.mkdir(exist_ok=True)
    if not (root / tag).is_symlink():
        (root / tag).symlink_to(CACHE)
    address = docker_host_address()
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer((address, PORT), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://{address}:{PORT}/{tag}"
    try:
        yield Mirror(
            cuda_repo=f"{base}/cuda",
            cuda_repo_key=f"{base}/keys/clusterctl-standin.asc",
            cuda_repo_key_sha256=f"sha256:{hashlib.sha256(key).hexdigest()}",
        )
    finally:
        server.shutdown()
        server.server_close()
