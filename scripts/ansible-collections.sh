#!/usr/bin/env bash
# Install the Ansible collections the roles and Molecule need into .ansible-collections/.
# Why: Ansible Galaxy is unreachable here; the `ansible` package on PyPI carries the same
# collections. clusterctl.run.collections pins the release and its wheel's sha256 and extracts
# just the ones the roles use (an installed clusterctl does the same into the user's cache on
# its first run).
set -euo pipefail
DEST="${1:-$(cd "$(dirname "$0")/.." && pwd)/.ansible-collections}"
exec "${PYTHON:-python3}" -m clusterctl.run.collections "$DEST"
