"""`clusterctl up examples/local.yaml` end to end: jobs, topology, idempotence, faults, down."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from clusterctl.hostlist import expand
from clusterctl.image.stage import CONFIGURE, STAGE_INVENTORY
from clusterctl.run.ansible import LOG_FILE as ANSIBLE_LOG
from clusterctl.run.providers.local import slurm_cgroup_dirs
from clusterctl.run.state import StateDir
from clusterctl.slurm.nodes import parse_nodes
from tests.conftest import EXAMPLES, REPO_ROOT
from tests.e2e.conftest import LocalCluster, json_events, json_report, run_cli, save_artifact
from tests.security.formats import ansible_yaml

pytestmark = [pytest.mark.e2e, pytest.mark.docker]


@pytest.mark.order(10)
def test_srun_on_all_four_gpu_nodes(local_cluster: LocalCluster) -> None:
    result = local_cluster.exec(
        "login001", "srun -N4 --gres=gpu:h100:8 bash -c 'echo $(hostname) $CUDA_VISIBLE_DEVICES'", timeout=180
    )
    assert result.returncode == 0, result.stderr
    lines = sorted(result.stdout.split("\n"))
    lines = [line for line in lines if line]
    assert [line.split()[0] for line in lines] == ["gpu001", "gpu002", "gpu003", "gpu004"]
    assert all(line.split()[1] == "0,1,2,3,4,5,6,7" for line in lines), lines


@pytest.mark.order(11)
def test_switches_one_lands_in_one_leaf(local_cluster: LocalCluster) -> None:
    # The job's output goes to /tmp, which every node has (there is no shared home on this cluster).
    submit = local_cluster.exec(
        "login001",
        "sbatch --parsable --wait --switches=1 -N2 --chdir=/tmp --output=/tmp/switches-%j.out --wrap 'srun hostname'",
        timeout=180,
    )
    assert submit.returncode == 0, submit.stderr
    job = submit.stdout.strip().split(";")[0]
    nodes = local_cluster.exec("login001", f"sacct -n -X -j {job} -o NodeList%40").stdout.split()
    hosts = set(expand(nodes[0]))
    leaves = {local_cluster.plan.node(h).topology_switch for h in hosts}
    assert len(hosts) == 2
    assert len(leaves) == 1, f"job {job} spans leaves {leaves}"


@pytest.mark.order(12)
def test_topology_matches_render(local_cluster: LocalCluster) -> None:
    out = local_cluster.exec("ctl001", "scontrol show topology").stdout
    # slurmctld lists a parent switch's descendant nodes too: compare what topology.conf says of each.
    loaded = {
        m.group(1): (m.group(2) or "", m.group(3) or "")
        for m in re.finditer(r"SwitchName=(\S+) Level=\d+ LinkSpeed=\d+(?: Nodes=(\S+))?(?: Switches=(\S+))?", out)
    }
    rendered = (local_cluster.build_dir / "slurm" / "topology.conf").read_text()
    want = {
        m.group(1): (m.group(2) or "", m.group(3) or "")
        for m in re.finditer(r"^SwitchName=(\S+)(?: Nodes=(\S+))?(?: Switches=(\S+))?$", rendered, re.MULTILINE)
    }
    assert want
    assert set(loaded) == set(want)
    for name, (nodes, switches) in want.items():
        if nodes:
            assert set(expand(loaded[name][0])) == set(expand(nodes)), name
        if switches:
            assert set(expand(loaded[name][1])) == set(expand(switches)), name


@pytest.mark.order(13)
def test_munge_key_is_0400_everywhere(local_cluster: LocalCluster) -> None:
    for node in local_cluster.plan.nodes:
        stat = local_cluster.exec(node.hostname, "stat -c '%a %U' /etc/munge/munge.key").stdout.strip()
        assert stat == "400 munge", (node.hostname, stat)


@pytest.mark.order(14)
def test_every_node_came_from_its_baked_image_and_ran_only_the_configure_stage(local_cluster: LocalCluster) -> None:
    stages = ansible_yaml((local_cluster.build_dir / STAGE_INVENTORY).read_text())["all"]["hosts"]
    assert stages == {node.hostname: {"clusterctl_stage": CONFIGURE} for node in local_cluster.plan.nodes}


@pytest.mark.order(14)
def test_compute_nodes_configured_themselves_from_their_bundle(local_cluster: LocalCluster) -> None:
    """The control machine pushed the controller and the login node only; each compute node's agent
    applied the bundle `up` published for it, says so in its journal with the digest, and told Slurm."""
    log = (local_cluster.build_dir / ANSIBLE_LOG).read_text()
    compute = [n.hostname for n in local_cluster.plan.nodes if n.role == "compute"]
    assert re.search(r"^(ok|changed): \[ctl001\]", log, re.MULTILINE), "the controller was pushed"
    for host in compute:
        assert not re.search(rf"\[{host}\]", log), f"a configure-stage task ran on {host} from the control machine"
    published = StateDir(local_cluster.state_dir, "local").read()["pull"]["bundles"]
    for host in compute:
        journal = local_cluster.exec(host, "journalctl -u clusterctl-agent --no-pager -o cat").stdout
        assert f"applied bundle {published[host]}" in journal, journal[-2000:]
        extra = local_cluster.exec("ctl001", f"scontrol show node -o {host}").stdout
        assert f"bundle={published[host][:16]} state=ok" in extra, extra


@pytest.mark.order(14)
def test_slurmd_runs_configless(local_cluster: LocalCluster) -> None:
    """slurmd has no slurm.conf of its own: it runs with --conf-server and slurmctld's copy."""
    for host in ("gpu001", "gpu004"):
        local = local_cluster.exec(host, "ls /etc/slurm; tr '\\0' ' ' < /proc/$(pidof slurmd)/cmdline").stdout
        assert "slurm.conf" not in local.split(), local
        assert "gres.conf" not in local.split(), local
        assert "--conf-server ctl001:6817" in local, local
        cached = local_cluster.exec(host, "cat /run/slurm/conf/slurm.conf")
        assert cached.stdout == (local_cluster.build_dir / "slurm" / "slurm.conf").read_text()


