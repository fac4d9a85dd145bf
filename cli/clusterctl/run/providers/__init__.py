"""Providers create and destroy the machines of a plan; ``for_plan`` picks one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from clusterctl.run.providers.base import Provider, ProviderError, ProvisionedHost

if TYPE_CHECKING:
    from clusterctl.run.providers.images import BootImage


def for_kind(kind: str, images: Mapping[str, BootImage] | None = None) -> Provider:
    """The provider implementation for a provider kind.

    ``images``: hardware profile -> its locked image (clusterctl.lock) to make its nodes from.
    """
    if kind == "local":
        from clusterctl.run.providers.local import LocalProvider

        return LocalProvider({profile: image.ref for profile, image in (images or {}).items()})
    if kind == "baremetal":
        from clusterctl.run.providers.baremetal import BaremetalProvider

        return BaremetalProvider()
    from clusterctl.run.providers.cloud import CloudProvider

    return CloudProvider(kind, images=images)


__all__ = ["Provider", "ProviderError", "ProvisionedHost", "for_kind"]
