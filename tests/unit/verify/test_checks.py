"""The check units one by one: verdicts, skips with reasons, transport failures, blame, drains."""

from __future__ import annotations

import stat
from pathlib import Path

from tests.conftest import EXAMPLES
from tests.plan_edits import replaced
from tests.verify_testkit import ReplayExecutor, chronyc, drain_command, gpu_query, real_gpu_plan, scontrol_node

from clusterctl.pipeline import load_and_validate
from clusterctl.plan.models import PlanNode
from clusterctl.run.executor import (
    NOT_FOUND_RC,
    TIMEOUT_RC,
    UNREACHABLE_RC,
    DockerExecutor,
    RoutingExecutor,
    SshExecutor,
    executor_for,
    run_many,
)
from clusterctl.run.sshopts import SshAccess, SshEndpoint, save_access
from clusterctl.slurm.nodes import SlurmNode, parse_nodes
from clusterctl.slurm.reasons import MAX_CHARS as MAX_REASON_CHARS
from clusterctl.spec.findings import Finding
from clusterctl.verify.base import CONTAINER, EMULATED, VerifyContext, VerifyOptions
from clusterctl.verify.drain import drain_reason
from clusterctl.verify.fabric import IbCheck
from clusterctl.verify.gpu import DcgmCheck, GpuInventoryCheck, judge_gpu_inventory
from clusterctl.verify.nccl import nccl_blame
from clusterctl.verify.parsers.gpu_query import parse_gpu_query
from clusterctl.verify.result import Verdict, blame_of, check_finding, figures_of, skipped, with_run
from clusterctl.verify.slurm import judge_slurm_node, judge_slurmd
from clusterctl.verify.storage import StorageCheck, fio_command, judge_storage_node
from clusterctl.verify.timesync import TimeSyncCheck, judge_time

LOCAL = load_and_validate(EXAMPLES / "local.yaml").plan
ONPREM = load_and_validate(EXAMPLES / "onprem-h100-256.yaml").plan


def _gpu_node(**changes: object) -> PlanNode:
    return ONPREM.node("gpu001").model_copy(update=changes)


# --- GPU inventory --------------------------------------------------------------------------


def test_gpu_inventory_passes() -> None:
    result = judge_gpu_inventory(
        parse_gpu_query(gpu_query()), expected_gpus=8, gpu_model="H100-SXM-80GB", driver_pin="570.133.20"
    )

    assert Verdict.of(result) is Verdict.PASS
    assert figures_of(result)["gpus"] == 8


def test_gpu_inventory_names_every_difference() -> None:
    text = gpu_query(7, name="NVIDIA H100 PCIe", driver="550.54.15")

    result = judge_gpu_inventory(
        parse_gpu_query(text), expected_gpus=8, gpu_model="H100-SXM-80GB", driver_pin="570.133.20", target="gpu009"
    )

    assert Verdict.of(result) is Verdict.FAIL
    assert result.message == (
        "7 GPUs found, the plan has 8; NVIDIA H100 PCIe is not H100-SXM-80GB; "
        "driver 550.54.15 is loaded, the pin is 570.133.20."
    )
    assert "Xid 79" in result.hint


def test_gpu_check_skips_emulated_nodes_and_fails_without_a_driver() -> None:
    executor = ReplayExecutor(lambda host, cmd: (6, "NVIDIA-SMI has failed because it couldn't communicate\n", ""))
    local = VerifyContext(plan=LOCAL, thresholds={}, executor=executor)

    outcomes = GpuInventoryCheck().run(local)

    assert [o.message for o in outcomes] == [EMULATED] * 4
    assert executor.calls == []

    plan = ONPREM.model_copy(deep=True)
    real = VerifyContext(plan=plan, thresholds={}, executor=executor)
    (first, *_) = GpuInventoryCheck().run(real)
    assert Verdict.of(first) is Verdict.FAIL
    assert blame_of(first) == ("gpu001",)
    assert "nvidia-smi output could not be read (exit 6), line 1" in first.message