@pytest.mark.order(15)
def test_no_interpreter_discovery_warning_and_no_raw_ansible_output(local_cluster: LocalCluster) -> None:
    log = (local_cluster.build_dir / ANSIBLE_LOG).read_text()
    assert "TASK [" in log, "the Ansible log holds the run's output"
    assert "TASK [" not in local_cluster.first_up_output, "Ansible's raw output is on screen without --verbose"
    for text in (log, local_cluster.first_up_output):
        assert "discovered Python interpreter" not in text
        assert "interpreter discovery" not in text.lower()


@pytest.mark.order(18)
def test_second_up_changes_nothing(local_cluster: LocalCluster) -> None:
    """The roles run again in full (`--converge`) and find nothing to change."""
    result = local_cluster.up("--converge", "--output", "json")
    save_artifact("e2e-second-up.jsonl", result.stdout + result.stderr)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = next(e for e in json_events(result.stdout) if e["kind"] == "summary")
    assert summary["data"]["changed_tasks"] == 0, summary
    assert summary["data"]["converge_skipped"] == "", summary
    # The stream ends with the report envelope every command prints with --output json.
    report = json_report(result.stdout)
    assert (report["command"], report["ok"], report["changed_tasks"]) == ("up", True, 0), report


@pytest.mark.order(16)
def test_up_of_the_unchanged_cluster_checks_instead_of_converging(local_cluster: LocalCluster) -> None:
    """Every node as the cold `up` left it: the configure stage is skipped, readiness still runs.

    Its time is recorded for people (the speed targets are benchmarks/', never a test's)."""
    started = time.monotonic()
    result = local_cluster.up("--output", "json")
    seconds = time.monotonic() - started
    save_artifact("e2e-no-change-up.jsonl", result.stdout + result.stderr)
    assert result.returncode == 0, result.stderr[-3000:]
    events = json_events(result.stdout)
    summary = next(e for e in events if e["kind"] == "summary")
    assert summary["data"]["converge_skipped"].startswith("all 6 nodes"), summary
    assert summary["data"]["changed_tasks"] == 0, summary
    configure = [e for e in events if e["kind"] == "host" and e["phase"] == "configure"]
    assert {e["host"] for e in configure} == {"gpu001", "gpu002", "gpu003", "gpu004"}, "the pushed nodes ran a task"
    assert all(e["status"] == "ok" and "nothing changed" in e["message"] for e in configure), configure
    assert any(e["kind"] == "phase_end" and e["phase"] == "readiness" and e["status"] == "ok" for e in events)
    save_artifact("e2e-up-seconds.txt", f"first {local_cluster.first_up_seconds:.0f} s, no-change {seconds:.0f} s\n")


@pytest.mark.order(20)
def test_a_file_edited_by_hand_makes_up_converge_and_restore_it(local_cluster: LocalCluster) -> None:
    """A compute node's agent finds its own drift when `up` asks, and applies its bundle again; a pushed
    node's is found by the control machine."""
    victim, path = "gpu002", "/etc/clusterctl/health.conf"
    rendered = local_cluster.exec("gpu001", f"cat {path}").stdout
    assert "node * 8 devices" in rendered
    local_cluster.exec(victim, f"echo 'node gpu002 0 none - -' >> {path}").check_returncode()
    pushed, pushed_path = "login001", "/etc/slurm/cgroup.conf"
    local_cluster.exec(pushed, f"echo 'ConstrainRAMSpace=no' >> {pushed_path}").check_returncode()
    result = local_cluster.up("--output", "json")
    save_artifact("e2e-drift-up.jsonl", result.stdout + result.stderr)
    assert result.returncode == 0, result.stderr[-3000:]
    events = json_events(result.stdout)
    assert any(f"since the last converge: {pushed}" in e["message"] for e in events if e["kind"] == "message"), events
    changed = {
        e["host"] for e in events if e["kind"] == "host" and e["phase"] == "configure" and e["status"] == "changed"
    }
    assert {victim, pushed} <= changed, changed
    summary = next(e for e in events if e["kind"] == "summary")
    assert summary["data"]["converge_skipped"] == "", summary
    assert summary["data"]["changed_tasks"] >= 2, summary
    assert local_cluster.exec(victim, f"cat {path}").stdout == rendered
    assert (
        local_cluster.exec(pushed, f"cat {pushed_path}").stdout
        == (local_cluster.build_dir / "slurm" / "cgroup.conf").read_text()
    )


