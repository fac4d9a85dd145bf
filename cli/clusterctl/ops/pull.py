"""Configure by pull: publish every pulling node's pointer, then wait until each reports it applied.

``up`` publishes, through one command on the controller, the layers the bundle server lacks and a
signed pointer per pulling node (``clusterctl.agent.pointer``) with a new generation. Each node's
agent, waiting on its pointer, checks itself and applies its bundle when something changed, then
writes its report into its Slurm ``Extra`` field. ``up`` reads every report with one
``scontrol show node -o`` every ``POLL_S`` seconds and shows "N of M applied" as they come: the
controller's cost per node is a pointer, the layers it lacks, one Slurm update and a line of that
listing, whatever the cluster's size.

A node that reports a failure is named with the task and the cause its agent read on it (apt's
errors, the unit's journal). A node that never reports is named once one timeout has passed for
all of them together, with what is known of it: the last report, Slurm's state, the provider's
word on its machine (a stopped machine is named as soon as the provider says so).
"""

from __future__ import annotations

import io
import json
import tarfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterctl.agent.pointer import LAYER_NAMES, Pointer, bundle_digest, sign, signing_key
from clusterctl.bounded import BoundsError, json_document
from clusterctl.plan import Plan
from clusterctl.remote import Sender
from clusterctl.render import bundle
from clusterctl.render.pulling import pull_nodes
from clusterctl.run.ansible import HostFailure
from clusterctl.run.events import EventBus
from clusterctl.slurm.applied import APPLYING, FAILED, OK, Applied, parse_report
from clusterctl.slurm.nodes import SlurmNode

PHASE = "configure"
STATE_KEY = "pull"
POLL_S = 2.0
DEFAULT_APPLY_TIMEOUT_S = 1800.0
PUBLISH_TIMEOUT_S = 300.0
PUBLISH = f"{bundle.BUNDLES_PATH} publish {bundle.SERVER_ROOT}"

# A machine the provider reports in one of these states will not report: it is named at once.
DEAD_MACHINES = frozenset({"exited", "dead", "missing", "stopped", "terminated", "removing", "powered off"})

Layers = tuple[tuple[str, str], ...]


class PullError(Exception):
    """Publishing failed; the message says where and why."""


@dataclass(frozen=True)
class Assignment:
    """What one node is told: its layers and stage (``configure`` on a node made from its baked image)."""

    node: str
    layers: Layers
    stage: str
    facts: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class PullResult:
    """What the nodes reported."""

    generation: int
    reports: dict[str, Applied] = field(default_factory=dict)
    failures: list[HostFailure] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def changed(self) -> int:
        """Tasks that changed something, over the nodes that reported."""
        return sum(r.changed for r in self.reports.values() if r.state == OK)

    @property
    def succeeded(self) -> bool:
        """Every node reported OK."""
        return not self.failures


def next_generation(previous: int, now_ms: int | None = None) -> int:
    """The new request's generation: above the last one, and the time in ms (so a lost state never goes back)."""
    return max(previous + 1, now_ms if now_ms is not None else int(time.time() * 1000))


def layers_in(build_dir: Path) -> dict[str, Any]:
    """``bundles/index.json`` of the build directory.

    Raises:
        PullError: It is missing or not an index clusterctl wrote.
    """
    path = build_dir / bundle.INDEX
    try:
        data = json_document(path.read_text(encoding="utf-8"), "bundle index")
    except (OSError, UnicodeDecodeError, BoundsError) as exc:
        raise PullError(f"{path} cannot be read ({exc}); render again (clusterctl up renders it)") from None
    if not isinstance(data, dict) or not isinstance(data.get("kinds"), dict):
        raise PullError(f"{path} is not the bundle index clusterctl writes")
    return data


