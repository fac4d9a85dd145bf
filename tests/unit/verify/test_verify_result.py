"""CheckResult and ParseError."""

from __future__ import annotations

from clusterctl.verify.result import CheckResult, ParseError, Verdict


def test_parse_error_carries_the_line() -> None:
    error = ParseError("busbw 'x' is not a number", 12, "   8  2  float  sum  -1  x")

    assert (error.line_no, error.line, error.message) == (12, "   8  2  float  sum  -1  x", "busbw 'x' is not a number")
    assert str(error) == "line 12: busbw 'x' is not a number"


def test_check_result() -> None:
    ok = CheckResult("nccl.all_reduce", "node[1-2]", Verdict.PASS, {"busbw_gbps": 400.0}, "Fine.")

    assert ok.passed
    assert ok.hint == ""
    assert Verdict("skipped") is Verdict.SKIPPED
    assert str(Verdict.FAIL) == "fail"