@pytest.mark.order(22)
def test_a_partition_change_is_a_reconfigure_and_no_file_for_the_compute_nodes(
    local_cluster: LocalCluster, tmp_path: Path
) -> None:
    """Configless: the new partition reaches every slurmd through slurmctld (`scontrol reconfigure`), and
    the compute nodes' bundle is what it was: no compute node changed anything."""
    changed_spec = tmp_path / local_cluster.spec_path.name
    text = local_cluster.spec_path.read_text()
    line = '    - {name: gpu, groups: [gpu], default: true, max_time: "1-00:00:00"}\n'
    assert line in text
    changed_spec.write_text(text.replace(line, line + '    - {name: debug, groups: [gpu], max_time: "00:30:00"}\n'))
    bundles = StateDir(local_cluster.state_dir, "local").read()["pull"]["bundles"]
    options = ["--out", str(local_cluster.build_dir), "--yes", "--output", "json"]
    options += ["--lock", str(local_cluster.lock_path)] if local_cluster.lock_path else []
    log = local_cluster.build_dir / ANSIBLE_LOG
    before = log.stat().st_size
    try:
        result = local_cluster.cli("up", str(changed_spec), *options)
        save_artifact("e2e-partition-up.jsonl", result.stdout + result.stderr)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        assert StateDir(local_cluster.state_dir, "local").read()["pull"]["bundles"] == bundles
        events = json_events(result.stdout)
        compute = {
            e["host"]: e for e in events if e["kind"] == "host" and e["phase"] == "configure" and "gpu" in e["host"]
        }
        assert set(compute) == {"gpu001", "gpu002", "gpu003", "gpu004"}
        assert all(e["status"] == "ok" for e in compute.values()), compute
        run = log.read_text()[before:]
        assert re.search(r"RUNNING HANDLER \[slurm : Reconfigure Slurm\] \**\s+changed: \[ctl001\]", run), run[-3000:]
        assert not re.search(r"\[gpu00\d\]", run)
        nodes = local_cluster.exec("login001", "sinfo -h -p debug -N -o %N").stdout.split()
        assert sorted(set(nodes)) == ["gpu001", "gpu002", "gpu003", "gpu004"]
        seen = local_cluster.exec("gpu003", "grep -c '^PartitionName=debug' /run/slurm/conf/slurm.conf").stdout
        assert seen.strip() == "1", "slurmd on gpu003 has not the new slurm.conf"
    finally:
        back = local_cluster.up()
        assert back.returncode == 0, back.stdout[-3000:] + back.stderr[-3000:]


@pytest.mark.order(21)
def test_diff_of_the_unchanged_cluster_says_no_changes(local_cluster: LocalCluster) -> None:
    result = local_cluster.cli("diff", str(local_cluster.spec_path), "--out", str(local_cluster.build_dir))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no changes" in result.stdout + result.stderr


@pytest.mark.order(30)
def test_invalid_spec_creates_nothing(local_cluster: LocalCluster, tmp_path: Path) -> None:
    text = (
        (EXAMPLES / "local.yaml")
        .read_text()
        .replace("name: local", "name: broken")
        .replace("count: 4}", "count: 4, hardwre: emu-h100}")
    )
    spec = tmp_path / "broken.yaml"
    spec.write_text(text)
    result = run_cli("up", str(spec), "--yes", "--state-dir", str(tmp_path / "state"))
    assert result.returncode == 1
    assert "hardwre" in result.stderr
    assert "Traceback" not in result.stderr
    names = subprocess.run(
        ["docker", "ps", "-a", "--filter", "label=clusterctl.cluster=broken", "-q"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert names.strip() == ""
    assert not (tmp_path / "state" / "broken").exists()


@pytest.mark.order(31)
def test_second_concurrent_up_refuses(local_cluster: LocalCluster) -> None:
    state = StateDir(local_cluster.state_dir, local_cluster.plan.cluster.name)
    with state.lock("up (held by the test)"):
        result = local_cluster.up(timeout=120)
    assert result.returncode == 1
    assert "busy" in result.stderr
    assert "held by the test" in result.stderr


@pytest.mark.order(80)
def test_node_stopped_during_up_fails_then_next_up_completes(local_cluster: LocalCluster) -> None:
    victim = "gpu003"
    args = [
        sys.executable,
        "-m",
        "clusterctl",
        "up",
        str(local_cluster.spec_path),
        "--out",
        str(local_cluster.build_dir),
        "--yes",
        "--state-dir",
        str(local_cluster.state_dir),
        "--output",
        "json",
        "--converge",
    ]
    lines: list[str] = []
    published = threading.Event()
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT) as proc:

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line)
                if "bundles published on" in line:
                    published.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        assert published.wait(600), "up never published the bundles"
        # Mid-apply: the node told Slurm it started applying this up's bundle (--converge: it must).
        for _ in range(120):
            extra = local_cluster.exec("ctl001", f"scontrol show node -o {victim}").stdout
            if "state=applying" in extra:
                break
            time.sleep(0.5)
        assert "state=applying" in extra, extra
        subprocess.run(["docker", "stop", "-t", "1", f"clusterctl-local-{victim}"], check=True, capture_output=True)
        proc.wait(timeout=1200)
        reader.join(timeout=10)
        stderr = proc.stderr.read() if proc.stderr else ""
    output = "".join(lines) + stderr
    save_artifact("e2e-fault-up.jsonl", output)
    assert proc.returncode != 0
    summary = next(e for e in json_events("".join(lines)) if e["kind"] == "summary")
    failed_hosts = {f["host"] for f in summary["data"]["failures"]}
    assert failed_hosts == {victim}, summary["data"]["failures"]
    (failure,) = summary["data"]["failures"]
    # Named with its cause as soon as the provider said so, not after the apply timeout.
    assert "its machine is exited" in failure["message"], failure
    assert "started applying bundle" in failure["message"], failure
    # The rest were configured: the run went on for them.
    events = json_events("".join(lines))
    others = {e["host"] for e in events if e.get("phase") == "configure" and e["kind"] == "host"} - {victim}
    assert others >= {"ctl001", "login001", "gpu001", "gpu002", "gpu004"}

    again = local_cluster.up()
    save_artifact("e2e-fault-recovery-up.log", again.stdout + again.stderr)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    state = local_cluster.exec("ctl001", f"sinfo -h -n {victim} -o %t").stdout.strip()
    assert state in ("idle", "mix", "alloc"), state


