"""Slurm driven from the control machine: the commands of ``commands`` run on the launcher through an executor.

The launcher is the node Slurm commands run on (the first login node, else the first controller).
Every answer is parsed here, once; callers get nodes, jobs and per-node errors, never raw output.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from clusterctl.remote import Executor, run_many

from . import commands
from .jobs import Jobs, parse_jobs
from .nodes import SlurmNode, SlurmPartition, by_name, parse_nodes, parse_partitions
from .reasons import clean
from .records import RecordError

_VERSION_RE = re.compile(r"\b\d{1,4}\.\d{1,4}(?:\.\d{1,4})?(?:-[0-9A-Za-z.]{1,20})?")


class SlurmError(Exception):
    """Slurm could not be asked, or answered with something that is not what it prints."""


def why(rc: int, out: str, err: str) -> str:
    """The last non-blank line of a failed command's output, as one clean line."""
    for text in (err, out):
        lines = [line for line in text.split("\n") if line.strip()]
        if lines:
            return clean(lines[-1], 300)
    return f"exit {rc}"


@dataclass(frozen=True)
class Slurm:
    """Slurm as seen from ``launcher``."""

    executor: Executor
    launcher: str
    timeout_s: float = commands.SCONTROL_TIMEOUT_S

    def run(self, argv: Sequence[str]) -> tuple[int, str, str]:
        """Run one command on the launcher."""
        return self.executor.run(self.launcher, commands.shell(argv), self.timeout_s)

    def nodes(self) -> tuple[SlurmNode, ...]:
        """Every node slurmctld knows (``scontrol show node -o``).

        Raises:
            SlurmError: scontrol failed or printed something else.
        """
        rc, out, err = self.run(commands.show_nodes())
        if rc != 0:
            raise SlurmError(f"scontrol show node on {self.launcher} failed: {why(rc, out, err)}")
        try:
            return parse_nodes(out)
        except RecordError as exc:
            raise SlurmError(f"scontrol show node on {self.launcher}: {exc}") from None

    def node_map(self) -> dict[str, SlurmNode]:
        """:meth:`nodes` by name."""
        return by_name(self.nodes())

    def partitions(self) -> tuple[SlurmPartition, ...]:
        """Every partition (``scontrol show partition -o``).

        Raises:
            SlurmError: scontrol failed or printed something else.
        """
        rc, out, err = self.run(commands.show_partitions())
        if rc != 0:
            raise SlurmError(f"scontrol show partition on {self.launcher} failed: {why(rc, out, err)}")
        try:
            return parse_partitions(out)
        except RecordError as exc:
            raise SlurmError(f"scontrol show partition on {self.launcher}: {exc}") from None

    def switches(self) -> set[str]:
        """The switch names of the topology slurmctld loaded (empty when it cannot be read)."""
        _, out, _ = self.run(commands.show_topology())
        return {
            token.split("=", 1)[1]
            for line in out.split("\n")
            for token in line.split()
            if token.startswith("SwitchName=")
        }

    def _each(self, argvs: Mapping[str, list[str]]) -> dict[str, str]:
        hosts = list(argvs)
        jobs = [(self.launcher, commands.shell(argvs[h]), self.timeout_s) for h in hosts]
        return {
            host: "" if rc == 0 else why(rc, out, err)
            for host, (rc, out, err) in zip(hosts, run_many(self.executor, jobs), strict=True)
        }

    def drain(self, reasons: Mapping[str, str]) -> dict[str, str]:
        """Drain each node with its reason, all at once; node -> scontrol's error ("" when drained)."""
        return self._each({host: commands.drain(host, reason) for host, reason in reasons.items()})

    def resume(self, hosts: Iterable[str]) -> dict[str, str]:
        """Resume each node; node -> scontrol's error ("" when resumed)."""
        return self._each({host: commands.resume(host) for host in hosts})

    def reboot(self, hosts: Sequence[str], reason: str) -> str:
        """Reboot ``hosts`` once their jobs ended (back DOWN until resumed); scontrol's error or ""."""
        rc, out, err = self.run(commands.reboot(hosts, reason))
        return "" if rc == 0 else why(rc, out, err)

    def jobs(self, nodes: Sequence[str] = ()) -> Jobs:
        """The jobs holding nodes (or ``nodes``); ``unknown`` says why Slurm could not be asked."""
        rc, out, err = self.run(commands.jobs(nodes))
        if rc != 0:
            return Jobs(unknown=f"squeue on {self.launcher} failed: {why(rc, out, err)}")
        try:
            return Jobs(running=parse_jobs(out))
        except RecordError as exc:
            return Jobs(unknown=f"squeue on {self.launcher}: {exc}")

    def version(self) -> str:
        """The Slurm version the launcher runs (``23.11.4`` of ``slurm 23.11.4``), or "" when it cannot be read."""
        rc, out, _ = self.run(commands.version())
        found = _VERSION_RE.search(out[:200]) if rc == 0 else None
        return found[0] if found else ""
