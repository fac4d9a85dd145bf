"""What every acceptance check shares: its options and context, the check classes, and the verdicts
on a command that did not run or printed what its parser cannot read.

A check is a class with a ``name`` (what ``--only``/``--skip`` take) and ``run(ctx)`` returning
one `Finding` per verdict (`clusterctl.verify.result.with_run` says which nodes each covers).
Per-node checks share `NodeCheck`: say which nodes, when to skip, the command, and how to judge
its output; the base runs the command on every node at once through the context's executor. The
cluster-wide checks (Slurm, storage, NCCL) write their own ``run``. Nothing here prints or drains;
the runner does.

Each concern has its module with its command, parser, threshold and judgement: `gpu` (inventory,
DCGM), `fabric` (GPU-NIC locality, InfiniBand ports), `storage`, `slurm`, `timesync`, `transport`,
`nccl` and `packages` (the node against clusterctl.lock); `checks` lists them in run order.

Pure (the plan is only a type here): the judges import without pydantic (tests/gpu).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from clusterctl.hostlist import compress
from clusterctl.remote import NOT_FOUND_RC, TIMEOUT_RC, UNREACHABLE_RC, Executor, run_many
from clusterctl.slurm.reasons import VERIFY
from clusterctl.slurm.records import RecordError
from clusterctl.spec.findings import Finding
from clusterctl.verify.result import ParseError, Verdict, failed, skipped, with_run
from clusterctl.verify.testplan import NcclOptions

if TYPE_CHECKING:
    from clusterctl.image.lock import LockedImage
    from clusterctl.plan.models import Plan, PlanNode
    from clusterctl.verify.thresholds import AcceptanceThresholds

EMULATED = "skipped: emulated GPUs"
CONTAINER = "skipped: container"
DRAIN_PREFIX = VERIFY
# Two nodes' clocks more than this apart make cross-node logs and traces misleading; NTP on a
# LAN holds well under a millisecond, so 100 ms means the node is not really synchronised.
MAX_TIME_OFFSET_S = 0.1


@dataclass(frozen=True)
class VerifyOptions:
    """What to run and how long to wait.

    Attributes:
        only: Run only these checks (names from ``CHECK_NAMES``); empty means all.
        skip: Do not run these checks.
        nccl: How NCCL runs are launched.
        fio_size: Data written and read per node per tier (fio ``--size`` per job).
        fio_numjobs: fio jobs per node.
        fio_direct: O_DIRECT I/O, so reads measure the file system, not the page cache.
        command_timeout_s: Timeout of quick commands (nvidia-smi, ibstat, scontrol).
        nccl_timeout_s: Timeout of one srun (allocation included).
        fio_timeout_s: Timeout of one node's fio run.
        max_parallel: Commands in flight at once.
        max_time_offset_s: Largest clock offset that passes the time check.
        locked_images: Hardware profile -> its image in clusterctl.lock (the packages check runs
            only with a lock).
    """

    only: frozenset[str] = frozenset()
    skip: frozenset[str] = frozenset()
    nccl: NcclOptions = field(default_factory=NcclOptions)
    fio_size: str = "256m"
    fio_numjobs: int = 4
    fio_direct: bool = True
    command_timeout_s: float = 60.0
    nccl_timeout_s: float = 1200.0
    fio_timeout_s: float = 900.0
    max_parallel: int = 64
    max_time_offset_s: float = MAX_TIME_OFFSET_S
    locked_images: Mapping[str, LockedImage] = field(default_factory=dict)


@dataclass
class VerifyContext:
    """What every check needs: the plan, its thresholds, a way to run commands.

    Attributes:
        plan: The resolved cluster.
        thresholds: Acceptance thresholds per GPU hardware profile.
        executor: Runs commands on nodes.
        options: Run options.
        launcher: The node that runs ``srun`` and ``scontrol`` (login node, else controller).
        failed_nodes: Nodes an earlier check blamed; later NCCL runs leave them out.
        progress: Called with a line of text as work starts (the CLI shows it).
        node_rails: Each node's answer to the rails command (rc, stdout, stderr), read once
            for all the rail checks (`clusterctl.verify.fabric.RailCheck`).
    """

    plan: Plan
    thresholds: dict[str, AcceptanceThresholds]
    executor: Executor
    options: VerifyOptions = field(default_factory=VerifyOptions)
    launcher: str = ""
    failed_nodes: set[str] = field(default_factory=set)
    progress: Callable[[str], None] = field(default=lambda _line: None)
    node_rails: dict[str, tuple[int, str, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.launcher:
            self.launcher = launcher_host(self.plan)

    def thresholds_for(self, node: PlanNode) -> AcceptanceThresholds | None:
        """The thresholds of a node's hardware profile (None without GPUs)."""
        return self.thresholds.get(node.hardware)

    def run(self, jobs: Iterable[tuple[str, str, float]]) -> list[tuple[int, str, str]]:
        """Run ``(host, command, timeout)`` jobs at once (``options.max_parallel`` in flight)."""
        return run_many(self.executor, jobs, self.options.max_parallel)


def launcher_host(plan: Plan) -> str:
    """Where Slurm commands run: the first login node, else the first controller."""
    return plan.launcher()


