"""The NCCL test plan: which nodes run all_reduce_perf together, in which order, shaped by the fabric.

Phases, in order (each a list of waves; the runs of one wave share no node and go at once):

``single``
    Every GPU node alone: NVLink/NVSwitch and the node's own GPUs.
``pairs``
    Two-node runs inside each group (a scalable unit on a rail-optimized fabric, the nodes
    of one leaf on a rack-leaf one): each node's NICs and its leaf. Two rounds with
    different partners, so a node that fails with both partners is the suspect, not its
    partners.
``group``
    One run per group: the whole leaf level of that group.
``cross``
    Two-node runs between groups, through the spines: node k of one group with node k of
    the other, every pair of groups once. The pairings follow a round-robin tournament,
    so within a wave each group meets exactly one other group and every spine carries
    traffic at once (which spine a flow takes is the subnet manager's choice, not ours).
``full``
    The whole cluster, last.

Two-node runs set ``NCCL_ALGO=Ring``: with two nodes NCCL would otherwise pick a tree or
NVLS algorithm whose bus bandwidth can exceed the NICs' line rate (nccl-tests #256), and
the point of those runs is the network.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from clusterctl.catalog.tools import ALL_REDUCE_PERF
from clusterctl.hostlist import compress, expand

if TYPE_CHECKING:
    from clusterctl.plan.models import Plan, PlanNode

Phase = Literal["single", "pairs", "group", "cross", "full"]
PHASES: tuple[Phase, ...] = ("single", "pairs", "group", "cross", "full")
GroupKind = Literal["su", "leaf"]


@dataclass(frozen=True)
class NcclRun:
    """One nccl-tests run over a set of nodes.

    Attributes:
        phase: Which phase it belongs to.
        hosts: The nodes, in rank order.
        groups: The groups (SU or leaf-group names) the nodes belong to.
        env: Environment variables set for the run (``NCCL_ALGO=Ring`` on two nodes).
        gpus_per_node: Ranks per node (one per GPU).
        partition: The Slurm partition holding every node; None for the default.
    """

    phase: Phase
    hosts: tuple[str, ...]
    groups: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    gpus_per_node: int = 8
    partition: str | None = None

    @property
    def hostlist(self) -> str:
        """The nodes as a Slurm hostlist."""
        return compress(self.hosts)

    @property
    def name(self) -> str:
        """``pairs gpu[001-002]``."""
        return f"{self.phase} {self.hostlist}"


@dataclass(frozen=True)
class Wave:
    """Runs that go at the same time; no node appears in two of them.

    Attributes:
        phase: The phase of every run in the wave.
        number: 1-based position in the whole plan.
        runs: The runs.
        label: What distinguishes the wave within its phase (``round 2``).
    """

    phase: Phase
    number: int
    runs: tuple[NcclRun, ...]
    label: str = ""


@dataclass(frozen=True)
class NcclPlan:
    """The whole NCCL test plan of a cluster.

    Attributes:
        group_kind: ``su`` (rail-optimized fabric) or ``leaf`` (rack-leaf fabric).
        groups: Group name -> the nodes of that group taking part, in plan order.
        waves: Every wave, in execution order.
        notes: Why a phase has no runs, or what was left out.
    """

    group_kind: GroupKind
    groups: dict[str, tuple[str, ...]]
    waves: tuple[Wave, ...]
    notes: tuple[str, ...] = ()

    def runs(self, phase: Phase | None = None) -> list[NcclRun]:
        """Every run (of one phase), in execution order."""
        return [run for wave in self.waves if phase in (None, wave.phase) for run in wave.runs]

    def waves_of(self, phase: Phase) -> list[Wave]:
        """The waves of one phase."""
        return [wave for wave in self.waves if wave.phase == phase]

    @property
    def hosts(self) -> tuple[str, ...]:
        """Every node the plan tests, in group order."""
        return tuple(h for hosts in self.groups.values() for h in hosts)

    def group_of(self, host: str) -> str | None:
        """The group a node belongs to."""
        return next((name for name, hosts in self.groups.items() if host in hosts), None)


@dataclass(frozen=True)
class NcclOptions:
    """How each run is launched.

    Attributes:
        binary: The all_reduce_perf program (absolute path or name on PATH); by default
            where roles/nccl installs it. It must be built with MPI=1, since srun starts
            one rank per GPU.
        mpi: srun's ``--mpi`` plugin; slurm.conf has ``MpiDefault=none``, so it must be named.
        min_bytes: Smallest message (``-b``).
        max_bytes: Largest message (``-e``); at least the threshold's judged size.
        time_limit_min: srun ``--time`` per run, in minutes.
        extra_srun_args: Appended to srun's options (site accounts, QoS).
    """

    binary: str = ALL_REDUCE_PERF
    mpi: str = "pmix"
    min_bytes: int = 8 << 20
    max_bytes: int = 8 << 30
    time_limit_min: int = 15
    extra_srun_args: tuple[str, ...] = field(default_factory=tuple)


def eligible_nodes(plan: Plan) -> list[PlanNode]:
    """GPU compute nodes Slurm can run jobs on: in service (neither free spares nor replaced) and not burst.

    Why: free spares and replaced nodes are in no partition and burst nodes are powered off until a job asks for
    them; their per-node checks still run where a host exists.
    """
    return [n for n in plan.nodes if n.role == "compute" and n.gpus and n.in_service and not n.burst]


def fabric_groups(plan: Plan) -> tuple[GroupKind, dict[str, tuple[str, ...]]]:
    """The groups the plan's fabric defines over the eligible nodes.

    Returns:
        ``("su", {"su1": (...), ...})`` on a rail-optimized fabric, ``("leaf", {...})``
        keyed by the node's topology switch (its leaf or leaf group) on a rack-leaf one.
        Groups without eligible nodes are left out.
    """
    nodes = eligible_nodes(plan)
    wanted = {n.hostname for n in nodes}
    groups: dict[str, tuple[str, ...]] = {}
    if plan.fabric.layout == "rail-optimized" and plan.fabric.sus:
        for su in plan.fabric.sus:
            members = tuple(h for h in expand(su.hosts) if h in wanted)
            if members:
                groups[su.name] = members
        return "su", groups
    for node in nodes:
        key = node.topology_switch or f"leaf-{node.rack}"
        groups[key] = (*groups.get(key, ()), node.hostname)
    return "leaf", groups


def round_robin(items: list[str]) -> list[list[tuple[str, str]]]:
    """A round-robin tournament: every pair of items meets once, each item once per round.

    The circle method: fix the first item, rotate the rest one place per round. With an
    odd count a bye is added, so each round one item rests.

    Args:
        items: The competitors (group names), in a stable order.

    Returns:
        ``len(items) - 1`` rounds (``len(items)`` when odd), each a list of disjoint pairs.
    """
    players: list[str | None] = list(items)
    if len(players) < 2:
        return []
    if len(players) % 2:
        players.append(None)
    n = len(players)
    rounds: list[list[tuple[str, str]]] = []
    for _ in range(n - 1):
        pairs: list[tuple[str, str]] = []
        for i in range(n // 2):
            a, b = players[i], players[n - 1 - i]
            if a is not None and b is not None:
                pairs.append((a, b) if items.index(a) < items.index(b) else (b, a))
        rounds.append(pairs)
        players = [players[0], players[-1], *players[1:-1]]
    return rounds


def _pair_rounds(hosts: tuple[str, ...]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Two pairings of a group's nodes: (0,1)(2,3)... and (1,2)(3,4)...(n-1,0).

    Why two: a failed pair names two suspects; with a second, different partner, the node
    that fails both times is the bad one. The second round skips pairs the first had (a
    two-node group has one pair only).
    """
    n = len(hosts)
    first = [(hosts[i], hosts[i + 1]) for i in range(0, n - 1, 2)]
    seen = {frozenset(p) for p in first}
    second: list[tuple[str, str]] = []
    # With an even count the last pair wraps round to node 0; with an odd one node 0 rests.
    for i in range(1, n, 2):
        pair = (hosts[i], hosts[(i + 1) % n])
        if frozenset(pair) not in seen:
            second.append(pair)
    return first, second


