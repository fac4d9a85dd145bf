"""Debian's real slurmd (22.05) reads the rendered gres.conf: every GPU with its Cores= and no error.

``slurmd -G`` parses gres.conf for the node as slurmd does at start (gres.conf Cores= go through
xcpuinfo_abs_to_mac against the container's own CPUs) and prints each GRES it configured.
The local example's emulated GPUs are bound to core 0 (one socket, one core), which any
machine has; an index beyond the machine's cores is refused ("Invalid GRES data").
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterctl.pipeline import load_and_validate, render
from tests.conftest import EXAMPLES
from tests.docker_helpers import docker, image_with_packages

pytestmark = [pytest.mark.integration, pytest.mark.docker]

SLURMD_IMAGE = "local/clusterctl-test-slurmd:bookworm"
GRES_RE = re.compile(r"^slurmd: Gres Name=gpu Type=(\S+) Count=1 Index=(\d+) .*File=(\S+) Cores=(\S+) ", re.M)


@pytest.fixture
def slurmd_node(docker_ready: None, tmp_path: Path) -> Iterator[str]:
    """A container named gpu001 with slurmd and the local example's rendered /etc/slurm."""
    image = image_with_packages(SLURMD_IMAGE, ["slurmd", "slurm-client", "munge"])
    build, _ = render(load_and_validate(EXAMPLES / "local.yaml"), tmp_path / "build")
    name = f"clusterctl-test-slurmd-{uuid.uuid4().hex[:8]}"
    docker("run", "-d", "--name", name, "--hostname", "gpu001", image, "sleep", "infinity")
    try:
        slurm = build / "slurm"
        for path in sorted(slurm.rglob("*")):
            if path.is_file():
                target = f"/etc/slurm/{path.relative_to(slurm)}"
                docker("exec", name, "mkdir", "-p", str(Path(target).parent))
                docker("cp", str(path), f"{name}:{target}")
        # The emulated GPU devices the common role creates on the local cluster (major 195).
        docker("exec", name, "bash", "-c", "for i in 0 1 2 3 4 5 6 7; do mknod -m 666 /dev/nvidia$i c 195 $i; done")
        yield name
    finally:
        docker("rm", "-f", name, check=False)


def _gres(name: str) -> str:
    done = docker("exec", name, "bash", "-c", "slurmd -G -N gpu001 2>&1", check=False)
    return done.stdout


def test_slurmd_takes_every_gpu_with_its_cores(slurmd_node: str) -> None:
    output = _gres(slurmd_node)

    assert "error" not in output.lower(), output
    assert GRES_RE.findall(output) == [("h100", str(i), f"/dev/nvidia{i}", "0") for i in range(8)], output


def test_slurmd_refuses_cores_beyond_the_machine(slurmd_node: str) -> None:
    docker("exec", slurmd_node, "sed", "-i", "s/ Cores=0$/ Cores=0-4095/", "/etc/slurm/gres.conf")

    output = _gres(slurmd_node)

    assert "Invalid GRES data for gpu, Cores=0-4095" in output, output