def last_line(text: str) -> str:
    """The last non-blank line of a command's output, stripped (empty when there is none)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def transport_problem(name: str, target: str, tool: str, rc: int, err: str) -> Finding | None:
    """The result for a command that did not run (timeout, unreachable node); None when it ran.

    A missing program (rc 127) is left to the check (for some it is a failure, for others
    a reason to skip), except Slurm's own tools, without which no Slurm check can run.
    """
    if rc == TIMEOUT_RC and err.startswith("timed out"):
        return failed(name, target, f"{tool} {err}.", "The node may be hung; check it by hand.", rc=rc)
    if rc == NOT_FOUND_RC and tool in ("scontrol", "srun", "systemctl"):
        # Slurm's client tools belong on the login node and the controller; without them nothing runs.
        return failed(name, target, f"{tool} is not installed on {target}.", "Install the Slurm client there.", rc=rc)
    if rc == UNREACHABLE_RC:
        why = last_line(err) or "no answer"
        return failed(
            name,
            target,
            f"{target} could not be reached: {why}",
            "Check that the node is up and reachable (ssh, or docker for the local provider).",
            rc=rc,
        )
    return None


def parse_failure(name: str, target: str, tool: str, exc: ParseError | RecordError, rc: int, err: str) -> Finding:
    """A failed result for output that could not be read, naming the line that broke it."""
    hint = f"Run {tool} on {target} by hand to see the whole message."
    if not exc.line.strip():
        # Nothing usable came out: stderr says more than "end of input".
        why = last_line(err) or "no output"
        return failed(name, target, f"{tool} output could not be read (exit {rc}): {exc.message}: {why}", hint, rc=rc)
    return failed(
        name,
        target,
        f"{tool} output could not be read (exit {rc}), line {exc.line_no}: {exc.message}: {exc.line.strip()}",
        hint,
        rc=rc,
        line_no=exc.line_no,
    )


def node_result(check: str, host: str, result: Finding, **context: str) -> Finding:
    """A per-node result: it covers its node, and a failure counts against it."""
    blame = (host,) if Verdict.of(result) is Verdict.FAIL else ()
    return with_run(result, check, (host,), blame, **context)


class Check(ABC):
    """One acceptance check."""

    name: ClassVar[str]
    title: ClassVar[str]

    @abstractmethod
    def run(self, ctx: VerifyContext) -> list[Finding]:
        """Run the check over the cluster."""


class NodeCheck(Check):
    """A check that runs one command per node and judges each output on its own."""

    result_name: ClassVar[str]
    tool: ClassVar[str]
    # A missing program fails the check: every tool a node check runs is part of the stack.
    install_hint: ClassVar[str] = ""
    # Whether the check is about every node, not only the GPU nodes.
    every_node: ClassVar[bool] = False

    def nodes(self, ctx: VerifyContext) -> list[PlanNode]:
        """The nodes this check is about: the GPU nodes (or all, `every_node`) that exist (burst nodes do not, yet)."""
        return [n for n in ctx.plan.nodes if (n.gpus or self.every_node) and not n.burst]

    def skip_reason(self, ctx: VerifyContext, node: PlanNode) -> str | None:
        """Why the check does not apply to ``node``; None when it does."""
        return EMULATED if node.emulated else None

    @abstractmethod
    def command(self, ctx: VerifyContext, node: PlanNode) -> str:
        """The shell command to run on the node."""

    @abstractmethod
    def judge(self, ctx: VerifyContext, node: PlanNode, output: str) -> Finding:
        """The verdict on the command's stdout; raises ParseError when it cannot be read."""

    def timeout(self, ctx: VerifyContext) -> float:
        """Seconds the command may run."""
        return ctx.options.command_timeout_s

    def prepare(self, ctx: VerifyContext, nodes: list[PlanNode]) -> None:
        """Read what the judgement needs besides the command's output (nothing by default)."""

    def interpret(self, ctx: VerifyContext, node: PlanNode, rc: int, out: str, err: str) -> Finding:
        """Turn one command's return code and output into a verdict."""
        host = node.hostname
        problem = transport_problem(self.result_name, host, self.tool, rc, err)
        if problem is not None:
            return problem
        if rc == NOT_FOUND_RC and not out.strip():
            return failed(self.result_name, host, f"{self.tool} is not installed on {host}.", self.install_hint, rc=rc)
        try:
            return self.judge(ctx, node, out)
        except ParseError as exc:
            return parse_failure(self.result_name, host, self.tool, exc, rc, err)

    def run(self, ctx: VerifyContext) -> list[Finding]:
        """Run the command on every applicable node at once and judge each output."""
        outcomes: dict[str, Finding] = {}
        todo: list[PlanNode] = []
        for node in self.nodes(ctx):
            reason = self.skip_reason(ctx, node)
            if reason is not None:
                result = skipped(self.result_name, node.hostname, reason)
                outcomes[node.hostname] = with_run(result, self.name, (node.hostname,))
            else:
                todo.append(node)
        if todo:
            ctx.progress(f"{self.title}: {compress(n.hostname for n in todo)}")
            self.prepare(ctx, todo)
        jobs = [(n.hostname, self.command(ctx, n), self.timeout(ctx)) for n in todo]
        for node, (rc, out, err) in zip(todo, ctx.run(jobs), strict=True):
            result = self.interpret(ctx, node, rc, out, err)
            outcomes[node.hostname] = node_result(self.name, node.hostname, result, command=self.command(ctx, node))
        return [outcomes[n.hostname] for n in self.nodes(ctx) if n.hostname in outcomes]