@pytest.mark.order(40)
def test_a_gpu_node_joins_while_a_job_runs_then_leaves_after_its_job(
    local_cluster: LocalCluster, tmp_path: Path
) -> None:
    """Add gpu005 to the running cluster and take it out again: no job is killed on the way.

    The job on gpu001 runs throughout. gpu005 takes a job once it joined; when the spec drops it
    again, `up` drains it and waits for its job to end before the container goes."""
    grown = tmp_path / local_cluster.spec_path.name
    text = local_cluster.spec_path.read_text()
    gpu_group = "{group: gpu, role: compute, hardware: emu-h100, count: 4}"
    assert gpu_group in text
    grown.write_text(text.replace(gpu_group, gpu_group.replace("count: 4", "count: 5")))
    lock = ("--lock", str(local_cluster.lock_path)) if local_cluster.lock_path else ()
    long_job = _submit(local_cluster, "-w gpu001 --wrap 'sleep 900'")
    try:
        assert _job_state(local_cluster, long_job, until="RUNNING") == "RUNNING"
        planned = _diff(local_cluster, grown)
        assert {c["subject"] for c in planned if c["kind"] == "node-create"} == {"gpu005"}
        assert {c["subject"] for c in planned if c["kind"] == "node-remove"} == set()
        slurm_conf = next(c for c in planned if c["subject"] == "slurm/slurm.conf")
        assert slurm_conf["action"].startswith("slurmctld and slurmd restarted"), slurm_conf
        joined = local_cluster.cli(
            "up", str(grown), "--out", str(local_cluster.build_dir), "--yes", "--output", "json", *lock
        )
        save_artifact("e2e-node-joins-up.jsonl", joined.stdout + joined.stderr)
        assert joined.returncode == 0, joined.stdout[-3000:] + joined.stderr[-3000:]
        made = {
            e["host"]
            for e in json_events(joined.stdout)
            if e["kind"] == "host" and e["phase"] == "provision" and e["message"] == "created"
        }
        assert made == {"gpu005"}, "diff listed other nodes to create than up created"
        assert _job_state(local_cluster, long_job, until="RUNNING") == "RUNNING", "the running job did not survive"
        ran = local_cluster.exec("login001", "srun -w gpu005 -N1 hostname", timeout=180)
        assert ran.stdout.strip() == "gpu005", ran.stdout + ran.stderr

        short_job = _submit(local_cluster, "-w gpu005 --wrap 'sleep 25'")
        assert _job_state(local_cluster, short_job, until="RUNNING") == "RUNNING"
        planned = _diff(local_cluster, local_cluster.spec_path)
        removals = [c for c in planned if c["kind"] == "node-remove"]
        assert [(c["subject"], c["drain"]) for c in removals] == [("gpu005", True)], planned
        left = local_cluster.up("--drain-timeout", "300", "--output", "json")
        save_artifact("e2e-node-leaves-up.jsonl", left.stdout + left.stderr)
        assert left.returncode == 0, left.stdout[-3000:] + left.stderr[-3000:]
        events = json_events(left.stdout)
        said = [e["message"] for e in events if e["kind"] == "message"]
        assert any(m.startswith("gpu005 leave the cluster: drained (clusterctl:remove)") for m in said), said
        assert any(f"{short_job} (gpu005)" in m for m in said), "up did not wait for the job on gpu005"
        finished = local_cluster.exec("login001", f"sacct -X -n -P -j {short_job} -o State").stdout.strip()
        assert finished == "COMPLETED", finished
        container = subprocess.run(
            ["docker", "inspect", f"clusterctl-{local_cluster.plan.cluster.name}-gpu005"],
            capture_output=True,
            check=False,
        )
        assert container.returncode != 0, "the container of gpu005 is still there"
        nodes = local_cluster.exec("login001", "sinfo -h -N -o %N").stdout.split()
        assert "gpu005" not in nodes, nodes
        assert _job_state(local_cluster, long_job, until="RUNNING") == "RUNNING", "the running job did not survive"
        assert _diff(local_cluster, local_cluster.spec_path) == [], "up left something diff still lists"
    finally:
        local_cluster.exec("ctl001", f"scancel {long_job}")
        _job_state(local_cluster, long_job, until="")


