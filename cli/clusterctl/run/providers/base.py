"""The provider interface every provider implements (local, bare metal, clouds)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from clusterctl.plan import Plan
    from clusterctl.run.events import EventBus


class ProviderError(Exception):
    """Provisioning failed in a way the user can act on; the message says how."""


@dataclass(frozen=True)
class ProvisionedHost:
    """A machine ready to be configured."""

    hostname: str
    address: str
    user: str = "root"
    port: int = 22
    host_key: str | None = None
    connection: str = "ssh"  # "ssh" or "docker"
    container: str | None = None
    # The content hash of the baked image the machine was made from (clusterctl.lock); None for a plain one.
    image_hash: str | None = None


class Provider(Protocol):
    """Creates, destroys and reports the machines of a plan."""

    def provision(
        self, plan: Plan, build_dir: Path, state_dir: Path, *, yes: bool, events: EventBus
    ) -> list[ProvisionedHost]:
        """Create (or find) every non-burst node of ``plan``; idempotent."""
        ...

    def retire(self, plan: Plan, hosts: list[str], events: EventBus) -> None:
        """Remove the machines of ``hosts``, nodes the plan no longer has, drained and idle by now."""
        ...

    def destroy(self, plan: Plan, build_dir: Path, state_dir: Path, *, yes: bool, events: EventBus) -> None:
        """Remove exactly what this cluster created."""
        ...

    def status(self, plan: Plan, state_dir: Path) -> dict[str, str]:
        """Machine state per hostname (e.g. running, exited, missing)."""
        ...
