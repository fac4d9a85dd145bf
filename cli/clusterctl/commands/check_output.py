"""``clusterctl check-output KIND FILE``: judge a saved tool output against the acceptance marks."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import click
from pydantic import TypeAdapter, ValidationError
from rich.markup import escape
from rich.table import Table

from clusterctl.app import App
from clusterctl.catalog.transports import FABRIC_TRANSPORTS, expected_transport
from clusterctl.commands.common import handle_internal_errors, output_option, validated_or_exit
from clusterctl.pipeline import Validated
from clusterctl.report import STOPPED_INPUT, document, print_excerpt, unreadable
from clusterctl.spec.findings import Finding
from clusterctl.spec.types import Bandwidth, BandwidthValue
from clusterctl.verify.acceptance import acceptance_for, gpu_hardware, platform_of
from clusterctl.verify.offline import (
    DEFAULT_GPU_MODEL,
    DEFAULT_GPUS,
    DEFAULT_NICS,
    DEFAULT_SPEED_GBPS,
    KINDS,
    Kind,
    Marks,
    gpu_model_in,
    judge_nccl_debug_output,
    judge_output,
)
from clusterctl.verify.parsers.nccl_debug import parse_nccl_debug
from clusterctl.verify.parsers.nccl_tests import parse_nccl_tests
from clusterctl.verify.parsers.rdma_rails import parse_node_rails
from clusterctl.verify.rails import rail_devices
from clusterctl.verify.result import ParseError, Verdict, figures_of
from clusterctl.verify.thresholds import AcceptanceThresholds, defaults_for
from clusterctl.verify.transport import FabricChoiceError, log_fabric

EXIT_FAIL = 1
EXIT_UNREADABLE = 2


_BANDWIDTH: TypeAdapter[Bandwidth] = TypeAdapter(BandwidthValue)


def _bandwidth(value: str | None, param: str) -> float | None:
    """A ``"2 GB/s"`` option in bytes/s, read the way the spec reads bandwidths."""
    if value is None:
        return None
    try:
        return _BANDWIDTH.validate_python(value).bytes_per_s
    except ValidationError as exc:
        raise click.BadParameter(exc.errors()[0]["msg"], param_hint=param) from None


def _hardware(validated: Validated, kind: Kind, text: str, hardware: str | None) -> str:
    """The GPU profile whose marks apply: --hardware, the one GPU profile, or the output's hosts."""
    plan = validated.plan
    profiles = gpu_hardware(plan)
    if hardware is not None:
        if hardware not in profiles:
            known = ", ".join(profiles) or "none"
            raise click.BadParameter(
                f"{hardware!r} is not a GPU hardware profile of the spec ({known}).", param_hint="--hardware"
            )
        return hardware
    if len(profiles) == 1:
        return profiles[0]
    if not profiles:
        raise click.BadParameter("the spec has no GPU nodes, so it has no acceptance marks.", param_hint="--spec")
    if kind == "nccl-tests":
        try:
            hosts = parse_nccl_tests(text).hosts
        except ParseError:
            hosts = ()
        found = {n.hardware for n in plan.nodes if n.hostname in hosts}
        if len(found) == 1:
            return found.pop()
    raise click.BadParameter(
        f"the spec has several GPU profiles ({', '.join(profiles)}); pick one.", param_hint="--hardware"
    )


