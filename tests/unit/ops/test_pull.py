"""`up`'s side of pull: publish each node's signed pointer through one command on the controller, then
wait for the reports in Slurm's node list: "N of M applied", failures with the node's cause, silent
nodes named once after one deadline for all of them."""

from __future__ import annotations

import io
import json
import shlex
from collections.abc import Mapping
from pathlib import Path

import pytest

from clusterctl.agent import publish as server_side
from clusterctl.agent.pointer import signing_key, verify
from clusterctl.ops import pull
from clusterctl.pipeline import load_and_validate, render
from clusterctl.run.events import Event, EventBus
from clusterctl.slurm.applied import APPLYING, FAILED, OK, Applied, format_report
from clusterctl.slurm.nodes import SlurmNode, by_name, parse_nodes
from tests.conftest import EXAMPLES
from tests.verify_testkit import scontrol_node

MUNGE = bytes(range(256)) * 4
GPUS = ["gpu001", "gpu002", "gpu003", "gpu004"]


class Controller:
    """The controller as `up` reaches it: runs the bundle server's publish command on a local directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.commands: list[str] = []

    def run(self, host: str, command: str, timeout: float) -> tuple[int, str, str]:
        return self.send(host, command, None, timeout)

    def send(self, host: str, command: str, data: bytes | None, timeout: float) -> tuple[int, str, str]:
        self.commands.append(command)
        argv = shlex.split(command)
        assert argv[:3] == ["/usr/local/sbin/clusterctl-bundles", "publish", "/srv/clusterctl/bundles"]
        if argv[3:] == ["--have"]:
            return 0, json.dumps(server_side.have(self.root)), ""
        try:
            return 0, json.dumps(server_side.publish(self.root, io.BytesIO(data or b""))), ""
        except server_side.PublishError as exc:
            return 1, "", str(exc)


def test_publish_signs_one_pointer_per_pulling_node_and_sends_only_missing_layers(tmp_path: Path) -> None:
    validated = load_and_validate(EXAMPLES / "local.yaml")
    build, _ = render(validated, tmp_path / "build")
    plan = validated.plan
    controller = Controller(tmp_path / "srv")
    items = pull.assignments(plan, build, "e" * 64, {"gpu001": "configure"})
    layers = {d: (build / "bundles" / "layers" / f"{d}.tar.gz") for a in items for _, d in a.layers if d != "e" * 64}

    def data(digest: str) -> bytes:
        return b"engine" if digest == "e" * 64 else layers[digest].read_bytes()

    with pytest.raises(pull.PullError, match="does not have that digest"):
        pull.publish(controller, "ctl001", plan, MUNGE, 7, items, data)
    import hashlib

    engine = b"the engine"
    items = pull.assignments(plan, build, hashlib.sha256(engine).hexdigest(), {"gpu001": "configure"})

    def data2(digest: str) -> bytes:
        return engine if digest == hashlib.sha256(engine).hexdigest() else layers[digest].read_bytes()

    summary = pull.publish(
        controller,
        "ctl001",
        plan,
        MUNGE,
        7,
        items,
        data2,
        extra_facts={"clusterctl_heal_public_key": "ssh-ed25519 AAAA x"},
    )
    assert summary["pointers"] == 4
    assert summary["layers"] == 3
    key = signing_key(MUNGE)
    pointers = {
        n: verify((controller.root / "nodes" / f"{n}.json").read_bytes(), key, cluster="local", node=n) for n in GPUS
    }
    assert {n: p.stage for n, p in pointers.items()} == {
        "gpu001": "configure",
        "gpu002": "all",
        "gpu003": "all",
        "gpu004": "all",
    }
    assert {p.generation for p in pointers.values()} == {7}
    assert pointers["gpu001"].vars["clusterctl_heal_public_key"] == "ssh-ed25519 AAAA x"
    # Again: every layer is there, only the pointers travel.
    again = pull.publish(controller, "ctl001", plan, MUNGE, 8, items, data2)
    assert again["layers"] == 0


def test_a_rolling_upgrade_holds_the_nodes_still_to_roll_at_what_they_had(tmp_path: Path) -> None:
    validated = load_and_validate(EXAMPLES / "local.yaml")
    build, _ = render(validated, tmp_path / "build")
    before = pull.assignments(validated.plan, build, "e" * 64, {})
    recorded = pull.record(
        5,
        [
            pull.Assignment(a.node, (("engine", "e" * 64), ("roles", "0" * 64), ("files", "1" * 64)), a.stage)
            for a in before
        ],
    )
    held = pull.held_layers(recorded, ["gpu003", "gpu004"])
    now = {a.node: a.layers for a in pull.assignments(validated.plan, build, "e" * 64, {}, held)}
    assert now["gpu003"] == now["gpu004"] == (("engine", "e" * 64), ("roles", "0" * 64), ("files", "1" * 64))
    assert now["gpu001"] == {a.node: a.layers for a in before}["gpu001"]


class Slurm:
    """Slurm's node list as reports arrive, one read at a time."""

    def __init__(self, script: list[Mapping[str, Applied | None]]) -> None:
        self.script = script
        self.reads = 0

    def read(self) -> dict[str, SlurmNode]:
        step = self.script[min(self.reads, len(self.script) - 1)]
        self.reads += 1
        text = "".join(scontrol_node(n, extra=format_report(r) if r else "") for n, r in step.items())
        return by_name(parse_nodes(text))


