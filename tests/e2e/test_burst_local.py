"""Cloud burst rehearsed locally: examples/local-burst.yaml's burst nodes exist only in Slurm until a
job needs them, are created and configured on demand, run the job, and are removed when idle."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator

import pytest

from clusterctl.pipeline import load_and_validate
from tests.conftest import REPO_ROOT
from tests.docker_helpers import require_docker
from tests.e2e.conftest import LocalCluster, run_cli, save_artifact

pytestmark = [pytest.mark.e2e, pytest.mark.docker]

SPEC = REPO_ROOT / "examples" / "local-burst.yaml"
BURST = ["gpu-b001", "gpu-b002"]


def _containers(cluster: LocalCluster, hosts: list[str]) -> set[str]:
    names = subprocess.run(
        ["docker", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True, check=True
    ).stdout.split()
    return {h for h in hosts if f"clusterctl-{cluster.plan.cluster.name}-{h}" in names}


def _states(cluster: LocalCluster) -> dict[str, str]:
    out = cluster.exec("ctl001", "sinfo -h -N -o '%N %t'").stdout
    return dict(line.split() for line in out.splitlines() if len(line.split()) == 2)


def _wait(predicate: object, timeout: float, what: str, step: float = 5) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


@pytest.fixture(scope="module")
def burst_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """examples/local-burst.yaml brought up for this module."""
    require_docker()
    root = tmp_path_factory.mktemp("burst-cluster")
    cluster = LocalCluster(
        spec_path=SPEC, build_dir=root / "build", state_dir=root / "state", plan=load_and_validate(SPEC).plan
    )
    run_cli("down", str(SPEC), "--yes", "--force", "--state-dir", str(cluster.state_dir), timeout=600)
    result = cluster.up()
    save_artifact("e2e-burst-up.log", result.stdout + result.stderr)
    if result.returncode != 0:
        pytest.fail(f"up of the burst example failed:\n{(result.stdout + result.stderr)[-5000:]}")
    yield cluster
    save_artifact("e2e-burst.log", cluster.exec("ctl001", "cat /var/log/clusterctl/burst.log").stdout)
    down = run_cli("down", str(SPEC), "--yes", "--force", "--state-dir", str(cluster.state_dir), timeout=600)
    assert down.returncode == 0, down.stderr
    assert not _containers(cluster, BURST)


@pytest.mark.order(110)
def test_burst_nodes_exist_only_in_slurm(burst_cluster: LocalCluster) -> None:
    assert not _containers(burst_cluster, BURST)
    states = _states(burst_cluster)
    for host in BURST:
        assert states.get(host, "").endswith("~"), states
    status = burst_cluster.cli("status", str(SPEC), "--output", "json")
    nodes = {n["hostname"]: n for n in __import__("json").loads(status.stdout)["nodes"]}
    assert {nodes[h]["power"] for h in BURST} == {"powered down"}


@pytest.mark.order(111)
def test_job_resumes_burst_nodes_then_they_are_released(burst_cluster: LocalCluster) -> None:
    submit = burst_cluster.exec(
        "login001",
        "cd /tmp && sbatch --parsable -p burst -N2 --gres=gpu:h100:8 --output=burst-%j.out "
        "--wrap 'srun bash -c \"echo \\$(hostname) \\$CUDA_VISIBLE_DEVICES\"'",
    )
    assert submit.returncode == 0, submit.stderr
    job = submit.stdout.strip()
    started = time.monotonic()

    def finished() -> bool:
        state = burst_cluster.exec("ctl001", f"scontrol show job {job} | grep -o 'JobState=[A-Z]*'").stdout
        return "COMPLETED" in state or "FAILED" in state or "CANCELLED" in state

    _wait(finished, 900, f"burst job {job} to finish")
    run_seconds = time.monotonic() - started
    # No shared file system here: the batch script's output is in /tmp on the job's batch host.
    batch_host = burst_cluster.exec("ctl001", f"scontrol show job {job} | grep -o 'BatchHost=[^ ]*'").stdout
    batch_host = batch_host.strip().removeprefix("BatchHost=")
    assert batch_host in BURST, batch_host
    out = burst_cluster.exec(batch_host, f"cat /tmp/burst-{job}.out").stdout
    lines = sorted(line for line in out.splitlines() if line.startswith("gpu-b"))
    assert [line.split()[0] for line in lines] == BURST, out
    assert all(line.split()[1] == "0,1,2,3,4,5,6,7" for line in lines), out
    state = burst_cluster.exec("ctl001", f"scontrol show job {job} | grep -o 'JobState=[A-Z]*'").stdout
    assert "COMPLETED" in state, state
    assert _containers(burst_cluster, BURST) == set(BURST)
    # Made on demand, each configured itself from its bundle: its agent's journal names the digest.
    # The agent says so once the apply's last tasks (slurmd starts in the last play) and its digest of
    # the node are done: on a busy machine, after a short job has ended.
    applied = re.compile(r"applied bundle [0-9a-f]{64} \(generation \d+\)")

    def journal(host: str) -> str:
        return burst_cluster.exec(host, "journalctl -u clusterctl-agent --no-pager -o cat").stdout

    for host in BURST:
        _wait(lambda host=host: applied.search(journal(host)), 600, f"{host}'s agent to apply its bundle")

    released = time.monotonic()
    _wait(lambda: not _containers(burst_cluster, BURST), 600, "idle burst nodes to be removed")
    _wait(
        lambda: all(_states(burst_cluster).get(h, "").endswith("~") for h in BURST),
        300,
        "burst nodes to show as powered down",
    )
    save_artifact(
        "e2e-burst-figures.txt",
        f"submit-to-completion {run_seconds:.0f} s\ncompletion-to-removal {time.monotonic() - released:.0f} s\n",
    )


@pytest.mark.order(112)
def test_failed_resume_leaves_node_down_and_next_resume_succeeds(burst_cluster: LocalCluster) -> None:
    host = "gpu-b001"
    squatter = f"clusterctl-{burst_cluster.plan.cluster.name}-{host}"
    # A container of someone else holds the node's name: the provider must refuse to touch it.
    subprocess.run(
        ["docker", "run", "-d", "--name", squatter, "local/debian:bookworm", "sleep", "infinity"],
        check=True,
        capture_output=True,
    )
    try:
        submit = burst_cluster.exec("login001", f"sbatch --parsable -p burst -w {host} --wrap hostname")
        assert submit.returncode == 0, submit.stderr
        job = submit.stdout.strip()

        def down_with_reason() -> bool:
            out = burst_cluster.exec("ctl001", f"sinfo -h -n {host} -o '%t|%E'").stdout.strip()
            return out.startswith("down") and "clusterctl-burst:" in out

        _wait(down_with_reason, 300, f"{host} to be DOWN with a clusterctl-burst reason")
        reason = burst_cluster.exec("ctl001", f"sinfo -h -n {host} -o '%E'").stdout
        assert "does not belong to cluster" in reason, reason
        burst_cluster.exec("ctl001", f"scancel {job}")
    finally:
        subprocess.run(["docker", "rm", "-f", squatter], check=False, capture_output=True)

    burst_cluster.exec("ctl001", f"scontrol update nodename={host} state=resume")
    retry = burst_cluster.exec("login001", f"sbatch --parsable -p burst -w {host} --wrap hostname")
    job = retry.stdout.strip()

    def completed() -> bool:
        return "COMPLETED" in burst_cluster.exec("ctl001", f"scontrol show job {job}").stdout

    _wait(completed, 900, f"job {job} on {host} after the provider was repaired")
