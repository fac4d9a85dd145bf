#!/usr/bin/env python3
"""Run clusterctl's single-node acceptance checks for real on this GPU machine; print a JSON report.

Not a pytest module and not run in CI: it needs real GPUs. Each check degrades to
``skipped`` with the reason when its tool is absent (nvidia-smi, dcgmi, all_reduce_perf),
so the script runs on any machine. It imports only clusterctl's pure parsers and judges
(no pydantic, no click), so a bare ``python3`` in a checkout is enough::

    python3 tests/gpu/single_node_checks.py                    # what is there
    python3 tests/gpu/single_node_checks.py --gpus 8 --driver-pin 570.133.20 \\
        --rails mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7 --nccl-tests /opt/nccl-tests/build

Checks: GPU inventory (``nvidia-smi --query-gpu``), GPU-NIC locality (``nvidia-smi topo -m``),
``dcgmi diag -r N`` when DCGM is installed, nccl-tests ``all_reduce_perf`` across the node's
GPUs when it is built, and the NCCL transport: the all_reduce_perf run (or, without nccl-tests,
a tiny torch.distributed NCCL all_reduce when PyTorch is installed) goes with
``NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET`` and its log goes through clusterctl's
transport parser. One node connects its GPUs through P2P/SHM, so the expected verdict is
"intra-node only" (skipped, with the network NCCL would use between nodes), never a failure;
a log without NCCL lines fails. The transport check runs again inside a stock image
(``--container-image``, NVIDIA's PyTorch by default) started through pyxis (``srun
--container-image``) or, without Slurm, through enroot: the node's enroot mounts and hook must
bring the fabric's plugin and the vendor's NCCL environment into it. Exit 0 when nothing failed,
1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# The checkout's package, importable without installing clusterctl.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "cli"))

from clusterctl.catalog.tools import NCCL_TESTS_BIN_DIR
from clusterctl.spec.findings import Finding
from clusterctl.verify.fabric import judge_topo
from clusterctl.verify.gpu import judge_dcgm, judge_gpu_inventory
from clusterctl.verify.nccl import judge_nccl
from clusterctl.verify.offline import model_from_name
from clusterctl.verify.parsers.dcgmi_diag import parse_dcgmi_diag
from clusterctl.verify.parsers.gpu_query import QUERY_COMMAND, parse_gpu_query
from clusterctl.verify.parsers.nccl_debug import parse_nccl_debug
from clusterctl.verify.parsers.nccl_tests import parse_nccl_tests
from clusterctl.verify.parsers.nvidia_smi_topo import nics_near_gpus, parse_nvidia_smi_topo
from clusterctl.verify.result import ParseError, Verdict, check_finding, figures_of, with_figures
from clusterctl.verify.thresholds import defaults_for
from clusterctl.verify.transport import (
    CONTAINER_CHECK,
    TORCH_ALL_REDUCE,
    TransportJudgement,
    in_container,
    judge_transport,
    pyxis_image,
)

# verify's default stock image (clusterctl.spec.models.DEFAULT_CONTAINER_CHECK_IMAGE; pydantic not needed here).
DEFAULT_CONTAINER_CHECK_IMAGE = "nvcr.io/nvidia/pytorch:24.09-py3"

# Where nccl-tests usually ends up when built by hand or by a role (roles/nccl: /opt/nccl-tests/bin).
NCCL_TESTS_DIRS = (
    NCCL_TESTS_BIN_DIR,
    "/opt/nccl-tests/build",
    "/usr/local/nccl-tests/build",
    "~/nccl-tests/build",
    "/usr/local/bin",
)
# NCCL prints the transport lines ("Using network", "NET/IB : Using", channels) at INFO under
# the INIT and NET subsystems.
NCCL_DEBUG_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}
# A tiny NCCL job for machines without nccl-tests: one process per GPU, one all_reduce.
TORCH_JOB = r"""
import os, sys
import torch, torch.distributed as dist, torch.multiprocessing as mp

def run(rank, world):
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:" + sys.argv[1], rank=rank, world_size=world)
    x = torch.ones(1 << 20, device="cuda")
    dist.all_reduce(x)
    torch.cuda.synchronize()
    assert int(x[0].item()) == world, x[0].item()
    dist.destroy_process_group()

