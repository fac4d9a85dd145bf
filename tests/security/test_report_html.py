"""The verify report's HTML shows every value as text: plan names, messages and reasons cannot
add an element, an attribute or a script to the page."""

from __future__ import annotations

from html.parser import HTMLParser

from clusterctl.pipeline import load_and_validate
from clusterctl.plan.models import Plan
from clusterctl.verify.report import DrainAction, Report, render_html
from clusterctl.verify.result import Verdict, check_finding, with_run
from tests.conftest import EXAMPLES

EVIL = "\"'><script>alert(1)</script><img src=x onerror=alert(2)>&amp;{{ x }}"


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attributes: set[str] = set()
        self.text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes |= {name for name, _ in attrs}

    def handle_data(self, data: str) -> None:
        self.text += data


def _page(evil: str) -> str:
    plan = load_and_validate(EXAMPLES / "local.yaml").plan
    nodes = [n.model_copy(update={"hostname": n.hostname + evil, "group": n.group + evil}) for n in plan.nodes]
    plan = Plan.model_validate(
        {
            **plan.model_dump(),
            "nodes": [n.model_dump() for n in nodes],
            "cluster": {**plan.cluster.model_dump(), "name": plan.cluster.name + evil, "spec_file": "spec" + evil},
        }
    )
    result = check_finding(
        check="gpu" + evil, target=nodes[2].hostname, verdict=Verdict.FAIL, figures={"x" + evil: evil},
        message="failed " + evil, hint="look " + evil,
    )  # fmt: skip
    outcome = with_run(result, "gpu", hosts=(nodes[2].hostname,), blame=(nodes[2].hostname,), command=evil)
    report = Report.for_plan(
        plan, started_at="2026-01-01T00:00:00Z" + evil, duration_s=1.0, checks=["gpu"], thresholds={},
        findings=[outcome], drains=[DrainAction(nodes[2].hostname, "clusterctl-verify: " + evil, False, evil)],
    )  # fmt: skip
    return render_html(report)


def test_hostile_values_stay_text() -> None:
    clean, hostile = _Tags(), _Tags()
    clean.feed(_page("plain"))
    hostile.feed(_page(EVIL))
    assert hostile.tags == clean.tags
    assert hostile.attributes == clean.attributes
    assert "<script>alert(1)</script>" in hostile.text
    assert "onerror" not in hostile.attributes
