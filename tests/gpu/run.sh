#!/usr/bin/env bash
# Run clusterctl's single-node checks for real on a GPU machine and keep the JSON report.
#
# For a machine lent to a task (the device `run` tool, repository root as working directory):
#   bash tests/gpu/run.sh [--gpus N] [--driver-pin X] [--nccl-tests DIR] [--fabric KIND] ...
# The report goes to $OUT/single_node_checks.json ($OUT is the folder that comes back; /tmp
# without it). Needs only python3 and the checkout: each check skips, with its reason, when its
# tool (nvidia-smi, dcgmi, all_reduce_perf, torch) is missing. The NCCL transport check runs
# all_reduce_perf (or a torch.distributed all_reduce) with NCCL_DEBUG=INFO and expects
# "intra-node only" on one machine; it runs again inside a stock image (--container-image, default
# NVIDIA's PyTorch) started through pyxis (srun --container-image) or, without Slurm, enroot, so the
# node's enroot mounts and hook are what is tested. Exit status: the script's (0 nothing failed, 1 otherwise).
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-/tmp}"
mkdir -p "$out"
command -v nvidia-smi >/dev/null && nvidia-smi -L || echo "nvidia-smi not found"
exec python3 tests/gpu/single_node_checks.py --out "$out/single_node_checks.json" "$@"