def assignments(
    plan: Plan,
    build_dir: Path,
    engine: str,
    stages: Mapping[str, str],
    held: Mapping[str, Layers] | None = None,
) -> list[Assignment]:
    """Each pulling node's layers (its kind's, or those it is ``held`` at during a rolling upgrade)."""
    index = layers_in(build_dir)
    of = bundle.kind_of(plan)
    out = []
    for node in pull_nodes(plan):
        kind = of[node.hostname]
        files = index["kinds"].get(kind.name, {}).get("files")
        if not isinstance(files, str):
            raise PullError(f"{build_dir / bundle.INDEX} has no bundle for {node.hostname}; render again")
        layers: Layers = (("engine", engine), ("roles", str(index["roles"])), ("files", files))
        if held and node.hostname in held:
            layers = held[node.hostname]
        out.append(Assignment(node.hostname, layers, stages.get(node.hostname, "all"), bundle.node_facts(plan, node)))
    return out


def _tar(entries: Iterable[tuple[str, bytes]]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


def publish(
    sender: Sender,
    controller: str,
    plan: Plan,
    munge_key: bytes,
    generation: int,
    nodes: Sequence[Assignment],
    layer_data: Callable[[str], bytes],
    *,
    force: bool = False,
    extra_facts: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Send the layers the server lacks and every node's signed pointer; returns the server's summary.

    Raises:
        PullError: The controller could not be reached or refused the input.
    """
    rc, out, err = sender.send(controller, f"{PUBLISH} --have", None, 60)
    if rc != 0:
        raise PullError(f"{controller}: the bundle server's directory cannot be read: {(err or out).strip()[:300]}")
    try:
        present = set(json_document(out.strip() or "[]", "layer list"))
    except (BoundsError, TypeError) as exc:
        raise PullError(
            f"{controller}: the bundle server listed its layers in a way clusterctl does not read: {exc}"
        ) from None
    key = signing_key(munge_key)
    wanted = sorted({digest for a in nodes for _, digest in a.layers} - present)
    entries: list[tuple[str, bytes]] = [(f"layers/{digest}.tar.gz", layer_data(digest)) for digest in wanted]
    for item in nodes:
        pointer = Pointer(
            cluster=plan.cluster.name,
            node=item.node,
            generation=generation,
            layers=item.layers,
            stage=item.stage,
            force=force,
            vars={**(extra_facts or {}), **item.facts},
        )
        entries.append((f"nodes/{item.node}.json", sign(pointer, key)))
    entries.append(("nodes.json", json.dumps(sorted(a.node for a in nodes)).encode()))
    rc, out, err = sender.send(controller, PUBLISH, _tar(entries), PUBLISH_TIMEOUT_S)
    if rc != 0:
        raise PullError(f"{controller}: publishing the bundles failed: {(err or out).strip()[:300]}")
    try:
        summary = json_document(out.strip().splitlines()[-1], "publish summary")
    except (BoundsError, IndexError):
        summary = {}
    return summary if isinstance(summary, dict) else {}


def _last_words(report: Applied | None, generation: int) -> str:
    if report is None:
        return "it never reported"
    when = time.strftime("%H:%M:%S", time.localtime(report.at))
    if report.generation != generation:
        return f"its last report ({when}) answers an earlier up"
    if report.state == APPLYING:
        return f"it started applying bundle {report.bundle} at {when} and never finished"
    return f"its last report ({when}) says {report.state}"


def _slurm_words(node: SlurmNode | None) -> str:
    if node is None:
        return "Slurm does not know it"
    return f"Slurm has it {node.compact_state()}" + (" and not responding" if node.not_responding else "")


def wait(
    read: Callable[[], Mapping[str, SlurmNode]],
    nodes: Sequence[str],
    generation: int,
    events: EventBus,
    *,
    timeout: float = DEFAULT_APPLY_TIMEOUT_S,
    machines: Callable[[Sequence[str]], Mapping[str, str]] | None = None,
    poll: float = POLL_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> PullResult:
    """Wait until each of ``nodes`` reported ``generation`` (ok or failed), or ``timeout`` passed for them all.

    Args:
        read: One read of Slurm's nodes (``scontrol show node -o``), by name; raises nothing.
        nodes: The nodes that must report.
        generation: The generation ``up`` published.
        events: Where "N of M applied" and each node's outcome go.
        timeout: One deadline for every node together.
        machines: The provider's state of the machines still waiting, given their names (read at most
            every ``10 * poll``); a machine it calls dead is named then, not at the timeout.
        poll: Seconds between two reads.
        clock: The monotonic clock.
        sleep: How to wait between two reads.
    """
    started = clock()
    result = PullResult(generation)
    waiting = list(nodes)
    said = -1
    seen: dict[str, Applied | None] = {}
    listed: Mapping[str, SlurmNode] = {}
    checked_machines = started
    while True:
        listed = read()
        for host in list(waiting):
            slurm = listed.get(host)
            report = parse_report(slurm.fields.get("Extra", "")) if slurm is not None and not slurm.ambiguous else None
            seen[host] = report
            if report is None or report.generation != generation or report.state == APPLYING:
                continue
            waiting.remove(host)
            result.reports[host] = report
            if report.state == FAILED:
                failure = HostFailure(host, report.task, report.message or "the apply failed", cause=report.cause)
                result.failures.append(failure)
                events.host(PHASE, host, "failed", report.message, task=report.task)
            else:
                changed = f", {report.changed} task(s) changed" if report.changed else ", nothing changed"
                events.host(
                    PHASE, host, "changed" if report.changed else "ok", f"applied bundle {report.bundle}{changed}"
                )
        done = len(nodes) - len(waiting)
        if done != said:
            failed = len(result.failures)
            events.info(
                f"{done - failed} of {len(nodes)} applied" + (f", {failed} failed" if failed else ""), phase=PHASE
            )
            said = done
        if not waiting:
            break
        now = clock()
        if machines is not None and now - checked_machines >= 10 * poll:
            checked_machines = now
            states = machines(list(waiting))
            for host in [h for h in waiting if states.get(h, "running") in DEAD_MACHINES]:
                waiting.remove(host)
                message = (
                    f"its machine is {states[host]} (the provider says so); {_last_words(seen.get(host), generation)}"
                )
                result.failures.append(HostFailure(host, "", message, unreachable=True))
                events.host(PHASE, host, "unreachable", message)
            if not waiting:
                break
        if now - started >= timeout:
            for host in waiting:
                message = (
                    f"no report within {timeout:.0f} s: {_last_words(seen.get(host), generation)}; "
                    f"{_slurm_words(listed.get(host))}"
                )
                result.failures.append(HostFailure(host, "", message, unreachable=True))
                events.host(PHASE, host, "unreachable", message)
            break
        sleep(poll)
    result.seconds = clock() - started
    return result


def held_layers(recorded: Any, nodes: Iterable[str]) -> dict[str, Layers]:
    """The layers each of ``nodes`` was last told (state.json's ``pull``), for a rolling upgrade's waiting nodes."""
    assigned = recorded.get("assigned") if isinstance(recorded, dict) else None
    out: dict[str, Layers] = {}
    for node in nodes:
        layers = assigned.get(node) if isinstance(assigned, dict) else None
        if (
            isinstance(layers, list)
            and [x[0] if isinstance(x, list) and x else None for x in layers] == list(LAYER_NAMES)
            and all(len(x) == 2 and isinstance(x[1], str) for x in layers)
        ):
            out[node] = tuple((str(n), str(d)) for n, d in layers)
    return out


def record(generation: int, published: Sequence[Assignment]) -> dict[str, Any]:
    """What state.json keeps under ``pull``: the generation and what each node was told."""
    return {
        "generation": generation,
        "assigned": {a.node: [list(layer) for layer in a.layers] for a in published},
        "bundles": {a.node: bundle_digest(a.layers) for a in published},
    }