def _spec_marks(
    validated: Validated,
    spec: str,
    kind: Kind,
    text: str,
    hardware: str | None,
    mount: str | None,
    platform: str | None,
    rails_file: str | None = None,
) -> Marks:
    plan = validated.plan
    hw = _hardware(validated, kind, text, hardware)
    platform = platform or platform_of(plan, hw)
    thresholds = acceptance_for(plan, validated.loaded.spec.acceptance, hw, platform=platform)
    node = next(n for n in plan.nodes if n.hardware == hw and n.gpus)
    read_bw = write_bw = None
    notes: list[str] = []
    rails = tuple(node.rails)
    if rails_file is not None:
        # The node's own device of each rail, as the rdma role recorded it (clusterctl.verify.rails).
        try:
            devices = rail_devices("the node", list(node.rails), parse_node_rails(Path(rails_file).read_text()))
        except ParseError as exc:
            message = f"{rails_file} line {exc.line_no}: {exc.message}."
            raise click.BadParameter(message, param_hint="--rails-file") from None
        if devices.problem:
            raise click.BadParameter(devices.problem.replace(devices.path, rails_file), param_hint="--rails-file")
        rails = devices.devices
        notes.append(f"rails: the node's devices from {rails_file} ({devices.mapping(list(node.rails))})")
    elif any(":" in r for r in rails) and kind in ("nvidia-smi-topo", "ibstat"):
        rails = ()
        notes.append(
            "the spec names the rails by PCI address, which the output does not print: give --rails-file (a copy "
            "of the node's /etc/clusterctl/rdma-rails.conf) or --rails to check them"
        )
    if kind == "fio":
        tiers = [t for t in plan.storage if mount is None or t.mount == mount]
        if mount is not None and not tiers:
            known = ", ".join(t.mount for t in plan.storage) or "none"
            raise click.BadParameter(f"{mount} is not a storage tier of the spec ({known}).", param_hint="--mount")
        if len(tiers) == 1:
            tier = tiers[0]
            read_bw, write_bw = tier.read_bytes_per_s, tier.write_bytes_per_s
            # The tier's figure is what the whole cluster gets; one node's run measures its share.
            notes.append(f"storage tier {tier.name} ({tier.mount}): read {tier.read_bw}, write {tier.write_bw}")
        elif tiers:
            notes.append("the spec has several storage tiers and no --mount: no bandwidth marks")
    return Marks(
        source=f"spec {spec}, hardware {hw} ({node.gpus}x {node.gpu_model}"
        + (f" on {platform}" if platform else f", {len(node.rails)} rails at {plan.fabric.speed_gbps} Gb/s")
        + ")",
        thresholds=thresholds,
        rails=rails,
        ib_rate_gbps=thresholds.ib_rate_gbps if thresholds.ib_rate_gbps is not None else plan.fabric.speed_gbps,
        read_bw_bytes=read_bw,
        write_bw_bytes=write_bw,
        notes=tuple(notes),
    )


def _default_marks(kind: Kind, text: str, gpu_model: str | None, platform: str | None, rails: tuple[str, ...]) -> Marks:
    notes: list[str] = []
    model = gpu_model or gpu_model_in(kind, text)
    if model is None:
        model = DEFAULT_GPU_MODEL
        notes.append(f"GPU model: {model} (the output does not name it; set --gpu-model)")
    elif gpu_model is None:
        notes.append(f"GPU model: {model} (read from the output)")
    nics = len(rails) or DEFAULT_NICS
    try:
        thresholds = defaults_for(model, DEFAULT_GPUS, nics, DEFAULT_SPEED_GBPS, platform)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--gpu-model") from None
    where = f" on {platform}" if platform else f", {nics} rails at {DEFAULT_SPEED_GBPS} Gb/s"
    return Marks(
        source=f"defaults for {DEFAULT_GPUS}x {model}{where} (no --spec)",
        thresholds=thresholds,
        rails=rails,
        ib_rate_gbps=thresholds.ib_rate_gbps,
        notes=tuple(notes),
    )


def _unreadable(app: App, kind: str, file: str, exc: ParseError) -> None:
    where = f"line {exc.line_no}" if exc.line else f"end of input after line {exc.line_no}"
    if app.json:
        finding = unreadable(file, exc.message, line_no=exc.line_no, line=exc.line, rule=kind)
        app.print_json(
            document(
                "check-output", [finding], ok=False, stopped=STOPPED_INPUT, kind=kind, file=file, verdict="unreadable"
            )
        )
    else:
        app.display_error(f"{file}: {where}: {exc.message}.")
        if exc.line:
            print_excerpt(app.err, exc.line_no, exc.line)
    raise SystemExit(EXIT_UNREADABLE)


def _print_json(app: App, kind: str, file: str, result: Finding, notes: list[str], **marks: Any) -> None:
    """The reporter's document: the one finding, the verdict, and what it was judged against."""
    verdict = Verdict.of(result)
    details = {"kind": kind, "file": file, "verdict": str(verdict), **marks, "notes": notes}
    app.print_json(document("check-output", [result], ok=verdict is not Verdict.FAIL, **details))


def _show(
    app: App, kind: str, file: str, result: Finding, marks: Marks | None, notes: list[str], judged_by: str = ""
) -> None:
    verdict = Verdict.of(result)
    style = {Verdict.PASS: "green", Verdict.FAIL: "bold red", Verdict.SKIPPED: "yellow"}[verdict]
    target = f" ({result.node})" if result.node else ""
    app.out.print(f"{escape(kind)} {escape(file)}{escape(target)}: [{style}]{verdict.upper()}[/{style}]")
    app.out.print(f"  {escape(result.message)}")
    if result.hint:
        app.out.print(f"  [dim]hint:[/dim] {escape(result.hint)}")
    if app.interactive:
        table = Table(title="figures read", title_justify="left")
        table.add_column("figure")
        table.add_column("value", justify="right")
        for key, value in figures_of(result).items():
            table.add_row(key, str(value))
        app.out.print(table)
    else:
        app.out.print("figures:")
        for key, value in figures_of(result).items():
            app.out.print(f"  {escape(key)}: {escape(str(value))}")
    if judged_by or marks is None:
        app.out.print(escape(judged_by))
    else:
        app.out.print(f"thresholds: {escape(marks.source)}")
        for line in marks.thresholds.basis:
            app.out.print(f"  {escape(line)}")
    for note in notes:
        app.out.print(f"  [dim]{escape(note)}[/dim]")


