"""Options and helpers shared by the ``fabric`` commands: where the fabric comes from.

The fabric is read from a file saved from ``ibnetdiscover`` or ``iblinkinfo``, or from
running ``ibnetdiscover`` here. The hosts' rail maps (which of their HCAs is which rail)
come from saved rails files or, with ``--from-nodes``, from each node through the
executor ``verify`` uses; those are the group's only side effects.
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
from clusterctl.fabric.expected import ExpectedFabric
from clusterctl.fabric.host_hcas import HostHcas
from clusterctl.fabric.model import Fabric
from clusterctl.fabric.parsers import (
    FORMAT_LINKINFO,
    FORMAT_PORTS,
    FabricParseError,
    detect_format,
    parse_iblinkinfo,
    parse_ibnetdiscover,
)
from clusterctl.plan.models import Plan
from clusterctl.report import STOPPED_INPUT, command_name, document, print_excerpt, unreadable
from clusterctl.run.executor import TIMEOUT_RC, UNREACHABLE_RC, executor_for, run_many
from clusterctl.run.providers import ProviderError
from clusterctl.run.state import StateDir
from clusterctl.verify.parsers.rdma_rails import NodeRails, parse_node_rails
from clusterctl.verify.rails import RAILS_COMMAND, RAILS_PATH, rail_devices
from clusterctl.verify.result import ParseError

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
    hint = "pass the unedited output of ibnetdiscover, ibnetdiscover -p or iblinkinfo (stderr lines in it are fine)."
    if app.json:
        line_no, line = (err.line_no, err.line) if err else (0, "")
        finding = unreadable(origin, text, line_no=line_no, line=line, hint=hint[:1].upper() + hint[1:])
        app.print_json(document(command_name(), [finding], ok=False, stopped=STOPPED_INPUT))
    else:
        app.display_error(text)
        if err is None:
            raise SystemExit(EXIT_UNREADABLE)
        if err.line_no:
            print_excerpt(app.err, err.line_no, err.line)
        app.err.print(f"  [dim]hint:[/dim] {escape(hint)}")
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


# --- the hosts' rail maps -----------------------------------------------------------------------

# Seconds one node may take to print its rails file and GUIDs.
RAILS_TIMEOUT_S = 60


def host_hcas_of(host: str, rails: list[str], node_rails: NodeRails, source: str) -> HostHcas:
    """The rail map of one host from what its rails command printed (or a saved rails file).

    Rails are mapped by the device the rdma role recorded for them and by that device's node
    and port GUIDs (when the input has ``guid`` lines). A file without the host's current
    rails (not converged, written for another spec) gives no map, with the reason.
    """
    devices = rail_devices(host, rails, node_rails)
    if devices.kind in ("absent", "stale"):
        return HostHcas(source=source, problem=devices.problem[:-1])
    by_device: dict[str, str] = {}
    by_guid: dict[str, str] = {}
    for index, ref in enumerate(rails):
        entry = node_rails.rail(index)
        if entry is None or entry.ibdev is None:
            continue
        by_device[entry.ibdev] = ref
        guids = node_rails.guids.get(entry.ibdev)
        for guid in (guids.node_guid, guids.port_guid) if guids is not None else ():
            if guid is not None:
                by_guid[guid] = ref
    return HostHcas(by_device=by_device, by_guid=by_guid, source=source)


def _answer_hcas(host: str, rails: list[str], answer: tuple[int, str, str], source: str) -> HostHcas:
    """The rail map from one node's answer to the rails command (or a saved file, as rc 0)."""
    rc, out, err = answer
    why = (err.strip().splitlines() or out.strip().splitlines() or ["no answer"])[-1]
    if rc == UNREACHABLE_RC:
        return HostHcas(source=source, problem=f"{host} could not be reached ({why})")
    if rc == TIMEOUT_RC:
        return HostHcas(source=source, problem=f"{host} did not answer in {RAILS_TIMEOUT_S} s")
    if rc != 0:
        return HostHcas(source=source, problem=f"{source} could not be read (exit {rc}: {why})")
    try:
        return host_hcas_of(host, rails, parse_node_rails(out), source)
    except ParseError as exc:
        return HostHcas(source=source, problem=f"line {exc.line_no} of {source}: {exc.message}")


def _railed_hosts(plan: Plan, expected: ExpectedFabric) -> dict[str, list[str]]:
    """Planned fabric hosts with rails, and their rails as the plan names them."""
    nodes = {n.hostname: n for n in plan.nodes}
    return {h: list(nodes[h].rails) for h in expected.hosts if h in nodes and nodes[h].rails}


def rails_from_nodes(app: App, plan: Plan, expected: ExpectedFabric, state_dir: Path) -> dict[str, HostHcas]:
    """Read every railed host's rails file and RDMA GUIDs, through the executor ``verify`` uses."""
    hosts = _railed_hosts(plan, expected)
    try:
        # Nodes are reached as `up` recorded them (known_hosts, key, bastion), never trusted on first use.
        executor = executor_for(plan, StateDir(state_dir, plan.cluster.name).path)
    except ProviderError as exc:
        app.abort(str(exc))
    app.display_info(f"Reading the rails of {len(hosts)} node(s) ({RAILS_PATH}) ...")
    jobs = [(host, RAILS_COMMAND, float(RAILS_TIMEOUT_S)) for host in hosts]
    answers = run_many(executor, jobs, 64)
    return {
        host: _answer_hcas(host, rails, answer, f"{host}:{RAILS_PATH}")
        for (host, rails), answer in zip(hosts.items(), answers, strict=True)
    }


def rails_from_dir(plan: Plan, expected: ExpectedFabric, directory: Path) -> dict[str, HostHcas]:
    """Read saved rails files: ``DIR/<host>`` or ``DIR/<host>.conf``, a copy of the node's file or command output."""
    out: dict[str, HostHcas] = {}
    for host, rails in _railed_hosts(plan, expected).items():
        path = next((p for p in (directory / host, directory / f"{host}.conf") if p.is_file()), None)
        if path is None:
            out[host] = HostHcas(source=str(directory), problem=f"{directory} has no rails file of {host}")
            continue
        out[host] = _answer_hcas(host, rails, (0, path.read_text(errors="replace"), ""), str(path))
    return out
