"""The acceptance checks: each a command, a parser, a threshold and a verdict per node or run.

A check is a class with a ``name`` (what ``--only``/``--skip`` take) and ``run(ctx)``
returning `Outcome` records. Per-node checks share `NodeCheck`: say which nodes, when to
skip, the command, and how to judge its output; the base runs the command on every node
at once through the context's executor. The cluster-wide checks (Slurm, storage, NCCL)
write their own ``run``. Nothing here prints or drains; the runner does.
"""

from __future__ import annotations

import shlex
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import ClassVar

from clusterctl.hostlist import compress, expand
from clusterctl.image.drift import DPKG_QUERY, PackageListError, compare_packages, parse_packages
from clusterctl.image.lock import LockedImage
from clusterctl.plan.models import Plan, PlanNode, StoragePlan
from clusterctl.run.executor import NOT_FOUND_RC, TIMEOUT_RC, UNREACHABLE_RC, Executor, run_many
from clusterctl.verify.gpu_inventory import judge_gpu_inventory
from clusterctl.verify.judge import judge_dcgm, judge_fio, judge_ibstat, judge_nccl, judge_topo
from clusterctl.verify.parsers.chronyc import TRACKING_COMMAND, parse_chronyc_tracking
from clusterctl.verify.parsers.dcgmi_diag import parse_dcgmi_diag
from clusterctl.verify.parsers.fio import FioJob, FioResult, parse_fio_json
from clusterctl.verify.parsers.gpu_query import QUERY_COMMAND, parse_gpu_query
from clusterctl.verify.parsers.ibstat import parse_ibstat
from clusterctl.verify.parsers.nccl_debug import parse_nccl_debug
from clusterctl.verify.parsers.nccl_tests import parse_nccl_tests
from clusterctl.verify.parsers.nvidia_smi_topo import parse_nvidia_smi_topo
from clusterctl.verify.parsers.rdma_rails import parse_node_rails
from clusterctl.verify.parsers.scontrol import (
    NODES_COMMAND,
    PARTITIONS_COMMAND,
    SlurmNode,
    parse_scontrol_nodes,
    parse_scontrol_partitions,
)
from clusterctl.verify.rails import RAILS_COMMAND, RAILS_PATH, RailDevices, rail_devices
from clusterctl.verify.result import CheckResult, ParseError, Verdict
from clusterctl.verify.testplan import (
    NcclOptions,
    NcclPlan,
    NcclRun,
    build_test_plan,
    eligible_nodes,
    fabric_groups,
    partition_of,
    srun_command,
)
from clusterctl.verify.thresholds import AcceptanceThresholds
from clusterctl.verify.transport import CHECK as CHECK_TRANSPORT
from clusterctl.verify.transport import TransportJudgement, judge_transport

EMULATED = "skipped: emulated GPUs"
CONTAINER = "skipped: container"
DRAIN_PREFIX = "clusterctl-verify:"
# Fabrics whose NICs are InfiniBand (or RoCE) ports that ibstat lists.
IB_FABRICS = ("infiniband", "roce")
# dcgmi diag run time by level (techref §6: seconds, ~2 min, ~15 min, longer), with margin.
_DCGM_TIMEOUT_S = {1: 180.0, 2: 900.0, 3: 2700.0, 4: 7200.0}
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


@dataclass(frozen=True)
class Outcome:
    """One check result and the nodes it is about.

    Attributes:
        check: The check that produced it (``gpu``, ``nccl``, ...).
        result: The verdict with its figures.
        hosts: The nodes the result covers (empty for a cluster-wide result).
        blame: The nodes a failure counts against (drain candidates); empty when the
            failure cannot be pinned on a node (a spine, the storage servers).
        detail: Context for the report: NCCL phase and groups, storage tier, command.
    """

    check: str
    result: CheckResult
    hosts: tuple[str, ...] = ()
    blame: tuple[str, ...] = ()
    detail: dict[str, str] = field(default_factory=dict)

    @property
    def verdict(self) -> Verdict:
        """The result's verdict."""
        return self.result.verdict


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
            for all the rail checks (`RailCheck`).
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


def launcher_host(plan: Plan) -> str:
    """Where Slurm commands run: the first login node, else the first controller."""
    for role in ("login", "controller"):
        for node in plan.nodes:
            if node.role == role:
                return node.hostname
    raise ValueError("The plan has neither a login node nor a controller to run Slurm commands from.")


def skipped(check: str, name: str, target: str, reason: str, hint: str = "") -> CheckResult:
    """A skipped result whose message is the reason (``skipped: emulated GPUs``)."""
    return CheckResult(check=name, target=target, verdict=Verdict.SKIPPED, figures={}, message=reason, hint=hint)


def _failed(name: str, target: str, message: str, hint: str = "", **figures: float | int | str) -> CheckResult:
    return CheckResult(
        check=name, target=target, verdict=Verdict.FAIL, figures=dict(figures), message=message, hint=hint
    )


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def transport_problem(name: str, target: str, tool: str, rc: int, err: str) -> CheckResult | None:
    """The result for a command that did not run (timeout, unreachable node); None when it ran.

    A missing program (rc 127) is left to the check (for some it is a failure, for others
    a reason to skip), except Slurm's own tools, without which no Slurm check can run.
    """
    if rc == TIMEOUT_RC and err.startswith("timed out"):
        return _failed(name, target, f"{tool} {err}.", "The node may be hung; check it by hand.", rc=rc)
    if rc == NOT_FOUND_RC and tool in ("scontrol", "srun", "systemctl"):
        # Slurm's client tools belong on the login node and the controller; without them nothing runs.
        return _failed(name, target, f"{tool} is not installed on {target}.", "Install the Slurm client there.", rc=rc)
    if rc == UNREACHABLE_RC:
        why = _last_line(err) or "no answer"
        return _failed(
            name,
            target,
            f"{target} could not be reached: {why}",
            "Check that the node is up and reachable (ssh, or docker for the local provider).",
            rc=rc,
        )
    return None


def parse_failure(name: str, target: str, tool: str, exc: ParseError, rc: int, err: str) -> CheckResult:
    """A failed result for output that could not be read, naming the line that broke it."""
    hint = f"Run {tool} on {target} by hand to see the whole message."
    if not exc.line.strip():
        # Nothing usable came out: stderr says more than "end of input".
        why = _last_line(err) or "no output"
        return _failed(name, target, f"{tool} output could not be read (exit {rc}): {exc.message}: {why}", hint, rc=rc)
    return _failed(
        name,
        target,
        f"{tool} output could not be read (exit {rc}), line {exc.line_no}: {exc.message}: {exc.line.strip()}",
        hint,
        rc=rc,
        line_no=exc.line_no,
    )


