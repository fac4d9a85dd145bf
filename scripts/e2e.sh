#!/usr/bin/env bash
# The end-to-end suite in two pytest processes at once: the burst example's module beside the
# local cluster's modules. Much of each is waiting on Slurm and on jobs, so together they take
# little more than the longer one. The two clusters share nothing: their own networks, container
# names and node names (examples/local-burst.yaml says why the names must differ).
# The burst module's output is kept in test-artifacts/ and printed after the other's. The bare-metal
# lab's module is not here: `make lab-test` runs it alone (README, "Bare metal").
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
pytest=(.venv/bin/python -m pytest -q -p no:cacheprovider)
mkdir -p test-artifacts
log=test-artifacts/e2e-burst-pytest.log
"${pytest[@]}" --durations=5 tests/e2e/test_burst_local.py >"$log" 2>&1 &
burst=$!
"${pytest[@]}" --durations=15 tests/e2e --ignore=tests/e2e/test_burst_local.py \
  --ignore=tests/e2e/test_baremetal_lab.py
others=$?
wait "$burst"
burst_rc=$?
echo "--- tests/e2e/test_burst_local.py, run beside the others ($log) ---"
cat "$log"
if (( others != 0 || burst_rc != 0 )); then
  echo "e2e: failed (local cluster modules: exit $others; burst module: exit $burst_rc)" >&2
  exit 1
fi
