"""Options and helpers shared by the ``fabric`` commands: where the fabric comes from.

The fabric is read from a file saved from ``ibnetdiscover`` or ``iblinkinfo``, or from
running ``ibnetdiscover`` here; the only side effect of the group is that subprocess.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
from rich.markup import escape

from clusterctl.app import App
from clusterctl.fabric.model import Fabric
from clusterctl.fabric.parsers import (
    FORMAT_LINKINFO,
    FORMAT_PORTS,
    FabricParseError,
    detect_format,
    parse_iblinkinfo,
    parse_ibnetdiscover,
)

F = TypeVar("F", bound=Callable[..., Any])

IBNETDISCOVER = "ibnetdiscover"
# A fabric of a few thousand ports is swept in seconds; minutes mean an unresponsive subnet.
DISCOVER_TIMEOUT_S = 300
EXIT_UNREADABLE = 2


@dataclass(frozen=True)
class FabricSource:
    """A parsed fabric and where it came from (a file name, or ``ibnetdiscover (local)``)."""

    fabric: Fabric
    origin: str


def _host_pattern(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    try:
        pattern = re.compile(value)
    except re.error as err:
        raise click.BadParameter(f"{value!r} is not a regular expression: {err}.") from None
    if "host" not in pattern.groupindex:
        raise click.BadParameter(
            f"{value!r} has no named group 'host'; write it like '^(?P<host>[^.]+)\\S* (?P<hca>\\S+)'."
        )
    return value


def fabric_input_options(func: F) -> F:
    """``--ibnetdiscover FILE``, ``--iblinkinfo FILE`` and ``--host-pattern REGEX``."""
    func = click.option(
        "--host-pattern",
        callback=_host_pattern,
        metavar="REGEX",
        help="Read host and HCA from CA node descriptions with this regex (named groups host and hca) "
        "instead of '<host> <hca>'.",
    )(func)
    func = click.option(
        "--iblinkinfo",
        "iblinkinfo",
        type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=str),
        metavar="FILE",
        help="Saved iblinkinfo output ('-' for stdin); ibswitches/ibhosts lines in it add GUIDs.",
    )(func)
    return click.option(
        "--ibnetdiscover",
        "ibnetdiscover",
        type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=str),
        metavar="FILE",
        help="Saved ibnetdiscover output, plain or -p ('-' for stdin). "
        "Without this or --iblinkinfo, ibnetdiscover runs on this host.",
    )(func)


def load_fabric(app: App, ibnetdiscover: str | None, iblinkinfo: str | None) -> FabricSource:
    """Read and parse the fabric; exit 2 when it cannot be read, with the line that broke it.

    Raises:
        click.UsageError: When both files are given.
    """
    if ibnetdiscover and iblinkinfo:
        raise click.UsageError("Give --ibnetdiscover or --iblinkinfo, not both.")
    if ibnetdiscover or iblinkinfo:
        path = ibnetdiscover or iblinkinfo or ""
        origin = "stdin" if path == "-" else path
        text = sys.stdin.read() if path == "-" else Path(path).read_text(errors="replace")
        want_linkinfo = bool(iblinkinfo)
    else:
        text = _run_ibnetdiscover(app)
        origin = f"{IBNETDISCOVER} (run on this host)"
        want_linkinfo = False
    try:
        fmt = detect_format(text)
        if want_linkinfo != (fmt == FORMAT_LINKINFO):
            option = "--iblinkinfo" if fmt == FORMAT_LINKINFO else "--ibnetdiscover"
            tool = {FORMAT_PORTS: "ibnetdiscover -p"}.get(fmt, fmt)
            _unreadable(app, origin, None, f"{origin} holds {tool} output; pass it with {option}.")
        fabric = parse_iblinkinfo(text) if want_linkinfo else parse_ibnetdiscover(text)
    except FabricParseError as err:
        _unreadable(app, origin, err)
    for note in fabric.notes:
        app.display_debug(f"{origin}: {note}")
    return FabricSource(fabric, origin)


def _unreadable(app: App, origin: str, err: FabricParseError | None, message: str | None = None) -> NoReturn:
    if message is None and err is not None:
        message = f"{origin} line {err.line_no}: {err.message}" if err.line_no else f"{origin}: {err.message}"
    text = message or f"{origin} cannot be read."
    if app.json:
        app.print_json(
            {
                "error": {
                    "file": origin,
                    "line": err.line_no if err else None,
                    "text": err.line.rstrip("\n") if err else None,
                    "message": text,
                }
            }
        )
    else:
        app.display_error(text)
        if err is None:
            raise SystemExit(EXIT_UNREADABLE)
        if err.line_no:
            gutter = f"{err.line_no:>5} | "
            app.err.print(f"[dim]{gutter}[/dim]{escape(err.line.rstrip())}")
        app.err.print(
            "  [dim]hint:[/dim] pass the unedited output of ibnetdiscover, ibnetdiscover -p or iblinkinfo "
            "(stderr lines in it are fine)."
        )
    raise SystemExit(EXIT_UNREADABLE)


def _run_ibnetdiscover(app: App) -> str:
    """Run ``ibnetdiscover`` on this host and return its stdout (exit 2 when it cannot run)."""
    if shutil.which(IBNETDISCOVER) is None:
        app.abort(
            f"{IBNETDISCOVER} is not installed on this host (package infiniband-diags). Run it on a host "
            "on the fabric and pass its output: --ibnetdiscover FILE.",
            EXIT_UNREADABLE,
        )
    app.display_info(f"Running {IBNETDISCOVER} on this host ...")
    try:
        result = subprocess.run(
            [IBNETDISCOVER], capture_output=True, text=True, timeout=DISCOVER_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        app.abort(
            f"{IBNETDISCOVER} did not finish in {DISCOVER_TIMEOUT_S} s; is a subnet manager running?", EXIT_UNREADABLE
        )
    except OSError as err:
        app.abort(f"{IBNETDISCOVER} could not be started: {err.strerror or err}.", EXIT_UNREADABLE)
    if result.returncode != 0:
        detail = result.stderr.strip().splitlines()[-1:] or [f"exit status {result.returncode}"]
        app.abort(
            f"{IBNETDISCOVER} failed: {detail[0]} (it needs read access to /dev/infiniband/umad*; try as root).",
            EXIT_UNREADABLE,
        )
    return result.stdout
