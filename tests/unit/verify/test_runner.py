"""The runner end to end with a fake executor replaying real and documented-format outputs.

The cluster is the 2-SU plan (64 nodes, 8 NDR rails each) with real GPUs. Faults planted:
gpu007 has a bad NIC that only NCCL shows, gpu010 fails DCGM (no fabric manager), gpu020's
slurmd is dead, the gpu005-gpu037 path across the spines is slow, login001's clock is off,
and the checkpoint tier is slower than the spec says.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tests.verify_testkit import (
    RAILS,
    ReplayExecutor,
    Response,
    chronyc,
    drain_command,
    gpu_query,
    ibstat,
    nccl_debug_run,
    rails_conf,
    real_gpu_plan,
    scontrol_node,
    scontrol_partition,
)

from clusterctl.hostlist import expand
from clusterctl.plan import Plan
from clusterctl.verify.acceptance import thresholds_by_hardware
from clusterctl.verify.base import VerifyOptions
from clusterctl.verify.rails import RAILS_COMMAND
from clusterctl.verify.report import Report, render_html, write_report
from clusterctl.verify.result import Verdict, blame_of, figures_of, hosts_of
from clusterctl.verify.runner import drain_failures, run_verify, select_checks

DATA = Path(__file__).parent / "data"
NODELIST_RE = re.compile(r"--nodelist=(\S+)")


class Cluster:
    """Answers every command verify sends, with the planted faults."""

    def __init__(self, plan: Plan, fixtures: Path) -> None:
        self.plan = plan
        self.nccl_single = (fixtures / "nccl" / "nccl_allreduce_1x8H100_nvls_nccltests290.txt").read_text()
        self.nccl_good = (fixtures / "nccl" / "nccl_allreduce_2x_p5_awsome.txt").read_text()
        self.nccl_slow = (fixtures / "nccl" / "nccl_allreduce_2x8H100_ndr_degraded_nccltests290.txt").read_text()
        self.topo = (fixtures / "nvidia-smi" / "nvsmi_topo_m_8xH100_8nic_sglang30401.txt").read_text()
        self.dcgm_pass = (fixtures / "dcgm" / "dcgmi_diag_r2_p4de_8xA100_pass_awsome.txt").read_text()
        self.dcgm_fail = (fixtures / "dcgm" / "dcgmi_diag_r3_8xH100_fail_no_fabricmanager.txt").read_text()
        self.fio = (DATA / "fio_seq_write_read.json").read_text()

    def __call__(self, host: str, command: str) -> Response | None:
        if command == "true":
            return 0, "", ""
        if command.startswith("scontrol show node"):
            lines = [
                scontrol_node(n.hostname, state="IDLE*" if n.hostname == "gpu020" else "IDLE")
                for n in self.plan.nodes
                if n.role == "compute"
            ]
            return 0, "".join(lines), ""
        if command.startswith("scontrol show partition"):
            return 0, "".join(scontrol_partition(p.name, p.hosts) for p in self.plan.slurm.partitions), ""
        if command.startswith("scontrol update"):
            return 0, "", ""
        if command.startswith("systemctl is-active slurmd"):
            return (3, "inactive\n", "") if host == "gpu020" else (0, "active\n", "")
        if "chronyc" in command:
            return 0, chronyc(0.5 if host == "login001" else 0.00002), ""
        if command.startswith("nvidia-smi --query-gpu"):
            return 0, gpu_query(), ""
        if command == "nvidia-smi topo -m":
            return 0, self.topo, ""
        if command == "ibstat":
            return 0, ibstat(RAILS), ""
        if command == RAILS_COMMAND:
            return 0, rails_conf(RAILS), ""
        if command.startswith("dcgmi diag"):
            return (226, self.dcgm_fail, "") if host == "gpu010" else (0, self.dcgm_pass, "")
        if command.startswith("findmnt"):
            tier = next(t for t in self.plan.storage if f"--mountpoint {t.mount} " in command)
            return 0, f"{tier.fstype} {tier.source}\n{self.fio}", ""
        if command.startswith("srun"):
            match = NODELIST_RE.search(command)
            assert match is not None
            if "clusterctl-verify-transport" in command:
                return 0, nccl_debug_run(tuple(expand(match[1].strip("'")))), ""
            hosts = set(expand(match[1].strip("'")))
            if len(hosts) == 1:
                return 0, self.nccl_single, ""
            if "gpu007" in hosts or hosts == {"gpu005", "gpu037"}:
                return 0, self.nccl_slow, ""
            return 0, self.nccl_good, ""
        return None


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, fixtures_dir: Path) -> tuple[Plan, ReplayExecutor, Report]:
    plan = real_gpu_plan(tmp_path_factory.mktemp("runner"))
    executor = ReplayExecutor(Cluster(plan, fixtures_dir))
    report = run_verify(plan, thresholds_by_hardware(plan, None), executor, VerifyOptions())
    return plan, executor, drain_failures(report, plan, executor)


def _outcomes(report: Report, name: str, target: str | None = None) -> list:
    return [o for o in report.findings if o.code == name and (target is None or o.node == target)]


def test_failing_nodes_and_drains(run: tuple[Plan, ReplayExecutor, Report]) -> None:
    _plan, executor, report = run

    assert report.failed
    assert report.failing_nodes() == ["login001", "gpu007", "gpu010", "gpu020"]
    drained = {d.host: d.reason for d in report.drains}
    assert sorted(drained) == ["gpu007", "gpu010", "gpu020"]  # login001 is not a Slurm node
    assert all(reason.startswith("clusterctl-verify: ") for reason in drained.values())
    assert drained["gpu010"].startswith("clusterctl-verify: dcgm.diag: 1 of 13 tests failed: GPU Memory (all GPUs)")
    assert len(drained["gpu010"]) <= 160
    assert drained["gpu020"] == "clusterctl-verify: slurm.node: gpu020 is IDLE+NOT_RESPONDING"
    assert drained["gpu007"].startswith("clusterctl-verify: nccl.all_reduce: The all_reduce busbw 155.57 GB/s")
    # scontrol runs on the login node, once per drained node.
    updates = executor.commands("scontrol update")
    assert (updates[0][0], updates[0][1]) == ("login001", drain_command("gpu007", drained["gpu007"]))
    assert len(updates) == 3


def test_dcgm_fail_maps_to_fabric_manager(run: tuple[Plan, ReplayExecutor, Report]) -> None:
    _, _, report = run
    (dcgm,) = _outcomes(report, "dcgm.diag", "gpu010")

    assert Verdict.of(dcgm) is Verdict.FAIL
    assert "nvidia-fabricmanager" in dcgm.hint
    # The acceptance level with the NVLink count the PCIe test expects.
    assert dcgm.data["command"] == "dcgmi diag -r 2 -p pcie.gpu_nvlinks_expected_up=18"


def test_bad_nic_is_found_by_its_pairs_and_its_partners_are_cleared(run: tuple[Plan, ReplayExecutor, Report]) -> None:
    _, _, report = run
    pairs = [o for o in report.findings if o.rule == "nccl" and "gpu007" in hosts_of(o) and len(hosts_of(o)) == 2]
    summaries = {s.hostname: s for s in report.node_summaries()}

    assert [(o.data["phase"], Verdict.of(o)) for o in pairs] == [
        ("pairs", Verdict.FAIL),
        ("pairs", Verdict.FAIL),
        ("cross", Verdict.SKIPPED),
    ]
    assert [blame_of(o) for o in pairs[:2]] == [("gpu007",), ("gpu007",)]
    assert pairs[2].message == "skipped: gpu007 failed an earlier check"
    assert summaries["gpu007"].checks["nccl"] is Verdict.FAIL
    assert summaries["gpu006"].checks["nccl"] is Verdict.PASS
    assert summaries["gpu008"].checks["nccl"] is Verdict.PASS
    # Bad nodes sit out the later phases instead of dragging every big run down.
    (su1,) = [o for o in report.findings if o.data.get("phase") == "group" and o.data.get("groups") == ["su1"]]
    assert not {"gpu007", "gpu010", "gpu020"} & set(hosts_of(su1))
    assert Verdict.of(su1) is Verdict.PASS


def test_nodes_failing_earlier_checks_are_skipped_in_nccl(run: tuple[Plan, ReplayExecutor, Report]) -> None:
    _, executor, report = run
    (single,) = [o for o in report.findings if o.rule == "nccl" and hosts_of(o) == ("gpu010",)]

    assert Verdict.of(single) is Verdict.SKIPPED
    assert single.message == "skipped: gpu010 failed an earlier check"
    assert all("gpu010" not in cmd and "gpu020" not in cmd for _, cmd in executor.commands("srun"))
    assert {host for host, _ in executor.commands("srun")} == {"login001"}


def test_a_slow_spine_path_fails_without_draining(run: tuple[Plan, ReplayExecutor, Report]) -> None:
    _, _, report = run
    (cross,) = [o for o in report.findings if hosts_of(o) == ("gpu005", "gpu037")]

    assert (cross.data["phase"], Verdict.of(cross), blame_of(cross)) == ("cross", Verdict.FAIL, ())
    assert cross in report.cluster_failures()
    assert "gpu005" not in report.failing_nodes()
    groups, values, states = report.group_matrix()
    assert groups == ["su1", "su2"]
    assert min(values[("su1", "su2")]) == 155.57
    assert values[("su1", "su2")] == values[("su2", "su1")]
    assert states[("su1", "su2")] == "fail"
    assert states[("su1", "su1")] == "pass"


def test_storage_aggregate_is_judged_against_the_tier(run: tuple[Plan, ReplayExecutor, Report]) -> None:
    _, _, report = run
    aggregates = {o.node: o for o in _outcomes(report, "storage.aggregate")}

    # 64 nodes x ~1.0 GB/s read beats datasets' 60 GB/s; 64 x 0.48 GB/s write misses ckpt's 120 GB/s.
    assert Verdict.of(aggregates["datasets (/lustre/datasets)"]) is Verdict.PASS
    assert figures_of(aggregates["datasets (/lustre/datasets)"])["nodes"] == 64
    assert Verdict.of(aggregates["ckpt (/mnt/ckpt)"]) is Verdict.FAIL
    assert blame_of(aggregates["ckpt (/mnt/ckpt)"]) == ()
    assert Verdict.of(aggregates["home (/home)"]) is Verdict.PASS  # no marks: no job errors is a pass


def test_every_pair_used_the_fabric_s_transport(run: tuple[Plan, ReplayExecutor, Report]) -> None:
    _plan, _executor, report = run

    transport = [o for o in report.findings if o.rule == "transport"]
    # gpu010 (DCGM) and gpu020 (slurmd) failed earlier checks and sit out: 62 nodes, 31 pairs, each
    # on the host and in a container of the stock image (pyxis).
    assert len(transport) == 62
    assert sorted({o.code for o in transport}) == ["nccl.transport", "nccl.transport.container"]
    assert {Verdict.of(o) for o in transport} == {Verdict.PASS}
    assert not {"gpu010", "gpu020"} & {h for o in transport for h in hosts_of(o)}


def test_time_and_gpu_checks_ran_for_real(run: tuple[Plan, ReplayExecutor, Report]) -> None:
    _, _, report = run
    (login,) = _outcomes(report, "time.sync", "login001")
    (gpu,) = _outcomes(report, "gpu.inventory", "gpu001")
    (topo,) = _outcomes(report, "topo.gpu_nic", "gpu001")
    (ib,) = _outcomes(report, "ib.ports", "gpu001")

    assert Verdict.of(login) is Verdict.FAIL
    assert "0.500 s off" in login.message
    assert (Verdict.of(gpu), Verdict.of(topo), Verdict.of(ib)) == (Verdict.PASS, Verdict.PASS, Verdict.PASS)
    assert gpu.message == "8 x NVIDIA H100 80GB HBM3 with driver 570.133.20."


def test_report_json_and_html(run: tuple[Plan, ReplayExecutor, Report], tmp_path: Path) -> None:
    plan, _, report = run

    json_path, html_path = write_report(report, tmp_path / "build")

    assert json_path == tmp_path / "build" / "verify" / "report.json"
    data = json.loads(json_path.read_text())
    assert (data["command"], data["ok"]) == ("verify", False)
    assert data["verdicts"] == {
        "pass": report.count(Verdict.PASS),
        "fail": report.count(Verdict.FAIL),
        "skipped": report.count(Verdict.SKIPPED),
    }
    assert data["counts"]["error"] == report.count(Verdict.FAIL)
    (dcgm,) = [f for f in data["findings"] if f["code"] == "dcgm.diag" and f["node"] == "gpu010"]
    assert (dcgm["level"], dcgm["rule"], dcgm["data"]["blame"]) == ("error", "dcgm", ["gpu010"])
    assert dcgm["data"]["figures"]["tests_failed"] == 1
    assert data["failing_nodes"] == ["login001", "gpu007", "gpu010", "gpu020"]
    assert len(data["nodes"]) == len(plan.nodes)
    assert [w["phase"] for w in data["test_plan"]["waves"]] == ["single", "pairs", "pairs", "group", "cross", "full"]
    page = html_path.read_text()
    for node in plan.nodes:
        assert f'data-node="{node.hostname}"' in page
    assert 'data-node="gpu007" data-verdict="fail"' in page
    assert 'data-node="gpu006" data-verdict="pass"' in page
    assert 'id="group-heatmap"' in page
    assert 'id="node-heatmap"' in page


def test_html_is_self_contained(run: tuple[Plan, ReplayExecutor, Report]) -> None:
    page = render_html(run[2])

    assert "<script" not in page
    assert "<link" not in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "url(" not in page


def test_only_and_skip_pick_checks(tmp_path: Path, fixtures_dir: Path) -> None:
    plan = real_gpu_plan(tmp_path)
    executor = ReplayExecutor(Cluster(plan, fixtures_dir))

    report = run_verify(plan, {}, executor, VerifyOptions(only=frozenset({"slurm", "ib"}), skip=frozenset({"ib"})))

    assert report.checks == ["slurm"]
    assert {o.rule for o in report.findings} == {"slurm"}
    assert not executor.commands("ibstat")
    assert select_checks(["nccl", "gpu"]) == ["gpu", "nccl"]
    with pytest.raises(ValueError, match="Unknown check gpus; the checks are slurm, time, gpu"):
        select_checks(["gpus"])
