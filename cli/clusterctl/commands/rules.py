"""``clusterctl rules``: every spec rule, its level, what it reads and whether it can be skipped."""

from __future__ import annotations

from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from clusterctl.app import App
from clusterctl.commands.common import handle_internal_errors, output_option
from clusterctl.report import document
from clusterctl.rules import RULES, SAFETY_TAG, check_skip


def rule_rows() -> list[dict[str, Any]]:
    """Every registered rule as data, by code."""
    check_skip(())  # registers every rule module
    return [
        {
            "code": r.code,
            "name": r.name,
            "level": str(r.level),
            "reads": "spec" if r.phase == 1 else "plan",
            "gates_plan": r.gates_plan,
            "skippable": SAFETY_TAG not in r.tags,
            "tags": sorted(r.tags),
            "checks": r.summary,
        }
        for r in sorted(RULES.values(), key=lambda r: r.code)
    ]


@click.command("rules")
@output_option
@click.pass_obj
@handle_internal_errors
def rules_cmd(app: App, output: str) -> None:
    """List every rule validate runs: code, name, level, what it checks and whether --skip-rule takes it.

    The level is the rule's usual one (some rules also report a lower one, e.g. a notice). Rules
    that read the spec alone run whatever else is wrong; those that read the plan run once the
    rules it is built from (gates_plan) pass. Safety rules cannot be skipped.

    Exit status: 0 listed, 2 bad usage, 70 internal error.
    """
    app.output = output
    rows = rule_rows()
    if app.json:
        app.print_json(document("rules", [], ok=True, rules=rows))
        return
    skip = {True: "skippable", False: "safety"}
    if not app.interactive:
        # One line per rule where the output is read by grep or a pager, not a table folded to 80 columns.
        width = max(len(row["name"]) for row in rows)
        for row in rows:
            click.echo(
                f"{row['code']:<7} {row['name']:<{width}} {row['level']:<7} {row['reads']:<4} "
                f"{skip[row['skippable']]:<9} {row['checks']}"
            )
        return
    table = Table(title=f"{len(rows)} rules (skip one with --skip-rule NAME or CODE)")
    for column in ("code", "name", "level", "reads", "skip", "checks"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(
            row["code"], row["name"], row["level"], row["reads"], skip[row["skippable"]], escape(row["checks"])
        )
    app.out.print(table)