def _sentence(text: str) -> str:
    return text if text.endswith(".") else text + "."


def _join(parts: list[str]) -> str:
    """Clauses as one sentence; an opening plain lower-case word is capitalised."""
    text = _sentence("; ".join(parts))
    first = text.split(" ", 1)[0]
    return text[:1].upper() + text[1:] if first.isalpha() and first.islower() else text


# --- per-node checks ------------------------------------------------------------------------


class Check(ABC):
    """One acceptance check."""

    name: ClassVar[str]
    title: ClassVar[str]

    @abstractmethod
    def run(self, ctx: VerifyContext) -> list[Outcome]:
        """Run the check over the cluster."""


class NodeCheck(Check):
    """A check that runs one command per node and judges each output on its own."""

    result_name: ClassVar[str]
    tool: ClassVar[str]
    # A missing program fails the check: every tool a node check runs is part of the stack.
    install_hint: ClassVar[str] = ""

    def nodes(self, ctx: VerifyContext) -> list[PlanNode]:
        """The nodes this check is about: GPU nodes that exist (burst nodes do not, yet)."""
        return [n for n in ctx.plan.nodes if n.gpus and not n.burst]

    def skip_reason(self, ctx: VerifyContext, node: PlanNode) -> str | None:
        """Why the check does not apply to ``node``; None when it does."""
        return EMULATED if node.emulated else None

    @abstractmethod
    def command(self, ctx: VerifyContext, node: PlanNode) -> str:
        """The shell command to run on the node."""

    @abstractmethod
    def judge(self, ctx: VerifyContext, node: PlanNode, output: str) -> CheckResult:
        """The verdict on the command's stdout; raises ParseError when it cannot be read."""

    def timeout(self, ctx: VerifyContext) -> float:
        """Seconds the command may run."""
        return ctx.options.command_timeout_s

    def prepare(self, ctx: VerifyContext, nodes: list[PlanNode]) -> None:
        """Read what the judgement needs besides the command's output (nothing by default)."""

    def interpret(self, ctx: VerifyContext, node: PlanNode, rc: int, out: str, err: str) -> CheckResult:
        """Turn one command's return code and output into a verdict."""
        host = node.hostname
        problem = transport_problem(self.result_name, host, self.tool, rc, err)
        if problem is not None:
            return problem
        if rc == NOT_FOUND_RC and not out.strip():
            return _failed(self.result_name, host, f"{self.tool} is not installed on {host}.", self.install_hint, rc=rc)
        try:
            return self.judge(ctx, node, out)
        except ParseError as exc:
            return parse_failure(self.result_name, host, self.tool, exc, rc, err)

    def run(self, ctx: VerifyContext) -> list[Outcome]:
        """Run the command on every applicable node at once and judge each output."""
        outcomes: dict[str, Outcome] = {}
        todo: list[PlanNode] = []
        for node in self.nodes(ctx):
            reason = self.skip_reason(ctx, node)
            if reason is not None:
                result = skipped(self.name, self.result_name, node.hostname, reason)
                outcomes[node.hostname] = Outcome(self.name, result, (node.hostname,))
            else:
                todo.append(node)
        if todo:
            ctx.progress(f"{self.title}: {compress(n.hostname for n in todo)}")
            self.prepare(ctx, todo)
        jobs = [(n.hostname, self.command(ctx, n), self.timeout(ctx)) for n in todo]
        for node, (rc, out, err) in zip(todo, run_many(ctx.executor, jobs, ctx.options.max_parallel), strict=True):
            result = self.interpret(ctx, node, rc, out, err)
            blame = (node.hostname,) if result.verdict is Verdict.FAIL else ()
            outcomes[node.hostname] = Outcome(
                self.name, result, (node.hostname,), blame, {"command": self.command(ctx, node)}
            )
        return [outcomes[n.hostname] for n in self.nodes(ctx) if n.hostname in outcomes]


class GpuInventoryCheck(NodeCheck):
    """GPU count, model and driver version from ``nvidia-smi --query-gpu``."""

    name = "gpu"
    title = "GPU inventory"
    result_name = "gpu.inventory"
    tool = "nvidia-smi"
    install_hint = "Install the NVIDIA driver (the nvidia_driver role) and load its modules."

    def command(self, ctx: VerifyContext, node: PlanNode) -> str:
        """``nvidia-smi --query-gpu=name,driver_version --format=csv,noheader``."""
        return QUERY_COMMAND

    def judge(self, ctx: VerifyContext, node: PlanNode, output: str) -> CheckResult:
        """Count equals the node's GPUs, every name is the plan's model, the driver is the pin."""
        return judge_gpu_inventory(
            parse_gpu_query(output),
            expected_gpus=node.gpus,
            gpu_model=node.gpu_model or "",
            driver_pin=ctx.plan.cluster.versions.get("nvidia_driver", ""),
            target=node.hostname,
        )


