"""``clusterctl schema``: the spec's JSON Schema for editors."""

from __future__ import annotations

import json

import click

from clusterctl.spec.models import Spec


@click.command("schema")
def schema_cmd() -> None:
    """Print the JSON Schema of the spec (point your editor's YAML plugin at it)."""
    schema = Spec.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "clusterctl cluster spec"
    click.echo(json.dumps(schema, indent=2, sort_keys=True))
