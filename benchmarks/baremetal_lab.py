"""Power-on to node in Slurm on the bare-metal lab: per machine and for the whole lab.

Removes the lab of SPEC (default examples/baremetal-lab.yaml), then ``python -m lab up SPEC`` from
nothing but the baked image (reused when built already), timed; then reads, for each machine:

* when the BMC powered it on and when it answered with its pinned host key (the lab's stack
  state: ``ready_after_s`` is the create's wait from power-on, every machine powered on at once);
* when its slurmd registered (Slurm's ``SlurmdStartTime``), against the start of ``up``'s
  provision phase (the first power-on).

Run on an otherwise idle machine: python benchmarks/baremetal_lab.py [--spec SPEC] [--keep]
(--keep leaves the lab up). Figures go to stdout and test-artifacts/benchmark/baremetal-lab.json.
Whether the machines ran under KVM or TCG is printed: the figures differ by an order of magnitude.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from clusterctl.pipeline import load_and_validate
from clusterctl.run.executor import executor_for

REPO = Path(__file__).resolve().parents[1]

_PROVISION = re.compile(r"^(\d\d:\d\d:\d\d) \[provision\] started", re.MULTILINE)


def main() -> None:
    """Entry point (see the module docstring)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--spec", type=Path, default=REPO / "examples" / "baremetal-lab.yaml")
    parser.add_argument("--keep", action="store_true", help="leave the lab up")
    args = parser.parse_args()
    lab = [sys.executable, "-m", "lab"]
    subprocess.run([*lab, "down", str(args.spec)], cwd=REPO, check=False, capture_output=True)
    started = time.monotonic()
    up = subprocess.run([*lab, "up", str(args.spec)], cwd=REPO, capture_output=True, text=True, check=False)
    total = time.monotonic() - started
    output = up.stdout + up.stderr
    if up.returncode != 0:
        sys.exit(f"python -m lab up failed:\n{output[-4000:]}")
    plan = load_and_validate(args.spec).plan
    state = args.spec.parent / ".clusterctl" / plan.cluster.name
    stack = json.loads((state / "lab-stack.json").read_text())["resources"]
    ready = {r["outputs"]["hostname"]: float(r["outputs"]["ready_after_s"]) for r in stack.values()}
    found = _PROVISION.search(output)
    assert found, "no provision phase in the output"
    today = datetime.date.today().isoformat()
    provision = datetime.datetime.fromisoformat(f"{today}T{found.group(1)}")
    rc, nodes, err = executor_for(plan, state).run(plan.slurm.controllers[0], "scontrol show node -o", 60)
    if rc != 0:
        sys.exit(f"scontrol show node failed: {err}")
    in_slurm = {}
    for line in nodes.splitlines():
        name = re.search(r"NodeName=(\S+)", line)
        start = re.search(r"SlurmdStartTime=(\S+)", line)
        if name and start and start.group(1) != "None":
            in_slurm[name.group(1)] = (datetime.datetime.fromisoformat(start.group(1)) - provision).total_seconds()
    accel = "KVM" if "under KVM" in output else "TCG"
    print(f"machines under {accel}; python -m lab up (image reused or built, lab, clusterctl up): {total:.0f} s")
    print(f"{'machine':10} {'power-on to SSH with its host key':>34} {'power-on to slurmd registered':>30}")
    for host in sorted(ready):
        slurm = f"{in_slurm[host]:.0f} s" if host in in_slurm else "-"
        print(f"{host:10} {ready[host]:>32.0f} s {slurm:>30}")
    out = REPO / "test-artifacts" / "benchmark"
    out.mkdir(parents=True, exist_ok=True)
    record = {"accel": accel, "total_s": round(total, 1), "ready_after_s": ready, "in_slurm_s": in_slurm}
    (out / "baremetal-lab.json").write_text(json.dumps(record, indent=2) + "\n")
    if not args.keep:
        subprocess.run([*lab, "down", str(args.spec)], cwd=REPO, check=False, capture_output=True)


if __name__ == "__main__":
    main()
