"""Time a burst on the local provider: sbatch to job start on burst nodes, and idle to removal.

Brings examples/local-burst.yaml up (unless --keep-up finds it up), submits a 2-node job to the
burst partition, reads Slurm's SubmitTime/StartTime, then waits until the idle burst containers
are removed. Run: python benchmarks/burst_local.py [--runs N]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO / "examples" / "local-burst.yaml"
CTL = "clusterctl-burst-ctl001"
LOGIN = "clusterctl-burst-login001"


def sh(container: str, command: str) -> str:
    """Run a command in a node container."""
    return subprocess.run(
        ["docker", "exec", container, "bash", "-lc", command], capture_output=True, text=True, check=False
    ).stdout


def burst_containers() -> int:
    """How many burst node containers exist."""
    names = subprocess.run(
        ["docker", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True, check=True
    ).stdout.split()
    return sum(1 for n in names if n.startswith("clusterctl-burst-gpu-b"))


def job_times(job: str) -> tuple[datetime, datetime, datetime]:
    """SubmitTime, StartTime, EndTime of a job."""
    out = sh(CTL, f"scontrol show job {job}")
    get = {
        k: datetime.fromisoformat(v)
        for k, v in re.findall(r"(SubmitTime|StartTime|EndTime)=(\S+)", out)
        if v not in ("Unknown", "None")
    }
    return get["SubmitTime"], get["StartTime"], get["EndTime"]


def one_burst() -> tuple[float, float, float]:
    """(submit to start s, start to end s, end to removal s) of one 2-node burst job."""
    job = sh(LOGIN, "sbatch --parsable -p burst -N2 --gres=gpu:h100:8 --wrap 'srun hostname'").strip()
    while "JobState=COMPLETED" not in sh(CTL, f"scontrol show job {job}"):
        time.sleep(2)
    submit, start, end = job_times(job)
    while burst_containers():
        time.sleep(2)
    removed = datetime.now()
    return (start - submit).total_seconds(), (end - start).total_seconds(), (removed - end).total_seconds()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--keep-up", action="store_true", help="leave the cluster up afterwards")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        state = ["--state-dir", str(Path(tmp) / "state")]
        if subprocess.run(["docker", "inspect", CTL], capture_output=True, check=False).returncode != 0:
            up = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "clusterctl",
                    "up",
                    str(SPEC),
                    "--yes",
                    *state,
                    "--out",
                    str(Path(tmp) / "build"),
                ],
                cwd=REPO,
                check=False,
            )
            if up.returncode != 0:
                raise SystemExit("up of examples/local-burst.yaml failed")
        print(f"{'run':>3} {'sbatch->start s':>16} {'job s':>6} {'end->removed s':>15}")
        for run in range(1, args.runs + 1):
            to_start, running, to_removed = one_burst()
            print(f"{run:>3} {to_start:>16.0f} {running:>6.0f} {to_removed:>15.0f}")
        if not args.keep_up:
            subprocess.run(
                [sys.executable, "-m", "clusterctl", "down", str(SPEC), "--yes", *state],
                cwd=REPO,
                check=False,
                capture_output=True,
            )


if __name__ == "__main__":
    main()