class RailCheck(NodeCheck):
    """A node check about the rails, judged by the node's own RDMA device names.

    Why: the spec names a rail by PCI address or device name, the tools by the node's device
    name, which depends on the image (`clusterctl.verify.rails`). Before the check's command
    runs, each node's rails file is read once (shared by every rail check of the run).
    """

    def prepare(self, ctx: VerifyContext, nodes: list[PlanNode]) -> None:
        """Read the rails file of the nodes whose answer is not in ``ctx.node_rails`` yet."""
        todo = [n for n in nodes if n.hostname not in ctx.node_rails]
        jobs = [(n.hostname, RAILS_COMMAND, ctx.options.command_timeout_s) for n in todo]
        for node, answer in zip(todo, run_many(ctx.executor, jobs, ctx.options.max_parallel), strict=True):
            ctx.node_rails[node.hostname] = answer

    def rail_devices(self, ctx: VerifyContext, node: PlanNode) -> RailDevices | CheckResult:
        """The node's device of each rail, or the failed result saying why they are unknown."""
        host = node.hostname
        rc, out, err = ctx.node_rails.get(host, (UNREACHABLE_RC, "", "the rails file was not read"))
        problem = transport_problem(self.result_name, host, "cat", rc, err)
        if problem is not None:
            return problem
        if rc != 0:
            why = _last_line(err) or _last_line(out) or "no message"
            return _failed(
                self.result_name,
                host,
                f"The rails file on {host} could not be read (exit {rc}): {why}",
                f"Check {RAILS_PATH} on {host} (the rdma role writes it at converge).",
                rc=rc,
            )
        try:
            rails = parse_node_rails(out)
        except ParseError as exc:
            return parse_failure(self.result_name, host, RAILS_PATH, exc, rc, err)
        devices = rail_devices(host, list(node.rails), rails)
        if devices.problem:
            return _failed(self.result_name, host, devices.problem, devices.hint, rails_file=devices.path)
        return devices

    def by_device(self, node: PlanNode, devices: RailDevices, result: CheckResult) -> CheckResult:
        """``result`` with the rail-to-device map in its figures, and in its hint when it failed."""
        if not devices.renamed:
            return result
        figures = {**result.figures, "rail_devices": ",".join(devices.devices)}
        hint = result.hint
        if result.verdict is Verdict.FAIL:
            where = f"The rails on {node.hostname} ({devices.path}): {devices.mapping(list(node.rails))}."
            hint = f"{hint} {where}" if hint else where
        return replace(result, figures=figures, hint=hint)


class TopoCheck(RailCheck):
    """GPU-NIC locality from ``nvidia-smi topo -m``: each GPU's rail NIC at PIX or PXB."""

    name = "topo"
    title = "GPU-NIC locality"
    result_name = "topo.gpu_nic"
    tool = "nvidia-smi"
    install_hint = GpuInventoryCheck.install_hint

    def skip_reason(self, ctx: VerifyContext, node: PlanNode) -> str | None:
        """Skipped on emulated GPUs and on nodes without rails in the spec."""
        if node.emulated:
            return EMULATED
        return None if node.rails else "skipped: no rails in the spec"

    def command(self, ctx: VerifyContext, node: PlanNode) -> str:
        """``nvidia-smi topo -m``."""
        return "nvidia-smi topo -m"

    def judge(self, ctx: VerifyContext, node: PlanNode, output: str) -> CheckResult:
        """Each GPU reaches its rail NIC (the node's device for the rail) at PIX or PXB."""
        devices = self.rail_devices(ctx, node)
        if isinstance(devices, CheckResult):
            return devices
        result = judge_topo(parse_nvidia_smi_topo(output), list(devices.devices), target=node.hostname)
        return self.by_device(node, devices, result)


class IbCheck(RailCheck):
    """InfiniBand ports from ``ibstat``: Active, LinkUp, at the fabric's speed."""

    name = "ib"
    title = "InfiniBand ports"
    result_name = "ib.ports"
    tool = "ibstat"
    install_hint = "Install infiniband-diags (and the OFED/MOFED driver stack)."

    def skip_reason(self, ctx: VerifyContext, node: PlanNode) -> str | None:
        """Skipped on emulated GPUs, on non-InfiniBand fabrics and on nodes without rails."""
        if node.emulated:
            return EMULATED
        if ctx.plan.fabric.kind not in IB_FABRICS:
            return f"skipped: the fabric is {ctx.plan.fabric.kind}, which has no InfiniBand ports"
        return None if node.rails else "skipped: no rails in the spec"

    def command(self, ctx: VerifyContext, node: PlanNode) -> str:
        """``ibstat``."""
        return "ibstat"

    def judge(self, ctx: VerifyContext, node: PlanNode, output: str) -> CheckResult:
        """Every rail HCA's ports Active/LinkUp at ``fabric.speed_gbps`` (or the spec's mark)."""
        devices = self.rail_devices(ctx, node)
        if isinstance(devices, CheckResult):
            return devices
        thresholds = ctx.thresholds_for(node)
        rate: float | None = ctx.plan.fabric.speed_gbps
        if thresholds is not None and thresholds.ib_rate_gbps is not None:
            rate = thresholds.ib_rate_gbps
        result = judge_ibstat(parse_ibstat(output), rate, list(devices.devices), target=node.hostname)
        return self.by_device(node, devices, result)


class DcgmCheck(NodeCheck):
    """``dcgmi diag -r N`` at the acceptance level."""

    name = "dcgm"
    title = "DCGM diagnostics"
    result_name = "dcgm.diag"
    tool = "dcgmi"
    install_hint = "Install datacenter-gpu-manager and start nvidia-dcgm (nv-hostengine)."

    def _level(self, ctx: VerifyContext, node: PlanNode) -> int:
        thresholds = ctx.thresholds_for(node)
        return thresholds.dcgm_diag_level if thresholds is not None else 1

    def command(self, ctx: VerifyContext, node: PlanNode) -> str:
        """``dcgmi diag -r N`` (with the NVLink count the PCIe test expects, from level 2)."""
        return dcgm_command(self._level(ctx, node), ctx.thresholds_for(node))

    def timeout(self, ctx: VerifyContext) -> float:
        """Long enough for the deepest level any node runs."""
        levels = [t.dcgm_diag_level for t in ctx.thresholds.values()] or [1]
        return _DCGM_TIMEOUT_S.get(max(levels), _DCGM_TIMEOUT_S[4])

    def judge(self, ctx: VerifyContext, node: PlanNode, output: str) -> CheckResult:
        """Every test passed or skipped, at the acceptance level."""
        level = self._level(ctx, node)
        # The parser reads the level from the command line, which the output alone lacks.
        diag = parse_dcgmi_diag(f"$ {self.command(ctx, node)}\n{output}")
        return judge_dcgm(diag, min_level=level, target=node.hostname)


def dcgm_command(level: int, thresholds: AcceptanceThresholds | None) -> str:
    """The ``dcgmi diag`` command line for a level and a node type."""
    command = f"dcgmi diag -r {level}"
    if level >= 2 and thresholds is not None and thresholds.nvlinks_expected_up:
        # Without it the PCIe test does not notice a node that lost NVLinks (techref §6).
        command += f" -p pcie.gpu_nvlinks_expected_up={thresholds.nvlinks_expected_up}"
    return command


