#!/usr/bin/env bash
# The end-to-end suite. The burst example's module runs in a second pytest process beside the local
# cluster's modules: much of each is waiting on Slurm and on jobs, so together they take little more
# than the longer one. The two clusters share nothing: their own networks, container names and node
# names (examples/local-burst.yaml says why the names must differ). The bare-metal lab's module runs
# after them, alone: its machines are virtual machines that, without a KVM that boots Linux, qemu
# emulates (TCG), which takes both cores for the better part of an hour.
# The burst and lab modules' output is kept in test-artifacts/ and printed after the others'.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
pytest=(.venv/bin/python -m pytest -q -p no:cacheprovider)
mkdir -p test-artifacts
log=test-artifacts/e2e-burst-pytest.log
lab_log=test-artifacts/e2e-lab-pytest.log
"${pytest[@]}" --durations=5 tests/e2e/test_burst_local.py >"$log" 2>&1 &
burst=$!
"${pytest[@]}" --durations=15 tests/e2e --ignore=tests/e2e/test_burst_local.py --ignore=tests/e2e/test_baremetal_lab.py
others=$?
wait "$burst"
burst_rc=$?
echo "--- tests/e2e/test_burst_local.py, run beside the others ($log) ---"
cat "$log"
started=$(date +%s)
"${pytest[@]}" --durations=10 tests/e2e/test_baremetal_lab.py >"$lab_log" 2>&1
lab_rc=$?
echo "--- tests/e2e/test_baremetal_lab.py, after them, $(( $(date +%s) - started )) s ($lab_log) ---"
cat "$lab_log"
if (( others != 0 || burst_rc != 0 || lab_rc != 0 )); then
  echo "e2e: failed (local cluster modules: exit $others; burst module: exit $burst_rc; bare-metal lab: exit $lab_rc)" >&2
  exit 1
fi