@pytest.mark.order(41)
def test_a_spare_takes_a_failed_nodes_place_and_the_repaired_node_becomes_a_spare(
    local_cluster: LocalCluster, tmp_path: Path
) -> None:
    """gpu005 joins as a hot spare; gpu002 fails (drained by hand) and gpu005 takes its place in the partition.

    Meanwhile an admin keeps gpu004 drained for repair: `up` and `node replace` succeed around it and
    leave it drained. `srun -N4` runs again on the four nodes in service once the admin lifts it.
    Once repaired, gpu002 passes its health check and is a free spare; the spec without the spare then
    removes gpu005 and gpu002 is back in service."""
    spared = tmp_path / local_cluster.spec_path.name
    text = local_cluster.spec_path.read_text()
    gpu_group = "{group: gpu, role: compute, hardware: emu-h100, count: 4}"
    assert gpu_group in text
    spared.write_text(text.replace(gpu_group, gpu_group.replace("count: 4", "count: 5, spares: 1")))
    options = ("--out", str(local_cluster.build_dir), "--yes")
    options += ("--lock", str(local_cluster.lock_path)) if local_cluster.lock_path else ()

    admins = "e2e: fan replaced, waiting for burn-in"
    kept = local_cluster.exec("login001", f"scontrol update nodename=gpu004 state=drain reason='{admins}'")
    assert kept.returncode == 0, kept.stderr
    joined = local_cluster.cli("up", str(spared), *options)
    save_artifact("e2e-spare-joins-up.log", joined.stdout + joined.stderr)
    assert joined.returncode == 0, joined.stdout[-3000:] + joined.stderr[-3000:]
    assert f"gpu004 is drained by an admin ({admins}); left as it is" in joined.stdout
    assert _partition_nodes(local_cluster) == ["gpu001", "gpu002", "gpu003", "gpu004"]
    assert _spare_column(local_cluster, spared) == {"gpu005": ("free spare", "idle", "")}

    reason = "e2e: Xid 79, GPU fell off the bus"
    drained = local_cluster.exec("login001", f"scontrol update nodename=gpu002 state=drain reason='{reason}'")
    assert drained.returncode == 0, drained.stderr
    replaced = local_cluster.cli("node", "replace", str(spared), "gpu002", *options)
    save_artifact("e2e-node-replace.log", replaced.stdout + replaced.stderr)
    assert replaced.returncode == 0, replaced.stdout[-3000:] + replaced.stderr[-3000:]
    assert "gpu005 takes gpu002's place" in replaced.stdout + replaced.stderr
    assert _partition_nodes(local_cluster) == ["gpu001", "gpu003", "gpu004", "gpu005"]
    assert _slurm_state(local_cluster, "gpu004") == ("drained", admins)
    lifted = local_cluster.exec("login001", "scontrol update nodename=gpu004 state=resume")
    assert lifted.returncode == 0, lifted.stderr
    ran = local_cluster.exec("login001", "srun -N4 -p gpu hostname", timeout=180)
    assert sorted(ran.stdout.split()) == ["gpu001", "gpu003", "gpu004", "gpu005"], ran.stdout + ran.stderr
    shown = _spare_column(local_cluster, spared)
    assert shown == {
        "gpu002": ("replaced by gpu005", "drain", reason),
        "gpu005": ("spare, replaces gpu002", "idle", ""),
    }

    returned = local_cluster.cli("node", "return", str(spared), "gpu002", *options)
    save_artifact("e2e-node-return.log", returned.stdout + returned.stderr)
    assert returned.returncode == 0, returned.stdout[-3000:] + returned.stderr[-3000:]
    assert _partition_nodes(local_cluster) == ["gpu001", "gpu003", "gpu004", "gpu005"]
    shown = _spare_column(local_cluster, spared)
    assert shown == {"gpu002": ("free spare", "idle", ""), "gpu005": ("spare, replaces gpu002", "idle", "")}

    restored = local_cluster.up()
    save_artifact("e2e-spare-leaves-up.log", restored.stdout + restored.stderr)
    assert restored.returncode == 0, restored.stdout[-3000:] + restored.stderr[-3000:]
    assert _partition_nodes(local_cluster) == ["gpu001", "gpu002", "gpu003", "gpu004"]
    assert StateDir(local_cluster.state_dir, "local").read().get("spares") == [], "a swap outlived its spare"


