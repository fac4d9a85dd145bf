#!/usr/bin/env bash
# Runs `make PHASE` for each phase in order, stopping at the first that fails, and prints how long
# each took (also written to test-artifacts/phases.txt), so a slow or failing phase is visible at
# the end of a long CI log. Phases joined by `+` run at the same time: the first one's output is
# shown as it comes, the others' is kept in test-artifacts/phase-<name>.log and printed after it.
# Usage: run-phases.sh setup lint+unit molecule+integration+e2e
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
mkdir -p test-artifacts
summary=test-artifacts/phases.txt
: >"$summary"
failed=""
# The machine's CPU use every 30 s (test-artifacts/vmstat.txt): where the phases leave cores idle.
if command -v vmstat >/dev/null 2>&1; then
  vmstat -n -t 30 >test-artifacts/vmstat.txt 2>&1 &
  sampler=$!
  trap 'kill "$sampler" 2>/dev/null' EXIT
fi

record() { # phase status started
  printf '%-12s %-7s %5d s\n' "$1" "$2" $(( $(date +%s) - $3 )) >>"$summary"
}

run_one() { # phase started: runs it, records it, exits with its status
  local status=passed rc=0
  make --no-print-directory "$1" || rc=$?
  (( rc == 0 )) || status=FAILED
  record "$1" "$status" "$2"
  return "$rc"
}

for group in "$@"; do
  IFS=+ read -ra phases <<<"$group"
  start=$(date +%s)
  pids=()
  for phase in "${phases[@]:1}"; do
    run_one "$phase" "$start" >"test-artifacts/phase-$phase.log" 2>&1 &
    pids+=("$!")
  done
  run_one "${phases[0]}" "$start" || failed+=" ${phases[0]}"
  for i in "${!pids[@]}"; do
    phase=${phases[$((i + 1))]}
    wait "${pids[$i]}" || failed+=" $phase"
    echo "--- phase $phase, run beside ${phases[0]} (test-artifacts/phase-$phase.log) ---"
    cat "test-artifacts/phase-$phase.log"
  done
  [[ -n $failed ]] && break
done
echo "--- phases (test-artifacts/phases.txt) ---"
cat "$summary"
if [[ -n $failed ]]; then
  echo "make test: phase(s)$failed failed; later phases did not run" >&2
  exit 1
fi