def partition_of(plan: Plan, hosts: tuple[str, ...]) -> str | None:
    """The partition holding every one of ``hosts`` (the default one first); None if none does."""
    parts = sorted(plan.slurm.partitions, key=lambda p: not p.default)
    for part in parts:
        members = set(expand(part.hosts)) if part.hosts else set()
        if set(hosts) <= members:
            return part.name
    return None


class _Builder:
    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.by_name = {n.hostname: n for n in plan.nodes}
        self.group_of: dict[str, str] = {}
        self.waves: list[Wave] = []

    def partition(self, hosts: tuple[str, ...]) -> str | None:
        return partition_of(self.plan, hosts)

    def run(self, phase: Phase, hosts: tuple[str, ...]) -> NcclRun:
        env = (("NCCL_ALGO", "Ring"),) if len(hosts) == 2 else ()
        groups = tuple(dict.fromkeys(self.group_of[h] for h in hosts))
        return NcclRun(
            phase=phase,
            hosts=hosts,
            groups=groups,
            env=env,
            gpus_per_node=min(self.by_name[h].gpus for h in hosts),
            partition=self.partition(hosts),
        )

    def wave(self, phase: Phase, runs: list[NcclRun], label: str = "") -> None:
        if runs:
            self.waves.append(Wave(phase=phase, number=len(self.waves) + 1, runs=tuple(runs), label=label))


