"""A node's digest of what the roles leave on it: the same command for pushed and pulled nodes.

Every path under /etc, /usr/local and /opt with its type, size, mtime, mode and owner; dpkg's
status file; the machine ID and the kernel; the names of the active services, timers, sockets and
mounts, read once systemd has no job left (a service a handler restarted is active again, not
activating). Two equal digests mean the roles would find nothing to change. The agent records it
after each apply and compares it before deciding to apply again; ``ops.converged`` reads it from
pushed nodes.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Sequence

ROOTS = ("/etc", "/usr/local", "/opt")
DIGEST_TIMEOUT_S = 60.0
# How long the digest waits for systemd's queued jobs (unit starts and restarts) to end.
SETTLE_S = 30


def digest_command(roots: Sequence[str] = ROOTS) -> str:
    """The bash command that prints the digest (64 hex characters).

    A fixed command: nothing from the spec or the node reaches it. User sessions come and go
    without anything the roles manage changing, so their units are left out; so is each unit's
    sub-state, which a timer changes every time it fires (waiting, running) with nothing changed.
    """
    where = " ".join(shlex.quote(root) for root in roots)
    return (
        f"for _ in $(seq {SETTLE_S}); do\n"
        '  [ -z "$(systemctl list-jobs --no-legend 2>/dev/null)" ] && break; sleep 1\n'
        "done\n"
        "{\n"
        "cat /etc/machine-id; uname -r\n"
        f"find {where} /var/lib/dpkg/status -xdev -printf '%p\\t%y\\t%s\\t%T@\\t%m\\t%U\\t%G\\t%l\\n' 2>/dev/null \\\n"
        "  | LC_ALL=C sort\n"
        "systemctl list-units --type=service,timer,socket,mount --state=active --no-legend --plain 2>/dev/null \\\n"
        "  | awk '$1 !~ /^(user@|user-runtime-dir@|session-|run-user-)/ {print $1}' | LC_ALL=C sort\n"
        "} | sha256sum | cut -c1-64"
    )


DIGEST_COMMAND = digest_command()


def local_digest(roots: Sequence[str] = ROOTS, timeout: float = DIGEST_TIMEOUT_S) -> str:
    """This machine's digest; empty when it cannot be computed."""
    try:
        done = subprocess.run(
            ["bash", "-c", digest_command(roots)], capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    text = done.stdout.strip()
    return text if done.returncode == 0 and len(text) == 64 else ""
