"""The drain reasons clusterctl gives Slurm: the prefix says who drained a node and who may resume it.

A reason that starts with ``clusterctl`` is clusterctl's; any other is an admin's and is never
undone. The ones in ``OWNED_BY_A_COMMAND`` belong to a command until it finishes (``up``
removing or upgrading a node, ``node replace``): neither ``heal`` nor the controller's heal
timer resumes them.
"""

from __future__ import annotations

import re

from .records import NODE_KEYS

PREFIX = "clusterctl"
HEALTH = "clusterctl-health:"
VERIFY = "clusterctl-verify:"
BURST = "clusterctl-burst:"
REMOVE = "clusterctl:remove"
UPGRADE = "clusterctl:upgrade"
REPLACED = "clusterctl:replaced"
OWNED_BY_A_COMMAND = (REMOVE, UPGRADE, REPLACED)
# Slurm keeps long reasons, but sinfo -R and `scontrol show node` lines become unreadable.
MAX_CHARS = 160

# C0 and C1 controls, DEL, and the Unicode line and paragraph separators.
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
# "Key=" of a field scontrol prints would read as a field of its own in `scontrol show node -o`.
_FIELD_RE = re.compile(r"(?<!\S)(" + "|".join(sorted(NODE_KEYS)) + r")=")


def ours(reason: str) -> bool:
    """A drain clusterctl made (and may undo)."""
    return reason.startswith(PREFIX)


def owned_by_a_command(reason: str) -> bool:
    """A drain a running clusterctl command owns until it finishes."""
    return reason.startswith(OWNED_BY_A_COMMAND)


def clean(reason: str, limit: int = MAX_CHARS) -> str:
    """``reason`` as one printable line Slurm shows as given: no controls, no ``Key=``, at most ``limit`` characters."""
    text = " ".join(_CONTROL_RE.sub(" ", reason).split())
    text = _FIELD_RE.sub(r"\1:", text)
    if len(text) > limit:
        text = text[: limit - 3].rstrip() + "..."
    return text


def reason(prefix: str, why: str, limit: int = MAX_CHARS) -> str:
    """``prefix why`` cleaned: the reason a clusterctl command drains a node with."""
    return clean(f"{prefix} {why}" if why else prefix, limit)
