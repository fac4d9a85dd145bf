"""Quick readiness checks after configuration (not the acceptance suite of ``clusterctl verify``).

Slurm nodes in service with the planned GRES (one ``scontrol show node -o``), the topology loaded,
munge working on the nodes clusterctl pushed (a node that configures itself proved it with the
munge-signed report it gave Slurm, and its slurmd with its registration), exporters answering and
Prometheus seeing every target (one query): no connection per compute node. Slurm's states are taken as they are: a
node an admin drained, or one ``verify`` drained, is reported as a note, never undone and never
a failure of ``up``; it still has to be registered with its planned GRES.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from clusterctl.bounded import json_document
from clusterctl.hostlist import expand
from clusterctl.plan import Plan
from clusterctl.plan.models import PlanNode
from clusterctl.render.pulling import pulls
from clusterctl.run.events import EventBus
from clusterctl.run.executor import Executor
from clusterctl.slurm.client import Slurm, SlurmError
from clusterctl.slurm.reasons import VERIFY, clean, ours

PHASE = "readiness"

GOOD_STATES = {"idle", "mix", "mixed", "alloc", "allocated", "comp", "completing"}


@dataclass
class Readiness:
    """Outcome of the readiness checks."""

    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    node_states: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """No problems."""
        return not self.problems


def slurm_node_states(remote: Executor, controller: str) -> dict[str, tuple[str, str, str]]:
    """Node -> (state as sinfo names it, GRES, reason); empty when Slurm cannot be read.

    From scontrol: sinfo leaves out the nodes in no partition (free spares, replaced nodes).
    """
    try:
        listed = Slurm(remote, controller, timeout_s=30).nodes()
    except SlurmError:
        return {}
    return {node.name: (node.compact_state(), node.gres_text(), node.reason) for node in listed}


def _left_as_is(node: PlanNode, state: str, reason: str) -> str | None:
    """Why a node that is not idle is fine as it is (a note), or None.

    A node an admin drained (any reason that is not clusterctl's) or verify drained is Slurm's
    state as someone chose it: ``up`` neither undoes it nor fails for it. A node its health check
    drained is unhealthy now, which readiness reports.
    """
    if not state.startswith("drain"):
        return None
    said = clean(reason) or "no reason given"
    if node.spare:
        return f"spare {node.hostname} is drained ({said}); `clusterctl node replace` does not take it until resumed"
    if reason.startswith(VERIFY):
        return f"{node.hostname} is drained by clusterctl verify ({said}); left as it is"
    if not ours(reason):
        return f"{node.hostname} is drained by an admin ({said}); left as it is"
    return None


def check_slurm(plan: Plan, remote: Executor, result: Readiness, timeout: float = 90) -> None:
    """Compute nodes registered, idle, with the planned GRES (replaced nodes are out of service: not checked)."""
    controller = plan.slurm.controllers[0]
    expected = {n.hostname: n for n in plan.nodes if n.role == "compute" and not n.burst and not n.replaced_by}
    deadline = time.monotonic() + timeout
    while True:
        nodes = slurm_node_states(remote, controller)
        waiting = [
            h
            for h, node in expected.items()
            if (got := nodes.get(h, ("", "", "")))[0] not in GOOD_STATES and not _left_as_is(node, got[0], got[2])
        ]
        if not waiting or time.monotonic() > deadline:
            break
        time.sleep(3)
    for host, node in expected.items():
        state, gres, reason = nodes.get(host, ("missing", "", ""))
        result.node_states[host] = state
        if state not in GOOD_STATES and (note := _left_as_is(node, state, reason)):
            result.notes.append(note)
        elif state not in GOOD_STATES:
            why = f" ({clean(reason)})" if reason and reason != "none" else ""
            result.problems.append(f"{host}: Slurm state {state}{why}, expected idle")
        want = f"gpu:{node.gres_type}:{node.gpus}" if node.gpus else "(null)"
        if node.gpus and not gres.startswith(want):
            result.problems.append(f"{host}: GRES {gres or 'none'}, expected {want}")
    burst = [n.hostname for n in plan.nodes if n.burst]
    for host in burst:
        result.node_states[host] = nodes.get(host, ("missing", "", ""))[0]


def check_topology(plan: Plan, remote: Executor, result: Readiness) -> None:
    """The switches Slurm loaded are the rendered ones."""
    if plan.slurm.topology != "tree":
        return
    loaded = Slurm(remote, plan.slurm.controllers[0], timeout_s=30).switches()
    want = {s.name for s in plan.slurm.switches}
    if loaded != want:
        result.problems.append(f"topology: Slurm has switches {sorted(loaded)}, the render has {sorted(want)}")


def check_munge(plan: Plan, remote: Executor, result: Readiness) -> None:
    """munge encodes and decodes on every pushed node (the pulling ones reported to Slurm through munge)."""
    for node in plan.nodes:
        if node.burst or node.replaced_by or pulls(plan, node):
            continue
        _, out, err = remote.run(node.hostname, "munge -n | unmunge | grep -c 'STATUS: *Success'", 30)
        if out.strip() != "1":
            result.problems.append(f"{node.hostname}: munge does not work ({(err or out).strip()[:200]})")


_PROM_QUERY = (
    'python3 -c "import json,urllib.request;'
    "print(json.dumps([(t['labels'].get('instance'),t['health']) for t in "
    "json.load(urllib.request.urlopen('http://localhost:9090/api/v1/targets'))['data']['activeTargets']]))\""
)


def check_monitoring(plan: Plan, remote: Executor, result: Readiness, timeout: float = 90) -> None:
    """Prometheus sees every rendered target up (waits for the first scrapes); replaced nodes may be down."""
    mon = plan.monitoring
    if not mon.prometheus or not mon.prometheus_host:
        return
    replaced = {n.hostname for n in plan.nodes if n.replaced_by}
    want = {f"{h}:{mon.node_exporter_port}" for h in mon.node_exporter_targets if h not in replaced}
    want |= {f"{h}:{mon.dcgm_exporter_port}" for h in mon.dcgm_exporter_targets if h not in replaced}
    deadline = time.monotonic() + timeout
    down: set[str] = set(want)
    while time.monotonic() < deadline:
        _, out, _ = remote.run(mon.prometheus_host, _PROM_QUERY, 30)
        try:
            targets = dict(json_document(out or "[]", "answer of Prometheus"))
        except (json.JSONDecodeError, TypeError, ValueError):
            targets = {}
        down = {t for t in want if targets.get(t) != "up"}
        if not down:
            return
        time.sleep(3)
    result.problems.append(f"monitoring: Prometheus does not see these targets up: {', '.join(sorted(down))}")


def check_cluster(plan: Plan, remote: Executor, events: EventBus) -> Readiness:
    """Run every readiness check, emitting events."""
    result = Readiness()
    for name, check in (
        ("slurm", check_slurm),
        ("topology", check_topology),
        ("munge", check_munge),
        ("monitoring", check_monitoring),
    ):
        before = len(result.problems)
        check(plan, remote, result)
        new = result.problems[before:]
        events.host(PHASE, name, "failed" if new else "ok", "; ".join(new) or "ok")
    return result


def partitions_summary(plan: Plan) -> list[str]:
    """``gpu: gpu[001-004] (default)`` lines."""
    return [
        f"{p.name}: {p.hosts} ({len(expand(p.hosts)) if p.hosts else 0} nodes"
        + (", default" if p.default else "")
        + f", max {p.max_time})"
        for p in plan.slurm.partitions
    ]
