"""``clusterctl validate SPEC``: report every finding."""

from __future__ import annotations

import click

from clusterctl.app import App
from clusterctl.commands.common import (
    handle_internal_errors,
    output_option,
    rule_options,
    spec_argument,
    validated_or_exit,
)
from clusterctl.report import document


@click.command("validate")
@spec_argument
@output_option
@rule_options
@click.pass_obj
@handle_internal_errors
def validate_cmd(app: App, spec: str, output: str, skip_rules: tuple[str, ...], strict: bool) -> None:
    """Check SPEC: schema, references, versions, fabric, storage and sizing rules.

    Every independent problem is reported in one run (`clusterctl rules` lists the rules).

    Exit status: 0 valid (warnings allowed unless --strict), 1 not valid, 2 bad usage (an unknown
    or safety rule given to --skip-rule), 70 internal error.
    """
    app.output = output
    result = validated_or_exit(app, spec, skip_rules, strict)
    if app.json:
        app.print_json(document("validate", result.findings, ok=True))
        return
    app.show_findings(result.findings)
    app.display_success(f"{spec} is valid ({app.summarize_findings(result.findings)}).")
