#!/usr/bin/env bash
# Runs `make PHASE` for each phase in order, stopping at the first that fails, and prints how long
# each took (also written to test-artifacts/phases.txt), so a slow or failing phase is visible at
# the end of a long CI log. Usage: run-phases.sh setup lint unit ...
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p test-artifacts
summary=test-artifacts/phases.txt
: >"$summary"
failed=""
for phase in "$@"; do
  start=$(date +%s)
  if make --no-print-directory "$phase"; then
    status=passed
  else
    status=FAILED
    failed=$phase
  fi
  printf '%-12s %-7s %5d s\n' "$phase" "$status" $(( $(date +%s) - start )) >>"$summary"
  [[ -n $failed ]] && break
done
echo "--- phases (test-artifacts/phases.txt) ---"
cat "$summary"
if [[ -n $failed ]]; then
  echo "make test: phase '$failed' failed; later phases did not run" >&2
  exit 1
fi
