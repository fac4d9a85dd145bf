"""Slurm as a whole: every node known to slurmctld, up and with its GRES; slurmd running on each
node; the partitions as planned. ``scontrol`` runs on the launcher (login node, else controller).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from clusterctl.hostlist import compress, expand
from clusterctl.slurm.commands import shell, show_nodes, show_partitions
from clusterctl.slurm.nodes import SlurmNode, by_name, parse_nodes, parse_partitions
from clusterctl.slurm.records import RecordError
from clusterctl.spec.findings import Finding
from clusterctl.verify.base import (
    DRAIN_PREFIX,
    Check,
    VerifyContext,
    last_line,
    node_result,
    parse_failure,
    transport_problem,
)
from clusterctl.verify.result import failed, passed, sentence, with_run

if TYPE_CHECKING:
    from clusterctl.plan.models import PlanNode

NODES_COMMAND = shell(show_nodes())
PARTITIONS_COMMAND = shell(show_partitions())
# Node states that are healthy: idle, or busy with someone's job.
_GOOD_STATES = ("IDLE", "ALLOCATED", "MIXED", "COMPLETING")

_BAD_FLAGS = ("DRAIN", "FAIL", "NOT_RESPONDING", "INVALID_REG", "INVALID", "REBOOT_REQUESTED")


def judge_slurm_node(node: PlanNode, slurm: SlurmNode | None) -> Finding:
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
        return failed(
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
        return failed("slurm.node", host, sentence(problems), hint, **figures)
    use = "idle" if slurm.state == "IDLE" else f"in use ({slurm.state})"
    gres = f" with {figures['gres']}" if node.gpus else ""
    return passed("slurm.node", host, f"{host} is {use}{gres}.", figures)


class SlurmCheck(Check):
    """Slurm as a whole: every node known, up and with its GRES; slurmd running; partitions."""

    name = "slurm"
    title = "Slurm"

    def run(self, ctx: VerifyContext) -> list[Finding]:
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
        (node_rc, node_out, node_err), (part_rc, part_out, part_err), *slurmd = ctx.run(jobs)
        outcomes: list[Finding] = []
        hosts = tuple(n.hostname for n in compute)
        try:
            problem = transport_problem("slurm.node", ctx.launcher, "scontrol", node_rc, node_err)
            if problem is not None:
                outcomes.append(with_run(problem, self.name, hosts))
            else:
                listed = by_name(parse_nodes(node_out))
                for node in compute:
                    result = judge_slurm_node(node, listed.get(node.hostname))
                    outcomes.append(node_result(self.name, node.hostname, result, command=NODES_COMMAND))
        except RecordError as exc:
            result = parse_failure("slurm.node", ctx.launcher, "scontrol", exc, node_rc, node_err)
            outcomes.append(with_run(result, self.name, hosts))
        for node, (rc, out, err) in zip(present, slurmd, strict=True):
            result = judge_slurmd(node.hostname, rc, out, err)
            outcomes.append(node_result(self.name, node.hostname, result, command="systemctl is-active slurmd"))
        outcomes.extend(self._partitions(ctx, part_rc, part_out, part_err))
        return outcomes

    def _partitions(self, ctx: VerifyContext, rc: int, out: str, err: str) -> list[Finding]:
        problem = transport_problem("slurm.partition", ctx.launcher, "scontrol", rc, err)
        if problem is not None:
            return [with_run(problem, self.name)]
        try:
            found = {p.name: p for p in parse_partitions(out)}
        except RecordError as exc:
            return [with_run(parse_failure("slurm.partition", ctx.launcher, "scontrol", exc, rc, err), self.name)]
        outcomes: list[Finding] = []
        for part in ctx.plan.slurm.partitions:
            have = found.get(part.name)
            figures: dict[str, float | int | str] = {"planned_nodes": part.hosts}
            if have is None:
                result = failed(
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
                    result = failed(
                        "slurm.partition",
                        part.name,
                        f"Partition {part.name} differs from the plan: {', '.join(parts)}.",
                        "Re-render and redeploy slurm.conf (clusterctl up), then scontrol reconfigure.",
                        **figures,
                    )
                else:
                    result = passed(
                        "slurm.partition",
                        part.name,
                        f"Partition {part.name} is UP with {have.nodes or 'no nodes'}.",
                        figures,
                    )
            outcomes.append(with_run(result, self.name, expand(part.hosts) if part.hosts else ()))
        return outcomes


def judge_slurmd(host: str, rc: int, out: str, err: str) -> Finding:
    """Judge ``systemctl is-active slurmd`` on a node.

    Why besides slurmctld's view: slurmctld notices a dead slurmd only after
    SlurmdTimeout; asking the node finds it at once.
    """
    problem = transport_problem("slurm.slurmd", host, "systemctl", rc, err)
    if problem is not None:
        return problem
    state = last_line(out) or last_line(err) or "unknown"
    if rc == 0 and state == "active":
        return passed("slurm.slurmd", host, "slurmd is running.", {"slurmd": state})
    return failed(
        "slurm.slurmd",
        host,
        f"slurmd is not running (systemctl: {state}).",
        f"systemctl status slurmd and journalctl -u slurmd on {host}; start it with systemctl start slurmd.",
        **{"slurmd": state},
    )