if __name__ == "__main__":
    world = torch.cuda.device_count()
    if world < 1:
        sys.exit("no CUDA device")
    mp.spawn(run, args=(world,), nprocs=world)
"""


def sh(command: list[str], timeout: float, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Run a command (``env`` added to ours); a missing program is rc 127 and a timeout rc 124, like a shell."""
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env={**os.environ, **env} if env else None,
        )
    except FileNotFoundError:
        return 127, "", f"{command[0]}: not found"
    except subprocess.TimeoutExpired:
        return 124, "", f"timed out after {timeout:g} s"
    return done.returncode, done.stdout, done.stderr


def skipped(name: str, reason: str) -> Finding:
    return check_finding(name, socket.gethostname(), Verdict.SKIPPED, {}, f"skipped: {reason}")


def failed(name: str, message: str, hint: str = "") -> Finding:
    return check_finding(name, socket.gethostname(), Verdict.FAIL, {}, message, hint)


def unreadable(name: str, tool: str, exc: ParseError, rc: int, err: str) -> Finding:
    shown = exc.line.strip() or (err.strip().splitlines() or ["no output"])[-1]
    return failed(name, f"{tool} output could not be read (exit {rc}), line {exc.line_no}: {exc.message}: {shown}")


class Node:
    """What the checks learn about this machine as they go."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.gpus = 0
        self.model: str | None = args.gpu_model
        # stdout + stderr of the all_reduce_perf run (NCCL_DEBUG=INFO), for the transport check.
        self.nccl_log: str | None = None


def check_inventory(node: Node) -> tuple[Finding, str]:
    if shutil.which("nvidia-smi") is None:
        return skipped("gpu.inventory", "nvidia-smi is not installed"), QUERY_COMMAND
    rc, out, err = sh(QUERY_COMMAND.split(), 60)
    try:
        query = parse_gpu_query(out)
    except ParseError as exc:
        return unreadable("gpu.inventory", "nvidia-smi", exc, rc, err), QUERY_COMMAND
    node.gpus = len(query.gpus)
    node.model = node.model or model_from_name(query.names[0])
    result = judge_gpu_inventory(
        query,
        expected_gpus=node.args.gpus or node.gpus,
        gpu_model=node.model or query.names[0],
        driver_pin=node.args.driver_pin or query.driver_versions[0],
        target=socket.gethostname(),
    )
    if node.model is None:
        result = with_figures(result, note=f"{query.names[0]} is not in clusterctl's GPU catalog")
    return result, QUERY_COMMAND


def check_topo(node: Node) -> tuple[Finding, str]:
    command = "nvidia-smi topo -m"
    if shutil.which("nvidia-smi") is None:
        return skipped("topo.gpu_nic", "nvidia-smi is not installed"), command
    rc, out, err = sh(command.split(), 60)
    try:
        topo = parse_nvidia_smi_topo(out)
    except ParseError as exc:
        return unreadable("topo.gpu_nic", "nvidia-smi topo", exc, rc, err), command
    rails = [r for r in (node.args.rails or "").split(",") if r]
    result = judge_topo(topo, rails, target=socket.gethostname())
    # Without --rails there is nothing to judge, but the pairing found is worth printing.
    near = nics_near_gpus(topo)
    result = with_figures(
        result, near_nics="; ".join(f"{gpu}: {'/'.join(nics) or 'none'}" for gpu, nics in near.items())
    )
    return result, command


def check_dcgm(node: Node) -> tuple[Finding, str]:
    level = node.args.dcgm_level
    command = f"dcgmi diag -r {level}"
    if shutil.which("dcgmi") is None:
        return skipped("dcgm.diag", "dcgmi is not installed (datacenter-gpu-manager)"), command
    rc, out, err = sh(command.split(), {1: 300, 2: 900}.get(level, 3600))
    if rc == 124:
        return failed("dcgm.diag", f"dcgmi {err}.", "Check that nv-hostengine runs (nvidia-dcgm)."), command
    try:
        diag = parse_dcgmi_diag(f"$ {command}\n{out}\n{err}")
    except ParseError as exc:
        return unreadable("dcgm.diag", "dcgmi", exc, rc, err), command
    return judge_dcgm(diag, min_level=level, target=socket.gethostname()), command


def find_all_reduce_perf(given: str | None) -> str | None:
    candidates = [given] if given else []
    candidates += [os.environ.get("NCCL_TESTS_DIR", ""), *NCCL_TESTS_DIRS]
    for directory in filter(None, candidates):
        path = Path(directory).expanduser()
        path = path if path.name == "all_reduce_perf" else path / "all_reduce_perf"
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    return shutil.which("all_reduce_perf")


def check_nccl(node: Node) -> tuple[Finding, str]:
    binary = find_all_reduce_perf(node.args.nccl_tests)
    gpus = node.gpus or node.args.gpus or 1
    command = [binary or "all_reduce_perf", "-b", "8M", "-e", node.args.nccl_max, "-f", "2", "-g", str(gpus), "-c", "1"]
    shown = " ".join(command)
    if binary is None:
        return skipped("nccl.all_reduce", "all_reduce_perf is not built (give --nccl-tests DIR)"), shown
    if node.gpus == 0:
        return skipped("nccl.all_reduce", "no GPU found by nvidia-smi"), shown
    rc, out, err = sh(command, 1800, env=NCCL_DEBUG_ENV)
    node.nccl_log = f"{out}\n{err}"
    try:
        result = parse_nccl_tests(out, collective="all_reduce")
    except ParseError as exc:
        return unreadable("nccl.all_reduce", "all_reduce_perf", exc, rc, err), shown
    mark = None
    min_size = 1 << 30
    if node.model is not None:
        thresholds = defaults_for(node.model, gpus, 0, 400)
        mark, min_size = thresholds.nccl_intra_busbw_gbps, thresholds.nccl_min_size_bytes
    # nccl-tests from an MPI build still runs as one process here; -g spans the local GPUs.
    return judge_nccl(result, mark, min_size, target=socket.gethostname()), shown


def torch_python() -> str | None:
    """A python3 that imports torch with CUDA, or None."""
    python = shutil.which("python3")
    if python is None:
        return None
    rc, out, _ = sh([python, "-c", "import torch; print(torch.cuda.is_available())"], 120)
    return python if rc == 0 and out.strip() == "True" else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def check_transport(node: Node) -> tuple[Finding, str]:
    """The transport NCCL chose, from NCCL_DEBUG=INFO: on one node, "intra-node only" (skipped)."""
    name = "nccl.transport"
    if node.nccl_log is not None:
        text, shown = node.nccl_log, "the all_reduce_perf run above, with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET"
    else:
        python = torch_python()
        shown = (
            "python3 -c <torch.distributed all_reduce on every GPU>, with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET"
        )
        if python is None:
            return skipped(
                name, "no NCCL program here (all_reduce_perf not built, torch with CUDA not installed)"
            ), shown
        rc, out, err = sh([python, "-c", TORCH_JOB, str(free_port())], 600, env=NCCL_DEBUG_ENV)
        if rc == 124:
            return failed(name, f"the torch NCCL job {err}."), shown
        text = f"{out}\n{err}"
    try:
        log = parse_nccl_debug(text)
    except ParseError as exc:
        return failed(
            name, f"NCCL printed no debug line: {exc.message}", "Check that NCCL_DEBUG reaches the job."
        ), shown
    result = judge_transport(log, node.args.fabric, nodes=1, target=socket.gethostname()).result
    return result, shown


def _srun_with_pyxis() -> str | None:
    """srun, when it has pyxis' --container-image (the SPANK plugin is loaded), else None."""
    srun = shutil.which("srun")
    if srun is None:
        return None
    rc, out, err = sh([srun, "--help"], 60)
    return srun if rc == 0 and "--container-image" in f"{out}{err}" else None


