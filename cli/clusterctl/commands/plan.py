"""``clusterctl plan SPEC``: the resolved cluster and the sizing report."""

from __future__ import annotations

from ipaddress import IPv4Address

import click
from rich.table import Table

from clusterctl.app import App
from clusterctl.commands.common import (
    handle_internal_errors,
    output_option,
    rule_options,
    spec_argument,
    validated_or_exit,
)
from clusterctl.plan import Plan
from clusterctl.report import document


def address_range(addresses: list[str]) -> str:
    """``10.20.0.17-10.20.0.20`` for consecutive addresses, else them all, comma-separated."""
    if not addresses:
        return ""
    numbers = [int(IPv4Address(a)) for a in addresses]
    if numbers == list(range(numbers[0], numbers[0] + len(numbers))):
        return addresses[0] if len(addresses) == 1 else f"{addresses[0]}-{addresses[-1]}"
    return ", ".join(addresses)


def _fmt_days(days: float | None) -> str:
    return f"{days:.1f} days" if days is not None else "n/a (no GPUs)"


def plan_tables(plan: Plan) -> list[Table]:
    """The plan as rich tables (nodes, fabric, power/storage/workload)."""
    nodes = Table(title=f"Cluster {plan.cluster.name} ({plan.cluster.provider}, {plan.cluster.os})")
    for col in ("group", "role", "hardware", "nodes", "spares", "hosts", "addresses", "GPUs"):
        nodes.add_column(col, justify="right" if col in ("nodes", "spares", "GPUs") else "left", overflow="fold")
    for group in plan.groups:
        members = [n for n in plan.nodes if n.group == group.name]
        nodes.add_row(
            group.name + (" (burst)" if group.burst else ""),
            group.role,
            group.hardware,
            str(group.count),
            str(group.spares),
            group.hosts,
            address_range([n.address for n in members]),
            str(sum(n.gpus for n in members)),
        )
    nodes.add_row("total", "", "", str(len(plan.nodes)), "", "", "", str(plan.gpus.total), style="bold")

    f = plan.fabric
    fabric = Table(title=f"Fabric: {f.kind} {f.speed_gbps} Gb/s, {f.layout}, {f.radix}-port switches")
    fabric.add_column("item")
    fabric.add_column("value", justify="right")
    for label, value in (
        ("tiers", f.tiers),
        ("scalable units", f"{len(f.sus)} x {f.su_size} nodes" if f.su_size else "-"),
        ("leaf switches", f.leaf_switches),
        ("spine switches", f.spine_switches),
        ("core switches", f.core_switches),
        ("node links", f.node_links),
        ("leaf-spine links", f.leaf_spine_links),
        ("spine-core links", f.spine_core_links),
        ("oversubscription", f"{f.oversubscription:g}:1"),
        ("2-tier capacity", f"{f.max_endpoints_2tier} ports"),
    ):
        fabric.add_row(label, str(value))

    sizing = Table(title="Sizing")
    sizing.add_column("item")
    sizing.add_column("value", justify="right")
    sizing.add_row("GPUs (active / total)", f"{plan.gpus.active} / {plan.gpus.total}")
    sizing.add_row("HBM", f"{plan.gpus.hbm_gib:,.0f} GiB")
    sizing.add_row("BF16 dense peak (active)", f"{plan.gpus.peak_bf16_pflops:,.1f} PFLOP/s")
    sizing.add_row("IT power", f"{plan.power.it_kw:,.1f} kW")
    sizing.add_row("max rack power", f"{plan.power.max_rack_kw:,.1f} kW")
    for tier in plan.storage:
        bw = ", ".join(
            x
            for x in (f"read {tier.read_bw}" if tier.read_bw else "", f"write {tier.write_bw}" if tier.write_bw else "")
            if x
        )
        sizing.add_row(f"storage {tier.name} ({tier.kind}, {tier.purpose})", f"{tier.mount} {bw}".strip())
        if tier.checkpoint_write_s is not None:
            sizing.add_row(f"  checkpoint write to {tier.name}", f"{tier.checkpoint_write_s:.1f} s")
    if plan.workload:
        w = plan.workload
        sizing.add_row("model state (16 B/param)", f"{w.model_state_tib:.2f} TiB")
        sizing.add_row("min GPUs for model state", str(w.min_gpus_for_state))
        sizing.add_row("checkpoint size", f"{w.checkpoint_tib:.2f} TiB")
        sizing.add_row(f"training time at MFU {w.target_mfu:g}", _fmt_days(w.train_days))
    return [nodes, fabric, sizing]


@click.command("plan")
@spec_argument
@output_option
@rule_options
@click.pass_obj
@handle_internal_errors
def plan_cmd(app: App, spec: str, output: str, skip_rules: tuple[str, ...], strict: bool) -> None:
    """Resolve SPEC and print the plan: nodes with their addresses, fabric sizing, power, storage and
    training time.

    Exit status: 0 planned, 1 the spec is not valid, 2 bad usage, 70 internal error.
    """
    app.output = output
    result = validated_or_exit(app, spec, skip_rules, strict)
    if app.json:
        # The findings are the envelope's; the sizing report keeps everything else.
        report = {k: v for k, v in result.plan.summary().items() if k != "findings"}
        report["addresses"] = [
            {"hostname": n.hostname, "group": n.group, "role": n.role, "address": n.address, "burst": n.burst}
            for n in result.plan.nodes
        ]
        app.print_json(document("plan", result.findings, ok=True, **report))
        return
    for table in plan_tables(result.plan):
        app.out.print(table)
    for note in result.plan.power.assumptions:
        app.out.print(f"[dim]assumption: {note}[/dim]")
    app.show_findings(result.findings)