def _events() -> tuple[EventBus, list[Event]]:
    bus, seen = EventBus(), []
    bus.subscribe(seen.append)
    return bus, seen


def test_wait_shows_progress_and_names_failures_with_their_cause() -> None:
    ok = Applied(7, "a" * 16, OK, changed=2, at=1)
    failed = Applied(
        7,
        "a" * 16,
        FAILED,
        at=1,
        task="monitoring : Start the node exporter",
        message="Unable to start",
        cause=("unit: Failed to locate executable /x",),
    )
    old = Applied(6, "a" * 16, OK, at=1)
    slurm = Slurm(
        [
            {"gpu001": old, "gpu002": None},
            {"gpu001": Applied(7, "a" * 16, APPLYING, at=1), "gpu002": ok},
            {"gpu001": failed, "gpu002": ok},
        ]
    )
    bus, seen = _events()
    result = pull.wait(slurm.read, ["gpu001", "gpu002"], 7, bus, poll=0, sleep=lambda s: None)
    assert [e.message for e in seen if e.kind == "message"] == [
        "0 of 2 applied",
        "1 of 2 applied",
        "1 of 2 applied, 1 failed",
    ]
    assert result.changed == 2
    (failure,) = result.failures
    assert (failure.host, failure.task, failure.cause) == (
        "gpu001",
        "monitoring : Start the node exporter",
        ("unit: Failed to locate executable /x",),
    )


def test_silent_nodes_are_named_once_after_one_deadline_for_all() -> None:
    clock = [0.0]
    slurm = Slurm([{h: (Applied(7, "a" * 16, OK, at=1) if h == "gpu001" else None) for h in GPUS}])
    bus, _ = _events()

    def sleep(seconds: float) -> None:
        clock[0] += 2.0

    result = pull.wait(slurm.read, GPUS, 7, bus, timeout=30, clock=lambda: clock[0], sleep=sleep)
    assert sorted(f.host for f in result.failures) == ["gpu002", "gpu003", "gpu004"]
    assert all("no report within 30 s: it never reported" in f.message for f in result.failures)
    assert clock[0] <= 32, "one timeout for all the nodes, not one each"


@pytest.mark.parametrize("dead", ["exited", "powered off"])
def test_a_stopped_machine_is_named_as_soon_as_the_provider_says_so(dead: str) -> None:
    clock = [0.0]
    applying = Applied(7, "a" * 16, APPLYING, at=1)
    slurm = Slurm([{"gpu001": Applied(7, "a" * 16, OK, at=1), "gpu002": applying}])
    bus, _ = _events()

    def sleep(seconds: float) -> None:
        clock[0] += 1.0

    result = pull.wait(
        slurm.read,
        ["gpu001", "gpu002"],
        7,
        bus,
        timeout=1800,
        poll=1,
        clock=lambda: clock[0],
        sleep=sleep,
        machines=lambda waiting: {"gpu001": "running", "gpu002": dead} if waiting == ["gpu002"] else {},
    )
    (failure,) = result.failures
    assert failure.host == "gpu002"
    assert failure.unreachable
    assert f"its machine is {dead}" in failure.message
    assert "started applying bundle" in failure.message
    assert clock[0] < 60


def test_generations_only_go_up() -> None:
    assert pull.next_generation(5, now_ms=3) == 6
    assert pull.next_generation(5, now_ms=1000) == 1000
