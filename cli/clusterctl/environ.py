"""The environment variables clusterctl reads, all in one place (every layer may import this)."""

from __future__ import annotations


class Env:
    """Environment variable names clusterctl reads (all in one place)."""

    DEBUG = "CLUSTERCTL_DEBUG"
    STATE_DIR = "CLUSTERCTL_STATE_DIR"
    BASE_IMAGE = "CLUSTERCTL_BASE_IMAGE"
    FIXTURES = "CLUSTERCTL_FIXTURES"
    BMC_USER = "CLUSTERCTL_BMC_USERNAME"
    BMC_PASSWORD = "CLUSTERCTL_BMC_PASSWORD"
