"""The verify report: per-node verdicts, heat maps, JSON and a self-contained HTML page.

``Report`` holds every finding of a run (one per verdict, `clusterctl.verify.result`); the
per-node view and the heat maps are derived from it. ``write_report`` puts ``report.json`` (the
reporter's document, `clusterctl.report.document`) and ``report.html`` (``templates/verify/
report.html.j2``, with its CSS inline and no scripts or external assets, so it can be mailed or
attached to a ticket as one file) under ``<build dir>/verify/``.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from clusterctl.plan.models import Plan, PlanNode
from clusterctl.render.builddir import write_run_file
from clusterctl.render.environment import render_template
from clusterctl.report import document
from clusterctl.spec.findings import Finding
from clusterctl.verify.checks import CHECK_NAMES
from clusterctl.verify.result import Verdict, blame_of, figures_of, hosts_of
from clusterctl.verify.testplan import NcclPlan
from clusterctl.verify.thresholds import AcceptanceThresholds

REPORT_DIR = "verify"
HTML_TEMPLATE = "verify/report.html.j2"
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

    @property
    def why(self) -> str:
        """The reasons (else the skip notes) as one line."""
        return "; ".join(text.rstrip(".") for text in self.reasons or self.notes)


def node_group(node: PlanNode) -> str:
    """The group a node is shown under: ``su1``, its leaf switch, or its role."""
    if node.role != "compute":
        return node.role
    if node.su is not None:
        return f"su{node.su}"
    return node.topology_switch or node.rack


def _check_verdict(host: str, of_check: list[Finding]) -> tuple[Verdict, list[str], list[str]]:
    """One check's cell for a node: its verdict, the failures counted against it, the skip notes.

    Fail when it blames the node; pass when any of its results on the node passed (a node cleared
    by its other pair runs is not at fault); fail when it only failed without blaming anyone
    (slurmctld unreachable); skipped otherwise.
    """
    verdicts = [Verdict.of(f) for f in of_check]
    blamed = [f for f in of_check if Verdict.of(f) is Verdict.FAIL and host in blame_of(f)]
    if blamed:
        return Verdict.FAIL, [f"{f.code}: {f.message}" for f in blamed], []
    if Verdict.PASS in verdicts:
        return Verdict.PASS, [], []
    failed = [f for f in of_check if Verdict.of(f) is Verdict.FAIL and len(hosts_of(f)) <= 2]
    if failed:
        return Verdict.FAIL, [f"{f.code}: {f.message}" for f in failed], []
    if Verdict.FAIL in verdicts:
        # Only a cluster-wide result failed (a leaf or spine run): not this node's fault.
        return Verdict.SKIPPED, [], []
    return Verdict.SKIPPED, [], [f.message for f in of_check]


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
        findings: Every verdict, in the order the checks gave them.
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
    findings: list[Finding]
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
        return any(Verdict.of(f) is Verdict.FAIL for f in self.findings)

    def count(self, verdict: Verdict) -> int:
        """Results with ``verdict``."""
        return sum(1 for f in self.findings if Verdict.of(f) is verdict)

    def failing_nodes(self) -> list[str]:
        """Nodes a failure is counted against, in plan order."""
        blamed = {h for f in self.findings if Verdict.of(f) is Verdict.FAIL for h in blame_of(f)}
        return [n.hostname for n in self.nodes if n.hostname in blamed]

    def cluster_failures(self) -> list[Finding]:
        """Failures pinned on no node: partitions, aggregate storage, leaf and spine runs."""
        return [f for f in self.findings if Verdict.of(f) is Verdict.FAIL and not blame_of(f)]

    def node_summaries(self) -> list[NodeSummary]:
        """One summary per node of the plan (see `_check_verdict` for each check's cell)."""
        summaries: list[NodeSummary] = []
        for node in self.nodes:
            host = node.hostname
            mine = [f for f in self.findings if host in hosts_of(f)]
            checks: dict[str, Verdict] = {}
            reasons: list[str] = []
            notes: list[str] = []
            for name in CHECK_NAMES:
                of_check = [f for f in mine if f.rule == name]
                if of_check:
                    checks[name], why, skip_notes = _check_verdict(host, of_check)
                    reasons.extend(why)
                    notes.extend(skip_notes)
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
        for f in self.findings:
            if f.rule == "nccl" and hosts_of(f) == (host,) and "busbw_gbps" in figures_of(f):
                return float(figures_of(f)["busbw_gbps"])
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
        nccl = [f for f in self.findings if f.rule == "nccl"]
        with_group_run = {tuple(f.data.get("groups", ())) for f in nccl if f.data.get("phase") == "group"}
        cells: dict[tuple[str, str], list[Finding]] = {}
        for finding in nccl:
            phase = finding.data.get("phase")
            names = list(finding.data.get("groups", ()))
            if len(names) == 1 and (phase == "group" or (phase == "pairs" and (names[0],) not in with_group_run)):
                key = (names[0], names[0])
            elif phase == "cross" and len(names) == 2:
                key = (names[0], names[1])
            else:
                continue
            cells.setdefault(key, []).append(finding)
        values: dict[tuple[str, str], list[float]] = {}
        states: dict[tuple[str, str], str] = {}
        for (a, b), findings in cells.items():
            measured = [figures_of(f).get("busbw_gbps") for f in findings]
            vals = [float(v) for v in measured if isinstance(v, int | float)]
            ran = [Verdict.of(f) for f in findings if Verdict.of(f) is not Verdict.SKIPPED]
            worst = max(ran, key=_RANK.__getitem__, default=None)
            state = str(worst) if worst is not None else findings[0].message
            # The matrix is symmetric: a cross cell shows in both triangles.
            for key in {(a, b), (b, a)}:
                values[key] = vals
                states[key] = state
        return groups, values, states

    def to_dict(self) -> dict[str, Any]:
        """The report as the reporter's JSON document (``docs/schemas/report.schema.json``)."""
        return document(
            "verify",
            self.findings,
            ok=not self.failed,
            cluster=self.cluster,
            spec_file=self.spec_file,
            provider=self.provider,
            started_at=self.started_at,
            duration_s=round(self.duration_s, 3),
            checks=self.checks,
            verdicts={str(v): self.count(v) for v in Verdict},
            failing_nodes=self.failing_nodes(),
            nodes=[
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
            thresholds={hw: asdict(t) for hw, t in self.thresholds.items()},
            test_plan=_test_plan_dict(self.test_plan),
            drains=[asdict(d) for d in self.drains],
        )


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


# --- HTML: the page's figures; templates/verify/report.html.j2 lays them out ----------------------


def heat_hue(value: float, mark: float | None) -> int | None:
    """Hue from red (0) below 80 % of the mark, through amber at the mark, to green (130) at 110 %.

    None without a mark: the template shows such a tile in a neutral colour.
    """
    if mark is None or mark <= 0:
        return None
    ratio = max(0.0, min(1.0, (value / mark - 0.8) / 0.3))
    return round(ratio * 130)


def _node_mark(report: Report, node: PlanNode, n_nodes: int) -> float | None:
    thresholds = report.thresholds.get(node.hardware)
    return thresholds.nccl_busbw_gbps(n_nodes) if thresholds is not None else None


def _inter_mark(report: Report) -> float | None:
    marks = [t.nccl_inter_busbw_gbps for t in report.thresholds.values() if t.nccl_inter_busbw_gbps is not None]
    return min(marks) if marks else None


def _tiles(report: Report, summaries: list[NodeSummary]) -> dict[str, list[dict[str, Any]]]:
    """Per group, one tile per node: its busbw (hue) or its verdict."""
    by_name = {n.hostname: n for n in report.nodes}
    groups: dict[str, list[dict[str, Any]]] = {}
    for s in summaries:
        tile: dict[str, Any] = {"node": s.hostname, "title": s.why or str(s.verdict), "state": str(s.verdict)}
        if s.busbw_gbps is not None:
            hue = heat_hue(s.busbw_gbps, _node_mark(report, by_name[s.hostname], 1))
            # A failed node shows red whatever it measured.
            tile.update(label=f"{s.busbw_gbps:g}", hue=hue, measured=s.verdict is not Verdict.FAIL)
        else:
            tile.update(label=str(s.verdict), hue=None, measured=False)
        groups.setdefault(s.group, []).append(tile)
    return groups


def _matrix(report: Report) -> dict[str, Any]:
    """The group-pair heat map: rows of cells with the worst busbw, or the state where none ran."""
    groups, values, states = report.group_matrix()
    mark = _inter_mark(report)
    rows = []
    for a in groups:
        cells: list[dict[str, Any]] = []
        for b in groups:
            vals, state = values.get((a, b), []), states.get((a, b), "")
            if vals:
                worst, median = min(vals), statistics.median(vals)
                title = f"min {worst:g}, median {median:g} GB/s over {len(vals)} runs"
                cells.append({"value": f"{worst:g}", "hue": heat_hue(worst, mark), "title": title})
            elif state:
                cells.append({"state": "skipped" if state.startswith("skipped") else state, "title": state})
            else:
                cells.append({})
        rows.append({"group": a, "cells": cells})
    return {"groups": groups, "rows": rows, "mark": f"{mark:g}" if mark else ""}


def _rows(findings: list[Finding]) -> list[dict[str, Any]]:
    return [
        {
            "finding": f,
            "verdict": str(Verdict.of(f)),
            "figures": ", ".join(f"{k}={v}" for k, v in figures_of(f).items()),
            "command": f.data.get("command", ""),
        }
        for f in findings
    ]


def render_html(report: Report) -> str:
    """The report as one self-contained HTML page (inline CSS, no scripts, no external assets)."""
    summaries = report.node_summaries()
    failing = [s for s in summaries if s.verdict is Verdict.FAIL]
    cluster_failures = report.cluster_failures()
    if report.failed:
        banner = f"FAIL: {len(failing)} of {len(summaries)} nodes failed" + (
            f", {len(cluster_failures)} cluster-wide failures" if cluster_failures else ""
        )
    else:
        banner = f"PASS: all {len(summaries)} nodes passed or were skipped with a reason"
    return render_template(
        HTML_TEMPLATE,
        report=report,
        verdict="fail" if report.failed else "pass",
        banner=banner,
        counts=", ".join(f"{report.count(v)} {v}" for v in Verdict),
        columns=[c for c in report.checks if any(c in s.checks for s in summaries)],
        summaries=summaries,
        tiles=_tiles(report, summaries),
        matrix=_matrix(report),
        group_kind="SU" if report.test_plan and report.test_plan.group_kind == "su" else "leaf group",
        cluster_failures=_rows(cluster_failures),
        results=_rows(report.findings),
    )


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
        table.add_row(s.hostname, s.group, Text(str(s.verdict), style=_STYLE[s.verdict]), *cells, s.why)
    return table


def summary_lines(report: Report) -> list[str]:
    """The per-node verdicts as plain lines (for logs and pipes)."""
    lines = []
    for s in report.node_summaries():
        checks = " ".join(f"{name}={verdict}" for name, verdict in s.checks.items())
        lines.append(f"{s.hostname} {s.verdict} {checks}" + (f" -- {s.why}" if s.why else ""))
    return lines
