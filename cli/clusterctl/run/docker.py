"""A thin wrapper over the ``docker`` CLI (no SDK dependency; the CLI is what users have)."""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

from clusterctl.run.providers.base import ProviderError

# Labels of a baked Docker image (and so of every container made from it).
LABEL_HASH = "clusterctl.image.hash"
LABEL_PROFILE = "clusterctl.image.profile"
LABEL_OS = "clusterctl.image.os"
LABEL_ARCH = "clusterctl.image.arch"
LABEL_FORMAT = "clusterctl.image.format"


class DockerError(ProviderError):
    """A docker command failed."""


def docker(
    *args: str, check: bool = True, timeout: float = 300, input_text: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``docker ARGS`` and return the completed process.

    Raises:
        DockerError: the command failed and ``check`` is set, with docker's own message.
    """
    if shutil.which("docker") is None:
        raise DockerError("the docker client is not installed; install Docker (apt-get install docker.io)")
    try:
        result = subprocess.run(
            ["docker", *args], capture_output=True, text=True, timeout=timeout, input=input_text, check=False
        )
    except subprocess.TimeoutExpired:
        raise DockerError(f"`docker {' '.join(args[:3])} ...` did not finish within {timeout:.0f} s") from None
    if check and result.returncode != 0:
        message = result.stderr.strip() or result.stdout.strip()
        raise DockerError(f"`docker {' '.join(args[:4])}` failed: {message}")
    return result


def engine_available() -> bool:
    """Whether a Docker engine answers."""
    return shutil.which("docker") is not None and docker("info", check=False, timeout=30).returncode == 0


def inspect(kind: str, name: str) -> dict[str, Any] | None:
    """``docker <kind> inspect NAME`` as a dict, or None when it does not exist."""
    result = docker(kind, "inspect", name, check=False)
    if result.returncode != 0:
        return None
    data = json.loads(result.stdout)
    return dict(data[0]) if data else None


def labelled(kind: str, label: str) -> list[str]:
    """Names of containers/networks/volumes carrying ``label`` (key=value)."""
    if kind == "container":
        out = docker("ps", "-a", "--filter", f"label={label}", "--format", "{{.Names}}").stdout
    else:
        out = docker(kind, "ls", "--filter", f"label={label}", "--format", "{{.Name}}").stdout
    return sorted(line for line in out.splitlines() if line)
