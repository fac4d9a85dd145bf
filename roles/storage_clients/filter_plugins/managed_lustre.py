"""Managed Lustre mount units: put the address the cloud stack created into the rendered unit.

A cloud's managed Lustre (FSx for Lustre, Azure Managed Lustre, GCP Managed Lustre) gets its
address only once the stack exists, so the render writes ``What=clusterctl-managed-lustre:<tier>``
and ``clusterctl up`` writes ``clusterctl_managed_lustre`` (tier -> ``<address>@tcp:/<name>``,
from the stack outputs) into the inventory. These filters do the substitution on the controller.
"""

from __future__ import annotations

import re

MARKER = re.compile(r"^What=clusterctl-managed-lustre:(\S+)$", re.MULTILINE)


def managed_lustre_tiers(units: dict[str, str]) -> dict[str, str]:
    """Unit file name -> managed tier name, for the units that mount a managed Lustre."""
    out = {}
    for unit, text in units.items():
        match = MARKER.search(text)
        if match:
            out[unit] = match.group(1)
    return out


def managed_lustre_units(units: dict[str, str], sources: dict[str, str] | None) -> dict[str, str]:
    """The units with each managed tier's What= set from ``sources``; a tier without one keeps its marker."""
    sources = sources or {}

    def resolve(match: re.Match[str]) -> str:
        source = sources.get(match.group(1))
        return f"What={source}" if source else match.group(0)

    return {unit: MARKER.sub(resolve, text) for unit, text in units.items()}


class FilterModule:
    """Ansible filters of the storage_clients role."""

    def filters(self) -> dict[str, object]:
        return {"managed_lustre_tiers": managed_lustre_tiers, "managed_lustre_units": managed_lustre_units}
