"""Integration tests start real services in containers; they need Docker."""

from __future__ import annotations

import pytest

from tests.docker_helpers import require_docker


@pytest.fixture(scope="session")
def docker_ready() -> None:
    """Docker engine and base image available (skip, or fail under CI)."""
    require_docker()