class TimeSyncCheck(NodeCheck):
    """Clock synchronisation from ``chronyc tracking`` (timedatectl where chrony is absent)."""

    name = "time"
    title = "time sync"
    result_name = "time.sync"
    tool = "chronyc"

    def nodes(self, ctx: VerifyContext) -> list[PlanNode]:
        """Every node that exists."""
        return [n for n in ctx.plan.nodes if not n.burst]

    def skip_reason(self, ctx: VerifyContext, node: PlanNode) -> str | None:
        """Containers share the host's clock and cannot set it (no CAP_SYS_TIME)."""
        return CONTAINER if ctx.plan.slurm.container_nodes else None

    def command(self, ctx: VerifyContext, node: PlanNode) -> str:
        """chrony's view; systemd-timesyncd's yes/no where chrony is not installed."""
        return (
            f"if command -v chronyc >/dev/null 2>&1; then {TRACKING_COMMAND}; "
            "else echo NTPSynchronized=$(timedatectl show -p NTPSynchronized --value 2>/dev/null || echo unknown); fi"
        )

    def judge(self, ctx: VerifyContext, node: PlanNode, output: str) -> CheckResult:
        """Synchronised, with the offset within ``max_time_offset_s``."""
        return judge_time(output, ctx.options.max_time_offset_s, target=node.hostname)


def judge_time(output: str, max_offset_s: float, *, target: str = "") -> CheckResult:
    """Judge ``chronyc tracking`` (or the ``NTPSynchronized=`` fallback line).

    Raises:
        ParseError: The chronyc output cannot be read.
    """
    text = output.strip()
    if text.startswith("NTPSynchronized="):
        value = text.split("=", 1)[1].strip()
        if value == "yes":
            return CheckResult(
                "time.sync",
                target,
                Verdict.PASS,
                {"source": "timedatectl"},
                "systemd-timesyncd reports the clock synchronised.",
            )
        return _failed(
            "time.sync",
            target,
            f"The clock is not synchronised (timedatectl NTPSynchronized={value or 'unknown'}).",
            "Install and enable chrony pointed at the site's NTP servers.",
            source="timedatectl",
        )
    tracking = parse_chronyc_tracking(output)
    figures: dict[str, float | int | str] = {
        "offset_s": tracking.offset_s,
        "stratum": tracking.stratum,
        "reference": tracking.reference,
        "leap_status": tracking.leap_status,
        "max_offset_s": max_offset_s,
    }
    if not tracking.synchronised:
        return CheckResult(
            "time.sync",
            target,
            Verdict.FAIL,
            figures,
            f"chronyd is not synchronised (leap status {tracking.leap_status}, reference {tracking.reference}).",
            "Check that the NTP sources answer: chronyc sources -v.",
        )
    if abs(tracking.offset_s) > max_offset_s:
        return CheckResult(
            "time.sync",
            target,
            Verdict.FAIL,
            figures,
            f"The clock is {abs(tracking.offset_s):.3f} s off NTP time, more than {max_offset_s:g} s.",
            "chronyd is still slewing or its sources are far; check chronyc sources -v.",
        )
    return CheckResult(
        "time.sync",
        target,
        Verdict.PASS,
        figures,
        f"Synchronised to {tracking.reference}, {abs(tracking.offset_s) * 1e3:.3f} ms off.",
    )


# --- Slurm ------------------------------------------------------------------------------------

# Node states that are healthy: idle, or busy with someone's job.
_GOOD_STATES = ("IDLE", "ALLOCATED", "MIXED", "COMPLETING")
_BAD_FLAGS = ("DRAIN", "FAIL", "NOT_RESPONDING", "INVALID_REG", "INVALID", "REBOOT_REQUESTED")


def judge_slurm_node(node: PlanNode, slurm: SlurmNode | None) -> CheckResult:
    """Judge one node as slurmctld sees it: known, up, not drained, with the plan's GRES.

    Args:
        node: The plan's node.
        slurm: The node's ``scontrol show node`` record; None when slurmctld does not know it.

    Returns:
        Pass for an idle (or busy) node with the GRES the plan gives it; fail otherwise.
        Burst nodes may also be powered down (``IDLE+CLOUD``, ``+POWERED_DOWN``).
    """
    host = node.hostname
    if slurm is None:
        return _failed(
            "slurm.node",
            host,
            f"{host} is not in slurmctld's node table.",
            "Check the NodeName lines of slurm.conf and restart slurmctld.",
        )
    state = "+".join((slurm.state, *slurm.flags))
    figures: dict[str, float | int | str] = {
        "state": state,
        "gres": ",".join(f"{g.name}:{g.type}:{g.count}" if g.type else f"{g.name}:{g.count}" for g in slurm.gres)
        or "none",
    }
    if slurm.reason:
        figures["reason"] = slurm.reason
    problems: list[str] = []
    hint = ""
    bad_flags = [f for f in slurm.flags if f in _BAD_FLAGS]
    if slurm.state not in _GOOD_STATES or bad_flags:
        why = f" ({slurm.reason})" if slurm.reason else ""
        problems.append(f"{host} is {state}{why}")
        if slurm.not_responding or slurm.state == "DOWN":
            hint = f"slurmd on {host} does not answer: systemctl status slurmd; journalctl -u slurmd."
        elif slurm.reason.startswith(DRAIN_PREFIX):
            hint = f"An earlier clusterctl verify drained it; once fixed: scontrol update nodename={host} state=resume."
        else:
            hint = f"See the reason; once fixed: scontrol update nodename={host} state=resume."
    if node.gpus:
        count, types = slurm.gres_count("gpu"), slurm.gres_types("gpu")
        if count != node.gpus or (node.gres_type and types and node.gres_type not in types):
            have = figures["gres"]
            problems.append(f"its GRES is {have}, the plan has gpu:{node.gres_type}:{node.gpus}")
            hint = hint or "slurmd found other GPUs than gres.conf lists; compare slurmd -G with gres.conf."
    elif slurm.gres_count("gpu"):
        problems.append(f"it has {slurm.gres_count('gpu')} GPUs in Slurm, the plan has none")
    if problems:
        return CheckResult("slurm.node", host, Verdict.FAIL, figures, _join(problems), hint)
    use = "idle" if slurm.state == "IDLE" else f"in use ({slurm.state})"
    gres = f" with {figures['gres']}" if node.gpus else ""
    return CheckResult("slurm.node", host, Verdict.PASS, figures, f"{host} is {use}{gres}.")