def test_missing_tool_and_transport_failures() -> None:
    answers = {
        "gpu001": None,  # dcgmi not installed
        "gpu002": (TIMEOUT_RC, "", "timed out after 900 s"),
        "gpu003": (UNREACHABLE_RC, "", "ssh: connect to host 10.20.0.15 port 22: No route to host\n"),
    }
    executor = ReplayExecutor(lambda host, cmd: answers.get(host, (0, "", "")))
    ctx = VerifyContext(plan=ONPREM, thresholds={}, executor=executor)

    outcomes = {o.node: o for o in DcgmCheck().run(ctx)}

    assert outcomes["gpu001"].message == "dcgmi is not installed on gpu001."
    assert "datacenter-gpu-manager" in outcomes["gpu001"].hint
    assert outcomes["gpu002"].message == "dcgmi timed out after 900 s."
    assert (
        outcomes["gpu003"].message
        == "gpu003 could not be reached: ssh: connect to host 10.20.0.15 port 22: No route to host"
    )
    assert all(Verdict.of(r) is Verdict.FAIL for r in outcomes.values())


def test_ib_check_skips_non_infiniband_fabrics() -> None:
    plan = load_and_validate(EXAMPLES / "aws-p5.yaml").plan
    ctx = VerifyContext(plan=plan, thresholds={}, executor=ReplayExecutor(lambda h, c: None))

    (first, *_) = IbCheck().run(ctx)

    assert first.message == "skipped: the fabric is efa, which has no InfiniBand ports"


# --- time -----------------------------------------------------------------------------------


def test_time_sync_verdicts() -> None:
    assert Verdict.of(judge_time(chronyc(0.0004), 0.1)) is Verdict.PASS
    assert judge_time(chronyc(-0.3), 0.1).message == "The clock is 0.300 s off NTP time, more than 0.1 s."
    lost = judge_time(chronyc(0.0, leap="Not synchronised", reference="00000000 ()"), 0.1)
    assert Verdict.of(lost) is Verdict.FAIL
    assert "chronyc sources" in lost.hint
    assert Verdict.of(judge_time("NTPSynchronized=yes\n", 0.1)) is Verdict.PASS
    assert Verdict.of(judge_time("NTPSynchronized=no\n", 0.1)) is Verdict.FAIL


def test_time_sync_skips_container_nodes() -> None:
    ctx = VerifyContext(plan=LOCAL, thresholds={}, executor=ReplayExecutor(lambda h, c: None))

    outcomes = TimeSyncCheck().run(ctx)

    assert len(outcomes) == len(LOCAL.nodes)
    assert {o.message for o in outcomes} == {CONTAINER}


# --- Slurm ----------------------------------------------------------------------------------


def _slurm(line: str) -> SlurmNode:
    (node,) = parse_nodes(line)
    return node


def test_slurm_node_verdicts() -> None:
    node = _gpu_node()

    assert judge_slurm_node(node, _slurm(scontrol_node("gpu001"))).message == "gpu001 is idle with gpu:h100:8."
    busy = judge_slurm_node(node, _slurm(scontrol_node("gpu001", state="ALLOCATED")))
    assert (Verdict.of(busy), busy.message) == (Verdict.PASS, "gpu001 is in use (ALLOCATED) with gpu:h100:8.")
    missing = judge_slurm_node(node, None)
    assert missing.message == "gpu001 is not in slurmctld's node table."
    gres = judge_slurm_node(node, _slurm(scontrol_node("gpu001", gres="gpu:h100:7")))
    assert gres.message == "Its GRES is gpu:h100:7, the plan has gpu:h100:8."
    down = judge_slurm_node(node, _slurm(scontrol_node("gpu001", state="DOWN*", reason="Not responding")))
    assert down.message == "gpu001 is DOWN+NOT_RESPONDING (Not responding)."
    assert "journalctl -u slurmd" in down.hint


def test_slurm_node_drained_by_an_earlier_verify_says_how_to_resume() -> None:
    line = scontrol_node("gpu001", state="IDLE+DRAIN", reason="clusterctl-verify: ib.ports: mlx5_3/1 is Down (Polling)")

    result = judge_slurm_node(_gpu_node(), _slurm(line))

    assert Verdict.of(result) is Verdict.FAIL
    assert figures_of(result)["reason"] == "clusterctl-verify: ib.ports: mlx5_3/1 is Down (Polling)"
    assert result.hint == (
        "An earlier clusterctl verify drained it; once fixed: scontrol update nodename=gpu001 state=resume."
    )


