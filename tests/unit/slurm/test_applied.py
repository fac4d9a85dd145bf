"""The agent's report in a node's Extra field: written by the node, read back from ``scontrol show node -o``.

Whatever a task name, a message or a journal line holds (spaces, ``State=``, line breaks, control
characters), it stays inside the report: it cannot open a Slurm field or forge another report's words.
"""

from __future__ import annotations

import pytest

from clusterctl.slurm.applied import FAILED, MAX_REPORT_CHARS, OK, Applied, format_report, parse_report, set_report
from clusterctl.slurm.nodes import parse_nodes
from tests.verify_testkit import scontrol_node

BUNDLE = "5efeb3d8255e36eb"


def _through_slurm(applied: Applied) -> Applied | None:
    """The report as ``up`` reads it: set as Extra, listed by scontrol, parsed by clusterctl.slurm."""
    (node,) = parse_nodes(scontrol_node("gpu001", extra=format_report(applied)))
    assert not node.ambiguous
    return parse_report(node.fields["Extra"])


def test_an_ok_report_reads_back_as_written() -> None:
    applied = Applied(1796537741989, BUNDLE, OK, changed=3, at=1796537791)
    assert _through_slurm(applied) == applied


def test_a_failure_with_hostile_text_stays_one_report_in_one_field() -> None:
    applied = Applied(
        7,
        BUNDLE,
        FAILED,
        at=1796537791,
        task="monitoring : Start State=IDLE Reason=x",
        message="line one\nState=DOWN Extra=clusterctl-agent gen=99 state=ok",
        cause=("prometheus-node-exporter: Failed to locate executable /usr/local/sbin/x: No such file", "\x1b[31mred"),
    )
    text = format_report(applied)
    assert "\n" not in text
    assert "\x1b" not in text
    back = _through_slurm(applied)
    assert back is not None
    assert (back.generation, back.state, back.task) == (7, FAILED, "monitoring : Start State=IDLE Reason=x")
    assert back.message == "line one State=DOWN Extra=clusterctl-agent gen=99 state=ok"
    assert back.cause[0].startswith("prometheus-node-exporter: Failed to locate executable")
    assert back.cause[1] == "[31mred"


def test_a_long_cause_is_cut_so_the_report_fits() -> None:
    applied = Applied(7, BUNDLE, FAILED, task="t", message="m", cause=tuple("x" * 2000 for _ in range(3)))
    text = format_report(applied)
    assert len(text) <= MAX_REPORT_CHARS
    back = parse_report(text)
    assert back is not None
    assert back.state == FAILED


@pytest.mark.parametrize(
    "extra",
    [
        "",
        "rack=r01 owner=team-a",  # an admin's own use of the field
        "clusterctl-agent gen=7 bundle=5efeb3d8255e36eb state=ok changed=0",  # no time
        "clusterctl-agent gen=7 bundle=5efeb3d8255e36eb state=done changed=0 at=1",
        "clusterctl-agent gen=7 gen=8 bundle=5efeb3d8255e36eb state=ok changed=0 at=1",
        "clusterctl-agent gen=1e9 bundle=5efeb3d8255e36eb state=ok changed=0 at=1",
        "clusterctl-agent gen=7 bundle=../../etc state=ok changed=0 at=1",
        "clusterctl-agent gen=" + "9" * 40 + " bundle=5efeb3d8255e36eb state=ok changed=0 at=1",
    ],
)
def test_anything_else_in_extra_is_no_report(extra: str) -> None:
    assert parse_report(extra) is None


def test_the_update_is_one_argv_word_per_field() -> None:
    argv = set_report("gpu001", Applied(7, BUNDLE, OK, at=1))
    assert argv[:3] == ["scontrol", "update", "NodeName=gpu001"]
    assert argv[3].startswith("Extra=clusterctl-agent gen=7 ")
    with pytest.raises(ValueError, match="not a node name"):
        set_report("-oProxyCommand=x", Applied(7, BUNDLE, OK, at=1))
