"""``clusterctl render SPEC --out DIR``: write the build directory."""

from __future__ import annotations

from pathlib import Path

import click

from clusterctl.app import App
from clusterctl.commands.common import (
    handle_internal_errors,
    output_option,
    rule_options,
    spec_argument,
    validated_or_exit,
)
from clusterctl.pipeline import render
from clusterctl.render import BuildDirError
from clusterctl.report import document


@click.command("render")
@spec_argument
@click.option(
    "--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), help="Build directory [build/<cluster>]."
)
@output_option
@rule_options
@click.pass_obj
@handle_internal_errors
def render_cmd(
    app: App, spec: str, out_dir: Path | None, output: str, skip_rules: tuple[str, ...], strict: bool
) -> None:
    """Render every generated file (Slurm, NCCL, inventory, storage, monitoring) for SPEC.

    The same spec always gives a byte-identical tree; nothing secret is written.

    Exit status: 0 rendered, 1 the spec is not valid or the build directory was refused (not
    clusterctl's), 2 bad usage, 70 internal error.
    """
    app.output = output
    result = validated_or_exit(app, spec, skip_rules, strict)
    if not app.json:
        app.show_findings(result.findings)
    try:
        target, changed = render(result, out_dir)
    except BuildDirError as exc:
        app.abort(str(exc), 1)
    if app.json:
        app.print_json(document("render", result.findings, ok=True, build_dir=str(target), changed=changed))
        return
    app.display_success(f"rendered {target} ({len(changed)} file(s) changed)")
    for path in changed:
        app.display_debug(f"  {path}")