class SlurmCheck(Check):
    """Slurm as a whole: every node known, up and with its GRES; slurmd running; partitions."""

    name = "slurm"
    title = "Slurm"

    def run(self, ctx: VerifyContext) -> list[Outcome]:
        """Ask slurmctld (from the launcher) and each node's slurmd."""
        plan, opts = ctx.plan, ctx.options
        compute = [n for n in plan.nodes if n.role == "compute"]
        ctx.progress(f"Slurm: scontrol on {ctx.launcher}, slurmd on {compress(n.hostname for n in compute)}")
        present = [n for n in compute if not n.burst]
        jobs = [
            (ctx.launcher, NODES_COMMAND, opts.command_timeout_s),
            (ctx.launcher, PARTITIONS_COMMAND, opts.command_timeout_s),
            *((n.hostname, "systemctl is-active slurmd", opts.command_timeout_s) for n in present),
        ]
        (node_rc, node_out, node_err), (part_rc, part_out, part_err), *slurmd = run_many(
            ctx.executor, jobs, opts.max_parallel
        )
        outcomes: list[Outcome] = []
        hosts = tuple(n.hostname for n in compute)
        try:
            problem = transport_problem("slurm.node", ctx.launcher, "scontrol", node_rc, node_err)
            if problem is not None:
                outcomes.append(Outcome(self.name, problem, hosts))
            else:
                by_name = {n.name: n for n in parse_scontrol_nodes(node_out)}
                for node in compute:
                    result = judge_slurm_node(node, by_name.get(node.hostname))
                    blame = (node.hostname,) if result.verdict is Verdict.FAIL else ()
                    outcomes.append(Outcome(self.name, result, (node.hostname,), blame, {"command": NODES_COMMAND}))
        except ParseError as exc:
            result = parse_failure("slurm.node", ctx.launcher, "scontrol", exc, node_rc, node_err)
            outcomes.append(Outcome(self.name, result, hosts))
        for node, (rc, out, err) in zip(present, slurmd, strict=True):
            result = judge_slurmd(node.hostname, rc, out, err)
            blame = (node.hostname,) if result.verdict is Verdict.FAIL else ()
            outcomes.append(
                Outcome(self.name, result, (node.hostname,), blame, {"command": "systemctl is-active slurmd"})
            )
        outcomes.extend(self._partitions(ctx, part_rc, part_out, part_err))
        return outcomes

    def _partitions(self, ctx: VerifyContext, rc: int, out: str, err: str) -> list[Outcome]:
        problem = transport_problem("slurm.partition", ctx.launcher, "scontrol", rc, err)
        if problem is not None:
            return [Outcome(self.name, problem)]
        try:
            found = {p.name: p for p in parse_scontrol_partitions(out)}
        except ParseError as exc:
            return [Outcome(self.name, parse_failure("slurm.partition", ctx.launcher, "scontrol", exc, rc, err))]
        outcomes: list[Outcome] = []
        for part in ctx.plan.slurm.partitions:
            have = found.get(part.name)
            figures: dict[str, float | int | str] = {"planned_nodes": part.hosts}
            if have is None:
                result = _failed(
                    "slurm.partition",
                    part.name,
                    f"Partition {part.name} does not exist in Slurm.",
                    "Check the PartitionName lines of slurm.conf.",
                    **figures,
                )
            else:
                figures.update(nodes=have.nodes, state=have.state)
                planned = set(expand(part.hosts)) if part.hosts else set()
                actual = set(expand(have.nodes)) if have.nodes not in ("", "(null)") else set()
                if planned != actual or have.state not in ("UP", ""):
                    missing, extra = sorted(planned - actual), sorted(actual - planned)
                    parts = [f"state {have.state}"] if have.state not in ("UP", "") else []
                    if missing:
                        parts.append(f"missing {compress(missing)}")
                    if extra:
                        parts.append(f"unplanned {compress(extra)}")
                    result = CheckResult(
                        "slurm.partition",
                        part.name,
                        Verdict.FAIL,
                        figures,
                        f"Partition {part.name} differs from the plan: {', '.join(parts)}.",
                        "Re-render and redeploy slurm.conf (clusterctl up), then scontrol reconfigure.",
                    )
                else:
                    result = CheckResult(
                        "slurm.partition",
                        part.name,
                        Verdict.PASS,
                        figures,
                        f"Partition {part.name} is UP with {have.nodes or 'no nodes'}.",
                    )
            outcomes.append(Outcome(self.name, result, tuple(expand(part.hosts)) if part.hosts else ()))
        return outcomes


def judge_slurmd(host: str, rc: int, out: str, err: str) -> CheckResult:
    """Judge ``systemctl is-active slurmd`` on a node.

    Why besides slurmctld's view: slurmctld notices a dead slurmd only after
    SlurmdTimeout; asking the node finds it at once.
    """
    problem = transport_problem("slurm.slurmd", host, "systemctl", rc, err)
    if problem is not None:
        return problem
    state = _last_line(out) or _last_line(err) or "unknown"
    if rc == 0 and state == "active":
        return CheckResult("slurm.slurmd", host, Verdict.PASS, {"slurmd": state}, "slurmd is running.")
    return CheckResult(
        "slurm.slurmd",
        host,
        Verdict.FAIL,
        {"slurmd": state},
        f"slurmd is not running (systemctl: {state}).",
        f"systemctl status slurmd and journalctl -u slurmd on {host}; start it with systemctl start slurmd.",
    )


# --- storage ---------------------------------------------------------------------------------


def fio_command(mount: str, host: str, options: VerifyOptions) -> str:
    """Check the mount, then write and read ``fio_size`` per job on it; clean up after.

    The first output line is findmnt's ``FSTYPE SOURCE`` (exit 3 without a mount there);
    fio's JSON follows. Each node writes into its own directory so nodes never share files.
    """
    directory = f"{mount.rstrip('/')}/.clusterctl-verify/{host}"
    fio = [
        "fio",
        "--output-format=json",
        f"--directory={directory}",
        # The read job reads the files the write job wrote, instead of laying out its own.
        "--filename_format=clusterctl.$jobnum.$filenum",
        "--ioengine=libaio",
        f"--direct={int(options.fio_direct)}",
        "--bs=1M",
        "--iodepth=16",
        f"--numjobs={options.fio_numjobs}",
        f"--size={options.fio_size}",
        "--group_reporting",
        "--end_fsync=1",
        "--name=write",
        "--rw=write",
        "--name=read",
        "--stonewall",
        "--rw=read",
    ]
    q = shlex.quote
    return (
        f"findmnt -n -o FSTYPE,SOURCE --mountpoint {q(mount)} || exit 3; "
        f"mkdir -p {q(directory)} && {' '.join(q(a) for a in fio)}; rc=$?; rm -rf {q(directory)}; exit $rc"
    )


