"""``clusterctl up SPEC``: validate, render, provision, configure, check readiness, summarize."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from clusterctl.agent.apply import APPLY_LOG
from clusterctl.app import App
from clusterctl.commands.common import (
    handle_internal_errors,
    max_unavailable_option,
    output_option,
    progress_under_lock,
    rule_options,
    spec_argument,
    state_dir_option,
    validated_or_exit,
)
from clusterctl.commands.image import lock_option
from clusterctl.image.lock import lock_path
from clusterctl.ops.images import locked_images
from clusterctl.ops.pull import DEFAULT_APPLY_TIMEOUT_S
from clusterctl.ops.readiness import partitions_summary
from clusterctl.ops.retire import DEFAULT_DRAIN_TIMEOUT_S
from clusterctl.ops.up import UpResult, up
from clusterctl.pipeline import default_build_dir
from clusterctl.plan import Plan
from clusterctl.render import BuildDirError
from clusterctl.render.inventory import container_name
from clusterctl.render.pulling import pull_nodes
from clusterctl.report import document
from clusterctl.run.ansible import AnsibleSetupError, HostFailure, ensure_collections
from clusterctl.run.failure_cause import summary_lines
from clusterctl.run.providers import ProviderError
from clusterctl.run.state import LockedError, StateDir, StateDirError


def _require_engine_for(plan: Plan) -> None:
    """Cloud and bare-metal providers need the Pulumi CLI; check before anything happens."""
    if plan.cluster.provider == "local":
        return
    from clusterctl.run.pulumi import PulumiCliMissingError, require_pulumi_cli

    try:
        if plan.cluster.provider == "baremetal":
            from clusterctl.run.providers.baremetal import require_engine

            require_engine()
        else:
            require_pulumi_cli()
    except PulumiCliMissingError as exc:
        raise ProviderError(str(exc)) from None


def _login_hint(plan: Plan) -> str:
    login = next((n for n in plan.nodes if n.role == "login"), None) or next(
        n for n in plan.nodes if n.role == "controller"
    )
    if plan.cluster.provider == "local":
        return f"docker exec -it {container_name(plan, login)} bash -l"
    return f"ssh {plan.cluster.ssh_user}@{login.address}"


def summary_data(plan: Plan, result: UpResult) -> dict[str, Any]:
    """The end-of-run summary (also the JSON ``summary`` event)."""
    emulated = sorted(n.hostname for n in plan.nodes if n.emulated and not n.burst)
    return {
        "cluster": plan.cluster.name,
        "ok": result.ok,
        "error": result.error,
        "build_dir": str(result.build_dir),
        "nodes": {n.hostname: n.role for n in plan.nodes if not n.burst},
        "partitions": partitions_summary(plan),
        "login": _login_hint(plan),
        "emulated_gpus": emulated,
        "changed_tasks": result.configure.changed_total if result.configure else None,
        "failures": [
            {"host": f.host, "task": f.task, "message": f.message, "unreachable": f.unreachable, "cause": list(f.cause)}
            for f in (result.configure.failures if result.configure else [])
        ],
        "readiness_problems": result.readiness.problems if result.readiness else [],
        "notes": result.readiness.notes if result.readiness else [],
        "timings_s": result.timings,
        "baked": result.baked,
        "converge_skipped": result.converge_skipped,
    }


def _print_summary(app: App, plan: Plan, data: dict[str, Any], failures: list[HostFailure]) -> None:
    out = app.out
    if data["failures"]:
        out.print("[bold red]Failed:[/bold red]")
        for line in summary_lines(failures):
            out.print(line, markup=False)
        pulled = sorted({f.host for f in failures if f.host in {n.hostname for n in pull_nodes(plan)}})
        if len(pulled) < len({f.host for f in failures}):
            out.print(f"Ansible log: {data['build_dir']}/logs/ansible.log", markup=False)
        if pulled:
            out.print(
                f"On {', '.join(pulled)} (they configure themselves): `journalctl -u clusterctl-agent` and "
                f"{APPLY_LOG}.",
                markup=False,
            )
        out.print("Fix the cause and run `clusterctl up` again; it continues where it stopped.", markup=False)
    if data["error"] and not data["failures"] and not data["readiness_problems"]:
        out.print(f"[bold red]error:[/bold red] {escape(data['error'])}")
    for problem in data["readiness_problems"]:
        out.print(f"[red]not ready:[/red] {escape(problem)}")
    if app.quiet:
        return
    for note in data["notes"]:
        out.print(f"note: {note}", markup=False)
    if data["ok"]:
        did = (
            f"configure stage skipped: {data['converge_skipped']}; `clusterctl up --converge` runs it anyway"
            if data["converge_skipped"]
            else f"{data['changed_tasks']} changed task(s)"
        )
        seconds = data["timings_s"].get("total", 0)
        out.print(f"[bold green]Cluster {plan.cluster.name} is up[/bold green] ({did}, {seconds:.0f} s)")
    roles: dict[str, list[str]] = {}
    for host, role in data["nodes"].items():
        roles.setdefault(role, []).append(host)
    out.print("Nodes: " + "; ".join(f"{role}: {', '.join(hosts)}" for role, hosts in roles.items()), markup=False)
    out.print("Partitions: " + "; ".join(data["partitions"]), markup=False)
    out.print(f"Log in: {data['login']}", markup=False)
    if data["baked"]:
        out.print(
            f"From locked images (configure stage only): {', '.join(data['baked'])}",
            markup=False,
        )
    if data["emulated_gpus"]:
        out.print(
            "Emulated GPUs on "
            + ", ".join(data["emulated_gpus"])
            + ": Slurm schedules them as real GRES (/dev/nvidia* character devices); the GPU roles "
            "(driver, CUDA, NCCL, DCGM, enroot) were skipped there.",
            markup=False,
        )


@click.command("up")
@spec_argument
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), help="Build directory.")
@state_dir_option
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation (cloud previews).")
@click.option(
    "--locked",
    is_flag=True,
    help="Fail, doing nothing, unless every hardware profile has its image in the lock, matching the spec.",
)
@click.option("--no-image", is_flag=True, help="Make new nodes from the plain base image (both stages), lock or not.")
@click.option(
    "--converge",
    is_flag=True,
    help="Run the configure stage even when every node is as the last converge left it and nothing it reads changed.",
)
@click.option(
    "--drain-timeout",
    type=click.FloatRange(min=0),
    default=DEFAULT_DRAIN_TIMEOUT_S,
    show_default=True,
    help="Seconds to wait for the jobs on nodes leaving the cluster or in an upgrade batch (drained first).",
)
@click.option(
    "--apply-timeout",
    type=click.FloatRange(min=1),
    default=DEFAULT_APPLY_TIMEOUT_S,
    show_default=True,
    help="Seconds the nodes that configure themselves have, all together, to report their bundle applied.",
)
@max_unavailable_option
@lock_option
@output_option
@rule_options
@click.pass_obj
@handle_internal_errors
def up_cmd(
    app: App,
    spec: str,
    out_dir: Path | None,
    state_dir: Path,
    yes: bool,
    locked: bool,
    no_image: bool,
    converge: bool,
    drain_timeout: float,
    apply_timeout: float,
    max_unavailable: int | None,
    lock_file: Path | None,
    output: str,
    skip_rules: tuple[str, ...],
    strict: bool,
) -> None:
    """Bring the cluster in SPEC up, or converge it to SPEC if it exists.

    Re-running finishes an interrupted or failed run and changes nothing when nothing differs.
    With a clusterctl.lock beside SPEC (`clusterctl image build`), new nodes are made from their
    profile's locked image and nodes made from it run only the configure stage. With --output
    json, one event per line while it runs, then the report envelope with the summary.

    Exit status: 0 the cluster is up and ready, 1 it is not (invalid spec, a tool missing, a
    provider, configure or readiness failure: what was done is recorded, `up` again goes on from
    there), 2 bad usage, 70 internal error.
    """
    app.output = output
    if locked and no_image:
        raise click.UsageError("--locked and --no-image exclude each other.")
    validated = validated_or_exit(app, spec, skip_rules, strict, state_dir)
    plan = validated.plan
    try:
        _require_engine_for(plan)
        # Before anything is created: an installed clusterctl fetches them once, or says how to get them.
        ensure_collections(app.display_info)
    except (ProviderError, AnsibleSetupError) as exc:
        app.abort(f"{exc} Nothing was created.", 1)
    state = StateDir(state_dir, plan.cluster.name)
    out_dir = out_dir or _recorded_build_dir(state) or default_build_dir(plan).resolve()
    images = None
    if not no_image:
        # A bare-metal archive counts where the PXE server serves it: this run's build directory.
        choice = locked_images(spec, plan, lock_path(spec, lock_file), locked, build_dir=out_dir)
        if choice.error:
            app.abort(choice.error)
        for warning in choice.warnings:
            app.display_warning(warning)
        images = choice.images
    if not app.json:
        app.show_findings(validated.findings)
    try:
        with progress_under_lock(app, state, "up") as bus:
            result = up(
                validated,
                state,
                bus,
                out_dir=out_dir,
                yes=yes,
                images=images,
                converge=converge,
                drain_timeout=drain_timeout,
                stream_ansible=app.verbosity > 0 and not app.json,
                max_unavailable=max_unavailable,
                apply_timeout=apply_timeout,
            )
    except (LockedError, StateDirError, BuildDirError) as exc:
        app.abort(str(exc), 1)
    except (ProviderError, AnsibleSetupError) as exc:
        app.abort(
            f"{exc}\nWhat was created so far is recorded in {state.path}; run `clusterctl up` again after "
            "fixing this, or `clusterctl down` to remove it.",
            1,
        )
    data = summary_data(plan, result)
    if app.json:
        from clusterctl.run.events import Event

        bus.emit(Event("summary", status="ok" if result.ok else "error", message=result.error, data=data))
        app.print_json(document("up", validated.findings, **data), line=True)
    else:
        _print_summary(app, plan, data, result.configure.failures if result.configure else [])
    if not result.ok:
        raise SystemExit(1)


def _recorded_build_dir(state: StateDir) -> Path | None:
    """The build directory the last `up` used, when it is still there (so `up` from elsewhere reuses it)."""
    try:
        recorded = state.read().get("build_dir")
    except StateDirError:
        return None  # `up` itself reports the unreadable state
    return Path(recorded) if isinstance(recorded, str) and Path(recorded).is_dir() else None
