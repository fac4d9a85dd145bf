"""The front half of every command: load the spec, run the rules, build the plan, render.

Commands call these; tests call them directly. Nothing here prints.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from clusterctl.plan import Plan
from clusterctl.plan.service import read_swaps
from clusterctl.render import RenderedFile, render_files, write_tree
from clusterctl.render.check import finding as render_finding
from clusterctl.render.escape import RenderError
from clusterctl.render.tree import bundle_files, do_not_edit
from clusterctl.rules import not_run, validate
from clusterctl.run.state import SWAPS_KEY, StateDir
from clusterctl.spec import Finding, Level, LoadedSpec, SpecError, load_spec


@dataclass
class Validated:
    """A spec that passed validation, its findings, its plan and the files it renders to."""

    loaded: LoadedSpec
    findings: list[Finding]
    plan: Plan
    files: list[RenderedFile] = field(default_factory=list)


def fails(findings: Iterable[Finding], strict: bool) -> bool:
    """Whether findings stop the command: errors always, warnings under ``--strict``."""
    threshold = Level.WARNING if strict else Level.ERROR
    return any(f.level >= threshold for f in findings)


def load_and_validate(
    spec_path: str | Path, skip: Iterable[str] = (), strict: bool = False, state_root: Path | None = None
) -> Validated:
    """Load, validate and plan ``spec_path``.

    The plan is rendered here too (in memory): a value that a generated format cannot carry is a
    spec error located at its field, found before anything is written or run. With ``state_root``
    the plan puts in service the spares the cluster's state records (``clusterctl node replace``).

    Raises:
        SpecError: the spec has errors (or warnings with ``strict``); carries all findings.
        StateDirError: the cluster's state cannot be read.
        SwapError: its record of spares in service is not one clusterctl wrote.
    """
    loaded = load_spec(spec_path)
    swaps = read_swaps(StateDir(state_root, loaded.spec.name).read().get(SWAPS_KEY)) if state_root else []
    findings, plan = validate(loaded, skip, swaps)
    if plan is None or fails(findings, strict):
        raise SpecError(findings, not_run(findings))
    try:
        files = render_files(plan)
    except RenderError as exc:
        raise SpecError([*findings, render_finding(exc, loaded)]) from None
    return Validated(loaded=loaded, findings=findings, plan=plan, files=files)


def default_build_dir(plan: Plan) -> Path:
    """``build/<cluster>`` in the current directory."""
    return Path("build") / plan.cluster.name


def render(validated: Validated, out_dir: Path | None = None) -> tuple[Path, list[str]]:
    """Render the build directory; returns it and the files that changed."""
    target = out_dir or default_build_dir(validated.plan)
    marker = do_not_edit(validated.plan, target)
    files = [marker if f.path == marker.path else f for f in validated.files or render_files(validated.plan)]
    changed = write_tree([*files, *bundle_files(validated.plan, files)], target)
    return target, changed
