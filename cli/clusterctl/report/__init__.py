"""The one reporter: findings on a terminal (rich), as JSON (one documented schema) and in HTML.

Every command that judges something (``validate``, ``verify``, ``fabric check``, ``fabric lint``,
``check-output``) reports `clusterctl.spec.findings.Finding` values through here:

- ``document``: the JSON document ``--output json`` prints and ``verify`` saves as report.json,
  with the schema in ``docs/schemas/report.schema.json`` (`SCHEMA_VERSION`).
- ``terminal``: a finding with the source line and a caret under its column, the level styles,
  the ``2 errors, 1 warning`` summary.
- HTML pages and other generated text come from ``templates/`` through the render environment
  (`clusterctl.render.tree.render_template`), never from Python strings.
"""

from clusterctl.report.document import (
    SCHEMA_VERSION,
    STOPPED_ERROR,
    STOPPED_INPUT,
    STOPPED_SPEC,
    command_name,
    document,
    unreadable,
)
from clusterctl.report.terminal import LEVEL_STYLE, print_excerpt, show_findings, summarize

__all__ = [
    "LEVEL_STYLE",
    "SCHEMA_VERSION",
    "STOPPED_ERROR",
    "STOPPED_INPUT",
    "STOPPED_SPEC",
    "command_name",
    "document",
    "print_excerpt",
    "show_findings",
    "summarize",
    "unreadable",
]