def storage_hosts(plan: Plan, tier: StoragePlan) -> list[str]:
    """The nodes that test a tier: its compute nodes (the consumers), else every node mounting it."""
    mounted = set(expand(tier.hosts)) if tier.hosts else set()
    present = [n for n in plan.nodes if n.hostname in mounted and not n.burst]
    compute = [n.hostname for n in present if n.role == "compute"]
    return compute or [n.hostname for n in present]


class StorageCheck(Check):
    """Each tier mounted where the plan says, and its aggregate fio bandwidth at the tier's marks."""

    name = "storage"
    title = "storage"

    def run(self, ctx: VerifyContext) -> list[Outcome]:
        """Run fio on every consumer of each tier at once and add up the bandwidth."""
        if not ctx.plan.storage:
            result = skipped(self.name, "storage.fio", "", "skipped: no storage tiers in the spec")
            return [Outcome(self.name, result)]
        outcomes: list[Outcome] = []
        for tier in ctx.plan.storage:
            outcomes.extend(self._tier(ctx, tier))
        return outcomes

    def _tier(self, ctx: VerifyContext, tier: StoragePlan) -> list[Outcome]:
        hosts = storage_hosts(ctx.plan, tier)
        ctx.progress(f"storage {tier.name} ({tier.mount}): fio on {compress(hosts)}")
        detail = {"tier": tier.name, "mount": tier.mount}
        jobs = [(h, fio_command(tier.mount, h, ctx.options), ctx.options.fio_timeout_s) for h in hosts]
        outcomes: list[Outcome] = []
        merged: list[FioJob] = []
        measured: list[str] = []
        results = run_many(ctx.executor, jobs, ctx.options.max_parallel)
        for (host, command, _), (rc, out, err) in zip(jobs, results, strict=True):
            result, fio = judge_storage_node(tier, host, rc, out, err)
            blame = (host,) if result.verdict is Verdict.FAIL else ()
            outcomes.append(Outcome(self.name, result, (host,), blame, {**detail, "command": command}))
            if fio is not None:
                merged.extend(fio.jobs)
                measured.append(host)
        if measured:
            # Jobs keep their group ids, so the sum per group is the tier's aggregate (see FioResult).
            total = judge_fio(
                FioResult(jobs=tuple(merged)),
                tier.read_bytes_per_s,
                tier.write_bytes_per_s,
                target=f"{tier.name} ({tier.mount})",
            )
            total = replace(total, check="storage.aggregate", figures={**total.figures, "nodes": len(measured)})
            outcomes.append(Outcome(self.name, total, tuple(measured), (), detail))
        return outcomes


def judge_storage_node(
    tier: StoragePlan, host: str, rc: int, out: str, err: str
) -> tuple[CheckResult, FioResult | None]:
    """Judge one node's mount check and fio run on a tier (no bandwidth mark: that is aggregate)."""
    problem = transport_problem("storage.fio", host, "fio", rc, err)
    if problem is not None:
        return problem, None
    first = out.strip().splitlines()[0] if out.strip() else ""
    if rc == 3 and not first:
        return (
            _failed(
                "storage.mount",
                host,
                f"{tier.mount} is not mounted on {host}.",
                f"systemctl status {tier.unit_name} on {host}.",
            ),
            None,
        )
    fstype = first.split()[0] if first else ""
    if fstype and not fstype.startswith(tier.fstype):
        return (
            _failed(
                "storage.mount",
                host,
                f"{tier.mount} on {host} is {fstype}, not {tier.fstype}.",
                f"Something else is mounted at {tier.mount}; check findmnt {tier.mount}.",
                fstype=fstype,
            ),
            None,
        )
    if rc == NOT_FOUND_RC and "fio" in err:
        result = skipped("storage", "storage.fio", host, "skipped: fio is not installed", "Install fio on the nodes.")
        return replace(result, figures={"fstype": fstype}), None
    try:
        fio = parse_fio_json(out)
    except ParseError as exc:
        return parse_failure("storage.fio", host, "fio", exc, rc, err), None
    result = judge_fio(fio, target=host)
    return replace(result, figures={**result.figures, "fstype": fstype, "tier": tier.name}), fio


# --- NCCL ------------------------------------------------------------------------------------


def nccl_mark(ctx: VerifyContext, run: NcclRun) -> tuple[float | None, int]:
    """The busbw mark and judged message size for a run: the lowest of its nodes' profiles."""
    by_name = {n.hostname: n for n in ctx.plan.nodes}
    marks: list[float] = []
    sizes: list[int] = []
    for host in run.hosts:
        thresholds = ctx.thresholds_for(by_name[host])
        if thresholds is None:
            continue
        mark = thresholds.nccl_busbw_gbps(len(run.hosts))
        if mark is not None:
            marks.append(mark)
        sizes.append(thresholds.nccl_min_size_bytes)
    return (min(marks) if marks else None), (max(sizes) if sizes else 1 << 30)


def judge_nccl_run(ctx: VerifyContext, run: NcclRun, rc: int, out: str, err: str) -> CheckResult:
    """Judge one srun of all_reduce_perf."""
    target = run.hostlist
    problem = transport_problem("nccl.all_reduce", ctx.launcher, "srun", rc, err)
    if problem is not None:
        return replace(problem, target=target)
    mark, size = nccl_mark(ctx, run)
    try:
        result = judge_nccl(parse_nccl_tests(out, collective="all_reduce"), mark, size, target=target)
    except ParseError as exc:
        why = _last_line(err) or exc.message
        return _failed(
            "nccl.all_reduce",
            target,
            f"all_reduce_perf produced no results (srun exit {rc}): {why}",
            "Run the srun command from the report by hand on the login node; check the nodes' slurmd logs.",
            rc=rc,
        )
    if rc != 0 and result.verdict is not Verdict.FAIL:
        return replace(
            result,
            verdict=Verdict.FAIL,
            message=f"srun exited {rc} after the results: {_last_line(err) or 'no message'}",
            hint="A rank failed at the end of the run; see the job's stderr.",
        )
    return result


