"""Health-gated return to service: a node clusterctl drained comes back only once it is healthy.

The contract is the drain reason's prefix. A reason that starts with ``clusterctl``
(``clusterctl-verify:`` from verify, ``clusterctl-health:`` from the node's health check,
``clusterctl:upgrade``, ...) marks a drain clusterctl made and may undo; any other reason is an
admin's, and such a node is never touched. A clusterctl-drained node runs its health check (the
cluster's HealthCheckProgram, with every probe it has); only when it passes is the node resumed.
An unhealthy node stays drained (the health check puts its own reason on it).
"""

from __future__ import annotations

import shlex
from collections.abc import Collection
from dataclasses import dataclass

from clusterctl.drain_reasons import PREFIX
from clusterctl.plan.models import Plan
from clusterctl.render.health import HEALTHCHECK_PATH
from clusterctl.run.jobs import Executor, run_many
from clusterctl.run.retire import REASON as LEAVING
from clusterctl.run.retire import UPGRADE_REASON
from clusterctl.spec.findings import Finding, Level
from clusterctl.verify.base import last_line
from clusterctl.verify.parsers.scontrol import SlurmNode, parse_scontrol_nodes
from clusterctl.verify.result import ParseError

CLUSTERCTL_PREFIX = PREFIX
NODES_COMMAND = "scontrol show node -o"
HEALTH_TIMEOUT_S = 120.0
SCONTROL_TIMEOUT_S = 60.0


class HealError(Exception):
    """Slurm's node list could not be read; nothing was changed."""


@dataclass(frozen=True)
class Drained:
    """A drained (or draining) node and why."""

    host: str
    reason: str
    replaced_by: str | None = None

    @property
    def ours(self) -> bool:
        """Drained by clusterctl (the reason's prefix), so clusterctl may resume it."""
        return self.reason.startswith(CLUSTERCTL_PREFIX)

    @property
    def leaving(self) -> bool:
        """Drained by ``up`` because the spec no longer has it: resuming it would undo the spec."""
        return self.reason.startswith(LEAVING)


def drained_nodes(nodes: tuple[SlurmNode, ...], plan: Plan) -> list[Drained]:
    """The plan's compute nodes Slurm has drained or is draining, in plan order."""
    by_name = {node.name: node for node in nodes}
    out = []
    for planned in plan.nodes:
        node = by_name.get(planned.hostname)
        if planned.role == "compute" and node is not None and node.drained:
            out.append(Drained(planned.hostname, node.reason, planned.replaced_by))
    return out


def resume_command(host: str) -> str:
    """``scontrol update nodename=HOST state=resume``, quoted for the shell."""
    return f"scontrol update nodename={shlex.quote(host)} state=resume"


def _last_line(*texts: str) -> str:
    return next((line[:300] for line in map(last_line, texts) if line), "")