def check_transport_container(node: Node) -> tuple[Finding, str]:
    """The transport NCCL chooses inside a stock image started through pyxis (else enroot): what a job sees.

    The node's enroot configuration (mounts.d, hooks.d) must bring the fabric's plugin, /etc/nccl.conf
    and the vendor's NCCL environment into the container; on one node the expected verdict is the
    host check's, "intra-node only", and a log without NCCL lines fails.
    """
    name = CONTAINER_CHECK
    image = node.args.container_image
    if image in ("", "none"):
        return skipped(name, "--container-image none"), ""
    gpus = node.gpus or 1
    env = {**NCCL_DEBUG_ENV, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    srun = _srun_with_pyxis()
    if srun is not None:
        command = [
            srun,
            "--nodes=1",
            f"--ntasks={gpus}",
            f"--gpus-per-node={gpus}",
            "--label",
            "--export=ALL",
            f"--container-image={pyxis_image(image)}",
            "python3",
            "-c",
            TORCH_ALL_REDUCE,
        ]
        shown = (
            f"srun --container-image={pyxis_image(image)} python3 -c <torch.distributed all_reduce>, NCCL_DEBUG=INFO"
        )
    elif shutil.which("enroot") is not None:
        # The same runtime without Slurm: enroot applies the node's mounts.d and hooks.d as under pyxis.
        script = (
            "set -e; dir=$(mktemp -d); trap 'enroot remove -f clusterctl-check >/dev/null 2>&1; rm -rf \"$dir\"' EXIT; "
            'enroot import -o "$dir/image.sqsh" "docker://$0" >&2; '
            'enroot create -n clusterctl-check "$dir/image.sqsh" >&2; '
            'enroot start --env NCCL_DEBUG --env NCCL_DEBUG_SUBSYS clusterctl-check python3 -c "$1" "$2"'
        )
        command = ["bash", "-c", script, pyxis_image(image), TORCH_JOB, env["MASTER_PORT"]]
        shown = f"enroot import/create/start of {pyxis_image(image)}, python3 -c <torch all_reduce>, NCCL_DEBUG=INFO"
    else:
        return skipped(name, "neither srun with pyxis (--container-image) nor enroot here"), ""
    rc, out, err = sh(command, 1800, env=env)
    if rc == 124:
        return failed(name, f"the container NCCL job {err}."), shown
    try:
        log = parse_nccl_debug(f"{out}\n{err}")
    except ParseError as exc:
        last = (err.strip().splitlines() or ["no output"])[-1]
        return failed(
            name,
            f"NCCL printed no debug line in the container (exit {rc}): {exc.message}: {last}",
            "Run the command by hand; check the image pulls and that enroot's hooks run.",
        ), shown
    result = judge_transport(log, node.args.fabric, nodes=1, target=socket.gethostname()).result
    return in_container(TransportJudgement(result), image).result, shown


CHECKS: tuple[Callable[[Node], tuple[Finding, str]], ...] = (
    check_inventory,
    check_topo,
    check_dcgm,
    check_nccl,
    check_transport,
    check_transport_container,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpus", type=int, help="GPUs this node must have (default: what nvidia-smi finds)")
    parser.add_argument("--gpu-model", help="catalog model, e.g. H100-SXM-80GB (default: from nvidia-smi)")
    parser.add_argument("--driver-pin", help="driver version that must be loaded")
    parser.add_argument("--rails", help="rail NIC of GPU0, GPU1, ... for the topo check")
    parser.add_argument("--dcgm-level", type=int, default=1, choices=(1, 2, 3, 4), help="dcgmi diag -r level")
    parser.add_argument("--nccl-tests", metavar="DIR", help="nccl-tests build directory or all_reduce_perf path")
    parser.add_argument("--nccl-max", default="8G", help="largest all_reduce message (-e)")
    parser.add_argument(
        "--fabric", help="the fabric kind the node is on (infiniband, efa, ...), for the transport check"
    )
    parser.add_argument(
        "--container-image",
        default=DEFAULT_CONTAINER_CHECK_IMAGE,
        help="stock image the container transport check starts through pyxis or enroot ('none' skips it)",
    )
    parser.add_argument("--out", type=Path, help="also write the JSON report here")
    args = parser.parse_args(argv)

    node = Node(args)
    started = datetime.now(UTC).isoformat(timespec="seconds")
    results: list[dict[str, Any]] = []
    for check in CHECKS:
        clock = time.monotonic()
        result, command = check(node)
        results.append(
            {
                "check": result.code,
                "verdict": str(Verdict.of(result)),
                "message": result.message,
                "hint": result.hint,
                "figures": figures_of(result),
                "command": command,
                "duration_s": round(time.monotonic() - clock, 2),
            }
        )
    report = {
        "host": socket.gethostname(),
        "started_at": started,
        "passed": all(r["verdict"] != "fail" for r in results),
        "results": results,
    }
    text = json.dumps(report, indent=2, default=str)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
