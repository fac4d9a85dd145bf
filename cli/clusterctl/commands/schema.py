"""``clusterctl schema``: the spec's JSON Schema for editors."""

from __future__ import annotations

import json

import click

from clusterctl.app import App
from clusterctl.commands.common import handle_internal_errors, output_option
from clusterctl.report import document
from clusterctl.spec.models import Spec


@click.command("schema")
@output_option
@click.pass_obj
@handle_internal_errors
def schema_cmd(app: App, output: str) -> None:
    """Print the JSON Schema of the spec (point your editor's YAML plugin at it).

    The text output is the schema itself; --output json wraps it in the report envelope (key
    `schema`), like every other command's.

    Exit status: 0 printed, 2 bad usage, 70 internal error.
    """
    app.output = output
    schema = Spec.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "clusterctl cluster spec"
    if app.json:
        app.print_json(document("schema", [], ok=True, schema=schema))
        return
    click.echo(json.dumps(schema, indent=2, sort_keys=True))
