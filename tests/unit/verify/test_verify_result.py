"""A check's verdict as a Finding, and ParseError."""

from __future__ import annotations

from clusterctl.spec.findings import Finding, Level
from clusterctl.verify.result import (
    ParseError,
    Verdict,
    blame_of,
    check_finding,
    figures_of,
    hosts_of,
    sentence,
    with_figures,
    with_run,
)


def test_parse_error_carries_the_line() -> None:
    error = ParseError("busbw 'x' is not a number", 12, "   8  2  float  sum  -1  x")

    assert (error.line_no, error.line, error.message) == (12, "   8  2  float  sum  -1  x", "busbw 'x' is not a number")
    assert str(error) == "line 12: busbw 'x' is not a number"


def test_check_result() -> None:
    ok = check_finding("nccl.all_reduce", "node[1-2]", Verdict.PASS, {"busbw_gbps": 400.0}, "Fine.")

    assert type(ok) is Finding
    assert (ok.code, ok.node, ok.level, ok.message) == ("nccl.all_reduce", "node[1-2]", Level.INFO, "Fine.")
    assert Verdict.of(ok) is Verdict.PASS
    assert ok.hint == ""
    assert figures_of(ok) == {"busbw_gbps": 400.0}
    assert Verdict("skipped") is Verdict.SKIPPED
    assert str(Verdict.FAIL) == "fail"


def test_verdicts_are_levels() -> None:
    assert [v.level for v in Verdict] == [Level.INFO, Level.ERROR, Level.WARNING]
    for verdict in Verdict:
        assert Verdict.of(check_finding("x", "", verdict, {}, "m")) is verdict


def test_run_context_is_structured_data() -> None:
    result = with_figures(check_finding("nccl.all_reduce", "a,b", Verdict.FAIL, {"busbw_gbps": 1.0}, "Slow."), rc=1)
    run = with_run(result, "nccl", ("a", "b"), ("b",), phase="pairs", groups=["su1"], wave=2)

    assert run.rule == "nccl"
    assert (hosts_of(run), blame_of(run)) == (("a", "b"), ("b",))
    assert run.to_dict()["data"] == {
        "figures": {"busbw_gbps": 1.0, "rc": 1},
        "nodes": ["a", "b"],
        "blame": ["b"],
        "phase": "pairs",
        "groups": ["su1"],
        "wave": 2,
    }


def test_sentence() -> None:
    assert sentence(["the busbw is low", "mlx5_3 is down"]) == "The busbw is low; mlx5_3 is down."
    assert sentence(["mlx5_3 is down"]) == "mlx5_3 is down."
    assert sentence(["7 GPUs found."]) == "7 GPUs found."
