"""`clusterctl up` on a cloud example with no `pulumi` on PATH: a clear message, nothing created."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES


@pytest.mark.parametrize("example", ["aws-p5.yaml", "onprem-h100-256.yaml"])
def test_up_without_pulumi_cli(tmp_path: Path, example: str) -> None:
    # A PATH with python's own folder (for `clusterctl`) and the system tools, minus any pulumi.
    folders = [str(Path(sys.executable).parent), "/usr/bin", "/bin"]
    path = os.pathsep.join(f for f in folders if not (Path(f) / "pulumi").exists())
    env = {**os.environ, "PATH": path}
    env.pop("CLUSTERCTL_DEBUG", None)
    done = subprocess.run(
        [sys.executable, "-m", "clusterctl", "up", str(EXAMPLES / example), "--yes"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert "Pulumi CLI" in output
    assert "Traceback" not in output
    # Nothing created: no build directory, no state directory.
    assert sorted(p.name for p in tmp_path.iterdir()) == []
