"""The NCCL test plan derived from the fabric: phases, waves, tournaments, srun lines."""

from __future__ import annotations

import shlex
from itertools import combinations
from pathlib import Path

import pytest
from tests.conftest import EXAMPLES
from tests.verify_testkit import two_su_plan

from clusterctl.pipeline import load_and_validate
from clusterctl.verify.testplan import (
    NcclOptions,
    NcclPlan,
    build_test_plan,
    fabric_groups,
    round_robin,
    srun_command,
)


@pytest.fixture(scope="module")
def two_su(tmp_path_factory: pytest.TempPathFactory) -> NcclPlan:
    return build_test_plan(two_su_plan(tmp_path_factory.mktemp("two-su")))


@pytest.fixture(scope="module")
def four_su(tmp_path_factory: pytest.TempPathFactory) -> NcclPlan:
    return build_test_plan(two_su_plan(tmp_path_factory.mktemp("four-su"), sus=4))


def _assert_waves_are_node_disjoint(test_plan: NcclPlan) -> None:
    for wave in test_plan.waves:
        hosts = [h for run in wave.runs for h in run.hosts]
        assert len(hosts) == len(set(hosts)), f"wave {wave.number} ({wave.phase}) uses a node twice"


def _assert_cross_waves_use_disjoint_su_pairs(test_plan: NcclPlan) -> None:
    for wave in test_plan.waves_of("cross"):
        pairs = {run.groups for run in wave.runs}
        sus = [su for pair in pairs for su in pair]
        assert all(len(pair) == 2 for pair in pairs)
        assert len(sus) == len(set(sus)), f"wave {wave.number}: an SU meets two others ({sorted(pairs)})"


def test_two_su_groups_follow_the_scalable_units(two_su: NcclPlan) -> None:
    assert two_su.group_kind == "su"
    assert list(two_su.groups) == ["su1", "su2"]
    assert two_su.groups["su1"] == tuple(f"gpu{i:03d}" for i in range(1, 33))
    assert two_su.groups["su2"] == tuple(f"gpu{i:03d}" for i in range(33, 65))


def test_two_su_runs_per_phase(two_su: NcclPlan) -> None:
    counts = {phase: len(two_su.runs(phase)) for phase in ("single", "pairs", "group", "cross", "full")}

    # 64 single-node runs; 2 rounds x 16 pairs x 2 SUs; one run per SU; 32 node pairs across
    # the spines for the one SU pair; the whole cluster once.
    assert counts == {"single": 64, "pairs": 64, "group": 2, "cross": 32, "full": 1}
    assert [(w.phase, len(w.runs)) for w in two_su.waves] == [
        ("single", 64),
        ("pairs", 32),
        ("pairs", 32),
        ("group", 2),
        ("cross", 32),
        ("full", 1),
    ]
    assert [w.number for w in two_su.waves] == [1, 2, 3, 4, 5, 6]
    assert two_su.notes == ()


def test_two_su_no_node_twice_in_a_wave(two_su: NcclPlan) -> None:
    _assert_waves_are_node_disjoint(two_su)


def test_two_su_cross_waves_use_disjoint_su_pairs(two_su: NcclPlan) -> None:
    _assert_cross_waves_use_disjoint_su_pairs(two_su)
    (cross,) = two_su.waves_of("cross")
    assert {run.groups for run in cross.runs} == {("su1", "su2")}
    # Node k of su1 meets node k of su2: every node crosses the spines once.
    assert cross.runs[0].hosts == ("gpu001", "gpu033")
    assert sorted(h for run in cross.runs for h in run.hosts) == sorted(two_su.hosts)


def test_pairs_give_every_node_two_different_partners(two_su: NcclPlan) -> None:
    partners: dict[str, set[str]] = {}
    for run in two_su.runs("pairs"):
        a, b = run.hosts
        assert two_su.group_of(a) == two_su.group_of(b), "pairs stay inside their SU"
        partners.setdefault(a, set()).add(b)
        partners.setdefault(b, set()).add(a)
    assert all(len(p) == 2 for p in partners.values())
    assert partners["gpu001"] == {"gpu002", "gpu032"}  # (1,2) in round 1, (32,1) wraps round in round 2


def test_two_node_runs_use_ring_and_the_rest_do_not(two_su: NcclPlan) -> None:
    for run in two_su.runs():
        env = dict(run.env)
        if len(run.hosts) == 2:
            assert env == {"NCCL_ALGO": "Ring"}
        else:
            assert "NCCL_ALGO" not in env


def test_full_run_is_last_and_spans_every_node(two_su: NcclPlan) -> None:
    last = two_su.waves[-1]
    assert last.phase == "full"
    assert len(last.runs[0].hosts) == 64
    assert last.runs[0].groups == ("su1", "su2")