def build_test_plan(plan: Plan) -> NcclPlan:
    """Derive the NCCL test plan from the plan's fabric.

    Args:
        plan: The resolved cluster.

    Returns:
        The waves of every phase; ``notes`` says which phases have no runs and why.
    """
    kind, groups = fabric_groups(plan)
    builder = _Builder(plan)
    builder.group_of = {h: name for name, hosts in groups.items() for h in hosts}
    hosts = [h for members in groups.values() for h in members]
    notes: list[str] = []
    label = "SU" if kind == "su" else "leaf group"
    if not hosts:
        return NcclPlan(group_kind=kind, groups=groups, waves=(), notes=("no schedulable GPU nodes to test",))

    builder.wave("single", [builder.run("single", (h,)) for h in hosts])

    rounds = [_pair_rounds(members) for members in groups.values()]
    for index in (0, 1):
        pairs = [builder.run("pairs", pair) for group_rounds in rounds for pair in group_rounds[index]]
        builder.wave("pairs", pairs, label=f"round {index + 1}")
    if not builder.waves or builder.waves[-1].phase != "pairs":
        notes.append(f"pairs: no {label} has two nodes")

    # A group of two is its own pair run; a group of one is its own single-node run.
    group_runs = [builder.run("group", members) for members in groups.values() if len(members) > 2]
    builder.wave("group", group_runs)
    if not group_runs:
        notes.append(f"group: no {label} has more than two nodes (the pair runs cover them)")

    names = list(groups)
    for number, matches in enumerate(round_robin(names), start=1):
        runs = [
            builder.run("cross", (a_host, b_host))
            for a, b in matches
            for a_host, b_host in zip(groups[a], groups[b], strict=False)
        ]
        builder.wave("cross", runs, label=f"round {number}: " + ", ".join(f"{a}-{b}" for a, b in matches))
    if len(names) < 2:
        notes.append(f"cross: one {label} only, no traffic crosses the spines")
    elif any(len(groups[a]) != len(groups[b]) for a in names for b in names):
        notes.append(f"cross: {label}s differ in size; the nodes beyond the smaller one's count sit out")

    if len(names) > 1:
        builder.wave("full", [builder.run("full", tuple(hosts))])
    else:
        notes.append(f"full: the cluster is one {label}, so the {label} run is the full run")
    return NcclPlan(group_kind=kind, groups=groups, waves=tuple(builder.waves), notes=tuple(notes))


def srun_command(
    run: NcclRun, options: NcclOptions | None = None, *, job: str | None = None, task_env: tuple[str, ...] = ()
) -> str:
    """The shell command that runs ``run`` through Slurm from the login node.

    Args:
        run: The run.
        options: Launch options; defaults when None.
        job: What the job name says after ``clusterctl-verify-`` (the run's phase by default).
        task_env: ``NAME=value`` set in each task through ``env`` (values with commas, which
            ``--export`` would split).

    Returns:
        An ``srun ... all_reduce_perf ...`` command line, quoted for a POSIX shell.
    """
    opts = options or NcclOptions()
    export = ",".join(["ALL", *(f"{k}={v}" for k, v in run.env)])
    args = [
        "srun",
        f"--job-name=clusterctl-verify-{job or run.phase}",
        *([f"--partition={run.partition}"] if run.partition else []),
        f"--nodelist={run.hostlist}",
        f"--nodes={len(run.hosts)}",
        f"--ntasks-per-node={run.gpus_per_node}",
        f"--gpus-per-node={run.gpus_per_node}",
        "--exclusive",
        f"--time={opts.time_limit_min}",
        f"--mpi={opts.mpi}",
        "--label",
        f"--export={export}",
        *opts.extra_srun_args,
        *(("env", *task_env) if task_env else ()),
        opts.binary,
        # One GPU per rank; -c 1 checks the results, which nccl-tests does by default but
        # a site wrapper may not.
        *("-b", str(opts.min_bytes), "-e", str(opts.max_bytes), "-f", "2", "-g", "1", "-c", "1"),
    ]
    return " ".join(shlex.quote(a) for a in args)
