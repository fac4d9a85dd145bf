"""Providers create and destroy the machines of a plan; ``for_plan`` picks one."""

from __future__ import annotations

from clusterctl.run.providers.base import Provider, ProviderError, ProvisionedHost


def for_kind(kind: str) -> Provider:
    """The provider implementation for a provider kind."""
    if kind == "local":
        from clusterctl.run.providers.local import LocalProvider

        return LocalProvider()
    if kind == "baremetal":
        from clusterctl.run.providers.baremetal import BaremetalProvider

        return BaremetalProvider()
    from clusterctl.run.providers.cloud import CloudProvider

    return CloudProvider(kind)


__all__ = ["Provider", "ProviderError", "ProvisionedHost", "for_kind"]