def _slurm_state(cluster: LocalCluster, node: str) -> tuple[str, str]:
    """The node's state and reason as clusterctl's Slurm parser reads ``scontrol show node -o``."""
    shown = cluster.exec("login001", f"scontrol show node -o {node}")
    assert shown.returncode == 0, shown.stderr
    (found,) = parse_nodes(shown.stdout)
    return found.compact_state(), found.reason


def _partition_nodes(cluster: LocalCluster) -> list[str]:
    """The nodes of partition gpu as slurmctld has them."""
    listed = cluster.exec("login001", "sinfo -h -p gpu -N -o %N")
    assert listed.returncode == 0, listed.stderr
    return sorted(set(listed.stdout.split()))


def _spare_column(cluster: LocalCluster, spec: Path) -> dict[str, tuple[str, str, str]]:
    """`status --output json`: each spare and replaced node, with its Slurm state and drain reason."""
    shown = cluster.cli("status", str(spec), "--output", "json")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    nodes = json.loads(shown.stdout)["nodes"]
    return {n["hostname"]: (n["spare"], n["slurm"], n["reason"]) for n in nodes if n.get("spare")}


def _diff(cluster: LocalCluster, spec: Path) -> list[dict[str, object]]:
    """``clusterctl diff -o json``'s changes (exit 2 when there are some, 0 when none)."""
    result = cluster.cli("diff", str(spec), "--out", str(cluster.build_dir), "--output", "json")
    assert result.returncode in (0, 2), result.stdout + result.stderr
    changes: list[dict[str, object]] = json.loads(result.stdout)["changes"]
    assert (result.returncode == 2) == bool(changes), result.stdout
    return changes


def _submit(cluster: LocalCluster, options: str) -> str:
    submit = cluster.exec("login001", f"sbatch --parsable -N1 --chdir=/tmp --output=/dev/null {options}")
    assert submit.returncode == 0, submit.stderr
    return submit.stdout.strip().split(";")[0]


@pytest.mark.order(82)
def test_a_service_that_does_not_start_fails_up_with_its_cause_on_screen(local_cluster: LocalCluster) -> None:
    """The summary names the node and the task, and below them what the unit's journal says.

    The node exporter: a unit whose outage leaves Slurm alone, so the retry finds the node in service.
    """
    victim, missing, unit = "gpu004", "/usr/local/sbin/clusterctl-e2e-missing-check", "prometheus-node-exporter"
    dropin = f"/etc/systemd/system/{unit}.service.d/zz-e2e-broken.conf"
    broken = local_cluster.exec(
        victim,
        f"mkdir -p {Path(dropin).parent} && printf '[Service]\\nExecStartPre={missing}\\n' > {dropin} "
        f"&& systemctl daemon-reload && systemctl stop {unit}",
    )
    assert broken.returncode == 0, broken.stderr
    try:
        result = local_cluster.up(timeout=900)
        output = result.stdout + result.stderr
        save_artifact("e2e-failed-service-up.log", output)
        assert result.returncode == 1, output[-3000:]
        summary = output[output.index("Failed:") :].splitlines()
        assert len(summary) <= 25, "\n".join(summary)
        text = "\n".join(summary)
        assert re.search(rf"{victim}: failed in task '(monitoring : )?Start the node exporter'", text), text
        # The unit's journal line that names the missing program, not only "Failed to start".
        assert re.search(rf"on {victim}: {unit}: {unit}.service: Failed .*{re.escape(missing)}", text), text
        assert "clusterctl up" in text  # how to go on
    finally:
        # The retry runs whatever failed above, so the later tests find the cluster whole.
        local_cluster.exec(victim, f"rm -f {dropin} && systemctl daemon-reload")
        again = local_cluster.up()
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]


@pytest.mark.order(83)
def test_a_broken_apt_source_fails_up_with_apts_error_and_the_retry_finishes(local_cluster: LocalCluster) -> None:
    """Both stages on every node (`--no-image`), one node missing a package behind a dead apt source."""
    victim, source = "gpu004", "/etc/apt/sources.list.d/zz-e2e-broken.list"
    broken = local_cluster.exec(
        victim,
        "apt-get remove -y -qq chrony >/dev/null "
        "&& rm -rf /var/lib/apt/lists/* /var/lib/apt/periodic/update-success-stamp && touch -d @0 /var/lib/apt/lists "
        f"&& echo 'deb http://127.0.0.1:9/debian bookworm main' > {source}",
        timeout=300,
    )
    assert broken.returncode == 0, broken.stderr
    try:
        result = local_cluster.up("--no-image", timeout=1200)
        output = result.stdout + result.stderr
        save_artifact("e2e-broken-apt-up.log", output)
        assert result.returncode == 1, output[-3000:]
        summary = output[output.index("Failed:") :].splitlines()
        assert len(summary) <= 25, "\n".join(summary)
        text = "\n".join(summary)
        assert f"{victim}: failed in task 'Install the missing ones'" in text
        # apt's own line for the dead source (an error to python-apt, a warning to apt-get).
        assert re.search(rf"on {victim}: [EW]: ?Failed to fetch http://127\.0\.0\.1:9/debian/dists/bookworm/", text), (
            text
        )
    finally:
        # The retry runs whatever failed above, so the later tests find the cluster whole.
        local_cluster.exec(victim, f"rm -f {source}")
        again = local_cluster.up("--no-image", timeout=1200)
        save_artifact("e2e-broken-apt-retry-up.log", again.stdout + again.stderr)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert local_cluster.exec(victim, "dpkg-query -W -f '${Status}' chrony").stdout == "install ok installed"