def test_powered_down_burst_nodes_are_fine() -> None:
    node = _gpu_node(burst=True)

    result = judge_slurm_node(node, _slurm(scontrol_node("gpu001", state="IDLE+CLOUD+POWERED_DOWN")))

    assert Verdict.of(result) is Verdict.PASS


def test_slurmd_probe() -> None:
    assert Verdict.of(judge_slurmd("gpu001", 0, "active\n", "")) is Verdict.PASS
    dead = judge_slurmd("gpu001", 3, "inactive\n", "")
    assert (Verdict.of(dead), dead.message) == (Verdict.FAIL, "slurmd is not running (systemctl: inactive).")


# --- storage --------------------------------------------------------------------------------


def test_storage_node_mount_and_fio_problems() -> None:
    tier = ONPREM.storage[0]  # datasets, lustre
    fio = (Path(__file__).parent / "data" / "fio_seq_write_read.json").read_text()

    ok, parsed = judge_storage_node(tier, "gpu001", 0, f"lustre {tier.source}\n{fio}", "")
    missing, _ = judge_storage_node(tier, "gpu001", 3, "", "")
    wrong, _ = judge_storage_node(tier, "gpu001", 0, "ext4 /dev/sda1\n", "")
    no_fio, _ = judge_storage_node(
        tier, "gpu001", NOT_FOUND_RC, f"lustre {tier.source}\n", "bash: fio: command not found"
    )

    assert Verdict.of(ok) is Verdict.PASS
    assert parsed is not None
    assert figures_of(ok)["fstype"] == "lustre"
    assert missing.message == "/lustre/datasets is not mounted on gpu001."
    assert wrong.message == "/lustre/datasets on gpu001 is ext4, not lustre."
    assert (Verdict.of(no_fio), no_fio.message) == (Verdict.SKIPPED, "skipped: fio is not installed")


def test_storage_without_tiers_says_so() -> None:
    ctx = VerifyContext(plan=LOCAL, thresholds={}, executor=ReplayExecutor(lambda h, c: None))

    (outcome,) = StorageCheck().run(ctx)

    assert outcome.message == "skipped: no storage tiers in the spec"


def test_fio_command_runs_in_a_private_directory_and_cleans_up() -> None:
    command = fio_command("/lustre/datasets", "gpu001", VerifyOptions())

    assert command.startswith("findmnt -n -o FSTYPE,SOURCE --mountpoint /lustre/datasets || exit 3; ")
    assert "--directory=/lustre/datasets/.clusterctl-verify/gpu001" in command
    assert "'--filename_format=clusterctl.$jobnum.$filenum'" in command
    assert command.endswith("rm -rf /lustre/datasets/.clusterctl-verify/gpu001; exit $rc")


# --- NCCL blame -----------------------------------------------------------------------------


def _run(hosts: tuple[str, ...], verdict: Verdict) -> Finding:
    result = check_finding("nccl.all_reduce", ",".join(hosts), verdict, {}, "")
    return with_run(result, "nccl", hosts)


def test_blame_singles_out_the_node_that_fails_with_every_partner() -> None:
    outcomes = [
        _run(("a", "b"), Verdict.FAIL),
        _run(("b", "c"), Verdict.FAIL),
        _run(("c", "d"), Verdict.PASS),
        _run(("a", "d"), Verdict.PASS),
        _run(("e",), Verdict.FAIL),
        _run(("a", "b", "c", "d"), Verdict.FAIL),
    ]

    blamed = nccl_blame(outcomes)

    assert sorted(blamed) == ["b", "e"]
    assert blamed["b"] == "every two-node run failed (2 runs, partners a,c)"
    assert blamed["e"] == "single-node all_reduce failed"


def test_blame_names_both_when_a_pair_is_all_there_is() -> None:
    blamed = nccl_blame(
        [_run(("a", "b"), Verdict.FAIL), _run(("c",), Verdict.of(skipped("nccl.all_reduce", "c", "x")))]
    )

    assert sorted(blamed) == ["a", "b"]
    assert "cannot tell which" in blamed["a"]


# --- drains ---------------------------------------------------------------------------------


