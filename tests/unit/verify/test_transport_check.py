"""The ``transport`` check of clusterctl verify: two-node NCCL_DEBUG=INFO runs judged per node."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.verify_testkit import ReplayExecutor, Response, nccl_debug_run, real_gpu_plan, two_su_plan

from clusterctl.hostlist import expand
from clusterctl.plan import Plan
from clusterctl.verify.base import VerifyContext, VerifyOptions
from clusterctl.verify.result import Verdict, blame_of, figures_of, hosts_of
from clusterctl.verify.runner import run_verify
from clusterctl.verify.transport import TransportCheck, pyxis_image, transport_pairs

DATA = Path(__file__).parent / "data" / "nccl_debug"
NODELIST_RE = re.compile(r"--nodelist=(\S+)")


def _hosts(command: str) -> tuple[str, ...]:
    match = NODELIST_RE.search(command)
    assert match is not None
    return tuple(expand(match[1].strip("'")))


def _answer(sockets: tuple[str, ...] = ()):  # type: ignore[no-untyped-def]
    def handler(host: str, command: str) -> Response | None:
        if command.startswith("srun") and "clusterctl-verify-transport" in command:
            return 0, nccl_debug_run(_hosts(command), sockets=sockets), ""
        return None

    return handler


@pytest.fixture(scope="module")
def with_container(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    return real_gpu_plan(tmp_path_factory.mktemp("transport"))


@pytest.fixture(scope="module")
def plan(with_container: Plan) -> Plan:
    """The host runs only (acceptance.container_image: null)."""
    cluster = with_container.cluster.model_copy(update={"container_check_image": None})
    return with_container.model_copy(update={"cluster": cluster})


def test_every_node_gets_a_partner_and_the_command_asks_for_the_transport_lines(plan: Plan) -> None:
    executor = ReplayExecutor(_answer())
    ctx = VerifyContext(plan=plan, thresholds={}, executor=executor)

    outcomes = TransportCheck().run(ctx)

    assert len(outcomes) == 32
    assert all(Verdict.of(o) is Verdict.PASS for o in outcomes), [o.message for o in outcomes][:2]
    tested = [h for o in outcomes for h in hosts_of(o)]
    assert sorted(tested) == sorted(n.hostname for n in plan.nodes if n.role == "compute")
    command = outcomes[0].data["command"]
    assert command.startswith("srun --job-name=clusterctl-verify-transport ")
    assert "--nodes=2 --ntasks-per-node=8 --gpus-per-node=8" in command
    assert " --label " in command
    # The comma in INIT,NET would split srun's --export list; env sets it in each task.
    assert (
        " env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET /opt/nccl-tests/bin/all_reduce_perf -b 1048576 -e 16777216 "
        in command
    )
    assert outcomes[0].message == (
        "NCCL used IB on 2 hosts (NET/IB over InfiniBand (IB or IBext), as infiniband needs)."
    )
    assert figures_of(outcomes[0])["net_channels_gdr"] == 16


def test_a_socket_fallback_blames_only_that_node_and_names_its_task(plan: Plan) -> None:
    executor = ReplayExecutor(_answer(sockets=("gpu007",)))
    ctx = VerifyContext(plan=plan, thresholds={}, executor=executor)

    outcomes = TransportCheck().run(ctx)

    failed = [o for o in outcomes if Verdict.of(o) is Verdict.FAIL]
    assert len(failed) == 1
    (outcome,) = failed
    assert "gpu007" in hosts_of(outcome)
    assert blame_of(outcome) == ("gpu007",)
    partner = next(h for h in hosts_of(outcome) if h != "gpu007")
    task = hosts_of(outcome).index("gpu007") * 8
    quoted = f"(line 3: {task}: gpu007:4000:4100 [0] NCCL INFO Using network Socket)"
    assert outcome.message.startswith(
        f"gpu007 (task {task} and 7 more processes): NCCL fell back to sockets, "
        f"not NET/IB over InfiniBand (IB or IBext) {quoted}"
    )
    assert partner not in outcome.message


def test_the_bad_node_sits_out_the_nccl_runs(plan: Plan, fixtures_dir: Path) -> None:
    single = (fixtures_dir / "nccl" / "nccl_allreduce_1x8H100_nvls_nccltests290.txt").read_text()
    multi = (fixtures_dir / "nccl" / "nccl_allreduce_2x_p5_awsome.txt").read_text()

    def handler(host: str, command: str) -> Response | None:
        if "clusterctl-verify-transport" in command:
            return _answer(sockets=("gpu007",))(host, command)
        if command.startswith("srun"):
            return 0, single if "--nodes=1 " in command else multi, ""
        return None

    executor = ReplayExecutor(handler)
    report = run_verify(plan, {}, executor, VerifyOptions(only=frozenset({"transport", "nccl"})))

    assert report.checks == ["transport", "nccl"]
    assert report.failing_nodes() == ["gpu007"]
    busbw_runs = [c for _, c in executor.calls if "clusterctl-verify-transport" not in c]
    assert busbw_runs
    assert not any("gpu007" in _hosts(c) for c in busbw_runs if "--nodes=1 " in c)


def test_failed_nodes_are_left_out_and_an_odd_node_wraps_round(plan: Plan) -> None:
    ctx = VerifyContext(plan=plan, thresholds={}, executor=ReplayExecutor(_answer()))
    ctx.failed_nodes.add("gpu003")

    pairs = transport_pairs(ctx)

    assert all("gpu003" not in pair for pair in pairs)
    assert len(pairs) == 32  # 63 nodes: 31 pairs and the last node with the first
    assert pairs[-1][1] == pairs[0][0]


def test_run_without_debug_lines_fails_with_srun_s_message(plan: Plan) -> None:
    executor = ReplayExecutor(
        lambda h, c: (1, "", "srun: error: Unable to create step for job 12: Invalid generic resource")
    )
    ctx = VerifyContext(plan=plan, thresholds={}, executor=executor)

    outcome = TransportCheck().run(ctx)[0]

    assert Verdict.of(outcome) is Verdict.FAIL
    assert blame_of(outcome) == ()
    assert outcome.message == (
        "all_reduce_perf printed no NCCL debug line (srun exit 1): "
        "srun: error: Unable to create step for job 12: Invalid generic resource"
    )


def test_emulated_gpus_skip(tmp_path: Path) -> None:
    emulated = two_su_plan(tmp_path, sus=1)
    if not any(n.emulated for n in emulated.nodes):
        emulated = emulated.model_copy(
            update={"nodes": [n.model_copy(update={"emulated": True}) for n in emulated.nodes]}
        )
    executor = ReplayExecutor(_answer())

    (outcome,) = TransportCheck().run(VerifyContext(plan=emulated, thresholds={}, executor=executor))

    assert Verdict.of(outcome) is Verdict.SKIPPED
    assert outcome.message == "skipped: emulated GPUs"
    assert not executor.calls


def test_a_lone_node_skips(plan: Plan) -> None:
    executor = ReplayExecutor(_answer())
    ctx = VerifyContext(plan=plan, thresholds={}, executor=executor)
    ctx.failed_nodes.update(n.hostname for n in plan.nodes if n.hostname != "gpu001")

    (outcome,) = TransportCheck().run(ctx)

    assert Verdict.of(outcome) is Verdict.SKIPPED
    assert outcome.message == "skipped: needs two schedulable GPU nodes"
    assert not executor.calls


def test_real_log_through_the_check(plan: Plan) -> None:
    # The 2-node RoCE log of NVIDIA/nccl-tests#185 as a pair's output: NCCL's host names are not
    # the plan's and there are no task labels, so the plan's nodes show no transport line.
    text = (DATA / "ib_roce_2node_nccltests185.log").read_text()
    executor = ReplayExecutor(lambda h, c: (0, text, ""))
    ctx = VerifyContext(plan=plan, thresholds={}, executor=executor)

    outcome = TransportCheck().run(ctx)[0]

    assert Verdict.of(outcome) is Verdict.FAIL
    assert "NCCL's HCAs run RoCE, not IB as the fabric does" in outcome.message


# --- the same pairs inside a stock image started through pyxis ------------------------------


def _answer_by_place(host_sockets: tuple[str, ...] = (), container_sockets: tuple[str, ...] = ()):  # type: ignore[no-untyped-def]
    def handler(host: str, command: str) -> Response | None:
        if command.startswith("srun") and "clusterctl-verify-transport-container" in command:
            return 0, nccl_debug_run(_hosts(command), sockets=container_sockets), ""
        if command.startswith("srun") and "clusterctl-verify-transport" in command:
            return 0, nccl_debug_run(_hosts(command), sockets=host_sockets), ""
        return None

    return handler


def test_every_pair_also_runs_nccl_in_a_stock_image_through_pyxis(with_container: Plan) -> None:
    executor = ReplayExecutor(_answer_by_place())
    outcomes = TransportCheck().run(VerifyContext(plan=with_container, thresholds={}, executor=executor))

    assert len(outcomes) == 64
    container = [o for o in outcomes if o.code == "nccl.transport.container"]
    assert len(container) == 32
    assert all(Verdict.of(o) is Verdict.PASS for o in container)
    command = container[0].data["command"]
    pair = _hosts(command)
    assert " '--container-image=nvcr.io#nvidia/pytorch:24.09-py3' " in command
    assert (
        f" env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET MASTER_ADDR={pair[0]} MASTER_PORT=29500 python3 -c "
        in command
    )
    assert "dist.all_reduce(x)" in command
    assert " --mpi=" not in command  # torch.distributed rendezvous, not MPI in the image
    assert container[0].message.startswith(
        "In a container of nvcr.io/nvidia/pytorch:24.09-py3: NCCL used IB on 2 hosts"
    )


def test_a_node_whose_container_falls_back_to_sockets_fails_though_its_host_run_passes(with_container: Plan) -> None:
    executor = ReplayExecutor(_answer_by_place(container_sockets=("gpu007",)))
    outcomes = TransportCheck().run(VerifyContext(plan=with_container, thresholds={}, executor=executor))

    failed = [o for o in outcomes if Verdict.of(o) is Verdict.FAIL]
    assert [o.code for o in failed] == ["nccl.transport.container"]
    assert blame_of(failed[0]) == ("gpu007",)
    assert "In a container of nvcr.io/nvidia/pytorch:24.09-py3: gpu007 (task" in failed[0].message
    assert "NCCL fell back to sockets" in failed[0].message
    host_run = next(o for o in outcomes if o.code == "nccl.transport" and "gpu007" in hosts_of(o))
    assert Verdict.of(host_run) is Verdict.PASS


def test_registry_references_get_enroot_s_separator() -> None:
    assert pyxis_image("nvcr.io/nvidia/pytorch:24.09-py3") == "nvcr.io#nvidia/pytorch:24.09-py3"
    assert pyxis_image("registry.example.com:5000/ml/torch:1") == "registry.example.com:5000#ml/torch:1"
    assert (
        pyxis_image("pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime") == "pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime"
    )
