"""``clusterctl fabric lint TOPOLOGY_CONF``: defects Slurm would refuse or silently mis-schedule."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape

from clusterctl.app import App
from clusterctl.commands.common import handle_internal_errors, output_option, validated_or_exit
from clusterctl.fabric.lint import lint_topology_conf, parse_topology_conf
from clusterctl.report import LEVEL_STYLE, document, print_excerpt
from clusterctl.spec.findings import Level


@click.command("lint")
@click.argument("topology_conf", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--spec",
    type=click.Path(dir_okay=False, path_type=str),
    help="Also check that every compute node of the spec is under a switch and every name is a node.",
)
@output_option
@click.option("--strict", is_flag=True, help="Warnings (several roots, empty switches) fail too.")
@click.pass_obj
@handle_internal_errors
def lint_cmd(app: App, topology_conf: Path, spec: str | None, output: str, strict: bool) -> None:
    """Check TOPOLOGY_CONF (topology/tree).

    Errors: a node under two leaf switches, undefined or duplicate switches, cycles,
    unreadable lines; with --spec, nodes under no switch and names that are no node.
    Warnings: several roots with no common parent (right only for separate fabrics).

    Exit status: 0 clean (warnings allowed unless --strict), 1 otherwise, 2 bad usage, 70 internal
    error.
    """
    app.output = output
    known: set[str] | None = None
    if spec:
        plan = validated_or_exit(app, spec, (), False).plan
        known = {n.hostname for n in plan.nodes if n.role == "compute"}
    text = topology_conf.read_text(errors="replace")
    findings = lint_topology_conf(text, known, file=str(topology_conf))
    errors = [f for f in findings if f.level is Level.ERROR]
    warnings = [f for f in findings if f.level is Level.WARNING]
    ok = not errors and not (strict and warnings)
    if app.json:
        app.print_json(document("fabric lint", findings, ok=ok, file=str(topology_conf)))
        raise SystemExit(0 if ok else 1)
    lines = text.splitlines()
    for finding in findings:
        # Plain where stdout is no terminal: "file:5: error FAB-L001: message", then the line.
        style = LEVEL_STYLE[finding.level]
        app.out.print(
            f"{escape(finding.location)}: [{style}]{finding.level}[/{style}] [dim]{finding.code}:[/dim] "
            f"{escape(finding.message)}"
        )
        if 0 < finding.line <= len(lines):
            print_excerpt(app.out, finding.line, lines[finding.line - 1])
    summary = f"{len(errors)} error(s), {len(warnings)} warning(s)"
    if not ok:
        app.display_error(f"{topology_conf} has problems: {summary}.")
        raise SystemExit(1)
    conf = parse_topology_conf(text)
    app.display_success(
        f"{topology_conf} is valid: {len(conf.switches)} switches, {len(conf.nodes())} nodes"
        + (f" ({summary})." if warnings else ".")
    )