def heal(
    plan: Plan, executor: Executor, launcher: str, *, dry_run: bool = False, upgrading: Collection[str] = ()
) -> list[Finding]:
    """Health-check every node clusterctl drained and resume those that pass; leave the rest.

    Returns:
        One finding per drained node: ``heal.resumed`` (info), ``heal.unhealthy`` (error: still
        drained), ``heal.foreign`` (info: an admin's drain, untouched), ``heal.leaving`` and
        ``heal.replaced`` (info: out of service on purpose, untouched), ``heal.upgrading`` (info:
        drained for a rolling upgrade that has not upgraded it yet, one of ``upgrading``),
        ``heal.ready`` (info: healthy, not resumed under ``dry_run``).

    Raises:
        HealError: ``scontrol show node`` failed or printed no node.
    """
    drained = _drained(plan, executor, launcher)
    findings = [
        _about(
            d,
            "heal.foreign",
            f"left drained: its reason is not clusterctl's ({d.reason or 'none given'}).",
            hint="Resume it by hand when you are done (scontrol update nodename=... state=resume).",
        )
        for d in drained
        if not d.ours
    ]
    findings += [
        _about(
            d,
            "heal.leaving",
            "left drained: up is removing it (the spec no longer has it).",
            hint="Run `clusterctl up` with the spec that removed it to finish, or put it back in the spec.",
        )
        for d in drained
        if d.leaving
    ]
    findings += [
        _about(
            d,
            "heal.replaced",
            f"left drained: spare {d.replaced_by} took its place (clusterctl node replace).",
            hint="Once it is repaired, `clusterctl node return` health-checks it and makes it a spare.",
        )
        for d in drained
        if d.ours and d.replaced_by
    ]
    waiting = [d for d in drained if d.reason.startswith(UPGRADE_REASON) and d.host in upgrading]
    findings += [
        _about(
            d,
            "heal.upgrading",
            "left drained: a rolling upgrade drained it and has not upgraded it yet.",
            hint="Run `clusterctl up` again: the upgrade goes on from where it stopped.",
        )
        for d in waiting
    ]
    ours = [d for d in drained if d.ours and not d.leaving and not d.replaced_by and d not in waiting]
    checks = run_many(executor, [(d.host, HEALTHCHECK_PATH, HEALTH_TIMEOUT_S) for d in ours])
    healthy = [d for d, (rc, _o, _e) in zip(ours, checks, strict=True) if rc == 0]
    for d, (rc, check_out, check_err) in zip(ours, checks, strict=True):
        if rc != 0:
            why = _last_line(check_err, check_out) or f"exit {rc}"
            findings.append(
                _about(
                    d,
                    "heal.unhealthy",
                    f"stays drained: its health check failed ({why}).",
                    hint="Repair the node; the next heal resumes it once its health check passes.",
                )
            )
    if dry_run:
        findings += [
            _about(d, "heal.ready", f"is healthy and would be resumed (drained: {d.reason}).") for d in healthy
        ]
        return _in_plan_order(findings, plan)
    # The health check resumes a node it drained itself once the node is healthy again; read what
    # is still drained, so only those get scontrol's resume (it refuses a node that is not drained).
    still = {d.host for d in _drained(plan, executor, launcher)} if healthy else set()
    findings += [
        _about(d, "heal.resumed", f"resumed by its health check, which passed (drained: {d.reason}).")
        for d in healthy
        if d.host not in still
    ]
    healthy = [d for d in healthy if d.host in still]
    resumed = run_many(executor, [(launcher, resume_command(d.host), SCONTROL_TIMEOUT_S) for d in healthy])
    for d, (rc, res_out, res_err) in zip(healthy, resumed, strict=True):
        if rc == 0:
            findings.append(_about(d, "heal.resumed", f"resumed: its health check passed (drained: {d.reason})."))
        else:
            why = _last_line(res_err, res_out)
            findings.append(_about(d, "heal.unhealthy", f"is healthy but scontrol did not resume it: {why}."))
    return _in_plan_order(findings, plan)


def _about(d: Drained, code: str, says: str, *, hint: str = "") -> Finding:
    """A finding on drained node ``d``: its name, then what ``says``; errors for ``heal.unhealthy``."""
    level = Level.ERROR if code == "heal.unhealthy" else Level.INFO
    return Finding(
        code=code, level=level, node=d.host, message=f"{d.host} {says}", hint=hint, data={"reason": d.reason}
    )


def _drained(plan: Plan, executor: Executor, launcher: str) -> list[Drained]:
    rc, out, err = executor.run(launcher, NODES_COMMAND, SCONTROL_TIMEOUT_S)
    if rc != 0:
        raise HealError(f"{NODES_COMMAND} on {launcher} failed: {_last_line(err, out) or f'exit {rc}'}")
    try:
        return drained_nodes(parse_scontrol_nodes(out), plan)
    except ParseError as exc:
        raise HealError(f"{NODES_COMMAND} on {launcher}: {exc}") from None


def _in_plan_order(findings: list[Finding], plan: Plan) -> list[Finding]:
    order = {node.hostname: i for i, node in enumerate(plan.nodes)}
    return sorted(findings, key=lambda f: order.get(f.node or "", len(order)))