def nccl_blame(outcomes: list[Outcome]) -> dict[str, str]:
    """Nodes the NCCL results point at, with the why.

    A failed single-node run blames its node. A failed two-node run names two suspects;
    a node is blamed when every two-node run it took part in failed: with two or more
    different partners that singles out the bad node, with one partner both are named
    (the report says it cannot tell them apart). Runs over more nodes blame nobody: they
    test the leaves and spines, whose faults draining a node does not fix.
    """
    blamed: dict[str, str] = {}
    pair_runs: dict[str, list[Outcome]] = {}
    for outcome in outcomes:
        if outcome.check != "nccl" or outcome.verdict is Verdict.SKIPPED:
            continue
        if len(outcome.hosts) == 1 and outcome.verdict is Verdict.FAIL:
            blamed[outcome.hosts[0]] = "single-node all_reduce failed"
        elif len(outcome.hosts) == 2:
            for host in outcome.hosts:
                pair_runs.setdefault(host, []).append(outcome)
    for host, runs in pair_runs.items():
        if host in blamed or any(r.verdict is not Verdict.FAIL for r in runs):
            continue
        partners = sorted({h for r in runs for h in r.hosts if h != host})
        if len(runs) >= 2:
            blamed[host] = f"every two-node run failed ({len(runs)} runs, partners {compress(partners)})"
        else:
            blamed[host] = f"two-node run with {partners[0]} failed (cannot tell which of the two is at fault)"
    return blamed


# --- NCCL transport ----------------------------------------------------------------------------

# Set in every task: NCCL_DEBUG=INFO prints the transport lines; INIT,NET keeps just those
# subsystems ("Using network", "NET/IB : Using", channel lines are INIT|NET in NCCL's sources).
TRANSPORT_TASK_ENV = ("NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT,NET")
# Small messages: the transport is chosen at init; the run only has to connect.
_TRANSPORT_BYTES = (1 << 20, 16 << 20)


def transport_pairs(ctx: VerifyContext) -> list[tuple[str, str]]:
    """Two-node runs that give every schedulable GPU node a partner, neighbours first.

    Nodes follow the fabric's groups (SU or leaf), so most pairs share a leaf; with an odd
    count the last node is paired with the first. Nodes an earlier check blamed sit out.
    """
    _kind, groups = fabric_groups(ctx.plan)
    hosts = [h for members in groups.values() for h in members if h not in ctx.failed_nodes]
    pairs = [(hosts[i], hosts[i + 1]) for i in range(0, len(hosts) - 1, 2)]
    if len(hosts) % 2 and len(hosts) > 1:
        pairs.append((hosts[-1], hosts[0]))
    return pairs


