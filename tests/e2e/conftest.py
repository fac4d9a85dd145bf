"""End-to-end tests on a real local cluster, brought up once per session and shared.

The cluster is `examples/local.yaml` (1 controller, 1 login, 4 emulated-GPU nodes), with the
stand-in CUDA repository as its mirror (NCCL on the emulated GPU nodes), brought up with the real
CLI from its baked images: `clusterctl image build` first (an image made by an earlier run with the
same content hash is reused), then `clusterctl up --locked`, so the nodes run the configure stage
only. Molecule tests the install stage from scratch. Tests run in the order of their `order`
marker (default 50), so the destructive ones (fault injection, down) come last.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from clusterctl.pipeline import load_and_validate
from clusterctl.plan import Plan
from tests.conftest import REPO_ROOT
from tests.docker_helpers import require_docker
from tests.e2e.standin_mirror import serve_standin_repo

SPEC = REPO_ROOT / "examples" / "local.yaml"
ARTIFACTS = REPO_ROOT / "test-artifacts"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run e2e tests by their ``order`` marker."""

    def key(item: pytest.Item) -> int:
        marker = item.get_closest_marker("order")
        return int(marker.args[0]) if marker else 50

    items.sort(key=lambda item: key(item) if "tests/e2e" in str(item.path) else -1)


def pytest_configure(config: pytest.Config) -> None:
    """Register the ordering marker."""
    config.addinivalue_line("markers", "order(n): run e2e tests in ascending n")


@dataclass
class LocalCluster:
    """The shared cluster and how it was brought up."""

    spec_path: Path
    build_dir: Path
    state_dir: Path
    plan: Plan
    first_up_seconds: float = 0.0
    first_up_output: str = ""
    lock_path: Path | None = None
    extra: dict[str, object] = field(default_factory=dict)

    def cli(self, *args: str, timeout: float = 1800, check: bool = False) -> subprocess.CompletedProcess[str]:
        """Run ``clusterctl ARGS`` with this cluster's state and build dirs."""
        return run_cli(*args, "--state-dir", str(self.state_dir), timeout=timeout, check=check)

    def up(self, *extra: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
        """``clusterctl up`` on the shared spec."""
        lock = ("--lock", str(self.lock_path)) if self.lock_path else ()
        return self.cli(
            "up", str(self.spec_path), "--out", str(self.build_dir), "--yes", *lock, *extra, timeout=timeout
        )

    def exec(self, host: str, command: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run a shell command on a node (as root)."""
        return subprocess.run(
            ["docker", "exec", f"clusterctl-{self.plan.cluster.name}-{host}", "bash", "-lc", command],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def run_cli(*args: str, timeout: float = 1800, check: bool = False) -> subprocess.CompletedProcess[str]:
    """The real CLI in a subprocess (what a user runs)."""
    env = dict(os.environ, COLUMNS="200")
    result = subprocess.run(
        [sys.executable, "-m", "clusterctl", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=REPO_ROOT,
        env=env,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"clusterctl {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result


def save_artifact(name: str, text: str) -> Path:
    """Keep an output for people reading a CI run."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    path.write_text(text)
    return path


def json_events(output: str) -> list[dict[str, object]]:
    """Events from ``--output json`` (one JSON object per line; the report envelope that ends the
    stream is no event: `json_report` reads it)."""
    events = []
    for line in output.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                item = json.loads(line)
            except json.JSONDecodeError:
                continue
            if "kind" in item:
                events.append(item)
    return events


def json_report(output: str) -> dict[str, object]:
    """The report envelope that ends an ``up --output json`` stream (its last line)."""
    return json.loads([line for line in output.splitlines() if line.startswith("{")][-1])


def _with_heal_every(spec_text: str, period: str) -> str:
    """The spec with ``slurm.heal_every: PERIOD`` (after the slurm section's ``topology:``)."""
    anchor = "\n  topology: tree\n"
    assert spec_text.count(anchor) == 1, "examples/local.yaml's slurm section no longer ends with topology: tree"
    return spec_text.replace(anchor, f"{anchor}  heal_every: {period}\n")


@pytest.fixture(scope="session")
def local_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Bring examples/local.yaml up once for the session (torn down at the end).

    The spec is the example with the stand-in CUDA repository as its mirror (tests/e2e/standin_mirror.py),
    so its emulated GPU nodes carry NCCL at the example's pin, and with a heal timer that never fires
    while the tests run (test_heal_local starts its rounds itself: a round of its own in the middle of
    another test's drains would resume nodes that test expects drained)."""
    require_docker()
    root = tmp_path_factory.mktemp("local-cluster")
    with serve_standin_repo() as mirror:
        spec = root / SPEC.name
        spec.write_text(_with_heal_every(SPEC.read_text(), "1d") + mirror.spec_lines())
        plan = load_and_validate(spec).plan
        lock = root / "clusterctl.lock"
        cluster = LocalCluster(
            spec_path=spec, build_dir=root / "build", state_dir=root / "state", plan=plan, lock_path=lock
        )
        # A cluster left over from an interrupted earlier session would make this one's network clash.
        run_cli("down", str(spec), "--yes", "--force", "--state-dir", str(cluster.state_dir), timeout=600)
        image = cluster.cli(
            "image", "build", str(spec), "--lock", str(lock), "--out", str(root / "image"), timeout=3600
        )
        save_artifact("e2e-image-build.log", image.stdout + image.stderr)
        if image.returncode != 0:
            pytest.fail(f"clusterctl image build failed ({image.returncode}):\n{(image.stdout + image.stderr)[-6000:]}")
        started = time.monotonic()
        result = cluster.up("--locked")
        cluster.first_up_seconds = time.monotonic() - started
        cluster.first_up_output = result.stdout + result.stderr
        save_artifact("e2e-first-up.log", cluster.first_up_output)
        if result.returncode != 0:
            pytest.fail(f"clusterctl up failed ({result.returncode}):\n{cluster.first_up_output[-6000:]}")
        yield cluster
        run_cli("down", str(spec), "--yes", "--force", "--state-dir", str(cluster.state_dir), timeout=600)