# ansible-core 2.19+ stores a host's cached facts as a JSON string under this key; older versions
# store the facts themselves.
_FACT_PAYLOAD = "__payload__"


def _cached_facts(local_cluster: LocalCluster, host: str) -> tuple[Path, dict[str, object]]:
    """A host's file in the cluster's fact cache and its facts."""
    cache = local_cluster.state_dir / local_cluster.plan.cluster.name / "facts"
    path = next(p for p in cache.iterdir() if p.name in (host, f"s1_{host}"))
    raw = json.loads(path.read_text())
    return path, json.loads(raw[_FACT_PAYLOAD]) if _FACT_PAYLOAD in raw else raw


def _write_cached_facts(path: Path, facts: dict[str, object]) -> None:
    """Replace the facts in ``path``, in the layout the file already has."""
    wrapped = _FACT_PAYLOAD in json.loads(path.read_text())
    path.write_text(json.dumps({_FACT_PAYLOAD: json.dumps(facts)} if wrapped else facts))


def _plain(value: object) -> object:
    """A cached value without the origin tags ansible-core 2.19+ stores with templated strings."""
    if isinstance(value, dict) and "__ansible_type" in value and "value" in value:
        return value["value"]
    return value


@pytest.mark.order(85)
def test_node_reinstalled_under_its_name_is_gathered_again(local_cluster: LocalCluster) -> None:
    """A machine reinstalled in place has a new machine ID: `up` must not trust the facts cached
    for the old one (here a stale OS release), and gathers them again -- for that node only."""
    reinstalled, other = "login001", "ctl001"
    path, facts = _cached_facts(local_cluster, reinstalled)
    assert _plain(facts["ansible_distribution_release"]) == "bookworm"
    facts["ansible_distribution_release"] = "jammy"
    _write_cached_facts(path, facts)
    new_id = uuid.uuid4().hex
    local_cluster.exec(reinstalled, f"echo {new_id} > /etc/machine-id").check_returncode()
    _, other_before = _cached_facts(local_cluster, other)

    result = local_cluster.up("--output", "json")
    save_artifact("e2e-reinstalled-up.jsonl", result.stdout + result.stderr)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    _, facts = _cached_facts(local_cluster, reinstalled)
    assert _plain(facts["clusterctl_machine_id"]) == new_id
    assert _plain(facts["ansible_distribution_release"]) == "bookworm"
    _, other_after = _cached_facts(local_cluster, other)
    assert other_after["ansible_date_time"] == other_before["ansible_date_time"], "an unchanged node was gathered"
    # Nothing on the machine differs from what the roles want: gathering again changes nothing.
    summary = next(e for e in json_events(result.stdout) if e["kind"] == "summary")
    assert summary["data"]["changed_tasks"] == 0, summary


def _nccl_builds(cluster: LocalCluster, hosts: list[str]) -> dict[str, str]:
    """Per node, the libnccl2 build dpkg has and its selection (``hold`` when held)."""
    query = "dpkg-query -W -f '${Version} ${Status}' libnccl2 | awk '{print $1, $2}'"
    return {host: cluster.exec(host, query).stdout.strip() for host in hosts}