def judge_transport_run(ctx: VerifyContext, run: NcclRun, rc: int, out: str, err: str) -> TransportJudgement:
    """Judge one two-node ``NCCL_DEBUG=INFO`` run: each node's NCCL on the fabric's transport."""
    target = run.hostlist
    problem = transport_problem(CHECK_TRANSPORT, ctx.launcher, "srun", rc, err)
    if problem is not None:
        return TransportJudgement(replace(problem, target=target))
    # srun --label numbers tasks 0..n-1, gpus_per_node per node in --nodelist order (block distribution).
    task_hosts = {t: run.hosts[t // run.gpus_per_node] for t in range(len(run.hosts) * run.gpus_per_node)}
    try:
        log = parse_nccl_debug(f"{out}\n{err}")
    except ParseError:
        why = _last_line(err) or "no output"
        return TransportJudgement(
            _failed(
                CHECK_TRANSPORT,
                target,
                f"all_reduce_perf printed no NCCL debug line (srun exit {rc}): {why}",
                "Run the srun command from the report by hand on the login node; check the NCCL install.",
                rc=rc,
            )
        )
    judgement = judge_transport(
        log, ctx.plan.fabric.kind, nodes=len(run.hosts), hosts=run.hosts, task_hosts=task_hosts, target=target
    )
    if rc != 0 and judgement.result.verdict is Verdict.PASS:
        result = judgement.result
        figures = {**result.figures, "rc": rc}
        return replace(
            judgement,
            result=replace(
                result,
                figures=figures,
                message=result.message[:-1] + f"; srun exited {rc} afterwards (see the nccl check).",
            ),
        )
    return judgement


class TransportCheck(Check):
    """The transport NCCL chose between two nodes, from ``NCCL_DEBUG=INFO``: never a socket fallback."""

    name = "transport"
    title = "NCCL transport"

    def run(self, ctx: VerifyContext) -> list[Outcome]:
        """One small all_reduce_perf per pair of nodes, every pair at once, each log judged."""
        nodes = eligible_nodes(ctx.plan)
        if any(n.emulated for n in nodes):
            return [
                Outcome(self.name, skipped(self.name, CHECK_TRANSPORT, compress(n.hostname for n in nodes), EMULATED))
            ]
        pairs = transport_pairs(ctx)
        if not pairs:
            reason = "skipped: needs two schedulable GPU nodes"
            return [Outcome(self.name, skipped(self.name, CHECK_TRANSPORT, "", reason))]
        by_name = {n.hostname: n for n in nodes}
        options = replace(ctx.options.nccl, min_bytes=_TRANSPORT_BYTES[0], max_bytes=_TRANSPORT_BYTES[1])
        runs = [
            NcclRun(
                phase="pairs",
                hosts=pair,
                groups=(),
                gpus_per_node=min(by_name[h].gpus for h in pair),
                partition=partition_of(ctx.plan, pair),
            )
            for pair in pairs
        ]
        commands = [srun_command(run, options, job="transport", task_env=TRANSPORT_TASK_ENV) for run in runs]
        ctx.progress(f"{self.title}: {len(runs)} two-node runs with NCCL_DEBUG=INFO")
        jobs = [(ctx.launcher, command, ctx.options.nccl_timeout_s) for command in commands]
        outcomes: list[Outcome] = []
        for run, command, (rc, out, err) in zip(
            runs, commands, run_many(ctx.executor, jobs, ctx.options.max_parallel), strict=True
        ):
            judgement = judge_transport_run(ctx, run, rc, out, err)
            blame = tuple(h for h in judgement.failing_hosts if h in run.hosts)
            outcomes.append(Outcome(self.name, judgement.result, run.hosts, blame, {"command": command}))
        return outcomes


class NcclCheck(Check):
    """nccl-tests all_reduce_perf over the fabric-shaped test plan, wave by wave, through srun."""

    name = "nccl"
    title = "NCCL"

    def __init__(self, test_plan: NcclPlan | None = None) -> None:
        """Create the check; the plan is derived from the fabric unless given."""
        self.test_plan = test_plan

    def run(self, ctx: VerifyContext) -> list[Outcome]:
        """Run every wave in order; later waves leave out nodes already found bad."""
        test_plan = self.test_plan or build_test_plan(ctx.plan)
        emulated = {n.hostname for n in ctx.plan.nodes if n.emulated}
        outcomes: list[Outcome] = []
        excluded: set[str] = set(ctx.failed_nodes)
        phase = None
        for wave in test_plan.waves:
            if wave.phase != phase:
                # Blame only once a phase is complete: the second pairing round is what
                # tells a bad node from its first partner.
                excluded = set(ctx.failed_nodes) | set(nccl_blame(outcomes))
                phase = wave.phase
            todo: list[NcclRun] = []
            for run in wave.runs:
                detail = {"phase": run.phase, "groups": ",".join(run.groups), "wave": str(wave.number)}
                bad = [h for h in run.hosts if h in excluded]
                if any(h in emulated for h in run.hosts):
                    result = skipped(self.name, "nccl.all_reduce", run.hostlist, EMULATED)
                    outcomes.append(Outcome(self.name, result, run.hosts, (), detail))
                    continue
                if bad and run.phase in ("group", "full") and len(run.hosts) - len(bad) >= 2:
                    # A big run with a known-bad node only measures that node; run without it.
                    run = replace(run, hosts=tuple(h for h in run.hosts if h not in excluded))
                elif bad:
                    reason = f"skipped: {compress(bad)} failed an earlier check"
                    result = skipped(self.name, "nccl.all_reduce", run.hostlist, reason)
                    outcomes.append(Outcome(self.name, result, run.hosts, (), detail))
                    continue
                todo.append(run)
            if not todo:
                continue
            label = f" ({wave.label})" if wave.label else ""
            ctx.progress(f"NCCL wave {wave.number}, {wave.phase}{label}: {len(todo)} runs")
            commands = [srun_command(run, ctx.options.nccl) for run in todo]
            jobs = [(ctx.launcher, command, ctx.options.nccl_timeout_s) for command in commands]
            results = run_many(ctx.executor, jobs, ctx.options.max_parallel)
            for run, command, (rc, out, err) in zip(todo, commands, results, strict=True):
                detail = {
                    "phase": run.phase,
                    "groups": ",".join(run.groups),
                    "wave": str(wave.number),
                    "command": command,
                }
                outcomes.append(Outcome(self.name, judge_nccl_run(ctx, run, rc, out, err), run.hosts, (), detail))
        blamed = nccl_blame(outcomes)
        return [_with_blame(o, blamed) for o in outcomes]


def _with_blame(outcome: Outcome, blamed: dict[str, str]) -> Outcome:
    if outcome.verdict is not Verdict.FAIL:
        return outcome
    hosts = tuple(h for h in outcome.hosts if h in blamed)
    return replace(outcome, blame=hosts) if hosts else outcome


class PackagesCheck(NodeCheck):
    """A node's installed packages against its profile's image in clusterctl.lock (one dpkg-query per node).

    A package of the image at another version, or gone, fails the node, named; packages the image
    has not (the configure stage installs some on purpose) are counted, never failed
    (`clusterctl.image.drift`).
    """

    name = "packages"
    title = "packages against clusterctl.lock"
    result_name = "packages.lock"
    tool = "dpkg-query"
    install_hint = "The node is not a Debian or Ubuntu machine; the lock records dpkg's packages."

    def nodes(self, ctx: VerifyContext) -> list[PlanNode]:
        """Every node that exists."""
        return [n for n in ctx.plan.nodes if not n.burst]

    def run(self, ctx: VerifyContext) -> list[Outcome]:
        """Nothing without a lock (a cluster without baked images verifies as it always did)."""
        return super().run(ctx) if ctx.options.locked_images else []

    def skip_reason(self, ctx: VerifyContext, node: PlanNode) -> str | None:
        """Skipped for a profile the lock has no image of."""
        if node.hardware not in ctx.options.locked_images:
            return f"skipped: clusterctl.lock has no image of hardware profile {node.hardware}"
        return None

    def command(self, ctx: VerifyContext, node: PlanNode) -> str:
        """``dpkg-query -W`` with status, package and version."""
        return DPKG_QUERY

    def judge(self, ctx: VerifyContext, node: PlanNode, output: str) -> CheckResult:
        """Every package of the image at its locked version; the differences named."""
        image = ctx.options.locked_images[node.hardware]
        try:
            installed = parse_packages(output)
        except PackageListError as exc:
            raise ParseError(str(exc), 0, "") from None
        drift = compare_packages(image.packages, installed)
        figures: dict[str, float | int | str] = {
            "image": image.hash[:12],
            "locked": len(image.packages),
            "changed": len(drift.changed),
            "missing": len(drift.missing),
            "extra": len(drift.extra),
        }
        extra = f"; {len(drift.extra)} package(s) not in the image (not checked)" if drift.extra else ""
        if drift.drifted:
            parts = drift.differences()
            named = "; ".join(parts[:20]) + (f"; {len(parts) - 20} more" if len(parts) > 20 else "")
            return _failed(
                self.result_name,
                node.hostname,
                f"{len(parts)} package(s) of the {node.hardware} image differ on {node.hostname}: {named}{extra}.",
                "Install the locked versions again (apt-get install --allow-downgrades NAME=VERSION), or make the "
                "node anew from the locked image.",
                **figures,
            )
        return CheckResult(
            self.result_name,
            node.hostname,
            Verdict.PASS,
            figures,
            f"Every package of the {node.hardware} image ({len(image.packages)}) is at its locked version{extra}.",
        )


CHECKS: tuple[type[Check], ...] = (
    SlurmCheck,
    TimeSyncCheck,
    GpuInventoryCheck,
    TopoCheck,
    IbCheck,
    DcgmCheck,
    StorageCheck,
    TransportCheck,
    NcclCheck,
    PackagesCheck,
)
CHECK_NAMES: tuple[str, ...] = tuple(c.name for c in CHECKS)
