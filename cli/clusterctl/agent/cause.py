"""The cause of a failed task, as the node tells it: apt's own error lines, or the failed unit's journal.

Ansible's message says what failed ("Unable to restart service prometheus: Job for
prometheus.service failed ... See systemctl status"), not why. The why is on the node: apt's
``E:`` lines in the task's output, or the unit's journal for a service that did not start or
reload. The same reading serves both ways of configuring a node: the control machine asks a
pushed node (``clusterctl.run.failure_cause``), a pulling node's agent reads its own journal and
reports the lines with its failure. Everything read is shown as text: control characters are
escaped, lines are cut.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Callable

MAX_LINES = 3
MAX_CHARS = 240
JOURNAL_LINES = 40
JOURNAL_TIMEOUT_S = 15.0
APT_UPDATE_COMMAND = "LC_ALL=C apt-get update -q 2>&1 | tail -n 40"
APT_UPDATE_TIMEOUT_S = 90.0

SERVICE_ACTIONS = frozenset(
    {"systemd", "systemd_service", "service", "ansible.builtin.systemd", "ansible.builtin.systemd_service"}
    | {"ansible.builtin.service"}
)
APT_ACTIONS = frozenset({"apt", "package", "ansible.builtin.apt", "ansible.builtin.package"})

# apt-get's stderr has one error a line ("E: Unable to locate package x"); python-apt's, which the
# apt module shows when the cache update fails, joins them with ", " ("W:..., E:Failed to fetch ...").
# An unreachable source is only a warning to apt-get ("W: Failed to fetch ..."), so those count too.
_APT_ERROR = re.compile(r"(?:^|, |: )(?P<error>(?:E|Err:\d+|W(?=: ?Failed)) ?:?\s?.+?)(?=, [WE]:|$)", re.MULTILINE)
_UNIT_IN_MESSAGE = re.compile(
    r"Job for (?P<job>[\w@.:-]+?\.(?:service|socket|mount|timer)) failed"
    r"|Unable to (?:start|stop|restart|reload) service (?P<service>[\w@.:-]+)"
)
_UNIT_NAME = re.compile(r"^[\w@.:-]{1,200}$")
_JOURNAL_PROBLEM = re.compile(
    r"fail|error|not found|no such|denied|cannot|can't|unable|invalid|refus|fatal|timed out", re.IGNORECASE
)
# systemd's own summary of a failed job: true, but says nothing of why.
_GENERIC = re.compile(
    r"Failed with result|Failed to start|Reload failed for|Control process exited|Main process exited"
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")

# (host, command, timeout) -> (rc, stdout, stderr): a node's shell, here or over a transport.
Run = Callable[[str, float], tuple[int, str, str]]


def shown(text: str) -> str:
    """One line of a node's output as the terminal may show it: controls escaped, cut to length."""
    line = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text.strip())
    return line if len(line) <= MAX_CHARS else line[: MAX_CHARS - 3] + "..."


def apt_errors(output: str) -> list[str]:
    """apt's own error lines (``E: ...``, ``Err:N ...``), each once, the last ``MAX_LINES``."""
    seen: dict[str, None] = {}
    for found in _APT_ERROR.finditer(output):
        seen.setdefault(shown(found.group("error")))
    return list(seen)[-MAX_LINES:]


def unit_of(unit: str, message: str) -> str | None:
    """The systemd unit a failed service task was about (its ``name``, or the one its message names)."""
    if unit and _UNIT_NAME.match(unit):
        return unit
    found = _UNIT_IN_MESSAGE.search(message)
    if found:
        return found.group("job") or found.group("service")
    return None


def journal_command(unit: str) -> str:
    """The unit's last journal lines, messages only."""
    return f"journalctl --no-pager --output=cat --lines={JOURNAL_LINES} --unit={shlex.quote(unit)}"


def journal_cause(output: str) -> list[str]:
    """The journal lines that say why the unit failed: the specific ones first ("Failed to locate
    executable ...", a daemon's own error), then systemd's generic last word ("Failed to start ...")
    if there is room; each line once, the latest occurrence; else the last lines."""
    lines = [line for line in output.splitlines() if line.strip() and not line.startswith("-- ")]
    latest: dict[str, int] = {}
    for index, line in enumerate(lines):
        if _JOURNAL_PROBLEM.search(line):
            latest[line] = index
    ordered = sorted(latest, key=latest.__getitem__)
    specific = [line for line in ordered if not _GENERIC.search(line)]
    generic = [line for line in ordered if _GENERIC.search(line)]
    chosen = specific[-MAX_LINES:]
    chosen += generic[len(generic) - (MAX_LINES - len(chosen)) :] if len(chosen) < MAX_LINES and generic else []
    return [shown(line) for line in chosen or lines[-MAX_LINES:]]


def cause(action: str, message: str, detail: str, unit: str, run: Run) -> tuple[str, ...]:
    """What the node says about a failed task: apt's errors, or the failed unit's journal.

    Args:
        action: The failed module (its resolved name).
        message: Ansible's message.
        detail: The task's stderr and stdout.
        unit: The unit a service task named.
        run: Runs a bash command on the node: ``(command, timeout) -> (rc, stdout, stderr)``.
    """
    if action in APT_ACTIONS or (not action and "apt" in message):
        errors = apt_errors("\n".join((detail, message)))
        if errors:
            return tuple(errors)
        # python-apt may fail the cache update with no text at all ("Failed to update apt cache after
        # 5 retries: "): ask apt-get itself, which is what the task was doing anyway.
        _rc, out, err = run(APT_UPDATE_COMMAND, APT_UPDATE_TIMEOUT_S)
        return tuple(apt_errors(out + "\n" + err))
    named = unit_of(unit, message) if action in SERVICE_ACTIONS or "systemctl" in message else None
    if named is None:
        return ()
    rc, out, _err = run(journal_command(named), JOURNAL_TIMEOUT_S)
    if rc != 0:
        return ()
    return tuple(f"{named}: {line}" for line in journal_cause(out))


def run_here(command: str, timeout: float) -> tuple[int, str, str]:
    """``command`` with bash on this machine (the agent's ``Run``)."""
    try:
        done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return 124, "", f"timed out after {timeout:g} s"
    except OSError as exc:
        return 127, "", str(exc)
    return done.returncode, done.stdout, done.stderr
