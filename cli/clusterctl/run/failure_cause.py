"""The cause of a failed task, as the node tells it: what `up`'s summary prints under the failure.

The reading itself (apt's ``E:`` lines, the failed unit's journal) is ``clusterctl.agent.cause``,
which a pulling node's agent runs on itself; here the control machine asks a pushed node through
its executor. Everything read from a node is shown as text: control characters are escaped,
lines are cut.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from clusterctl.agent.cause import (
    APT_ACTIONS,
    APT_UPDATE_COMMAND,
    APT_UPDATE_TIMEOUT_S,
    JOURNAL_LINES,
    JOURNAL_TIMEOUT_S,
    MAX_CHARS,
    MAX_LINES,
    SERVICE_ACTIONS,
    apt_errors,
    cause,
    journal_cause,
    journal_command,
    shown,
    unit_of,
)
from clusterctl.remote import Executor
from clusterctl.run.ansible import HostFailure

# The failures whose cause is looked up (the summary shows no more).
MAX_FAILURES = 4

__all__ = [
    "APT_ACTIONS",
    "APT_UPDATE_COMMAND",
    "APT_UPDATE_TIMEOUT_S",
    "JOURNAL_LINES",
    "JOURNAL_TIMEOUT_S",
    "MAX_CHARS",
    "MAX_FAILURES",
    "MAX_LINES",
    "SERVICE_ACTIONS",
    "apt_errors",
    "cause_of",
    "failed_unit",
    "journal_cause",
    "journal_command",
    "shown",
    "summary_lines",
    "with_causes",
]


def failed_unit(failure: HostFailure) -> str | None:
    """The systemd unit a failed service task was about (its ``name``, or the one its message names)."""
    return unit_of(failure.unit, failure.message)


def cause_of(failure: HostFailure, executor: Executor) -> tuple[str, ...]:
    """What the node says about ``failure``: apt's errors, or the failed unit's journal."""
    if failure.unreachable:
        return ()
    return cause(
        failure.action,
        failure.message,
        failure.detail,
        failure.unit,
        lambda command, timeout: executor.run(failure.host, command, timeout),
    )


def with_causes(failures: Sequence[HostFailure], executor: Executor) -> list[HostFailure]:
    """``failures`` with the cause of the first ``MAX_FAILURES`` read from their nodes (a failure that
    already carries its cause, as a pulling node reports it, keeps it)."""
    return [
        replace(failure, cause=cause_of(failure, executor)) if index < MAX_FAILURES and not failure.cause else failure
        for index, failure in enumerate(failures)
    ]


def summary_lines(failures: Iterable[HostFailure]) -> list[str]:
    """The summary's lines for the failures: each failure, its cause on the node below it."""
    failures = list(failures)
    lines: list[str] = []
    for failure in failures[:MAX_FAILURES]:
        kind = "unreachable" if failure.unreachable else "failed"
        first = (failure.message.strip().splitlines() or [""])[0]
        if failure.task:
            lines.append(f"  {failure.host}: {kind} in task '{failure.task}': {shown(first)}")
        else:
            # A node that configures itself and did not say it applied its bundle.
            lines.append(f"  {failure.host}: did not apply its configuration: {shown(first)}")
        lines.extend(f"    on {failure.host}: {line}" for line in failure.cause)
    if len(failures) > MAX_FAILURES:
        lines.append(f"  ({len(failures) - MAX_FAILURES} more failure(s) in the Ansible log)")
    return lines
