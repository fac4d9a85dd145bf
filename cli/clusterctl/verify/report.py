"""The verify report: per-node verdicts, heat maps, JSON and a self-contained HTML page.

``Report`` holds every `Outcome` of a run; the per-node view and the heat maps are derived
from it. ``write_report`` puts ``report.json`` and ``report.html`` under
``<build dir>/verify/``. The HTML page has its CSS inline and no scripts or external assets,
so it can be mailed or attached to a ticket as one file.
"""

from __future__ import annotations

import html
import json
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from clusterctl.plan.models import Plan, PlanNode
from clusterctl.render.builddir import write_run_file
from clusterctl.verify.checks import CHECK_NAMES, Outcome
from clusterctl.verify.result import Verdict
from clusterctl.verify.testplan import NcclPlan
from clusterctl.verify.thresholds import AcceptanceThresholds

REPORT_DIR = "verify"
_RANK = {Verdict.SKIPPED: 0, Verdict.PASS: 1, Verdict.FAIL: 2}


@dataclass(frozen=True)
class DrainAction:
    """One ``scontrol update ... state=drain`` and how it went.

    Attributes:
        host: The node.
        reason: The reason given to Slurm (starts with ``clusterctl-verify:``).
        done: Whether scontrol accepted it.
        error: scontrol's message when it did not; empty otherwise.
    """

    host: str
    reason: str
    done: bool
    error: str = ""


@dataclass(frozen=True)
class NodeSummary:
    """One node's verdict over every check.

    Attributes:
        hostname: The node.
        role: controller, login or compute.
        group: Its SU or leaf group (the role for non-compute nodes).
        verdict: Fail when any check blames it, pass when something passed, else skipped.
        checks: Verdict per check name (only checks that said something about the node).
        reasons: The messages of the failures counted against it.
        notes: Why checks skipped it (deduplicated).
        busbw_gbps: Its single-node all_reduce busbw, when measured.
    """

    hostname: str
    role: str
    group: str
    verdict: Verdict
    checks: dict[str, Verdict]
    reasons: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    busbw_gbps: float | None = None


def _why(summary: NodeSummary) -> str:
    """The reasons (else the skip notes) of a node as one line."""
    return "; ".join(text.rstrip(".") for text in summary.reasons or summary.notes)


def node_group(node: PlanNode) -> str:
    """The group a node is shown under: ``su1``, its leaf switch, or its role."""
    if node.role != "compute":
        return node.role
    if node.su is not None:
        return f"su{node.su}"
    return node.topology_switch or node.rack