def test_four_su_tournament(four_su: NcclPlan) -> None:
    cross = four_su.waves_of("cross")

    # A round-robin over 4 SUs: 3 rounds of 2 matches, every pair once.
    assert len(cross) == 3
    assert all(len({run.groups for run in wave.runs}) == 2 for wave in cross)
    met = [run.groups for wave in cross for run in wave.runs]
    assert sorted(set(met)) == sorted(combinations(["su1", "su2", "su3", "su4"], 2))
    assert all(met.count(pair) == 32 for pair in set(met))
    _assert_cross_waves_use_disjoint_su_pairs(four_su)
    _assert_waves_are_node_disjoint(four_su)
    assert [w.label for w in cross] == [
        "round 1: su1-su4, su2-su3",
        "round 2: su1-su3, su2-su4",
        "round 3: su1-su2, su3-su4",
    ]


@pytest.mark.parametrize("count", [2, 3, 4, 5, 6, 7, 8, 16])
def test_round_robin_meets_every_pair_once(count: int) -> None:
    items = [f"g{i}" for i in range(count)]

    rounds = round_robin(items)

    assert len(rounds) == (count - 1 if count % 2 == 0 else count)
    pairs = [pair for r in rounds for pair in r]
    assert sorted(pairs) == sorted(combinations(items, 2))
    for r in rounds:
        used = [i for pair in r for i in pair]
        assert len(used) == len(set(used))


def test_round_robin_of_one_or_none() -> None:
    assert round_robin([]) == []
    assert round_robin(["su1"]) == []


def test_local_rack_leaf_plan() -> None:
    plan = load_and_validate(EXAMPLES / "local.yaml").plan

    test_plan = build_test_plan(plan)

    assert fabric_groups(plan) == ("leaf", {"leaf-r01": ("gpu001", "gpu002"), "leaf-r02": ("gpu003", "gpu004")})
    assert [(w.phase, [r.hostlist for r in w.runs]) for w in test_plan.waves] == [
        ("single", ["gpu001", "gpu002", "gpu003", "gpu004"]),
        ("pairs", ["gpu[001-002]", "gpu[003-004]"]),
        ("cross", ["gpu[001,003]", "gpu[002,004]"]),
        ("full", ["gpu[001-004]"]),
    ]
    assert any(note.startswith("group:") for note in test_plan.notes)
    assert all(run.partition == "gpu" for run in test_plan.runs())


def test_one_su_cluster_has_no_cross_or_full_phase() -> None:
    plan = load_and_validate(EXAMPLES / "onprem-h100-256.yaml").plan

    test_plan = build_test_plan(plan)

    assert [w.phase for w in test_plan.waves] == ["single", "pairs", "pairs", "group"]
    # The two hot spares are in no partition, so Slurm cannot run them.
    assert len(test_plan.runs("single")) == 30
    assert test_plan.runs("group")[0].hostlist == "gpu[001-030]"
    assert {n.split(":")[0] for n in test_plan.notes} == {"cross", "full"}


def test_odd_group_rests_one_node_per_round(tmp_path: Path) -> None:
    plan = two_su_plan(tmp_path)
    spares = [n.hostname for n in plan.nodes if n.su == 1][5:]  # 5 schedulable nodes left in su1
    nodes = [n.model_copy(update={"spare": True}) if n.hostname in spares else n for n in plan.nodes]
    plan = plan.model_copy(update={"nodes": nodes})
    test_plan = build_test_plan(plan)

    pairs = [r.hosts for r in test_plan.runs("pairs") if r.groups == ("su1",)]

    assert pairs == [
        ("gpu001", "gpu002"),
        ("gpu003", "gpu004"),
        ("gpu002", "gpu003"),
        ("gpu004", "gpu005"),
    ]
    assert any("differ in size" in note for note in test_plan.notes)
    _assert_waves_are_node_disjoint(test_plan)


def test_srun_command(two_su: NcclPlan) -> None:
    run = two_su.runs("pairs")[0]

    argv = shlex.split(srun_command(run, NcclOptions(binary="/opt/nccl-tests/all_reduce_perf", mpi="pmix")))

    assert argv[:2] == ["srun", "--job-name=clusterctl-verify-pairs"]
    assert "--nodelist=gpu[001-002]" in argv
    assert "--nodes=2" in argv
    assert "--ntasks-per-node=8" in argv
    assert "--gpus-per-node=8" in argv
    assert "--mpi=pmix" in argv
    assert "--partition=train" in argv
    assert "--export=ALL,NCCL_ALGO=Ring" in argv
    binary = argv.index("/opt/nccl-tests/all_reduce_perf")
    assert argv[binary + 1 :] == ["-b", "8388608", "-e", "8589934592", "-f", "2", "-g", "1", "-c", "1"]
