#!/usr/bin/env bash
# The checks that need a real GPU node, run on one (a lent GPU machine, or any node of a cluster):
# the single-node judgements of `clusterctl verify` on this machine's own outputs, through
# `clusterctl check-output` (the same parsers and thresholds verify uses), and the NCCL transport
# parser on a real NCCL_DEBUG=INFO log when nccl-tests are installed, and again inside a stock image
# started through pyxis (CLUSTERCTL_CONTAINER_IMAGE, default NVIDIA's PyTorch) where srun has pyxis.
#
#   scripts/gpu-checks.sh [OUT_DIR]        # outputs and verdicts under OUT_DIR [gpu-checks/]
#
# Each check prints its verdict; a tool that is missing (dcgmi, ibstat, all_reduce_perf) is
# reported as skipped with the reason, never failed. Exits 1 when a judgement failed, 2 when an
# output could not be parsed, 0 otherwise. Needs clusterctl (the repository's .venv or on PATH).
set -uo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${1:-gpu-checks}"
mkdir -p "$OUT"
if [ -x "$ROOT/.venv/bin/clusterctl" ]; then
  CLUSTERCTL="$ROOT/.venv/bin/clusterctl"
else
  CLUSTERCTL="$(command -v clusterctl || true)"
fi
[ -n "$CLUSTERCTL" ] || { echo "gpu-checks: clusterctl not found (make venv)" >&2; exit 2; }
command -v nvidia-smi >/dev/null || { echo "gpu-checks: nvidia-smi not found: not a GPU machine" >&2; exit 2; }

worst=0
note() { printf '%-18s %s\n' "$1" "$2"; }
judge() {
  local kind="$1" file="$2" rc label="${LABEL:-$1}"
  shift 2
  "$CLUSTERCTL" check-output "$kind" "$file" "$@" >"$OUT/$label.verdict.txt" 2>&1
  rc=$?
  note "$label" "$(head -n 1 "$OUT/$label.verdict.txt") (exit $rc; $OUT/$label.verdict.txt)"
  [ "$rc" -gt "$worst" ] && worst=$rc
}

nvidia-smi --query-gpu=name,driver_version,pci.bus_id --format=csv,noheader >"$OUT/gpus.csv"
note gpus "$(wc -l <"$OUT/gpus.csv") GPU(s): $(cut -d, -f1 "$OUT/gpus.csv" | sort -u | paste -sd';')"

nvidia-smi topo -m >"$OUT/nvidia-smi-topo.txt" 2>&1
judge nvidia-smi-topo "$OUT/nvidia-smi-topo.txt"

if command -v ibstat >/dev/null; then
  ibstat >"$OUT/ibstat.txt" 2>&1
  judge ibstat "$OUT/ibstat.txt"
else
  note ibstat "skipped: ibstat not installed (infiniband-diags)"
fi

if command -v dcgmi >/dev/null; then
  dcgmi diag -r 1 >"$OUT/dcgmi-diag.txt" 2>&1
  judge dcgmi-diag "$OUT/dcgmi-diag.txt" --level 1
else
  note dcgmi-diag "skipped: dcgmi not installed (datacenter-gpu-manager)"
fi

# One node, every GPU: what NCCL chose is read from its own log. On one node NCCL talks over
# NVLink/P2P, so the transport judgement says so (skipped) rather than passing a socket fallback.
PERF="${NCCL_TESTS_BIN:-/opt/nccl-tests/bin}/all_reduce_perf"
if [ -x "$PERF" ]; then
  gpus="$(wc -l <"$OUT/gpus.csv")"
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET "$PERF" -b 8 -e 1G -f 2 -g "$gpus" >"$OUT/nccl-tests.txt" 2>&1
  judge nccl-tests "$OUT/nccl-tests.txt" --nodes 1
  judge nccl-debug "$OUT/nccl-tests.txt" ${CLUSTERCTL_FABRIC:+--fabric "$CLUSTERCTL_FABRIC"}
else
  note nccl-tests "skipped: $PERF not found (roles/nccl builds it; NCCL_TESTS_BIN names another)"
fi

# The same inside a stock image started through pyxis, the way training jobs run: the node's enroot
# mounts and hook (roles/container_runtime) must bring the fabric's plugin, /etc/nccl.conf and the
# vendor's NCCL environment into the container. A small torch.distributed all_reduce with the image's
# own NCCL, one rank per GPU, judged like the host's log.
IMAGE="${CLUSTERCTL_CONTAINER_IMAGE:-nvcr.io#nvidia/pytorch:24.09-py3}"
if command -v srun >/dev/null && srun --help 2>&1 | grep -q -- '--container-image'; then
  gpus="$(wc -l <"$OUT/gpus.csv")"
  job="$(python3 -c "import sys; sys.path.insert(0, '$ROOT/cli'); from clusterctl.verify.transport import TORCH_ALL_REDUCE; print(TORCH_ALL_REDUCE)")"
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 \
    srun --nodes=1 --ntasks="$gpus" --gpus-per-node="$gpus" --label --export=ALL --container-image="$IMAGE" \
    python3 -c "$job" >"$OUT/nccl-debug-container.txt" 2>&1
  LABEL=nccl-debug-container judge nccl-debug "$OUT/nccl-debug-container.txt" ${CLUSTERCTL_FABRIC:+--fabric "$CLUSTERCTL_FABRIC"}
else
  note nccl-debug-container "skipped: no srun with pyxis (--container-image) here"
fi

exit "$worst"
