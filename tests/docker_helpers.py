"""Docker helpers for tests that start real services in containers (slurmctld, sshd, nodes).

Tests needing Docker skip with a reason when no engine answers, except under CI
(``CI=true``), where a missing engine is a failure: `.ci/run` starts one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Sequence

import pytest

BASE_IMAGE = os.environ.get("CLUSTERCTL_BASE_IMAGE", "local/debian:bookworm")
# systemd-capable flags that work without --privileged (environment.md).
SYSTEMD_FLAGS = [
    "--cap-add",
    "SYS_ADMIN",
    "--tmpfs",
    "/run",
    "--tmpfs",
    "/run/lock",
    "--tmpfs",
    "/tmp",
    "-v",
    "/sys/fs/cgroup:/sys/fs/cgroup:rw",
    "--cgroupns=host",
    "-e",
    "container=docker",
    "--stop-signal",
    "SIGRTMIN+3",
]


def docker(
    *args: str, check: bool = True, timeout: float = 600, input_text: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``docker ARGS``; raise with its stderr when it fails and ``check``."""
    result = subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, input=input_text, check=False
    )
    if check and result.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")
    return result


def require_docker() -> None:
    """Skip (or fail under CI) when no Docker engine or base image is available."""
    reason = ""
    if shutil.which("docker") is None:
        reason = "docker client not installed"
    elif subprocess.run(["docker", "info"], capture_output=True, check=False).returncode != 0:
        reason = "no Docker engine answers (run scripts/docker-bootstrap.sh)"
    elif docker("image", "inspect", BASE_IMAGE, check=False).returncode != 0:
        reason = f"base image {BASE_IMAGE} missing (run scripts/docker-bootstrap.sh)"
    if reason:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason + " -- required under CI")
        pytest.skip(reason)


def image_with_packages(tag: str, packages: Sequence[str], extra_script: str = "true") -> str:
    """A test image: the base image plus Debian ``packages`` (built once, then reused)."""
    if docker("image", "inspect", tag, check=False).returncode == 0:
        return tag
    name = f"clusterctl-build-{uuid.uuid4().hex[:8]}"
    docker("run", "-d", "--name", name, BASE_IMAGE, "sleep", "infinity")
    try:
        script = (
            "set -e; export DEBIAN_FRONTEND=noninteractive; apt-get update -qq; "
            f"apt-get install -y -qq --no-install-recommends {' '.join(packages)} >/dev/null; "
            f"{extra_script}; apt-get clean; rm -rf /var/lib/apt/lists/*"
        )
        docker("exec", name, "bash", "-c", script, timeout=900)
        docker("commit", "-c", 'CMD ["/lib/systemd/systemd"]', name, tag)
    finally:
        docker("rm", "-f", name, check=False)
    return tag
