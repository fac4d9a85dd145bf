"""diff: what the next `up` would change, from the applied render and plan against the spec's.

Each case renders the applied cluster from one spec and the spec from a changed copy of it,
both with the real planner and renderer, so the lists below are what the files really do.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from clusterctl.commands import cli
from clusterctl.ops.diff import RESTART_EFFECT, Change, applied_files, applied_plan, changes, effect_of
from clusterctl.ops.upgrade import PROGRESS_KEY, VERSIONS_KEY, planned_batches
from clusterctl.pipeline import load_and_validate, render
from clusterctl.render import render_files
from clusterctl.slurm.reasons import UPGRADE as UPGRADE_REASON
from tests.specs import example_data, group, write_spec

Mutation = Callable[[dict[str, Any]], None]


def _local() -> dict[str, Any]:
    return example_data("local.yaml")


def _diff(
    tmp_path: Path,
    mutation: Mutation | None = None,
    *,
    running: bool = True,
    saved: dict[str, Any] | None = None,
    max_unavailable: int | None = None,
) -> list[Change]:
    """The changes from the example to its mutated copy; ``saved``: the state's content (its pins, a roll)."""
    applied_spec = write_spec(tmp_path, _local())
    build, _ = render(load_and_validate(applied_spec), tmp_path / "build")
    data = _local()
    if mutation:
        mutation(data)
    plan = load_and_validate(write_spec(tmp_path, data)).plan
    files = render_files(plan)
    applied = applied_plan(build)
    assert applied is not None
    machines = {n.hostname: "running" for n in applied.nodes} if running else {}
    if saved is None:
        return changes(plan, files, applied, applied_files(build, files), machines)
    saved = {"nodes": {host: {} for host in machines}, **saved}
    return changes(
        plan,
        files,
        applied,
        applied_files(build, files),
        machines,
        recorded_versions=saved.get(VERSIONS_KEY),
        roll=planned_batches(plan, saved, list(saved["nodes"]), max_unavailable),
    )


def _summary(found: list[Change]) -> set[tuple[str, str, bool]]:
    return {(c.kind, c.subject, c.drain) for c in found}


def test_an_unchanged_cluster_has_no_changes(tmp_path: Path) -> None:
    assert _diff(tmp_path) == []


def test_a_gpu_node_added_is_created_and_slurm_restarted_without_drains(tmp_path: Path) -> None:
    """Slurm 22.05 (the example's) cannot add a node on reconfigure: both daemons restart, jobs keep running."""
    found = _diff(tmp_path, lambda d: group(d, "gpu").update(count=5))
    assert ("node-create", "gpu005", False) in _summary(found)
    files = {c.subject: c for c in found if c.kind == "file"}
    assert files["slurm/slurm.conf"].action == RESTART_EFFECT
    assert "hosts" in files
    assert not any(c.drain for c in found)


def test_a_node_removed_drains_it_first(tmp_path: Path) -> None:
    found = _diff(tmp_path, lambda d: group(d, "gpu").update(count=3))
    (removed,) = [c for c in found if c.kind == "node-remove"]
    assert (removed.subject, removed.drain) == ("gpu004", True)
    assert removed.action == "drain gpu004, wait for its jobs, then remove it"


def _bump(data: dict[str, Any]) -> None:
    data["versions"]["enroot"] = "3.5.1"


def _pins(tmp_path: Path) -> dict[str, str]:
    """The example's pins as its plan has them (defaults included): what `up` records after a converge."""
    return dict(load_and_validate(write_spec(tmp_path, _local(), "pins.yaml")).plan.cluster.versions)


def test_a_version_bump_lists_the_batches_the_roll_goes_through(tmp_path: Path) -> None:
    """Two at a time: the four GPU nodes in two batches, each drained, converged, checked and resumed."""
    found = _diff(tmp_path, _bump, saved={VERSIONS_KEY: _pins(tmp_path)}, max_unavailable=2)
    (version,) = [c for c in found if c.kind == "version"]
    assert (version.subject, version.drain) == ("enroot", True)
    assert version.detail == {"applied": "3.5.0", "spec": "3.5.1"}
    assert "roll in 2 batch(es) of at most 2 (4 node(s)" in version.action
    rolled = [c for c in found if c.kind == "roll-batch"]
    assert [(c.subject, c.detail["nodes"], c.drain) for c in rolled] == [
        ("batch 1", ["gpu001", "gpu002"], True),
        ("batch 2", ["gpu003", "gpu004"], True),
    ]
    assert rolled[0].action.startswith(f"drain gpu001, gpu002 ({UPGRADE_REASON}), wait for their jobs, converge,")
    # Emulated GPUs load no driver: nothing reboots.
    driver = _diff(
        tmp_path, lambda d: d["versions"].update(nvidia_driver="575.51.03"), saved={VERSIONS_KEY: _pins(tmp_path)}
    )
    assert not [c for c in driver if c.kind == "roll-batch" and "reboot" in c.action]


