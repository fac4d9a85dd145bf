#!/usr/bin/env bash
# Install the Ansible collections the roles and Molecule need into .ansible-collections/.
# Why: Ansible Galaxy is unreachable here; the `ansible` package on PyPI carries
# the same collections, so we take just the ones we use out of its wheel.
set -euo pipefail
ANSIBLE_VERSION="${CLUSTERCTL_ANSIBLE_VERSION:-12.3.0}"
DEST="${1:-$(cd "$(dirname "$0")/.." && pwd)/.ansible-collections}"
COLLECTIONS=(community/docker community/general ansible/posix community/library_inventory_filtering_v1 community/mysql)

if [ -f "$DEST/.version" ] && [ "$(cat "$DEST/.version")" = "$ANSIBLE_VERSION" ]; then
  exit 0
fi
PY="${PYTHON:-python3}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PY" -m pip download -q --no-deps --dest "$tmp" "ansible==$ANSIBLE_VERSION" 2>&1 | grep -v '^WARNING: Location' || true
wheel=$(ls "$tmp"/ansible-*.whl)
rm -rf "$DEST"
mkdir -p "$DEST"
patterns=()
for c in "${COLLECTIONS[@]}"; do patterns+=("ansible_collections/$c/*"); done
"$PY" - "$wheel" "$DEST" "${patterns[@]}" <<'PY'
import fnmatch, sys, zipfile
wheel, dest, *patterns = sys.argv[1:]
with zipfile.ZipFile(wheel) as zf:
    names = [n for n in zf.namelist() if any(fnmatch.fnmatch(n, p) for p in patterns)]
    zf.extractall(dest, names)
print(f"ansible-collections: {len(names)} files from {wheel.rsplit('/', 1)[-1]}", file=sys.stderr)
PY
echo "$ANSIBLE_VERSION" > "$DEST/.version"
