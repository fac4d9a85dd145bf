"""Hostile node outputs are answered with a clear error, never exit 70, never a hang.

The findings: a 4,300-digit rank (nccl-debug), a huge maxBytes or 1e400 in an nccl-tests row,
100k-deep or 5,000-digit JSON in fio, `groupid: 1e400`, a deeply nested clusterctl.lock
(status) or state.json (diff) exited 70; one `Channel ... via x<60k spaces>y` line cost 13 s of
CPU and a 60 KB reason of ` [` slowed heal (quadratic patterns). Then a property: every parser of
node output (tests/node_outputs.py) answers 10,000 random and mutated inputs with a result or
its own error. The 1 s per input target is measured by benchmarks/hostile_outputs.py (figures
in the README); here a watchdog of ten times that stops a hang without timing anything.
"""

from __future__ import annotations

import json
import shutil
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from clusterctl.commands import cli
from clusterctl.run.state import StateDir
from clusterctl.slurm.nodes import parse_nodes
from clusterctl.verify.parsers import parse_fio_json, parse_nccl_debug, parse_nccl_tests
from clusterctl.verify.result import ParseError
from tests.conftest import EXAMPLES
from tests.node_outputs import Parser, hostile_inputs, parsers
from tests.verify_testkit import nccl_debug_run, scontrol_node

INPUTS_PER_PARSER = 10_000
WATCHDOG_S = 10


class Hung(Exception):
    """A parser did not answer within the watchdog."""


@contextmanager
def watchdog(seconds: float) -> Iterator[None]:
    def ring(signum: int, frame: object) -> None:
        raise Hung(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _check_output(tmp_path: Path, kind: str, text: str) -> tuple[int, str]:
    path = tmp_path / f"{kind}.out"
    path.write_text(text)
    result = CliRunner().invoke(cli, ["check-output", kind, str(path)])
    return result.exit_code, result.output


NCCL_TESTS = (
    "# nThread 1 nGpus 1 minBytes 8 maxBytes {max_bytes} step: 2(factor) warmup iters: 5 iters: 20\n"
    "#       size         count      type   redop    root     time   algbw   busbw #wrong"
    "     time   algbw   busbw #wrong\n"
    "  8589934592    2147483648     float     sum      -1    39811  {algbw}  404.57      0"
    "    39790  215.88  404.78      0\n"
)


@pytest.mark.parametrize(
    ("kind", "text"),
    [
        ("nccl-debug", nccl_debug_run(("gpu001", "gpu002"), 1).replace("rank 0", "rank " + "9" * 4300)),
        ("nccl-debug", "gpu001:1:1 [0] NCCL INFO comm 0x1 rank " + "9" * 5000 + " nRanks 2 nNodes 1\n"),
        ("nccl-tests", NCCL_TESTS.format(max_bytes="9" * 5000, algbw="215.77")),
        ("nccl-tests", NCCL_TESTS.format(max_bytes="8589934592", algbw="1e400")),
        ("nccl-tests", NCCL_TESTS.format(max_bytes="8589934592", algbw="nan")),
        ("fio", "{" + '"a":{' * 100_000),
        ("fio", '{"jobs": [{"jobname": "j", "groupid": ' + "9" * 5000 + "}]}"),
        ("fio", '{"jobs": [{"jobname": "j", "groupid": 1e400}]}'),
        ("fio", '{"jobs": [{"jobname": "j", "read": {"bw_bytes": 1e400}}]}'),
    ],
)
def test_a_hostile_output_is_an_unreadable_output(tmp_path: Path, kind: str, text: str) -> None:
    code, output = _check_output(tmp_path, kind, text)
    assert code != 70, output
    assert "Traceback" not in output
    assert "internal error" not in output


def test_numbers_out_of_bounds_never_reach_a_judgement() -> None:
    """1e400 would read as an infinite bandwidth, which passes any mark."""
    with pytest.raises(ParseError):
        parse_nccl_tests(NCCL_TESTS.format(max_bytes="8589934592", algbw="1e400"))
    with pytest.raises(ParseError):
        parse_fio_json('{"jobs": [{"jobname": "j", "read": {"bw_bytes": 1e400, "iops": 1}}]}')


def test_a_long_channel_line_is_read_in_linear_time() -> None:
    prefix = "gpu001:1:1 [0] NCCL INFO "
    text = prefix + "Using network IB\n" + prefix + "Channel 00/0 : 0[0] -> 1[0] [send] via x" + " " * 60_000 + "y\n"
    with watchdog(WATCHDOG_S):
        log = parse_nccl_debug(text)
    assert log.processes


def test_a_long_reason_of_brackets_is_read_in_linear_time() -> None:
    text = scontrol_node("gpu001", state="IDLE+DRAIN", reason=" [" * 30_000 + "x")
    with watchdog(WATCHDOG_S):
        (node,) = parse_nodes(text)
    assert node.drained


def test_a_deeply_nested_lock_is_a_warning_in_status(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = tmp_path / "local.yaml"
    shutil.copy(EXAMPLES / "local.yaml", spec)
    (tmp_path / "clusterctl.lock").write_text("[" * 100_000)
    StateDir(tmp_path / "state", "local").write({"status": "up"})
    monkeypatch.setattr("clusterctl.ops.status.for_kind", lambda kind: _NoMachines())
    result = CliRunner().invoke(cli, ["status", str(spec), "--state-dir", str(tmp_path / "state")])
    assert result.exit_code == 0, result.output
    assert "nests more than" in result.output


class _NoMachines:
    def status(self, plan: object, state_dir: Path) -> dict[str, str]:
        return {}


def test_a_deeply_nested_state_file_is_an_error_in_diff(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state", "local")
    state.write({"status": "up"})
    state.state_file.write_text(json.dumps({"a": 1})[:-1] + ', "b": ' + "[" * 100_000 + "]" * 100_000 + "}")
    result = CliRunner().invoke(
        cli,
        ["diff", str(EXAMPLES / "local.yaml"), "--state-dir", str(tmp_path / "state"), "--out", str(tmp_path / "b")],
    )
    assert result.exit_code == 1, result.output
    assert "nests more than" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("parser", parsers(), ids=lambda p: p.name)
def test_every_parser_answers_every_input_with_a_result_or_its_error(parser: Parser) -> None:
    for index, text in enumerate(hostile_inputs(parser, INPUTS_PER_PARSER)):
        try:
            with watchdog(WATCHDOG_S):
                parser.parse(text)
        except parser.error:
            continue
        except Hung:
            pytest.fail(f"{parser.name}: input {index} ({len(text)} characters) got no answer in {WATCHDOG_S} s")
        except Exception as exc:
            pytest.fail(f"{parser.name}: input {index} raised {type(exc).__name__}: {str(exc)[:200]}")