def _debug_fabric(
    app: App, spec: str | None, hardware: str | None, fabric: str | None, text: str
) -> tuple[str | None, str]:
    """The fabric an NCCL_DEBUG log is judged for, and where it comes from.

    With a spec, the node group the log's hosts belong to decides (a burst group of p5 nodes is
    on EFA, the on-prem groups on InfiniBand); --hardware picks a profile when the log names no
    node of the spec.
    """
    if fabric is not None:
        return fabric, "--fabric"
    if spec is None:
        if hardware is not None:
            raise click.UsageError("--hardware needs --spec.")
        return None, "no --spec or --fabric: only a socket fallback fails"
    validated = validated_or_exit(app, spec, (), False)
    plan = validated.plan
    profiles = gpu_hardware(plan)
    if hardware is not None and hardware not in profiles:
        known = ", ".join(profiles) or "none"
        raise click.BadParameter(
            f"{hardware!r} is not a GPU hardware profile of the spec ({known}).", param_hint="--hardware"
        )
    try:
        hosts = parse_nccl_debug(text).hosts
    except ParseError:
        hosts = ()  # judged (and reported unreadable) afterwards
    try:
        kind, how = log_fabric(plan, hosts, hardware)
    except FabricChoiceError as exc:
        raise click.BadParameter(f"{exc}.", param_hint="--hardware") from None
    return kind, f"spec {spec}, {how}"


def _check_nccl_debug(app: App, file: str, text: str, fabric: str | None, source: str, nodes: int | None) -> None:
    """Judge a saved NCCL_DEBUG=INFO log and print the verdict (exit 1 on fail, 2 when unreadable)."""
    expected = expected_transport(fabric)
    notes = [f"nodes: {nodes} (--nodes)"] if nodes is not None else []
    try:
        result = judge_nccl_debug_output(text, fabric, nodes=nodes)
    except ParseError as exc:
        _unreadable(app, "nccl-debug", file, exc)
        return
    if app.json:
        expect = {"fabric": fabric, "transport": expected.label, "source": source}
        _print_json(app, "nccl-debug", file, result, notes, expected=expect)
    else:
        judged_by = f"expected: {expected.label} (fabric {fabric or 'not given'}; {source})"
        _show(app, "nccl-debug", file, result, None, notes, judged_by=judged_by)
    if Verdict.of(result) is Verdict.FAIL:
        raise SystemExit(EXIT_FAIL)


