"""Views of the event stream: a live per-phase/per-host table, plain lines, errors only (-q), JSON lines."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass, field

import click
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from clusterctl.run.events import Event, EventBus

_STYLE = {"ok": "green", "changed": "yellow", "failed": "bold red", "unreachable": "bold red", "running": "cyan"}


@dataclass
class _HostRow:
    phase: str = ""
    status: str = ""
    task: str = ""
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))


class JsonView:
    """One JSON object per event on stdout (``--output json``)."""

    def __call__(self, event: Event) -> None:
        """Write the event."""
        click.echo(json.dumps(event.to_dict(), default=str))


class PlainView:
    """Plain lines for logs and CI: phases, failures, and a per-host tally at each phase's end."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.started: dict[str, float] = {}
        self.tally: dict[str, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(int)))

    def __call__(self, event: Event) -> None:
        """Print what matters about ``event``."""
        stamp = time.strftime("%H:%M:%S", time.localtime(event.ts))
        if event.kind == "phase_start":
            self.started[event.phase] = event.ts
            self.console.print(f"{stamp} [{event.phase}] started {event.message}".rstrip(), markup=False)
        elif event.kind == "phase_end":
            took = event.ts - self.started.get(event.phase, event.ts)
            for host, counts in sorted(self.tally.pop(event.phase, {}).items()):
                summary = " ".join(f"{k}={v}" for k, v in sorted(counts.items()))
                self.console.print(f"{stamp} [{event.phase}] {host}: {summary}", markup=False)
            self.console.print(
                f"{stamp} [{event.phase}] {event.status} in {took:.1f} s {event.message}".rstrip(), markup=False
            )
        elif event.kind == "host":
            if event.status in ("failed", "unreachable"):
                where = f" in task '{event.task}'" if event.task else ""
                self.console.print(
                    f"{stamp} [{event.phase}] {event.host}: {event.status.upper()}{where}: {event.message}",
                    markup=False,
                )
            elif event.status != "running":
                if event.phase != "configure":
                    self.console.print(
                        f"{stamp} [{event.phase}] {event.host}: {event.status} {event.message}", markup=False
                    )
                self.tally[event.phase][event.host][event.status] += 1
        elif event.kind == "message":
            self.console.print(f"{stamp} [{event.phase or 'info'}] {event.message}", markup=False)


class QuietView:
    """Errors only (``-q``): failed and unreachable hosts, and error messages."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def __call__(self, event: Event) -> None:
        """Print ``event`` if it is an error."""
        stamp = time.strftime("%H:%M:%S", time.localtime(event.ts))
        if event.kind == "host" and event.status in ("failed", "unreachable"):
            where = f" in task '{event.task}'" if event.task else ""
            self.console.print(
                f"{stamp} [{event.phase}] {event.host}: {event.status.upper()}{where}: {event.message}", markup=False
            )
        elif event.kind in ("message", "phase_end") and event.status in ("error", "failed"):
            self.console.print(f"{stamp} [{event.phase or 'error'}] {event.message}".rstrip(), markup=False)


class LiveView:
    """A live table on a terminal: one row per host with its phase, last task and counts."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.rows: dict[str, _HostRow] = {}
        self.phases: list[tuple[str, str, float]] = []
        self.messages: list[str] = []
        self.live = Live(self._render(), console=console, refresh_per_second=4, transient=False)

    def __enter__(self) -> LiveView:
        self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.update(self._render())
        self.live.__exit__(None, None, None)

    def _render(self) -> Group:
        phases = Text("  ".join(f"{name}: {status}" for name, status, _ in self.phases) or "starting")
        table = Table(expand=False, show_edge=False)
        for col in ("host", "phase", "status", "ok", "changed", "failed", "last task"):
            table.add_column(col)
        for host, row in sorted(self.rows.items()):
            style = _STYLE.get(row.status, "")
            table.add_row(
                host,
                row.phase,
                Text(row.status, style=style),
                str(row.counts["ok"]),
                str(row.counts["changed"]),
                str(row.counts["failed"] + row.counts["unreachable"]),
                row.task[:60],
            )
        return Group(phases, table, *[Text(m) for m in self.messages[-5:]])

    def __call__(self, event: Event) -> None:
        """Update the table."""
        if event.kind == "phase_start":
            self.phases.append((event.phase, "running", event.ts))
        elif event.kind == "phase_end":
            self.phases = [(n, event.status if n == event.phase else s, t) for n, s, t in self.phases]
        elif event.kind == "host":
            row = self.rows.setdefault(event.host, _HostRow())
            row.phase, row.status = event.phase, event.status
            if event.task:
                row.task = event.task
            if event.status != "running":
                row.counts[event.status] += 1
            if event.status in ("failed", "unreachable"):
                self.messages.append(f"{event.host}: {event.task}: {event.message}")
        elif event.kind == "message":
            self.messages.append(event.message)
        self.live.update(self._render())


def attach(bus: EventBus, console: Console, mode: str) -> LiveView | None:
    """Subscribe the right view; returns the live view (a context manager) when one is used."""
    if mode == "json":
        bus.subscribe(JsonView())
        return None
    if mode == "quiet":
        bus.subscribe(QuietView(console))
        return None
    if mode == "live":
        view = LiveView(console)
        bus.subscribe(view)
        return view
    bus.subscribe(PlainView(console))
    return None
