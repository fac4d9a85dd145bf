"""The application object every command receives in ``ctx.obj``: output, verbosity, errors."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, NoReturn

import click
from rich.console import Console

from clusterctl.environ import Env
from clusterctl.report.document import STOPPED_ERROR, command_name, document
from clusterctl.report.terminal import safe, show_findings, summarize
from clusterctl.spec.findings import Finding, Level


class App:
    """Output and exit handling shared by the commands."""

    def __init__(self, verbosity: int = 0, output: str = "text") -> None:
        self.verbosity = verbosity
        self.output = output
        self.out = Console(highlight=False, soft_wrap=True, emoji=False)
        self.err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)

    @property
    def json(self) -> bool:
        """Whether machine output was asked for (``--output json``): JSON alone on stdout."""
        return self.output == "json"

    @property
    def quiet(self) -> bool:
        """``-q``: errors only (no infos, warnings, progress or success lines); asked-for data still prints."""
        return self.verbosity < 0

    @property
    def progress_mode(self) -> str:
        """How a long command shows its events: ``json``, ``quiet`` (errors only), ``live`` or ``plain``."""
        if self.json:
            return "json"
        if self.quiet:
            return "quiet"
        return "live" if self.interactive else "plain"

    @property
    def interactive(self) -> bool:
        """A human at a terminal (live views, colours)."""
        return self.out.is_terminal and not self.json

    def print_json(self, data: Any, *, line: bool = False) -> None:
        """Write ``data`` as JSON to stdout (``line``: on one line, the last of an event stream)."""
        click.echo(json.dumps(data, indent=None if line else 2, sort_keys=False, default=str))

    def display_info(self, message: str) -> None:
        """Informational line (hidden with -q)."""
        if self.verbosity >= 0:
            self.err.print(safe(message))

    def display_success(self, message: str) -> None:
        """A success line on stdout (text mode)."""
        if not self.json and self.verbosity >= 0:
            self.out.print(f"[green]{safe(message)}[/green]")

    def display_warning(self, message: str) -> None:
        """A warning line on stderr (hidden with -q)."""
        if self.quiet:
            return
        self.err.print(f"[yellow]warning:[/yellow] {safe(message)}")

    def display_error(self, message: str) -> None:
        """An error line on stderr."""
        self.err.print(f"[bold red]error:[/bold red] {safe(message)}")

    def display_debug(self, message: str) -> None:
        """Shown with -v."""
        if self.verbosity > 0:
            self.err.print(f"[dim]{safe(message)}[/dim]")

    def abort(self, message: str, code: int = 1) -> NoReturn:
        """Print ``message`` as an error and exit with ``code``.

        With ``--output json`` stdout gets the command's envelope too (``ok: false``,
        ``stopped: error`` and the message), so a script reads every outcome from one document.
        """
        if self.json:
            context = click.get_current_context(silent=True)
            command = command_name(context) if context is not None else ""
            # One line: it may end a stream of events (`up`).
            self.print_json(document(command, [], ok=False, stopped=STOPPED_ERROR, error=message), line=True)
        self.display_error(message)
        raise SystemExit(code)

    def show_findings(self, findings: list[Finding], min_level: Level = Level.INFO) -> None:
        """Print findings on stderr with the offending source line and a caret under the column (-q: errors only)."""
        show_findings(self.err, findings, max(min_level, Level.ERROR) if self.quiet else min_level)

    def summarize_findings(self, findings: list[Finding]) -> str:
        """``2 errors, 1 warning``."""
        return summarize(findings)


def debug_enabled() -> bool:
    """Tracebacks with locals for internal errors (``CLUSTERCTL_DEBUG=1``)."""
    return os.environ.get(Env.DEBUG, "") not in ("", "0")


def stdout_is_terminal() -> bool:
    """Whether stdout is a terminal."""
    return sys.stdout.isatty()