@click.command("check-output")
@click.argument("kind", type=click.Choice(KINDS))
@click.argument("file", type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=str))
@click.option("--spec", type=click.Path(dir_okay=False, path_type=str), help="Take the thresholds from this spec.")
@click.option("--hardware", metavar="NAME", help="The spec's GPU hardware profile (when it has several).")
@click.option(
    "--nodes",
    type=click.IntRange(min=1),
    help="Nodes the nccl-tests run spanned [from its rank lines, else 1].",
)
@click.option("--gpu-model", metavar="MODEL", help="Without --spec: defaults for this GPU model [from the output].")
@click.option("--platform", metavar="TYPE", help="Cloud instance type with its own published mark (p5.48xlarge).")
@click.option("--min-busbw", type=click.FloatRange(min=0, min_open=True), metavar="GBPS", help="nccl-tests mark.")
@click.option("--rails", metavar="NIC,...", help="Rail NIC of GPU0, GPU1, ... (nvidia-smi-topo, ibstat).")
@click.option(
    "--rails-file",
    type=click.Path(exists=True, dir_okay=False, path_type=str),
    metavar="FILE",
    help="With --spec: the node's /etc/clusterctl/rdma-rails.conf, naming each rail's device there.",
)
@click.option("--rate", type=click.FloatRange(min=0, min_open=True), metavar="GBPS", help="ibstat port rate.")
@click.option("--level", type=click.IntRange(1, 4), help="dcgmi-diag: the lowest acceptable -r level.")
@click.option(
    "--fabric",
    type=click.Choice(sorted(FABRIC_TRANSPORTS)),
    help="nccl-debug: the fabric the nodes are on [from --spec; without either, only sockets fail].",
)
@click.option("--mount", metavar="PATH", help="fio: the spec's storage tier mounted here.")
@click.option("--read-bw", metavar="BW", help='fio: read mark, e.g. "2 GB/s".')
@click.option("--write-bw", metavar="BW", help='fio: write mark, e.g. "2 GB/s".')
@output_option
@click.pass_obj
@handle_internal_errors
def check_output_cmd(
    app: App,
    kind: Kind,
    file: str,
    spec: str | None,
    hardware: str | None,
    nodes: int | None,
    gpu_model: str | None,
    platform: str | None,
    min_busbw: float | None,
    rails: str | None,
    rails_file: str | None,
    rate: float | None,
    level: int | None,
    fabric: str | None,
    mount: str | None,
    read_bw: str | None,
    write_bw: str | None,
    output: str,
) -> None:
    """Judge FILE, a saved KIND output, against the spec's thresholds (or the defaults).

    Prints the verdict, the figures read and the thresholds used. nccl-debug judges an
    NCCL_DEBUG=INFO log: the transport NCCL chose must be the fabric's (from --spec or
    --fabric), never a socket fallback.

    Exit status: 0 pass (or a judgement skipped with its reason), 1 fail, 2 FILE cannot be
    parsed (or bad usage), 70 internal error.
    """
    app.output = output
    text = click.open_file(file).read() if file == "-" else Path(file).read_text(errors="replace")
    if kind == "nccl-debug":
        judged_fabric, source = _debug_fabric(app, spec, hardware, fabric, text)
        _check_nccl_debug(app, file, text, judged_fabric, source, nodes)
        return
    if fabric is not None:
        raise click.UsageError("--fabric is for nccl-debug.")
    rail_list = tuple(r.strip() for r in rails.split(",") if r.strip()) if rails else ()
    if spec is not None:
        validated = validated_or_exit(app, spec, (), False)
        marks = _spec_marks(validated, spec, kind, text, hardware, mount, platform, rails_file)
    else:
        if hardware is not None or mount is not None:
            raise click.UsageError("--hardware and --mount need --spec.")
        if rails_file is not None:
            raise click.UsageError("--rails-file needs --spec (it maps the spec's rails to the node's devices).")
        marks = _default_marks(kind, text, gpu_model, platform, rail_list)
    # Explicit values win over the spec and the defaults.
    given = {
        "--rails": ",".join(rail_list) if rail_list else None,
        "--rate": f"{rate:g} Gb/s" if rate is not None else None,
        "--min-busbw": f"{min_busbw:g} GB/s" if min_busbw is not None else None,
        "--read-bw": read_bw,
        "--write-bw": write_bw,
        "--level": str(level) if level is not None else None,
    }
    explicit = {flag: value for flag, value in given.items() if value is not None}
    read_bytes, write_bytes = _bandwidth(read_bw, "--read-bw"), _bandwidth(write_bw, "--write-bw")
    marks = replace(
        marks,
        rails=rail_list or marks.rails,
        ib_rate_gbps=rate if rate is not None else marks.ib_rate_gbps,
        min_busbw_gbps=min_busbw,
        read_bw_bytes=read_bytes if read_bytes is not None else marks.read_bw_bytes,
        write_bw_bytes=write_bytes if write_bytes is not None else marks.write_bw_bytes,
        thresholds=_with_level(marks.thresholds, level) if level is not None else marks.thresholds,
        notes=(*marks.notes, *(f"explicit: {flag} {value}" for flag, value in explicit.items())),
    )
    try:
        result, notes = judge_output(kind, text, marks, nodes=nodes)
    except ParseError as exc:
        _unreadable(app, kind, file, exc)
        return
    if app.json:
        basis = {"source": marks.source, "basis": list(marks.thresholds.basis), "explicit": explicit}
        _print_json(app, kind, file, result, notes, thresholds=basis)
    else:
        _show(app, kind, file, result, marks, notes)
    if Verdict.of(result) is Verdict.FAIL:
        raise SystemExit(EXIT_FAIL)


def _with_level(thresholds: AcceptanceThresholds, level: int) -> AcceptanceThresholds:
    basis = [b for b in thresholds.basis if not b.startswith("dcgm_diag_level=")]
    basis.append(f"dcgm_diag_level={level}: --level")
    return replace(thresholds, dcgm_diag_level=level, basis=tuple(basis))
