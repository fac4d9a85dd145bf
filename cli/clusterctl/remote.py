"""The command interface every executor implements, its return codes, and many commands at once.

Pure (no plan, no transport): verify's checks and judges depend on this interface only, so they
import without pydantic and unit tests replay recorded outputs through a fake executor. The
executors themselves (docker exec, SSH, routing per node) are in `clusterctl.run.executor`.

A transport failure is reported in the return code, never raised: ``UNREACHABLE_RC``
(ssh's own 255) when the node cannot be reached, ``TIMEOUT_RC`` (coreutils ``timeout``'s
124) when the command ran too long, ``NOT_FOUND_RC`` (127) when the program is not installed.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, runtime_checkable

TIMEOUT_RC = 124
NOT_FOUND_RC = 127
UNREACHABLE_RC = 255


class Executor(Protocol):
    """Runs a shell command on a node."""

    def run(self, host: str, command: str, timeout: float) -> tuple[int, str, str]:
        """Run ``command`` (a POSIX shell string) on ``host``.

        Args:
            host: The plan hostname.
            command: Shell command line, run by bash as root.
            timeout: Seconds before the command is abandoned.

        Returns:
            ``(returncode, stdout, stderr)``; see the module docstring for the codes a
            transport failure gives.
        """
        ...


@runtime_checkable
class Sender(Executor, Protocol):
    """An executor that can also give a command input on its stdin (a tar of files, never a secret's path)."""

    def send(self, host: str, command: str, data: bytes | None, timeout: float) -> tuple[int, str, str]:
        """Run ``command`` on ``host`` with ``data`` on its stdin; the same return codes as ``run``."""
        ...


def run_many(
    executor: Executor, jobs: Iterable[tuple[str, str, float]], max_workers: int = 32
) -> list[tuple[int, str, str]]:
    """Run ``(host, command, timeout)`` jobs at once; results in the order given.

    Why threads: every job waits on a subprocess (docker, ssh, srun), so the GIL is no
    bottleneck, and a wave of 64 single-node runs must start together.
    """
    items = list(jobs)
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(items)))) as pool:
        futures = [pool.submit(executor.run, host, command, timeout) for host, command, timeout in items]
        return [f.result() for f in futures]
