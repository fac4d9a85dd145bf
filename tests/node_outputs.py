"""Every parser of what a node, Slurm or a tool prints, with real outputs to start from and hostile ones made from them.

Used by tests/security/test_node_outputs.py (the property: no input makes a parser raise anything
but its own parse error) and benchmarks/hostile_outputs.py (how long the worst input takes).
Seeds are the real outputs in tests/unit/verify/data and ../shared/fixtures where present, and the
verify test kit's outputs in the formats of real ones everywhere.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterctl.fabric.lint import parse_topology_conf
from clusterctl.fabric.parsers import FabricParseError, parse_fabric, parse_iblinkinfo, parse_ibnetdiscover
from clusterctl.image.drift import PackageListError, parse_packages
from clusterctl.run.failure_cause import apt_errors, journal_cause
from clusterctl.slurm.jobs import parse_jobs
from clusterctl.slurm.nodes import parse_nodes, parse_partitions
from clusterctl.slurm.records import RecordError
from clusterctl.verify.parsers import (
    parse_dcgmi_diag,
    parse_fio_json,
    parse_ibstat,
    parse_nccl_debug,
    parse_nccl_tests,
    parse_nvidia_smi_topo,
)
from clusterctl.verify.parsers.chronyc import parse_chronyc_tracking
from clusterctl.verify.parsers.gpu_query import parse_gpu_query
from clusterctl.verify.parsers.rdma_rails import parse_node_rails
from clusterctl.verify.result import ParseError
from tests.conftest import REPO_ROOT, SHARED_FIXTURES
from tests.verify_testkit import (
    chronyc,
    gpu_query,
    ibstat,
    nccl_debug_run,
    rails_conf,
    scontrol_node,
    scontrol_partition,
)

DATA = REPO_ROOT / "tests" / "unit" / "verify" / "data"


@dataclass(frozen=True)
class Parser:
    """One parser: how to call it, the error it answers bad input with (none: it never raises), its seeds."""

    name: str
    parse: Callable[[str], Any]
    error: tuple[type[BaseException], ...]
    seeds: tuple[str, ...]


def _files(*patterns: tuple[Path, str]) -> tuple[str, ...]:
    found = []
    for folder, pattern in patterns:
        if folder.is_dir():
            found += [p.read_text(errors="replace") for p in sorted(folder.glob(pattern))]
    return tuple(found)


def _nccl_tests_row() -> str:
    return (
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20\n"
        "#  Rank  0 Group  0 Pid 1 on gpu001 device  0 [0x18] NVIDIA H100 80GB HBM3\n"
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong\n"
        "  8589934592    2147483648     float     sum      -1    39811  215.77  404.57      0"
        "    39790  215.88  404.78      0\n"
        "# Avg bus bandwidth    : 404.6\n"
    )


def parsers() -> list[Parser]:
    """Every parser of node output, each with at least one seed."""
    fixtures = SHARED_FIXTURES
    return [
        Parser(
            "nccl-tests",
            parse_nccl_tests,
            (ParseError,),
            (_nccl_tests_row(), *_files((fixtures / "nccl", "nccl_*.txt"))),
        ),
        Parser(
            "nccl-debug",
            parse_nccl_debug,
            (ParseError,),
            (nccl_debug_run(("gpu001", "gpu002"), 2), *_files((DATA / "nccl_debug", "*.log"))),
        ),
        Parser("dcgmi-diag", parse_dcgmi_diag, (ParseError,), ("", *_files((fixtures / "dcgm", "dcgmi_diag*")))),
        Parser("ibstat", parse_ibstat, (ParseError,), (ibstat(["mlx5_0", "mlx5_1"]),)),
        Parser(
            "nvidia-smi-topo",
            parse_nvidia_smi_topo,
            (ParseError,),
            ("", *_files((fixtures / "nvidia-smi", "nvsmi_topo*"))),
        ),
        Parser("fio", parse_fio_json, (ParseError,), _files((DATA, "fio_*.json"))),
        Parser("chronyc", parse_chronyc_tracking, (ParseError,), (chronyc(),)),
        Parser("gpu-query", parse_gpu_query, (ParseError,), (gpu_query(),)),
        Parser("rdma-rails", parse_node_rails, (ParseError,), (rails_conf(["mlx5_0", "mlx5_1"]),)),
        Parser(
            "ibnetdiscover",
            parse_ibnetdiscover,
            (FabricParseError,),
            ("", *_files((fixtures / "infiniband", "ibnetdiscover*"))),
        ),
        Parser(
            "iblinkinfo",
            parse_iblinkinfo,
            (FabricParseError,),
            ("", *_files((fixtures / "infiniband", "iblinkinfo*"))),
        ),
        Parser("fabric", parse_fabric, (FabricParseError,), ("", *_files((fixtures / "infiniband", "*")))),
        Parser(
            "scontrol-node",
            parse_nodes,
            (RecordError,),
            ("".join(scontrol_node(f"gpu00{i}", state="IDLE+DRAIN", reason="fan [x] broken") for i in range(1, 4)),),
        ),
        Parser("scontrol-partition", parse_partitions, (RecordError,), (scontrol_partition("gpu", "gpu[001-004]"),)),
        Parser("squeue", parse_jobs, (RecordError,), ("12|gpu[001-002]\n13_4|gpu003\n14+0|\n",)),
        Parser("dpkg", parse_packages, (PackageListError,), ("ii \tslurmd\t22.05.8-4\nii \tmunge\t0.5.15-2\n",)),
        Parser(
            "journal", journal_cause, (), ("slurmd: error: cannot open /etc/slurm/gres.conf\nFailed to start slurmd\n",)
        ),
        Parser("apt", apt_errors, (), ("E: Unable to locate package foo\nErr:1 http://x bookworm InRelease\n",)),
        Parser(
            "topology.conf",
            parse_topology_conf,
            (),
            _files((fixtures / "slurm", "topology_conf*")) or ("SwitchName=s1 Nodes=gpu[1-2]\n",),
        ),
    ]


# What hostile outputs carry: numbers no int() or float() should take, nesting, runs that make a
# careless regular expression quadratic, record separators, terminal sequences.
FRAGMENTS = (
    "9" * 5000,
    "1e400",
    "-1e400",
    "nan",
    "inf",
    "0x" + "f" * 300,
    "[" * 2000,
    '{"a":' * 2000,
    " " * 60000,
    "x" * 60000,
    " [" * 30000,
    "/1" * 20000,
    "\x1e",
    "\x85",
    "\u2028",
    "\r",
    "\x00",
    "\x1b]8;;https://evil.example/\x07",
    "\x9b2J",
    "Reason=clusterctl-health: x",
    "NodeName=gpu999 State=IDLE+DRAIN",
    "Using network ",
    " via NET/IB/0/GDRDMA",
)


def _mutate(text: str, rng: random.Random) -> str:
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(5)
        at = rng.randrange(len(text) + 1)
        if kind == 0:
            text = text[:at] + rng.choice(FRAGMENTS) + text[at:]
        elif kind == 1:
            digits = [i for i, c in enumerate(text) if c.isdigit()]
            if digits:
                i = rng.choice(digits)
                text = text[:i] + rng.choice(("9" * 5000, "1e400", "nan", "-0")) + text[i + 1 :]
        elif kind == 2:
            end = min(len(text), at + rng.randint(1, 200))
            text = text[:at] + text[end:]
        elif kind == 3:
            lines = text.split("\n")
            i = rng.randrange(len(lines))
            lines.insert(i, lines[i] * rng.randint(1, 50))
            text = "\n".join(lines)
        else:
            text = text[:at]
    return text


_ALPHABET = "abcxyz019 .:=/[]{}()|,+-#\t\n\"'\\\x1b\x07\x85\u2028"


def _random_text(rng: random.Random) -> str:
    return "".join(rng.choices(_ALPHABET, k=rng.randint(0, 400)))


# Larger than any output a check reads; the parsers' own caps are tested on their own.
MAX_INPUT = 256 * 1024


def hostile_inputs(parser: Parser, count: int, seed: int = 0) -> Iterator[str]:
    """``count`` inputs for ``parser``: its seeds mutated, random text, and its seeds' lines with huge fragments."""
    rng = random.Random(f"{parser.name}:{seed}")
    seeds = [s[:4000] for s in parser.seeds] or [""]
    for _ in range(count):
        roll = rng.random()
        base = rng.choice(seeds)
        if roll < 0.6:
            text = _mutate(base, rng)
        elif roll < 0.95:
            text = _random_text(rng)
        else:
            lines = base.split("\n") or [""]
            line = rng.choice(lines)
            at = rng.randrange(len(line) + 1)
            text = line[:at] + rng.choice(FRAGMENTS[:12]) + line[at:]
        yield text[:MAX_INPUT]