def test_without_an_earlier_record_of_the_pins_nothing_rolls(tmp_path: Path) -> None:
    """`up` rolls only from pins it recorded: without them it converges every node at once, and diff says so."""
    for found in (_diff(tmp_path, _bump), _diff(tmp_path, _bump, saved={})):
        (version,) = [c for c in found if c.kind == "version"]
        assert version.drain is False
        assert "nothing rolls" in version.action
        assert not [c for c in found if c.kind == "roll-batch"]


def test_an_interrupted_roll_goes_on_with_the_nodes_it_has_not_upgraded(tmp_path: Path) -> None:
    pins = _pins(tmp_path)
    bumped = {**pins, "enroot": "3.5.1"}
    under_way = {VERSIONS_KEY: pins, PROGRESS_KEY: {"to": bumped, "done": ["gpu001", "gpu002"]}}
    found = _diff(tmp_path, _bump, saved=under_way, max_unavailable=1)
    assert [c.detail["nodes"] for c in found if c.kind == "roll-batch"] == [["gpu003"], ["gpu004"]]
    # The spec went back to the old pins mid-roll: a new roll, from the first node.
    back = {VERSIONS_KEY: bumped, PROGRESS_KEY: {"to": bumped, "done": ["gpu001"]}}
    found = _diff(tmp_path, saved=back, max_unavailable=4)
    assert [c.detail["nodes"] for c in found if c.kind == "roll-batch"] == [["gpu001", "gpu002", "gpu003", "gpu004"]]


def test_an_unchanged_cluster_with_a_record_of_its_pins_has_no_changes(tmp_path: Path) -> None:
    assert _diff(tmp_path, saved={VERSIONS_KEY: _pins(tmp_path)}) == []


def test_a_cluster_never_brought_up_creates_every_node(tmp_path: Path) -> None:
    found = _diff(tmp_path, running=False)
    assert {c.subject for c in found if c.kind == "node-create"} == {
        "ctl001",
        "login001",
        "gpu001",
        "gpu002",
        "gpu003",
        "gpu004",
    }


@pytest.mark.parametrize(
    ("path", "drain"),
    [
        ("storage/lnet.conf", True),
        ("slurm/gres.conf", False),
        ("slurm/slurm.conf", False),
        ("nccl/h100.conf", False),
        ("hosts", False),
    ],
)
def test_each_file_says_what_applying_it_does(path: str, drain: bool) -> None:
    action, drains = effect_of(path)
    assert drains is drain
    assert action


def test_the_command_follows_the_detailed_exit_code_convention(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = write_spec(tmp_path, _local(), "spec.yaml")
    build, _ = render(load_and_validate(spec), tmp_path / "build")
    names = [n.hostname for n in load_and_validate(spec).plan.nodes]

    class Running:
        def status(self, plan: object, state_dir: Path) -> dict[str, str]:
            return dict.fromkeys(names, "running")

    monkeypatch.setattr("clusterctl.commands.diff.for_kind", lambda kind: Running())
    args = ["diff", str(spec), "--out", str(build), "--state-dir", str(tmp_path / "state")]
    same = CliRunner().invoke(cli, args)
    assert same.exit_code == 0, same.output
    assert "no changes" in same.output

    data = _local()
    group(data, "gpu")["count"] = 3
    write_spec(tmp_path, data, "spec.yaml")
    changed = CliRunner().invoke(cli, [*args, "--output", "json"])
    assert changed.exit_code == 2, changed.output
    document = json.loads(changed.stdout)
    assert document["drain"] == ["gpu004"]
    assert {"kind": "node-remove", "subject": "gpu004"}.items() <= document["changes"][0].items()