@dataclass
class Report:
    """Everything one ``clusterctl verify`` run found.

    Attributes:
        cluster: Cluster name.
        spec_file: The spec the plan came from.
        provider: The provider the cluster runs on.
        started_at: ISO 8601 start time (UTC).
        duration_s: Wall time of the run.
        checks: The checks that ran, in order.
        thresholds: Acceptance thresholds per GPU hardware profile.
        outcomes: Every result.
        nodes: Every node of the plan, in plan order.
        test_plan: The NCCL test plan, when the NCCL check ran.
        drains: The drains issued (empty with ``--no-drain``).
    """

    cluster: str
    spec_file: str
    provider: str
    started_at: str
    duration_s: float
    checks: list[str]
    thresholds: dict[str, AcceptanceThresholds]
    outcomes: list[Outcome]
    nodes: list[PlanNode]
    test_plan: NcclPlan | None = None
    drains: list[DrainAction] = field(default_factory=list)

    @classmethod
    def for_plan(cls, plan: Plan, **kwargs: Any) -> Report:
        """A report over ``plan``'s nodes."""
        return cls(
            cluster=plan.cluster.name,
            spec_file=plan.cluster.spec_file,
            provider=plan.cluster.provider,
            nodes=list(plan.nodes),
            **kwargs,
        )

    @property
    def failed(self) -> bool:
        """Whether any check failed."""
        return any(o.verdict is Verdict.FAIL for o in self.outcomes)

    def count(self, verdict: Verdict) -> int:
        """Results with ``verdict``."""
        return sum(1 for o in self.outcomes if o.verdict is verdict)

    def failing_nodes(self) -> list[str]:
        """Nodes a failure is counted against, in plan order."""
        blamed = {h for o in self.outcomes if o.verdict is Verdict.FAIL for h in o.blame}
        return [n.hostname for n in self.nodes if n.hostname in blamed]

    def cluster_failures(self) -> list[Outcome]:
        """Failures pinned on no node: partitions, aggregate storage, leaf and spine runs."""
        return [o for o in self.outcomes if o.verdict is Verdict.FAIL and not o.blame]

    def node_summaries(self) -> list[NodeSummary]:
        """One summary per node of the plan.

        A check's cell is fail when it blames the node; pass when any of its results on
        the node passed (a node cleared by its other pair runs is not at fault); fail when
        it only failed without blaming anyone (slurmctld unreachable); skipped otherwise.
        """
        summaries: list[NodeSummary] = []
        for node in self.nodes:
            host = node.hostname
            mine = [o for o in self.outcomes if host in o.hosts]
            checks: dict[str, Verdict] = {}
            reasons: list[str] = []
            notes: list[str] = []
            for name in CHECK_NAMES:
                of_check = [o for o in mine if o.check == name]
                if not of_check:
                    continue
                blamed = [o for o in of_check if o.verdict is Verdict.FAIL and host in o.blame]
                if blamed:
                    checks[name] = Verdict.FAIL
                    reasons.extend(f"{o.result.check}: {o.result.message}" for o in blamed)
                elif any(o.verdict is Verdict.PASS for o in of_check):
                    checks[name] = Verdict.PASS
                elif failed := [o for o in of_check if o.verdict is Verdict.FAIL and len(o.hosts) <= 2]:
                    checks[name] = Verdict.FAIL
                    reasons.extend(f"{o.result.check}: {o.result.message}" for o in failed)
                elif any(o.verdict is Verdict.FAIL for o in of_check):
                    # Only a cluster-wide result failed (a leaf or spine run): not this node's fault.
                    checks[name] = Verdict.SKIPPED
                else:
                    checks[name] = Verdict.SKIPPED
                    notes.extend(o.result.message for o in of_check)
            verdict = max(checks.values(), key=_RANK.__getitem__, default=Verdict.SKIPPED)
            summaries.append(
                NodeSummary(
                    hostname=host,
                    role=node.role,
                    group=node_group(node),
                    verdict=verdict,
                    checks=checks,
                    reasons=tuple(dict.fromkeys(reasons)),
                    notes=tuple(dict.fromkeys(notes)),
                    busbw_gbps=self._single_busbw(host),
                )
            )
        return summaries

    def _single_busbw(self, host: str) -> float | None:
        for o in self.outcomes:
            if o.check == "nccl" and o.hosts == (host,) and "busbw_gbps" in o.result.figures:
                return float(o.result.figures["busbw_gbps"])
        return None

    def group_matrix(self) -> tuple[list[str], dict[tuple[str, str], list[float]], dict[tuple[str, str], str]]:
        """Bus bandwidth between groups, for the SU-pair heat map.

        Returns:
            The groups in order; per (row, column) the busbw of every measured run (the
            diagonal: the group run, or its pair runs when it has none; off the diagonal:
            the cross runs between the two groups); and per cell the worst verdict or the
            skip reason where nothing was measured.
        """
        if self.test_plan is None:
            return [], {}, {}
        groups = list(self.test_plan.groups)
        nccl = [o for o in self.outcomes if o.check == "nccl"]
        with_group_run = {o.detail.get("groups") for o in nccl if o.detail.get("phase") == "group"}
        cells: dict[tuple[str, str], list[Outcome]] = {}
        for outcome in nccl:
            phase = outcome.detail.get("phase")
            names = [g for g in outcome.detail.get("groups", "").split(",") if g]
            if len(names) == 1 and (phase == "group" or (phase == "pairs" and names[0] not in with_group_run)):
                key = (names[0], names[0])
            elif phase == "cross" and len(names) == 2:
                key = (names[0], names[1])
            else:
                continue
            cells.setdefault(key, []).append(outcome)
        values: dict[tuple[str, str], list[float]] = {}
        states: dict[tuple[str, str], str] = {}
        for (a, b), outcomes in cells.items():
            measured = [o.result.figures.get("busbw_gbps") for o in outcomes]
            vals = [float(v) for v in measured if isinstance(v, int | float)]
            ran = [o for o in outcomes if o.verdict is not Verdict.SKIPPED]
            worst = max((o.verdict for o in ran), key=_RANK.__getitem__, default=None)
            state = str(worst) if worst is not None else outcomes[0].result.message
            # The matrix is symmetric: a cross cell shows in both triangles.
            for key in {(a, b), (b, a)}:
                values[key] = vals
                states[key] = state
        return groups, values, states

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data."""
        return {
            "cluster": self.cluster,
            "spec_file": self.spec_file,
            "provider": self.provider,
            "started_at": self.started_at,
            "duration_s": round(self.duration_s, 3),
            "passed": not self.failed,
            "checks": self.checks,
            "counts": {str(v): self.count(v) for v in Verdict},
            "failing_nodes": self.failing_nodes(),
            "nodes": [
                {
                    "hostname": s.hostname,
                    "role": s.role,
                    "group": s.group,
                    "verdict": str(s.verdict),
                    "checks": {k: str(v) for k, v in s.checks.items()},
                    "reasons": list(s.reasons),
                    "notes": list(s.notes),
                    **({"busbw_gbps": s.busbw_gbps} if s.busbw_gbps is not None else {}),
                }
                for s in self.node_summaries()
            ],
            "results": [
                {
                    "check": o.check,
                    "name": o.result.check,
                    "target": o.result.target,
                    "verdict": str(o.verdict),
                    "message": o.result.message,
                    "hint": o.result.hint,
                    "figures": o.result.figures,
                    "hosts": list(o.hosts),
                    "blame": list(o.blame),
                    "detail": o.detail,
                }
                for o in self.outcomes
            ],
            "thresholds": {hw: asdict(t) for hw, t in self.thresholds.items()},
            "test_plan": _test_plan_dict(self.test_plan),
            "drains": [asdict(d) for d in self.drains],
        }


def _test_plan_dict(test_plan: NcclPlan | None) -> dict[str, Any] | None:
    if test_plan is None:
        return None
    return {
        "group_kind": test_plan.group_kind,
        "groups": {name: list(hosts) for name, hosts in test_plan.groups.items()},
        "waves": [
            {"number": w.number, "phase": w.phase, "label": w.label, "runs": [r.hostlist for r in w.runs]}
            for w in test_plan.waves
        ],
        "notes": list(test_plan.notes),
    }


def write_report(report: Report, build_dir: Path) -> tuple[Path, Path]:
    """Write ``verify/report.json`` and ``verify/report.html`` under ``build_dir``.

    Both are written like every file of the build directory (atomically, never through a link,
    only into a directory clusterctl made) but stay out of its manifest, so a re-render keeps them.

    Returns:
        The paths of the JSON and HTML files.

    Raises:
        BuildDirError: a link or a rendered file stands where a report goes, or ``build_dir`` is
            not a build directory clusterctl made.
    """
    json_path = write_run_file(
        build_dir, f"{REPORT_DIR}/report.json", (json.dumps(report.to_dict(), indent=2, default=str) + "\n").encode()
    )
    html_path = write_run_file(build_dir, f"{REPORT_DIR}/report.html", render_html(report).encode())
    return json_path, html_path


# --- HTML --------------------------------------------------------------------------------

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#1d2330;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #dde1e8}
.meta{color:#5b6475;font-size:13px}
.banner{padding:10px 14px;border-radius:6px;font-weight:600;margin:14px 0}
.banner.pass{background:#e3f5e8;color:#17602f}.banner.fail{background:#fde7e7;color:#8f1d1d}
table{border-collapse:collapse;font-size:13px}th,td{border:1px solid #dde1e8;padding:4px 8px;text-align:left;
vertical-align:top}th{background:#f3f5f8}
td.pass,span.pass{background:#dff3e4;color:#17602f}td.fail,span.fail{background:#fbdada;color:#8f1d1d;font-weight:600}
td.skipped,span.skipped{background:#eef0f3;color:#5b6475}
td.none{color:#a0a7b4}
.heat{display:flex;flex-wrap:wrap;gap:14px}.heat .group{border:1px solid #dde1e8;border-radius:6px;padding:8px}
.heat .group h3{font-size:13px;margin:0 0 6px}.tiles{display:grid;grid-template-columns:repeat(8,64px);gap:4px}
.tile{height:44px;border-radius:4px;font-size:11px;display:flex;flex-direction:column;justify-content:center;
align-items:center;color:#1d2330}.tile b{font-size:11px}
.matrix td{width:86px;height:40px;text-align:center;font-size:12px}
.legend span{display:inline-block;padding:2px 8px;margin-right:6px;border-radius:3px;font-size:12px}
details{margin:4px 0}code{font-size:12px;background:#f3f5f8;padding:1px 3px;border-radius:3px}
.msg{max-width:720px}
"""


