#!/usr/bin/env python3
"""Generate the "Role Variables" tables of roles/README.md from each role's meta/argument_specs.yml.

Descriptions and types come from ``meta/argument_specs.yml`` (entry point ``main``), defaults from
``defaults/main.yml`` (the value the role really uses). The tables replace the text between the
``<!-- role-docs:begin -->`` and ``<!-- role-docs:end -->`` markers of roles/README.md.

Usage:
    scripts/role-docs.py            # rewrite roles/README.md
    scripts/role-docs.py --check    # exit 1 when roles/README.md is out of date (CI)

Why: the README's variable tables and the argument specs would otherwise drift apart; the
argument specs are already checked against defaults/main.yml by tests/unit/test_role_argument_specs.py.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
ROLES = ROOT / "roles"
README = ROLES / "README.md"
BEGIN = "<!-- role-docs:begin -->"
END = "<!-- role-docs:end -->"
# A default longer than this is shown as "see defaults/main.yml" so the table stays readable.
MAX_DEFAULT = 70


def role_dirs(roles: Path = ROLES) -> list[Path]:
    """Every role under ``roles`` (a directory with tasks/main.yml), sorted by name."""
    return sorted(p for p in roles.iterdir() if (p / "tasks" / "main.yml").is_file())


def load_yaml(path: Path) -> dict:
    """A YAML mapping, or an empty one when the file is missing or empty."""
    if not path.is_file():
        return {}
    return yaml.safe_load(path.read_text()) or {}


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def format_default(value: object) -> str:
    """A default as a Markdown table cell: inline code, or a pointer to defaults/main.yml."""
    text = value if isinstance(value, str) else json.dumps(value)
    if isinstance(value, bool):
        text = "true" if value else "false"
    if len(text) > MAX_DEFAULT:
        return "see `defaults/main.yml`"
    return f"`{_cell(text)}`" if text != "" else '`""`'


def role_table(role: Path) -> str:
    """The Markdown section of one role: a heading, its short description and the variables table."""
    spec = load_yaml(role / "meta" / "argument_specs.yml").get("argument_specs", {}).get("main", {})
    defaults = load_yaml(role / "defaults" / "main.yml")
    options = spec.get("options", {})
    lines = [f"### {role.name}", ""]
    if spec.get("short_description"):
        lines += [_cell(spec["short_description"]), ""]
    if not options:
        return "\n".join([*lines, "No variables.", ""])
    lines += ["| Variable | Type | Default | Description |", "| --- | --- | --- | --- |"]
    for name in sorted(options):
        option = options[name] or {}
        kind = option.get("type", "str")
        if kind == "list" and option.get("elements"):
            kind = f"list of {option['elements']}"
        description = option.get("description", "")
        if isinstance(description, list):
            description = " ".join(description)
        if option.get("choices"):
            description += " One of: " + ", ".join(f"`{c}`" for c in option["choices"]) + "."
        default = format_default(defaults[name]) if name in defaults else "required"
        lines.append(f"| `{name}` | {kind} | {default} | {_cell(description)} |")
    return "\n".join([*lines, ""])


def generate(roles: Path = ROLES) -> str:
    """All roles' sections, in role-name order."""
    return "\n".join(role_table(role) for role in role_dirs(roles))


def updated_readme(text: str, tables: str) -> str:
    """``text`` with the part between the markers replaced by ``tables``."""
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{README}: markers {BEGIN} / {END} not found")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{tables}{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    """Rewrite roles/README.md, or with --check report whether it is current."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if roles/README.md is out of date")
    args = parser.parse_args(argv)
    current = README.read_text()
    wanted = updated_readme(current, generate())
    if args.check:
        if current != wanted:
            diff = difflib.unified_diff(
                current.splitlines(), wanted.splitlines(), "README.md", "generated", lineterm=""
            )
            sys.stderr.write("\n".join(diff) + "\nroles/README.md is out of date: run scripts/role-docs.py\n")
            return 1
        return 0
    if current != wanted:
        README.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
