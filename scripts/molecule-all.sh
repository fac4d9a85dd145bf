#!/usr/bin/env bash
# Run the Molecule scenarios of every role (roles/*/molecule/*), MOLECULE_JOBS at a time (default 3,
# longest first), and after the slurm `cluster` scenario the secrets test against its artifacts.
# Prints each scenario's result and duration as it ends; exits 1 when anything failed (after running
# the rest, unless --fail-fast).
#
#   scripts/molecule-all.sh                      # everything
#   scripts/molecule-all.sh common slurm/cluster # some roles or role/scenario pairs
#   scripts/molecule-all.sh --fail-fast
#   MOLECULE_JOBS=1 scripts/molecule-all.sh      # one at a time
#
# Scenarios can run side by side: their containers, networks and slurmd cgroup trees (named after
# the node's hostname) are distinct. Three at a time on 2 cores overlaps the scenarios' apt downloads
# and waits with the others' Ansible work.
#
# Logs: test-artifacts/molecule-logs/<role>-<scenario>.log. Needs Docker, the local image
# (scripts/docker-bootstrap.sh) and the collections (scripts/ansible-collections.sh).
set -uo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
ARTIFACTS="$ROOT/test-artifacts"
LOGS="$ARTIFACTS/molecule-logs"
CLUSTER_ARTIFACTS="$ARTIFACTS/molecule-cluster"
# clusterctl's own collection (collections/: clusterctl.node, the roles' sync_files) first, then the
# collections scripts/ansible-collections.sh extracts (or the ones the caller names).
EXTRACTED_COLLECTIONS="${ANSIBLE_COLLECTIONS_PATH:-$ROOT/.ansible-collections}"
case ":$EXTRACTED_COLLECTIONS:" in
  *":$ROOT/collections:"*) export ANSIBLE_COLLECTIONS_PATH="$EXTRACTED_COLLECTIONS" ;;
  *) export ANSIBLE_COLLECTIONS_PATH="$ROOT/collections:$EXTRACTED_COLLECTIONS" ;;
esac
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
have_docker_collection=false
IFS=: read -ra collection_dirs <<<"$ANSIBLE_COLLECTIONS_PATH"
for dir in "${collection_dirs[@]}"; do
  [ -d "$dir/ansible_collections/community/docker" ] && have_docker_collection=true
done
$have_docker_collection || die "collections missing (community.docker in none of $ANSIBLE_COLLECTIONS_PATH): run scripts/ansible-collections.sh"

# role/scenario pairs, longest first so the pool ends together.
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
longest=(nvidia_driver/gpu-node slurm/cluster rdma/default container_runtime/default slurm/default)
ordered=()
for pair in "${longest[@]}"; do
  for have in "${scenarios[@]}"; do [ "$have" = "$pair" ] && ordered+=("$pair"); done
done
for pair in "${scenarios[@]}"; do
  [[ " ${longest[*]} " == *" $pair "* ]] || ordered+=("$pair")
done

jobs_max="${MOLECULE_JOBS:-3}"
mkdir -p "$LOGS"
RESULTS="$(mktemp -d)"
trap 'rm -rf "$RESULTS"' EXIT

run_one() {
  local pair="$1" role="${1%%/*}" scenario="${1#*/}"
  local log="$LOGS/$role-$scenario.log" start=$SECONDS rc
  # The cluster scenario starts from fresh secrets and logs: the secrets test reads them.
  [ "$pair" = slurm/cluster ] && rm -rf "$CLUSTER_ARTIFACTS"
  (cd "roles/$role" && molecule test --scenario-name "$scenario") >"$log" 2>&1
  rc=$?
  if [ "$pair" = slurm/cluster ] && [ -d "$CLUSTER_ARTIFACTS" ]; then
    cp "$log" "$CLUSTER_ARTIFACTS/process-output.log"
    if [ "$rc" -eq 0 ]; then
      CLUSTERCTL_REQUIRE_CLUSTER_ARTIFACTS=1 python -m pytest -q -p no:cacheprovider \
        tests/integration/test_secrets_not_leaked.py >>"$log" 2>&1 || rc=3
    fi
  fi
  local took=$((SECONDS - start)) status
  [ "$rc" -eq 0 ] && status=passed || status="FAILED (rc=$rc)"
  printf '%-28s %-14s %d:%02d\n' "$pair" "$status" $((took / 60)) $((took % 60)) >"$RESULTS/${role}-${scenario}"
  printf '==> %s\n' "$(cat "$RESULTS/${role}-${scenario}")"
  if [ "$rc" -ne 0 ]; then
    printf '    last lines of %s:\n' "$log"
    grep -E 'fatal:|FAILED!|ERROR|failed=[1-9]|passed|failed' "$log" | tail -n 15 | sed 's/^/    | /'
  fi
  return "$rc"
}

total_start=$SECONDS
stop=false
for pair in "${ordered[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do
    wait -n || { $fail_fast && stop=true; }
  done
  $stop && break
  run_one "$pair" &
done
while [ "$(jobs -rp | wc -l)" -gt 0 ]; do wait -n || true; done

took=$((SECONDS - total_start))
printf '\n%-28s %-14s %s\n' scenario result duration
failed=()
for pair in "${ordered[@]}"; do
  file="$RESULTS/${pair%%/*}-${pair#*/}"
  [ -f "$file" ] || continue
  cat "$file"
  grep -q FAILED "$file" && failed+=("$pair")
done
printf '%-28s %-14s %d:%02d\n' total "" $((took / 60)) $((took % 60))
ran="$(ls "$RESULTS" | wc -l)"
if [ "${#failed[@]}" -gt 0 ] || [ "$ran" -ne "${#ordered[@]}" ]; then
  printf '\nmolecule-all: FAILED: %s (%d of %d ran; logs in %s)\n' "${failed[*]}" "$ran" "${#ordered[@]}" "$LOGS" >&2
  exit 1
fi
printf '\nmolecule-all: all %d scenario(s) passed\n' "${#ordered[@]}"
