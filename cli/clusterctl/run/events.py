"""One event stream for every long step: phases, hosts' tasks, resources.

The terminal view, plain log lines and ``--output json`` are listeners of the same bus,
so they cannot disagree.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Kind = Literal["phase_start", "phase_end", "host", "task", "resource", "message", "summary"]
Status = Literal["ok", "changed", "failed", "unreachable", "skipped", "running", "info", "warning", "error"]


@dataclass(frozen=True)
class Event:
    """Something that happened."""

    kind: Kind
    phase: str = ""
    host: str = ""
    task: str = ""
    status: Status = "info"
    message: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    ts: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        out = asdict(self)
        if not out["data"]:
            del out["data"]
        return out


Listener = Callable[[Event], None]


class EventBus:
    """Fan events out to listeners."""

    def __init__(self) -> None:
        self._listeners: list[Listener] = []

    def subscribe(self, listener: Listener) -> None:
        """Add a listener."""
        self._listeners.append(listener)

    def emit(self, event: Event) -> None:
        """Deliver ``event`` to every listener."""
        for listener in self._listeners:
            listener(event)

    def phase(self, name: str, status: Status = "running", message: str = "") -> None:
        """Phase start."""
        self.emit(Event("phase_start", phase=name, status=status, message=message))

    def phase_done(self, name: str, status: Status = "ok", message: str = "", **data: Any) -> None:
        """Phase end."""
        self.emit(Event("phase_end", phase=name, status=status, message=message, data=data))

    def host(self, phase: str, host: str, status: Status, message: str = "", task: str = "") -> None:
        """A host's progress in a phase."""
        self.emit(Event("host", phase=phase, host=host, status=status, message=message, task=task))

    def info(self, message: str, phase: str = "", status: Status = "info") -> None:
        """A free-form message."""
        self.emit(Event("message", phase=phase, status=status, message=message))
