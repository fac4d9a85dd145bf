"""Which locked images ``up`` may make nodes from: the lock beside the spec, checked against the plan."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from clusterctl.image.build import ImageBuildError, check_locked
from clusterctl.image.hash import ImageInputError
from clusterctl.image.lock import LockedImage, LockError, read_lock
from clusterctl.image.targets import target_for
from clusterctl.plan import Plan


@dataclass
class LockChoice:
    """The locked image of each profile ``up`` may use, the warnings to show, and why ``--locked`` stops."""

    images: dict[str, LockedImage] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    error: str = ""


def locked_images(spec: str, plan: Plan, lock_file: Path, locked: bool, *, build_dir: Path | None = None) -> LockChoice:
    """The locked image of each profile ``up`` may use; with ``locked`` (``--locked``), every profile's.

    ``build_dir``: the build directory ``up`` renders (where a bare-metal archive must be).

    Without ``locked`` a profile whose image does not match (or a lock of no use here) is a
    warning: its new nodes start from the base image and run both stages, as without a lock.
    With it, the same is an error and nothing is done.
    """
    rebuild = f"Run `clusterctl image build {spec}` and commit {lock_file}."
    try:
        lock = read_lock(lock_file)
    except LockError as exc:
        if locked:
            return LockChoice(error=f"--locked: {exc} Nothing was done.")
        return LockChoice(warnings=[f"{exc} Nodes start from the base image."])
    if lock is None:
        if locked:
            return LockChoice(error=f"--locked: there is no lock at {lock_file}. {rebuild} Nothing was done.")
        return LockChoice()
    try:
        checks = check_locked(plan, lock, target_for(plan, build_dir=build_dir), lock_file=lock_file)
    except (ImageBuildError, ImageInputError) as exc:
        if locked:
            return LockChoice(error=f"--locked: {exc}. Nothing was done.")
        return LockChoice(warnings=[f"{lock_file} is not used: {exc}."])
    problems = list(dict.fromkeys(c.problem for c in checks.values() if c.problem))
    if problems and locked:
        lines = "\n".join(f"  - {p}" for p in problems)
        return LockChoice(
            error=f"--locked: the spec no longer matches {lock_file}:\n{lines}\n{rebuild} Nothing was done."
        )
    return LockChoice(
        images={p: c.image for p, c in checks.items() if c.usable and c.image is not None},
        warnings=[f"{p}; new nodes start from the base image and run both stages. {rebuild}" for p in problems],
    )