@pytest.mark.order(96)
def test_a_version_bump_rolls_through_the_nodes_and_waits_for_the_running_job(
    local_cluster: LocalCluster, tmp_path: Path
) -> None:
    """A new NCCL pin, 2.26.2 to 2.27.3 (both in the stand-in CUDA mirror): the controller and login
    node first, then the GPU nodes one at a time (the default batch: 10 % of 4, at least one), as
    `diff` listed them.

    A job runs on gpu001 when the roll starts: its batch is drained and waits for it; the job
    completes (never killed), every node is resumed after its health check and has the new NCCL
    build installed and held, and the next `up` has nothing to do."""
    gpu_nodes = [n.hostname for n in local_cluster.plan.nodes if n.gpus]
    assert _nccl_builds(local_cluster, gpu_nodes) == dict.fromkeys(gpu_nodes, "2.26.2-1+cuda12.8 hold")
    bumped = tmp_path / local_cluster.spec_path.name
    text = local_cluster.spec_path.read_text()
    assert 'nccl: "2.26.2"' in text
    bumped.write_text(text.replace('nccl: "2.26.2"', 'nccl: "2.27.3"'))
    options = ("--out", str(local_cluster.build_dir), "--yes", "--output", "json")
    options += ("--lock", str(local_cluster.lock_path)) if local_cluster.lock_path else ()
    # diff lists the batches the following `up` goes through.
    planned = local_cluster.cli("diff", str(bumped), "--out", str(local_cluster.build_dir), "--output", "json")
    assert planned.returncode == 2, planned.stdout[-3000:] + planned.stderr[-3000:]
    listed = [c["detail"]["nodes"] for c in json.loads(planned.stdout)["changes"] if c["kind"] == "roll-batch"]
    assert listed == [["gpu001"], ["gpu002"], ["gpu003"], ["gpu004"]], planned.stdout
    # The job lasts until the roll drains its node, then a little longer: the batch must wait for it,
    # however long the steps before it take (at most 5 minutes, should scontrol not answer in the job).
    drained = "scontrol -o show node gpu001 | grep -q DRAIN"
    job = _submit(
        local_cluster, f"-w gpu001 --wrap 'for i in $(seq 150); do {drained} && break; sleep 2; done; sleep 10'"
    )
    assert _job_state(local_cluster, job, until="RUNNING") == "RUNNING"

    rolled = local_cluster.cli("up", str(bumped), *options)
    save_artifact("e2e-rolling-upgrade-up.jsonl", rolled.stdout + rolled.stderr)
    assert rolled.returncode == 0, rolled.stdout[-3000:] + rolled.stderr[-3000:]
    events = json_events(rolled.stdout)
    said = [str(e["message"]) for e in events if e["kind"] == "message"]
    assert [m for m in said if m.startswith("upgrade batch")] == [
        f"upgrade batch {i}: {', '.join(batch)} (drained: clusterctl:upgrade)" for i, batch in enumerate(listed, 1)
    ], said
    assert any(f"{job} (gpu001)" in m for m in said), "the batch did not wait for the job on gpu001"
    finished = local_cluster.exec("login001", f"sacct -X -n -P -j {job} -o State").stdout.strip()
    assert finished == "COMPLETED", finished
    resumed = {e["host"] for e in events if e["kind"] == "host" and "upgraded and resumed" in str(e["message"])}
    assert resumed == {"gpu001", "gpu002", "gpu003", "gpu004"}
    assert set(local_cluster.exec("login001", "sinfo -h -p gpu -N -o %t").stdout.split()) == {"idle"}
    assert _nccl_builds(local_cluster, gpu_nodes) == dict.fromkeys(gpu_nodes, "2.27.3-1+cuda12.8 hold")

    again = local_cluster.cli("up", str(bumped), *options)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    after = json_events(again.stdout)
    summary = next(e for e in after if e["kind"] == "summary")
    assert summary["data"]["changed_tasks"] == 0, summary
    assert not [e for e in after if e["kind"] == "message" and str(e["message"]).startswith("upgrade batch")]


@pytest.mark.order(98)
def test_down_refuses_while_a_job_runs(local_cluster: LocalCluster) -> None:
    job = _submit(local_cluster, "--wrap 'sleep 600'")
    try:
        assert _job_state(local_cluster, job, until="RUNNING") == "RUNNING"
        result = local_cluster.cli("down", str(local_cluster.spec_path), "--yes")
        assert result.returncode == 1, result.stdout + result.stderr
        said = " ".join(result.stderr.split())  # the terminal may wrap it
        assert f"1 job(s) running on cluster {local_cluster.plan.cluster.name}: {job} (gpu" in said
        assert "Nothing was destroyed" in said
        assert "down --force" in said
        label = f"label=clusterctl.cluster={local_cluster.plan.cluster.name}"
        running = subprocess.run(["docker", "ps", "--filter", label, "-q"], capture_output=True, text=True, check=True)
        assert len(running.stdout.split()) == len(local_cluster.plan.nodes)
    finally:
        local_cluster.exec("ctl001", f"scancel {job}")
        _job_state(local_cluster, job, until="")


def _job_state(cluster: LocalCluster, job: str, *, until: str, seconds: int = 60) -> str:
    """The job's state once it is ``until`` (empty: gone from squeue), or the last seen after ``seconds``."""
    state = "?"
    for _ in range(seconds):
        state = cluster.exec("login001", f"squeue -h -j {job} -o %T").stdout.strip()
        if state == until:
            break
        time.sleep(1)
    return state


@pytest.mark.order(99)
def test_down_leaves_nothing(local_cluster: LocalCluster) -> None:
    result = local_cluster.cli("down", str(local_cluster.spec_path), "--yes")
    assert result.returncode == 0, result.stderr
    label = f"label=clusterctl.cluster={local_cluster.plan.cluster.name}"
    for kind in (["ps", "-a"], ["network", "ls"], ["volume", "ls"]):
        listed = subprocess.run(
            ["docker", *kind, "--filter", label, "-q"], capture_output=True, text=True, check=True
        ).stdout
        assert listed.strip() == "", (kind, listed)
    for node in local_cluster.plan.nodes:
        assert slurm_cgroup_dirs(node.hostname) == [], node.hostname
    assert not (local_cluster.state_dir / local_cluster.plan.cluster.name).exists()