def test_drain_reason_and_command() -> None:
    result = check_finding("ib.ports", "gpu003", Verdict.FAIL, {}, "mlx5_3/1 is Down (Polling). More text here.")
    long = check_finding("dcgm.diag", "gpu003", Verdict.FAIL, {}, "x" * 300)

    reason = drain_reason(with_run(result, "ib", ("gpu003",), ("gpu003",)))

    assert reason == "clusterctl-verify: ib.ports: mlx5_3/1 is Down (Polling)"
    assert len(drain_reason(with_run(long, "dcgm", ("gpu003",), ("gpu003",)))) == MAX_REASON_CHARS
    assert drain_command("gpu003", reason) == (
        "scontrol update nodename=gpu003 state=drain 'reason=clusterctl-verify: ib.ports: mlx5_3/1 is Down (Polling)'"
    )


# --- executors ------------------------------------------------------------------------------


def _fake_docker(tmp_path: Path) -> str:
    script = tmp_path / "docker"
    script.write_text(
        "#!/bin/bash\n"
        "# docker exec CONTAINER bash -c COMMAND\n"
        'if [ "$2" = "clusterctl-local-gone" ]; then\n'
        '  echo "Error response from daemon: No such container: $2" >&2; exit 1\n'
        "fi\n"
        'shift 2; exec "$@"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_docker_executor(tmp_path: Path) -> None:
    docker = _fake_docker(tmp_path)
    executor = DockerExecutor({"gpu001": "clusterctl-local-gpu001", "gone": "clusterctl-local-gone"}, docker=docker)

    assert executor.run("gpu001", "echo hi; echo oops >&2; exit 3", 10) == (3, "hi\n", "oops\n")
    assert executor.run("gone", "true", 10)[0] == UNREACHABLE_RC
    assert executor.run("nope", "true", 10)[0] == UNREACHABLE_RC
    assert executor.run("gpu001", "sleep 5", 0.2) == (TIMEOUT_RC, "", "timed out after 0.2 s")
    assert DockerExecutor({"gpu001": "c"}, docker=str(tmp_path / "missing")).run("gpu001", "true", 5)[0] == NOT_FOUND_RC


def test_ssh_executor_argv(tmp_path: Path) -> None:
    bastion = SshEndpoint("203.0.113.7", "ubuntu")
    access = SshAccess(known_hosts=tmp_path / "known_hosts", identity_file=tmp_path / "id", bastion=bastion)
    executor = SshExecutor({"gpu001": SshEndpoint("10.20.0.15", "ubuntu")}, access)

    argv = executor.argv("gpu001", "scontrol show node -o")

    assert argv[-2:] == ["ubuntu@10.20.0.15", "sudo -n bash -c 'scontrol show node -o'"]
    proxy = next(a for a in argv if a.startswith("ProxyCommand="))
    assert proxy.endswith("ubuntu@203.0.113.7")
    assert "BatchMode=yes" in argv
    assert "StrictHostKeyChecking=yes" in argv
    root = SshExecutor({"a": SshEndpoint("10.0.0.1", "root")}, access)
    assert root.argv("a", "true")[-1] == "bash -c true"


def test_executor_for_the_providers(tmp_path: Path) -> None:
    local = executor_for(LOCAL, tmp_path)
    state = tmp_path / "state"
    state.mkdir()
    access = SshAccess(known_hosts=state / "known_hosts", identity_file=state / "id")
    save_access(state, {n.hostname: SshEndpoint(n.address, "ubuntu") for n in ONPREM.nodes}, access)
    onprem = executor_for(ONPREM, state)

    assert isinstance(local, DockerExecutor)
    assert local.containers["gpu001"] == "clusterctl-local-gpu001"
    assert isinstance(onprem, RoutingExecutor)
    ssh = onprem.routes["gpu001"]
    assert isinstance(ssh, SshExecutor)
    assert ssh.targets["gpu001"] == SshEndpoint(ONPREM.node("gpu001").address, "ubuntu")
    real = real_gpu_plan(tmp_path)
    gpu064 = [n.hostname for n in real.nodes].index("gpu064")
    mixed = replaced(real, {f"nodes.{gpu064}.burst": True, f"nodes.{gpu064}.emulated": True})
    assert isinstance(executor_for(mixed, tmp_path), RoutingExecutor)


def test_run_many_keeps_order() -> None:
    executor = ReplayExecutor(lambda host, cmd: (0, host, ""))

    results = run_many(executor, [(f"n{i}", "true", 1) for i in range(50)], max_workers=8)

    assert [r[1] for r in results] == [f"n{i}" for i in range(50)]
    assert run_many(executor, []) == []
