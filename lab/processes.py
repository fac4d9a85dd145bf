"""Background processes of the lab, each with a pid file, stopped by that pid only.

A pid file alone could name a process that has since ended and whose number went to another; the
lab stops a process only when its command line still names what the lab started.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

STOP_WAIT_S = 10.0


def read_pid(pid_file: Path) -> int | None:
    """The pid a pid file holds, or None."""
    try:
        text = pid_file.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def command_line(pid: int) -> str:
    """The command line of a running process ('' when it does not run)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def running(pid_file: Path, marker: str) -> int | None:
    """The pid of the process the pid file names when it still runs and its command line holds ``marker``."""
    pid = read_pid(pid_file)
    if pid is None or marker not in command_line(pid):
        return None
    return pid


def start(argv: Sequence[str], pid_file: Path, log: Path, env: dict[str, str] | None = None) -> int:
    """Start ``argv`` in its own session, output to ``log``; its pid goes to ``pid_file``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )
    pid_file.write_text(f"{proc.pid}\n")
    return proc.pid


def stop(pid_file: Path, marker: str) -> bool:
    """Stop the process ``pid_file`` names if its command line holds ``marker``; True when one was stopped."""
    pid = running(pid_file, marker)
    if pid is None:
        pid_file.unlink(missing_ok=True)
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_WAIT_S
    while time.monotonic() < deadline and command_line(pid):
        _reap(pid)
        time.sleep(0.2)
    if command_line(pid):
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
        _reap(pid)
    pid_file.unlink(missing_ok=True)
    return True


def _reap(pid: int) -> None:
    """Collect the exit status of a child of this process (others are not ours to wait for)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
