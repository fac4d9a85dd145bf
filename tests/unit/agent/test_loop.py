"""The agent's loop against a real bundle server: what it fetches, when it applies, what it reports.

The apply step is the one part replaced (tests/unit/agent/test_apply.py runs the real playbook;
tests/e2e the whole agent on the nodes): here it records what it was given and changes what the
node's digest reads, as an apply does.
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from pathlib import Path

import pytest

from clusterctl.agent.apply import ApplyResult, Failure, Layout
from clusterctl.agent.fetch import Server
from clusterctl.agent.loop import Agent, Settings, Steps
from clusterctl.agent.pointer import Pointer, sign, signing_key
from clusterctl.agent.publish import publish
from clusterctl.render.bundle import archive
from clusterctl.slurm.applied import FAILED, OK, Applied

KEY = signing_key(os.urandom(64))


class Node:
    """One simulated node: its digest, the applies it ran and the reports it gave Slurm."""

    def __init__(self, server: Server, root: Path, *, fail: str = "") -> None:
        self.server = server
        self.digest = "d0"
        self.applied: list[tuple[str, str]] = []
        self.reports: list[Applied] = []
        self.fail = fail
        self.agent = Agent(
            Settings("local", "gpu001", KEY, root / "state", jitter_s=0.01, wait_s=1),
            Steps(
                pointer=lambda known, wait: server.pointer("gpu001", known, wait),
                layer=server.layer,
                apply=self.apply,
                digest=lambda: self.digest,
                report=lambda applied: self.reports.append(applied) is None,
                cause=lambda failure: (f"{failure.unit}: Failed to locate executable /x",),
            ),
        )

    def apply(self, pointer: Pointer, layout: Layout) -> ApplyResult:
        self.applied.append((pointer.stage, (layout.files / "file.txt").read_text()))
        if self.fail:
            return ApplyResult(
                rc=2,
                tasks=9,
                failures=[Failure("monitoring : Start", action="systemd", unit="boom", message=self.fail)],
            )
        self.digest = f"after-{len(self.applied)}"
        return ApplyResult(rc=0, tasks=9, changed=4)


def _publish(
    root: Path, generation: int, text: str = "one", *, force: bool = False, facts: dict[str, str] | None = None
) -> str:
    data = archive([("file.txt", text.encode(), 0o644)])
    digest = hashlib.sha256(data).hexdigest()
    layers = (("engine", digest), ("roles", digest), ("files", digest))
    pointer = Pointer("local", "gpu001", generation, layers, "configure", force, facts or {})
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, content in [
            (f"layers/{digest}.tar.gz", data),
            ("nodes/gpu001.json", sign(pointer, KEY)),
            ("nodes.json", b'["gpu001"]'),
        ]:
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    raw.seek(0)
    publish(root, raw)
    return pointer.bundle


def test_first_pointer_applies_then_an_unchanged_node_only_checks(served: tuple[Path, Server], tmp_path: Path) -> None:
    root, server = served
    node = Node(server, tmp_path)
    bundle = _publish(root, 10)
    node.agent.step()
    assert node.applied == [("configure", "one")]
    assert [(r.generation, r.state) for r in node.reports] == [(10, "applying"), (10, OK)]
    assert node.reports[-1].changed == 4
    assert node.reports[-1].bundle == bundle[:16]

    _publish(root, 11)  # a no-change `up`: a new generation, the same bundle
    node.agent.step()
    assert len(node.applied) == 1
    assert (node.reports[-1].generation, node.reports[-1].state, node.reports[-1].changed) == (11, OK, 0)


def test_drift_or_force_applies_again_and_a_new_bundle_is_fetched(served: tuple[Path, Server], tmp_path: Path) -> None:
    root, server = served
    node = Node(server, tmp_path)
    _publish(root, 10)
    node.agent.step()
    node.digest = "edited by hand"
    _publish(root, 11)
    node.agent.step()
    assert len(node.applied) == 2
    _publish(root, 12, force=True)
    node.agent.step()
    assert len(node.applied) == 3
    _publish(root, 13, "two")
    node.agent.step()
    assert node.applied[-1] == ("configure", "two")
    # Only the layers of the bundle it applied are kept.
    assert len([p for p in (tmp_path / "state" / "layers").iterdir() if not p.name.startswith(".")]) == 1


def test_a_one_off_instruction_applies_once_and_is_no_change_after(served: tuple[Path, Server], tmp_path: Path) -> None:
    """The `up` that joined nodes asks every slurmd to restart; the next `up` asks nothing and finds
    the node as that apply left it."""
    root, server = served
    node = Node(server, tmp_path)
    restart = {"clusterctl_slurm_config_change_action": "restart"}
    _publish(root, 10, facts=restart)
    node.agent.step()
    assert len(node.applied) == 1
    _publish(root, 11)
    node.agent.step()
    assert len(node.applied) == 1
    assert (node.reports[-1].generation, node.reports[-1].changed) == (11, 0)
    _publish(root, 12, facts=restart)  # nodes joined again: carried out again
    node.agent.step()
    assert len(node.applied) == 2
    _publish(root, 13, facts={"clusterctl_heal_public_key": "ssh-ed25519 AAAA other"})  # a real fact: applies
    node.agent.step()
    assert len(node.applied) == 3


def test_an_older_generation_is_refused(served: tuple[Path, Server], tmp_path: Path) -> None:
    root, server = served
    node = Node(server, tmp_path)
    _publish(root, 10)
    node.agent.step()
    _publish(root, 9, "rolled back")
    node.agent.step()
    assert node.applied == [("configure", "one")]
    assert node.reports[-1].generation == 10


def test_a_failed_apply_is_reported_with_the_node_side_cause(served: tuple[Path, Server], tmp_path: Path) -> None:
    root, server = served
    node = Node(server, tmp_path, fail="Unable to start service prometheus-node-exporter")
    _publish(root, 10)
    node.agent.step()
    report = node.reports[-1]
    assert (report.state, report.task) == (FAILED, "monitoring : Start")
    assert report.message == "Unable to start service prometheus-node-exporter"
    assert report.cause == ("boom: Failed to locate executable /x",)
    assert node.agent.retry_at > 0, "a failed apply is retried after a backoff"


def test_a_layer_the_server_lacks_is_a_failed_report_not_a_crash(served: tuple[Path, Server], tmp_path: Path) -> None:
    root, server = served
    node = Node(server, tmp_path)
    _publish(root, 10)
    for layer in (root / "layers").iterdir():
        layer.unlink()
    import clusterctl.agent.loop as loop

    loop.BACKOFF_MIN_S, saved = 0.01, loop.BACKOFF_MIN_S
    try:
        node.agent.step()
    finally:
        loop.BACKOFF_MIN_S = saved
    assert node.applied == []
    assert node.reports[-1].state == FAILED
    assert "cannot fetch the bundle" in node.reports[-1].message


@pytest.mark.parametrize("tamper", ["other key", "other node"])
def test_a_pointer_not_signed_for_this_node_is_ignored(
    served: tuple[Path, Server], tmp_path: Path, tamper: str
) -> None:
    root, server = served
    node = Node(server, tmp_path)
    data = archive([("file.txt", b"evil", 0o644)])
    digest = hashlib.sha256(data).hexdigest()
    key = signing_key(os.urandom(64)) if tamper == "other key" else KEY
    name = "gpu001" if tamper == "other key" else "gpu002"
    pointer = Pointer("local", name, 99, (("engine", digest), ("roles", digest), ("files", digest)), "all")
    (root / "layers" / f"{digest}.tar.gz").write_bytes(data)
    (root / "nodes" / "gpu001.json").write_bytes(sign(pointer, key))
    node.agent.step()
    assert node.applied == []
    assert node.reports == []
