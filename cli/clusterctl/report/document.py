"""The JSON document of a command's findings: one schema for every command that reports them.

``docs/schemas/report.schema.json`` describes it. Every document has the same envelope::

    {"schema_version": 1, "command": "fabric check", "ok": false,
     "counts": {"error": 1, "warning": 0, "info": 0},
     "findings": [{"code": ..., "level": ..., "rule": ..., "path": ..., "file": ..., "line": ...,
                   "column": ..., "node": ..., "cable": ..., "message": ..., "hint": ..., "data": {...}}],
     ...}

and each command adds its own keys beside it (``verify``: the per-node summaries, thresholds and
test plan; ``fabric check``: the leaves as cabled; ``check-output``: the kind, file and marks;
``plan``: the sizing report; ``status``: the nodes), which the schema lists per command. Every
command prints it with ``--output json``; ``up`` and the commands that run it stream one event
per line first and print it last. ``ok`` is the command's verdict: exit 0. A command that
stopped before its own work (an invalid spec, an unreadable input) says so in ``stopped`` and
has only the envelope (and what it knew: check-output's kind and file).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from clusterctl.spec.findings import Finding, Level, count_levels

# Raised when a key of the envelope changes meaning or goes; adding a key keeps it.
SCHEMA_VERSION = 1
ENVELOPE = ("schema_version", "command", "ok", "counts", "findings", "stopped")
# Why a command stopped before its own work: its own keys are then absent.
STOPPED_SPEC = "spec"  # the spec is invalid (the findings say where)
STOPPED_INPUT = "input"  # an input (a saved tool output, a fabric dump) could not be read
STOPPED_ERROR = "error"  # anything else that stopped it (a refusal, a provider error): the ``error`` key says what
UNREADABLE = "INPUT-unreadable"


def document(
    command: str, findings: Sequence[Finding], *, ok: bool, stopped: str | None = None, **details: Any
) -> dict[str, Any]:
    """The JSON document of one command's run.

    Args:
        command: The command as typed after ``clusterctl`` (``fabric check``).
        findings: Everything it found, in the order it reports them.
        ok: Its verdict (the exit status is 0 exactly when this is true).
        stopped: Why it stopped before its own work (`STOPPED_SPEC`, `STOPPED_INPUT`); None
            for a full run, whose document has every key of its command.
        **details: The command's own keys (never one of the envelope's).

    Raises:
        ValueError: A detail key is one of the envelope's.
    """
    clash = sorted(set(details) & set(ENVELOPE))
    if clash:
        raise ValueError(f"{', '.join(clash)} belong to the report envelope, not to a command's details.")
    envelope: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "command": command,
        "ok": ok,
        "counts": count_levels(list(findings)),
        "findings": [f.to_dict() for f in findings],
    }
    if stopped is not None:
        envelope["stopped"] = stopped
    return {**envelope, **details}


def command_name(ctx: click.Context | None = None) -> str:
    """The running command as typed after the program name: ``validate``, ``fabric check``."""
    ctx = ctx or click.get_current_context()
    names: list[str] = []
    while ctx.parent is not None:
        names.append(ctx.info_name or "")
        ctx = ctx.parent
    return " ".join(reversed(names))


def unreadable(file: str, message: str, *, line_no: int = 0, line: str = "", hint: str = "", rule: str = "") -> Finding:
    """The finding for an input that could not be parsed: the file, the line that broke it, why.

    Args:
        file: The input (a path, or ``stdin``).
        message: What is wrong, as a sentence.
        line_no: 1-based line that broke parsing; 0 when the whole input is at fault.
        line: That line as it appeared in the input.
        hint: What to give instead.
        rule: The format that was expected (``ibnetdiscover``, ``nccl-tests``).
    """
    return Finding(
        code=UNREADABLE,
        level=Level.ERROR,
        message=message,
        hint=hint,
        rule=rule,
        file=file,
        line=line_no,
        data={"text": line.rstrip("\n")} if line_no else {},
        quote_source=False,
    )