def _esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def _heat_colour(value: float, mark: float | None) -> str:
    """Red below 80 % of the mark, through amber at the mark, to green at 110 % and above."""
    if mark is None or mark <= 0:
        return "#dfe9f7"
    ratio = max(0.0, min(1.0, (value / mark - 0.8) / 0.3))
    # Interpolate hue from red (0) to green (130) in HSL.
    return f"hsl({ratio * 130:.0f},70%,78%)"


def _verdict_colour(verdict: Verdict | str) -> str:
    return {"pass": "#dff3e4", "fail": "#fbdada"}.get(str(verdict), "#eef0f3")


def _node_mark(report: Report, node: PlanNode, n_nodes: int) -> float | None:
    thresholds = report.thresholds.get(node.hardware)
    return thresholds.nccl_busbw_gbps(n_nodes) if thresholds is not None else None


def _inter_mark(report: Report) -> float | None:
    marks = [t.nccl_inter_busbw_gbps for t in report.thresholds.values() if t.nccl_inter_busbw_gbps is not None]
    return min(marks) if marks else None


def _node_table(report: Report, summaries: list[NodeSummary]) -> str:
    columns = [c for c in report.checks if any(c in s.checks for s in summaries)]
    head = "".join(f"<th>{_esc(c)}</th>" for c in columns)
    rows = []
    for s in summaries:
        cells = []
        for c in columns:
            verdict = s.checks.get(c)
            cells.append(f'<td class="{_esc(verdict)}">{_esc(verdict)}</td>' if verdict else '<td class="none">-</td>')
        why = _why(s)
        rows.append(
            f'<tr data-node="{_esc(s.hostname)}" data-verdict="{_esc(s.verdict)}">'
            f'<td class="node">{_esc(s.hostname)}</td><td>{_esc(s.role)}</td><td>{_esc(s.group)}</td>'
            f'<td class="verdict {_esc(s.verdict)}">{_esc(s.verdict)}</td>{"".join(cells)}'
            f'<td class="msg">{_esc(why)}</td></tr>'
        )
    return (
        '<table id="nodes"><thead><tr><th>node</th><th>role</th><th>group</th><th>verdict</th>'
        f"{head}<th>why</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _node_heatmap(report: Report, summaries: list[NodeSummary]) -> str:
    by_name = {n.hostname: n for n in report.nodes}
    groups: dict[str, list[NodeSummary]] = {}
    for s in summaries:
        groups.setdefault(s.group, []).append(s)
    blocks = []
    for name, members in groups.items():
        tiles = []
        for s in members:
            if s.busbw_gbps is not None:
                colour = _heat_colour(s.busbw_gbps, _node_mark(report, by_name[s.hostname], 1))
                if s.verdict is Verdict.FAIL:
                    colour = _verdict_colour(Verdict.FAIL)
                label = f"{s.busbw_gbps:g}"
            else:
                colour, label = _verdict_colour(s.verdict), str(s.verdict)
            title = _why(s) or str(s.verdict)
            tiles.append(
                f'<div class="tile" style="background:{colour}" title="{_esc(title)}">'
                f"<b>{_esc(s.hostname)}</b><span>{_esc(label)}</span></div>"
            )
        blocks.append(f'<div class="group"><h3>{_esc(name)}</h3><div class="tiles">{"".join(tiles)}</div></div>')
    return f'<div class="heat" id="node-heatmap">{"".join(blocks)}</div>'


def _group_heatmap(report: Report) -> str:
    groups, values, states = report.group_matrix()
    if not groups:
        return '<p class="meta">The NCCL check did not run.</p>'
    mark = _inter_mark(report)
    head = "".join(f"<th>{_esc(g)}</th>" for g in groups)
    rows = []
    for a in groups:
        cells = []
        for b in groups:
            vals = values.get((a, b), [])
            state = states.get((a, b), "")
            if vals:
                worst, median = min(vals), statistics.median(vals)
                colour = _heat_colour(worst, mark)
                title = f"min {worst:g}, median {median:g} GB/s over {len(vals)} runs"
                cells.append(f'<td style="background:{colour}" title="{_esc(title)}">{worst:g}</td>')
            elif state:
                short = "skipped" if state.startswith("skipped") else state
                cells.append(
                    f'<td style="background:{_verdict_colour(short)}" title="{_esc(state)}">{_esc(short)}</td>'
                )
            else:
                cells.append('<td class="none">-</td>')
        rows.append(f"<tr><th>{_esc(a)}</th>{''.join(cells)}</tr>")
    kind = "SU" if report.test_plan and report.test_plan.group_kind == "su" else "leaf group"
    note = f"all_reduce busbw (GB/s), worst run per cell; mark {mark:g} GB/s" if mark else "all_reduce busbw (GB/s)"
    return (
        f'<p class="meta">{_esc(note)}. Diagonal: the {kind} run; elsewhere: node pairs across the spines.</p>'
        f'<table class="matrix" id="group-heatmap"><tr><th></th>{head}</tr>{"".join(rows)}</table>'
    )


def _results_table(outcomes: list[Outcome], table_id: str) -> str:
    rows = []
    for o in outcomes:
        r = o.result
        figures = ", ".join(f"{k}={v}" for k, v in r.figures.items())
        extra = ""
        if figures or o.detail.get("command"):
            command = f"<code>{_esc(o.detail['command'])}</code><br>" if o.detail.get("command") else ""
            extra = f"<details><summary>figures</summary>{command}{_esc(figures)}</details>"
        rows.append(
            f'<tr data-verdict="{_esc(o.verdict)}"><td>{_esc(r.check)}</td><td>{_esc(r.target)}</td>'
            f'<td class="{_esc(o.verdict)}">{_esc(o.verdict)}</td><td class="msg">{_esc(r.message)}'
            f"{'<br><i>' + _esc(r.hint) + '</i>' if r.hint else ''}{extra}</td></tr>"
        )
    return (
        f'<table id="{table_id}"><thead><tr><th>check</th><th>target</th><th>verdict</th><th>message</th></tr>'
        f"</thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _thresholds_html(report: Report) -> str:
    if not report.thresholds:
        return '<p class="meta">No GPU nodes: no GPU thresholds apply.</p>'
    parts = []
    for hw, t in report.thresholds.items():
        items = "".join(f"<li>{_esc(line)}</li>" for line in t.basis)
        parts.append(f"<h3>{_esc(hw)} ({_esc(t.gpu_model)})</h3><ul>{items}</ul>")
    return "".join(parts)


def render_html(report: Report) -> str:
    """The report as one self-contained HTML page (inline CSS, no scripts, no external assets)."""
    summaries = report.node_summaries()
    failing = [s for s in summaries if s.verdict is Verdict.FAIL]
    verdict = "fail" if report.failed else "pass"
    banner = (
        f"FAIL: {len(failing)} of {len(summaries)} nodes failed"
        + (f", {len(report.cluster_failures())} cluster-wide failures" if report.cluster_failures() else "")
        if report.failed
        else f"PASS: all {len(summaries)} nodes passed or were skipped with a reason"
    )
    counts = ", ".join(f"{report.count(v)} {v}" for v in Verdict)
    drains = (
        "".join(
            f"<li><b>{_esc(d.host)}</b>: {_esc(d.reason)}"
            + ("" if d.done else f" <span class='fail'>not drained: {_esc(d.error)}</span>")
            + "</li>"
            for d in report.drains
        )
        or "<li>none</li>"
    )
    plan_notes = ""
    if report.test_plan is not None:
        waves = "".join(
            f"<li>wave {w.number}: {_esc(w.phase)}{(' ' + _esc(w.label)) if w.label else ''}, {len(w.runs)} runs</li>"
            for w in report.test_plan.waves
        )
        notes = "".join(f"<li>{_esc(n)}</li>" for n in report.test_plan.notes)
        plan_notes = f"<h2>NCCL test plan</h2><ul>{waves}{notes}</ul>"
    cluster_failures = report.cluster_failures()
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>clusterctl verify: {_esc(report.cluster)}</title>
<style>{_CSS}</style></head>
<body>
<h1>clusterctl verify: {_esc(report.cluster)}</h1>
<p class="meta">spec {_esc(report.spec_file)} &middot; provider {_esc(report.provider)} &middot; started
{_esc(report.started_at)} &middot; {report.duration_s:.1f} s &middot; checks {_esc(", ".join(report.checks))}
&middot; results: {_esc(counts)}</p>
<div class="banner {verdict}" id="summary">{_esc(banner)}</div>
<h2>Nodes</h2>
{_node_table(report, summaries)}
<h2>Heat map: nodes</h2>
<p class="legend"><span class="pass">pass</span><span class="fail">fail</span><span class="skipped">skipped</span>
Tiles with a number show the single-node all_reduce busbw (GB/s), red below the mark to green above it.</p>
{_node_heatmap(report, summaries)}
<h2>Heat map: {"SU" if report.test_plan and report.test_plan.group_kind == "su" else "leaf-group"} pairs</h2>
{_group_heatmap(report)}
<h2>Cluster-wide failures</h2>
{_results_table(cluster_failures, "cluster-failures") if cluster_failures else "<p class='meta'>none</p>"}
<h2>Drained</h2>
<ul id="drains">{drains}</ul>
<h2>All results</h2>
{_results_table(report.outcomes, "results")}
<h2>Thresholds</h2>
{_thresholds_html(report)}
{plan_notes}
</body></html>
"""


# --- terminal ------------------------------------------------------------------------------

_STYLE = {Verdict.PASS: "green", Verdict.FAIL: "bold red", Verdict.SKIPPED: "dim"}


def summary_table(report: Report) -> Table:
    """The per-node verdicts as a rich table (for a terminal)."""
    summaries = report.node_summaries()
    columns = [c for c in report.checks if any(c in s.checks for s in summaries)]
    table = Table(title=f"clusterctl verify: {report.cluster}", title_justify="left")
    for name in ("node", "group", "verdict", *columns, "why"):
        table.add_column(name, overflow="fold")
    for s in summaries:
        cells = [
            Text(str(s.checks[c]), style=_STYLE[s.checks[c]]) if c in s.checks else Text("-", style="dim")
            for c in columns
        ]
        why = _why(s)
        table.add_row(s.hostname, s.group, Text(str(s.verdict), style=_STYLE[s.verdict]), *cells, why)
    return table


def summary_lines(report: Report) -> list[str]:
    """The per-node verdicts as plain lines (for logs and pipes)."""
    lines = []
    for s in report.node_summaries():
        checks = " ".join(f"{name}={verdict}" for name, verdict in s.checks.items())
        why = _why(s)
        lines.append(f"{s.hostname} {s.verdict} {checks}" + (f" -- {why}" if why else ""))
    return lines
