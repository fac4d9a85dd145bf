"""``clusterctl fabric check SPEC``: the cabled InfiniBand fabric against the spec's design."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from clusterctl.app import App
from clusterctl.commands.common import (
    handle_internal_errors,
    output_option,
    spec_argument,
    state_dir_option,
    validated_or_exit,
)
from clusterctl.commands.fabric.common import (
    FabricSource,
    fabric_input_options,
    load_fabric,
    rails_from_dir,
    rails_from_nodes,
)
from clusterctl.fabric.compare import CablingReport, compare_fabric
from clusterctl.fabric.expected import ExpectedFabric, expected_fabric
from clusterctl.report import LEVEL_STYLE, document


@click.command("check")
@spec_argument
@fabric_input_options
@output_option
@click.option("--strict", is_flag=True, help="Warnings (unknown hosts, extra uplinks) fail too.")
@click.option(
    "--from-nodes",
    is_flag=True,
    help="Map each node's HCAs to its rails from its /etc/clusterctl/rdma-rails.conf and RDMA GUIDs, read over "
    "the access clusterctl up recorded (needed when rails are PCI addresses or descriptions say HCA-<n>).",
)
@click.option(
    "--node-rails",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    metavar="DIR",
    help="Saved rail maps instead: DIR/<host> (or <host>.conf), a copy of the node's rdma-rails.conf.",
)
@state_dir_option
@click.pass_obj
@handle_internal_errors
def check_cmd(
    app: App,
    spec: str,
    ibnetdiscover: str | None,
    iblinkinfo: str | None,
    host_pattern: str | None,
    output: str,
    strict: bool,
    from_nodes: bool,
    node_rails: Path | None,
    state_dir: Path,
) -> None:
    """Check the cabled fabric against SPEC: rails, leaves, uplinks, links, ports.

    Reads saved ibnetdiscover or iblinkinfo output, or runs ibnetdiscover here. Switch
    names and GUIDs need not be known: leaves are recognised by the hosts cabled to them.

    HCAs are matched to rails by the name in their node description; where the spec names
    rails by PCI address or descriptions name no device, --from-nodes (or --node-rails)
    maps them, and HCAs that stay unmapped are reported.

    Exit status: 0 the fabric matches, 1 errors (or warnings with --strict), 2 the input cannot
    be read (or bad usage), 70 internal error.
    """
    app.output = output
    if from_nodes and node_rails is not None:
        raise click.UsageError("Give --from-nodes or --node-rails, not both.")
    plan = validated_or_exit(app, spec, (), False).plan
    if plan.fabric.kind != "infiniband":
        raise click.UsageError(f"{spec} declares an {plan.fabric.kind} fabric; fabric check reads InfiniBand.")
    source = load_fabric(app, ibnetdiscover, iblinkinfo)
    expected = expected_fabric(plan)
    host_hcas = (
        rails_from_nodes(app, plan, expected, state_dir)
        if from_nodes
        else rails_from_dir(plan, expected, node_rails)
        if node_rails is not None
        else {}
    )
    report = compare_fabric(source.fabric, expected, host_pattern=host_pattern, host_hcas=host_hcas)
    ok = report.matches(strict)
    if app.json:
        app.print_json(
            document(
                "fabric check",
                report.findings,
                ok=ok,
                spec=spec,
                source=source.origin,
                format=source.fabric.source,
                summary=report.summary(),
                leaves=[leaf.to_dict() for leaf in report.leaves],
                notes=list(source.fabric.notes),
            )
        )
    else:
        _show(app, report, expected, spec, source, ok)
    raise SystemExit(0 if ok else 1)


def _show(app: App, report: CablingReport, expected: ExpectedFabric, spec: str, source: FabricSource, ok: bool) -> None:
    if report.findings:
        if app.interactive:
            table = Table(title=f"Fabric check: {spec} against {source.origin}")
            for column in ("level", "code", "cable / port", "problem", "expected", "found"):
                table.add_column(column, overflow="fold")
            for f in report.findings:
                style = LEVEL_STYLE[f.level]
                table.add_row(
                    f"[{style}]{f.level}[/{style}]",
                    f"{f.code}\n[dim]{f.rule}[/dim]",
                    escape(f.cable),
                    escape(f.message),
                    escape(f.data["expected"]),
                    escape(f.data["found"]),
                )
            app.out.print(table)
        else:
            for f in report.findings:
                expected, found = f.data["expected"], f.data["found"]
                click.echo(f"{f.level} {f.code} {f.rule}: {f.cable}: expected {expected}; found {found}. {f.message}")
    if app.verbosity > 0:
        _show_leaves(app, report)
    counts = report.summary()
    summary = f"{counts['errors']} error(s), {counts['warnings']} warning(s)"
    if not ok:
        app.display_error(f"The fabric does not match {spec}: {summary}.")
        return
    ratio = f"{expected.oversubscription:g}:1" if expected.uplinks_per_leaf else "one leaf"
    message = (
        f"The fabric matches {spec}: {report.hosts_found} hosts, {report.hcas_found} HCAs on "
        f"{len(report.leaf_match)} leaves ({ratio})"
    )
    if report.warnings():
        app.display_warning(f"{message}, with {summary}.")
    else:
        app.display_success(f"{message}.")


def _show_leaves(app: App, report: CablingReport) -> None:
    if app.interactive:
        table = Table(title="Leaves as cabled")
        for column in ("switch", "GUID", "planned", "host links", "uplinks", "oversubscription"):
            table.add_column(column, justify="right" if column in ("host links", "uplinks") else "left")
        for leaf in report.leaves:
            table.add_row(escape(leaf.switch), leaf.guid, leaf.planned or "-", str(leaf.down), str(leaf.up), leaf.ratio)
        app.out.print(table)
        return
    for leaf in report.leaves:
        click.echo(
            f"leaf {leaf.switch} ({leaf.guid}) planned {leaf.planned or '-'}: {leaf.down} host links, "
            f"{leaf.up} uplinks, {leaf.ratio}"
        )
