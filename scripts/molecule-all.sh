#!/usr/bin/env bash
# Run the Molecule scenarios of every role (roles/*/molecule/*), the slurm `cluster` scenario last,
# then the secrets test against that scenario's artifacts. Prints each scenario's result and
# duration; exits 1 when anything failed (after running the rest, unless --fail-fast).
#
#   scripts/molecule-all.sh                      # everything
#   scripts/molecule-all.sh common slurm/cluster # some roles or role/scenario pairs
#   scripts/molecule-all.sh --fail-fast
#
# Logs: test-artifacts/molecule-logs/<role>-<scenario>.log. Needs Docker, the local image
# (scripts/docker-bootstrap.sh) and the collections (scripts/ansible-collections.sh).
set -uo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
ARTIFACTS="$ROOT/test-artifacts"
LOGS="$ARTIFACTS/molecule-logs"
CLUSTER_ARTIFACTS="$ARTIFACTS/molecule-cluster"
export ANSIBLE_COLLECTIONS_PATH="${ANSIBLE_COLLECTIONS_PATH:-$ROOT/.ansible-collections}"
export NO_COLOR=1 ANSIBLE_NOCOLOR=1 ANSIBLE_FORCE_COLOR=0
[ -d "$ROOT/.venv/bin" ] && export PATH="$ROOT/.venv/bin:$PATH"

fail_fast=false
selected=()
for arg in "$@"; do
  case "$arg" in
    --fail-fast) fail_fast=true ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) selected+=("$arg") ;;
  esac
done

die() { printf 'molecule-all: %s\n' "$*" >&2; exit 2; }
command -v molecule >/dev/null || die "molecule not found (activate .venv, or pip install -e '.[dev]')"
docker info >/dev/null 2>&1 || die "Docker is not running (scripts/docker-bootstrap.sh starts it)"
docker image inspect local/debian:bookworm >/dev/null 2>&1 || die "image local/debian:bookworm missing: run scripts/docker-bootstrap.sh"
[ -d "$ANSIBLE_COLLECTIONS_PATH/ansible_collections/community/docker" ] || die "collections missing: run scripts/ansible-collections.sh"

# role/scenario pairs, the cluster scenario last (it is the longest and needs the others' roles).
scenarios=()
for file in roles/*/molecule/*/molecule.yml; do
  role="$(echo "$file" | cut -d/ -f2)"
  scenario="$(echo "$file" | cut -d/ -f4)"
  pair="$role/$scenario"
  if [ "${#selected[@]}" -gt 0 ]; then
    keep=false
    for want in "${selected[@]}"; do
      [ "$want" = "$role" ] || [ "$want" = "$pair" ] && keep=true
    done
    $keep || continue
  fi
  scenarios+=("$pair")
done
[ "${#scenarios[@]}" -gt 0 ] || die "no scenario matches: ${selected[*]}"
ordered=()
for pair in "${scenarios[@]}"; do [ "$pair" != slurm/cluster ] && ordered+=("$pair"); done
for pair in "${scenarios[@]}"; do [ "$pair" = slurm/cluster ] && ordered+=("$pair"); done

mkdir -p "$LOGS"
results=()
failed=()
total_start=$SECONDS
for pair in "${ordered[@]}"; do
  role="${pair%%/*}"
  scenario="${pair#*/}"
  log="$LOGS/$role-$scenario.log"
  # The cluster scenario starts from fresh secrets and logs: the secrets test reads them.
  [ "$pair" = slurm/cluster ] && rm -rf "$CLUSTER_ARTIFACTS"
  printf '==> %-28s ' "$pair"
  start=$SECONDS
  (cd "roles/$role" && molecule test --scenario-name "$scenario") >"$log" 2>&1
  rc=$?
  if [ "$pair" = slurm/cluster ] && [ -d "$CLUSTER_ARTIFACTS" ]; then
    cp "$log" "$CLUSTER_ARTIFACTS/process-output.log"
    if [ "$rc" -eq 0 ]; then
      CLUSTERCTL_REQUIRE_CLUSTER_ARTIFACTS=1 python -m pytest -q -p no:cacheprovider \
        tests/integration/test_secrets_not_leaked.py >>"$log" 2>&1 || rc=3
    fi
  fi
  took=$((SECONDS - start))
  duration="$(printf '%d:%02d' $((took / 60)) $((took % 60)))"
  if [ "$rc" -eq 0 ]; then
    status=passed
  else
    status="FAILED (rc=$rc)"
    failed+=("$pair")
  fi
  printf '%-14s %s\n' "$status" "$duration"
  results+=("$(printf '%-28s %-14s %s' "$pair" "$status" "$duration")")
  if [ "$rc" -ne 0 ]; then
    printf '    last lines of %s:\n' "$log"
    grep -E 'fatal:|FAILED!|ERROR|failed=[1-9]|passed|failed' "$log" | tail -n 15 | sed 's/^/    | /'
    $fail_fast && break
  fi
done

took=$((SECONDS - total_start))
printf '\n%-28s %-14s %s\n' scenario result duration
printf '%s\n' "${results[@]}"
printf '%-28s %-14s %d:%02d\n' total "" $((took / 60)) $((took % 60))
if [ "${#failed[@]}" -gt 0 ]; then
  printf '\nmolecule-all: FAILED: %s (logs in %s)\n' "${failed[*]}" "$LOGS" >&2
  exit 1
fi
printf '\nmolecule-all: all %d scenario(s) passed\n' "${#ordered[@]}"
