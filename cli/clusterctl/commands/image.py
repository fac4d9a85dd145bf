"""``clusterctl image build SPEC``: one baked node image per hardware profile, recorded in clusterctl.lock."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from clusterctl.app import App
from clusterctl.commands.common import (
    handle_internal_errors,
    output_option,
    progress_under_lock,
    rule_options,
    spec_argument,
    state_dir_option,
    validated_or_exit,
)
from clusterctl.image.build import ImageBuildError, build_images
from clusterctl.image.hash import ImageInputError
from clusterctl.image.lock import LockError, lock_path
from clusterctl.image.targets import target_for
from clusterctl.render import BuildDirError
from clusterctl.report import document
from clusterctl.run.ansible import AnsibleSetupError
from clusterctl.run.providers import ProviderError
from clusterctl.run.state import LockedError, StateDir, StateDirError

lock_option = click.option(
    "--lock",
    "lock_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The lock file [clusterctl.lock beside SPEC].",
)


@click.group("image")
def image_group() -> None:
    """Baked node images: the install stage of the roles, once per hardware profile."""


@image_group.command("build")
@spec_argument
@click.option("--profile", metavar="NAME", help="Only this hardware profile (default: every profile the nodes use).")
@click.option("--rebuild", is_flag=True, help="Build even when an image with the same content hash exists.")
@lock_option
@click.option(
    "--out",
    "build_root",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("build"),
    show_default=True,
    help="Where the builders' Ansible directories go (<out>/<cluster>.image.<profile>).",
)
@state_dir_option
@output_option
@rule_options
@click.pass_obj
@handle_internal_errors
def image_build_cmd(
    app: App,
    spec: str,
    profile: str | None,
    rebuild: bool,
    lock_file: Path | None,
    build_root: Path,
    state_dir: Path,
    output: str,
    skip_rules: tuple[str, ...],
    strict: bool,
) -> None:
    """Build the image of each hardware profile of SPEC, or reuse it, and write clusterctl.lock.

    An image holds what the roles' install stage puts on a node of the profile (packages, drivers,
    Slurm binaries; nothing of the cluster's). It is named by a hash of what it is made of: an
    unchanged spec rebuilds nothing, and a changed pin rebuilds only the profiles whose roles read
    it. The lock (commit it) records each image and every package in it; `clusterctl up` makes
    nodes from the locked images and runs only the configure stage there.

    Exit status: 0 every image built or reused and the lock written, 1 a build failed (the lock
    is not changed) or the spec is not valid, 2 bad usage, 70 internal error.
    """
    app.output = output
    validated = validated_or_exit(app, spec, skip_rules, strict)
    plan = validated.plan
    if not app.json:
        app.show_findings(validated.findings)
    state = StateDir(state_dir, plan.cluster.name)
    try:
        target = target_for(plan, state_dir=state.path, build_dir=build_root / plan.cluster.name)
    except ImageBuildError as exc:
        app.abort(f"{exc}. Nothing was built.")
    lock = lock_path(spec, lock_file)
    try:
        with progress_under_lock(app, state, "image build") as bus:
            report = build_images(
                validated,
                target,
                lock_file=lock,
                state=state,
                events=bus,
                build_root=build_root,
                only=profile,
                rebuild=rebuild,
            )
    except (LockedError, StateDirError, BuildDirError, LockError, ImageInputError) as exc:
        app.abort(str(exc))
    except (ImageBuildError, ProviderError, AnsibleSetupError) as exc:
        app.abort(f"{exc}\nThe lock was not changed; fix the cause and run `clusterctl image build` again.")
    data: dict[str, Any] = {
        "cluster": plan.cluster.name,
        "lock": str(report.lock_file),
        "lock_changed": report.lock_changed,
        "images": [
            {
                "profile": r.profile,
                "action": r.action,
                "hash": r.hash,
                "tag": r.tag,
                "ref": r.ref,
                "packages": r.packages,
                "seconds": round(r.seconds, 1),
                "roles": list(r.roles),
            }
            for r in report.results
        ],
    }
    if app.json:
        app.print_json(document("image build", [], ok=True, **data))
        return
    for r in report.results:
        if r.action == "reused":
            line = f"{r.profile}: reused {r.tag or r.ref} (hash {r.hash}, {r.packages} packages)"
        else:
            line = f"{r.profile}: built {r.tag or r.ref} in {r.seconds:.0f} s (hash {r.hash}, {r.packages} packages)"
        app.out.print(line, markup=False)
    state_word = "written" if report.lock_changed else "unchanged"
    app.out.print(f"Lock {state_word}: {report.lock_file} (commit it; `clusterctl up` uses these images)", markup=False)
