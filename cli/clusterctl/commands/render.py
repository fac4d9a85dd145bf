"""``clusterctl render SPEC --out DIR``: write the build directory."""

from __future__ import annotations

from pathlib import Path

import click

from clusterctl.app import App
from clusterctl.commands.common import handle_internal_errors, rule_options, spec_argument, validated_or_exit
from clusterctl.pipeline import render
from clusterctl.render import BuildDirError


@click.command("render")
@spec_argument
@click.option(
    "--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), help="Build directory [build/<cluster>]."
)
@rule_options
@click.pass_obj
@handle_internal_errors
def render_cmd(app: App, spec: str, out_dir: Path | None, skip_rules: tuple[str, ...], strict: bool) -> None:
    """Render every generated file (Slurm, NCCL, inventory, storage, monitoring) for SPEC.

    The same spec always gives a byte-identical tree; nothing secret is written.
    """
    result = validated_or_exit(app, spec, skip_rules, strict)
    app.show_findings(result.findings)
    try:
        target, changed = render(result, out_dir)
    except BuildDirError as exc:
        app.abort(str(exc), 1)
    app.display_success(f"rendered {target} ({len(changed)} file(s) changed)")
    for path in changed:
        app.display_debug(f"  {path}")
