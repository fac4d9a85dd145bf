"""What a node's configuration agent tells Slurm it applied: the node's ``Extra`` field.

The agent (``clusterctl.agent``) sets it with ``scontrol update NodeName=<node> Extra=<report>``
after each check or apply, so ``up`` reads every node's state and what it applied in one
``scontrol show node -o``. The report is ``clusterctl-agent`` followed by ``key=value`` words whose
values are percent-encoded: no space, ``=`` or control character of a task name or a journal line
can open another word, a Slurm field (``State=``) or a line. Runs on the nodes (standard library
only) and on the control machine.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from urllib.parse import quote, unquote

from .names import node_name

MARK = "clusterctl-agent"
APPLYING = "applying"
OK = "ok"
FAILED = "failed"
STATES = (APPLYING, OK, FAILED)
# Slurm keeps the field as given; scontrol and the parsers handle far longer, the summary needs no more.
MAX_REPORT_CHARS = 1800
MAX_TEXT = 240
MAX_CAUSE_LINES = 3
_HEX = re.compile(r"[0-9a-f]{12,64}")
_WORD = re.compile(r"(?P<key>[a-z]{1,16})=(?P<value>[A-Za-z0-9%._~-]{0,1200})")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_MAX_NUMBER = 10**15


@dataclass(frozen=True)
class Applied:
    """One report: the generation of the request it answers, the bundle, and how the apply went.

    Attributes:
        generation: The request's generation (every ``up`` publishes a higher one).
        bundle: The bundle's digest (hex, at least 12 characters).
        state: ``applying``, ``ok`` or ``failed``.
        changed: Tasks that changed something (0 when the node was found as the bundle leaves it).
        at: When the agent wrote it (seconds since the epoch, the node's clock).
        task: The task that failed.
        message: Its message.
        cause: What the node says caused it (apt's errors, the unit's journal), a few lines.
    """

    generation: int
    bundle: str
    state: str
    changed: int = 0
    at: int = 0
    task: str = ""
    message: str = ""
    cause: tuple[str, ...] = ()


def _text(value: str, limit: int = MAX_TEXT) -> str:
    line = _CONTROL.sub(" ", value).strip()
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _enc(value: str) -> str:
    return quote(value, safe="")


def format_report(applied: Applied) -> str:
    """The ``Extra`` text for ``applied``, at most ``MAX_REPORT_CHARS`` (the cause is cut first)."""
    if applied.state not in STATES or not _HEX.fullmatch(applied.bundle):
        raise ValueError(f"not a report: state {applied.state!r}, bundle {applied.bundle[:70]!r}")
    head = [
        MARK,
        f"gen={int(applied.generation)}",
        f"bundle={applied.bundle}",
        f"state={applied.state}",
        f"changed={int(applied.changed)}",
        f"at={int(applied.at or time.time())}",
    ]
    if applied.task:
        head.append(f"task={_enc(_text(applied.task))}")
    if applied.message:
        head.append(f"msg={_enc(_text(applied.message))}")
    words = list(head)
    for line in applied.cause[:MAX_CAUSE_LINES]:
        word = f"cause={_enc(_text(line))}"
        if len(" ".join([*words, word])) > MAX_REPORT_CHARS:
            break
        words.append(word)
    text = " ".join(words)
    return text if len(text) <= MAX_REPORT_CHARS else " ".join(head)[:MAX_REPORT_CHARS]


def _number(text: str) -> int | None:
    if not text.isdigit() or len(text) > 15:
        return None
    value = int(text)
    return value if value < _MAX_NUMBER else None


def parse_report(extra: str) -> Applied | None:
    """The agent's report in a node's ``Extra`` text; None when it holds none (or anything else).

    Never raises: an ``Extra`` an admin or a forger wrote is simply not a report.
    """
    words = extra.strip().split(" ")
    if len(extra) > MAX_REPORT_CHARS + 64 or not words or words[0] != MARK:
        return None
    fields: dict[str, str] = {}
    causes: list[str] = []
    for word in words[1:]:
        found = _WORD.fullmatch(word)
        if found is None:
            return None
        key, value = found.group("key"), unquote(found.group("value"))
        if key == "cause":
            causes.append(_text(value))
        elif key in fields:
            return None
        else:
            fields[key] = value
    generation, changed, at = (_number(fields.get(k, "")) for k in ("gen", "changed", "at"))
    bundle, state = fields.get("bundle", ""), fields.get("state", "")
    if generation is None or changed is None or at is None or state not in STATES or not _HEX.fullmatch(bundle):
        return None
    return Applied(
        generation=generation,
        bundle=bundle,
        state=state,
        changed=changed,
        at=at,
        task=_text(fields.get("task", "")),
        message=_text(fields.get("msg", "")),
        cause=tuple(causes[:MAX_CAUSE_LINES]),
    )


def set_report(node: str, applied: Applied) -> list[str]:
    """``scontrol update NodeName=<node> Extra=<report>``: one argv word each, run as root on the node."""
    return ["scontrol", "update", f"NodeName={node_name(node)}", f"Extra={format_report(applied)}"]
