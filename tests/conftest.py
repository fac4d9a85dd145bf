"""Shared pytest fixtures: paths to the repository and to the real-cluster fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = REPO_ROOT / "examples"
# The sysfs lookup the rdma, nccl and storage_clients roles share (clusterctl.node.rdma_rails).
RDMA_RAILS_MODULE = REPO_ROOT / "collections/ansible_collections/clusterctl/node/plugins/modules/rdma_rails.py"
SHARED_FIXTURES = Path(os.environ.get("CLUSTERCTL_FIXTURES", REPO_ROOT.parent / "shared" / "fixtures"))


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--update-golden`` rewrites the golden files from the current render (review the diff!)."""
    parser.addoption("--update-golden", action="store_true", help="Refresh tests/golden/*/expected.")


@pytest.fixture(scope="session")
def update_golden(request: pytest.FixtureRequest) -> bool:
    """Whether golden files are being refreshed."""
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """The folder of real outputs from real clusters (``../shared/fixtures``).

    Absent on a developer machine: the test skips with the reason. Under CI
    (``CI=true``) its absence is a failure, so a CI run never silently skips them.
    """
    if SHARED_FIXTURES.is_dir():
        return SHARED_FIXTURES
    reason = f"real-cluster fixtures not found at {SHARED_FIXTURES} (set CLUSTERCTL_FIXTURES)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason + " -- they are required under CI")
    pytest.skip(reason)
