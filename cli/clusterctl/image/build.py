"""Build (or reuse) the image of each hardware profile of a spec on a target, and write the lock.

For each profile: its content hash (:mod:`clusterctl.image.hash`); when the target already has
an image with that hash, it is reused (nothing is built); otherwise the target starts a builder
from its base image, site.yml's install stage runs on it through the same ansible-runner adapter
as ``up`` (one host in every group the profile's nodes are in, the render's group variables,
``clusterctl_stage=install``), and the target captures it. The lock gets every image's
reference and packages (:mod:`clusterctl.image.lock`).

A target is anything with the :class:`ImageTarget` methods: :mod:`clusterctl.image.local`
(Docker), and the cloud and bare-metal image stacks.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from clusterctl import __version__
from clusterctl.image.hash import (
    BUILDER_HOSTNAME,
    Builder,
    ImageHash,
    builder_for,
    collections_hash,
    profile_hash,
    profiles,
    roles_hash,
)
from clusterctl.image.lock import Lock, LockCheck, LockedImage, check_lock, read_lock, write_lock
from clusterctl.paths import roles_dir
from clusterctl.pipeline import Validated
from clusterctl.plan.models import Plan
from clusterctl.render import ansible_yaml
from clusterctl.render.builddir import write_tree
from clusterctl.render.tree import RenderedFile
from clusterctl.run.ansible import (
    REQUIRED_COLLECTIONS,
    AnsibleSetupError,
    ConfigureResult,
    collections_path,
    run_playbook,
)
from clusterctl.run.events import EventBus
from clusterctl.run.state import StateDir, ensure_private_dir

# Groups every rendered inventory has (render/inventory.py), so site.yml's patterns always resolve.
_STANDARD_GROUPS = ("controller", "login", "compute", "gpu", "emulated_gpu", "burst", "static_compute", "opensm")
_ANSIBLE_FILES = ("ansible/ansible.cfg", "ansible/env/envvars", "ansible/env/settings")
PHASE = "image"


class ImageBuildError(Exception):
    """An image could not be built or the lock not written; the message says why and what to do."""


@dataclass(frozen=True)
class FoundImage:
    """An image on the target: its reference (image ID or digest), its tag, and its packages when read."""

    ref: str
    tag: str
    packages: dict[str, str] | None = None


@dataclass(frozen=True)
class BuildJob:
    """What a target needs to build one profile's image."""

    plan: Plan
    builder: Builder
    image: ImageHash
    build_dir: Path


InstallRunner = Callable[[dict[str, Any]], ConfigureResult]
"""Runs the install stage on the builder, given the host variables that reach it (connection)."""


class ImageTarget(Protocol):
    """Where images are built and kept (local Docker, a cloud's image service, ...)."""

    name: str
    base: str

    def arch(self) -> str:
        """The architecture images are built for (Debian's name)."""
        ...

    def find(self, image: ImageHash, os: str) -> FoundImage | None:
        """The image with this content hash, when the target has it."""
        ...

    def present(self, locked: LockedImage) -> bool:
        """Whether the locked image still exists."""
        ...

    def packages(self, ref: str) -> dict[str, str]:
        """The packages installed in image ``ref`` (name -> version)."""
        ...

    def build(self, job: BuildJob, install: InstallRunner, events: EventBus) -> FoundImage:
        """Start a builder, call ``install`` with its connection variables, capture it; packages included."""
        ...


@dataclass(frozen=True)
class ImageResult:
    """What ``image build`` did for one profile."""

    profile: str
    hash: str
    action: str  # "built" or "reused"
    ref: str
    tag: str
    packages: int
    seconds: float
    roles: tuple[str, ...] = ()


@dataclass
class BuildReport:
    """Every profile's result and the lock."""

    lock_file: Path
    lock_changed: bool = False
    results: list[ImageResult] = field(default_factory=list)


def builder_inventory(builder: Builder, connection: dict[str, Any], stage: str = "install") -> dict[str, Any]:
    """The builder's inventory: one host in every group the profile's nodes are in."""
    host = {**builder.host_vars, **connection, "clusterctl_stage": stage}
    children: dict[str, Any] = {g: {"hosts": {builder.hostname: None}} for g in builder.groups}
    for group in _STANDARD_GROUPS:
        children.setdefault(group, {"hosts": {}})
    return {"all": {"hosts": {builder.hostname: host}, "children": dict(sorted(children.items()))}}


def write_build_dir(validated: Validated, builder: Builder, connection: dict[str, Any], build_dir: Path) -> None:
    """The builder's ansible-runner directory: the render's Ansible settings, its inventory, the group variables.

    No other rendered file goes there: the install stage reads none (a role that does fails here,
    not on a node of some other cluster).
    """
    header = f"generated by clusterctl {__version__} to build the image of {builder.profile}; do not edit"
    files = [f for f in validated.files if f.path in _ANSIBLE_FILES]
    files.append(
        RenderedFile("ansible/inventory/hosts.yml", ansible_yaml.dump(builder_inventory(builder, connection), header))
    )
    files.append(RenderedFile("ansible/inventory/group_vars/all.yml", ansible_yaml.dump(builder.group_vars, header)))
    files.append(RenderedFile("DO_NOT_EDIT", f"# {header}\n"))
    write_tree(sorted(files, key=lambda f: f.path), build_dir)


def image_build_dir(build_root: Path, plan: Plan, profile: str) -> Path:
    """``<build root>/<cluster>.image.<profile>`` (a cluster name has no dot, so it is no cluster's build dir)."""
    return build_root / f"{plan.cluster.name}.image.{profile}"


def current_hashes(
    plan: Plan, *, arch: str, base: str, roles_root: Path | None = None, only: str | None = None
) -> dict[str, ImageHash]:
    """The content hash of each profile (or of ``only``) now.

    Raises:
        ImageBuildError: ``only`` is not a profile of the plan.
    """
    names = profiles(plan)
    if only is not None and only not in names:
        raise ImageBuildError(f"no node uses hardware profile {only!r}; the spec's profiles are {', '.join(names)}")
    return {p: profile_hash(plan, p, arch=arch, base=base, roles_root=roles_root) for p in ([only] if only else names)}


def build_images(
    validated: Validated,
    target: ImageTarget,
    *,
    lock_file: Path,
    state: StateDir,
    events: EventBus,
    build_root: Path = Path("build"),
    only: str | None = None,
    rebuild: bool = False,
    roles_root: Path | None = None,
) -> BuildReport:
    """Build or reuse each profile's image on ``target`` and write ``lock_file``.

    Args:
        validated: The spec, validated and rendered in memory.
        target: Where images are built.
        lock_file: The lock to update (created when missing).
        state: The cluster's state directory: the builders' Ansible artifacts go under ``images/``.
        events: Progress.
        build_root: Where the builders' ansible-runner directories go.
        only: One profile; all of the spec's by default.
        rebuild: Build even when an image with the hash exists.
        roles_root: The roles and site.yml (clusterctl's own by default).

    Raises:
        ImageBuildError: a profile is unknown, the lock belongs to another cluster, or a build failed.
        LockError: the existing lock cannot be read.
    """
    plan = validated.plan
    existing = read_lock(lock_file)
    if existing is not None and existing.cluster != plan.cluster.name:
        raise ImageBuildError(
            f"{lock_file} is the lock of cluster {existing.cluster}, not {plan.cluster.name}; "
            "give this spec its own lock file with --lock FILE."
        )
    hashes = current_hashes(plan, arch=target.arch(), base=target.base, roles_root=roles_root, only=only)
    report = BuildReport(lock_file=lock_file)
    images: dict[str, LockedImage] = dict(existing.images) if existing else {}
    if only is None:
        # Profiles the spec no longer uses leave the lock.
        images = {p: i for p, i in images.items() if p in hashes}
    for profile, image in hashes.items():
        started = time.monotonic()
        events.phase(PHASE, message=f"{profile} {image.short}")
        found = None if rebuild else target.find(image, plan.cluster.os)
        locked = images.get(profile)
        if found is not None:
            action = "reused"
            if locked is not None and locked.hash == image.hash and locked.ref == found.ref:
                packages = locked.packages
            else:
                packages = target.packages(found.ref)
        else:
            action = "built"
            found = _build_one(validated, target, image, state, events, build_root, roles_root)
            packages = found.packages if found.packages is not None else target.packages(found.ref)
        images[profile] = LockedImage(
            profile=profile,
            hash=image.hash,
            target=target.name,
            ref=found.ref,
            os=plan.cluster.os,
            arch=str(image.inputs["arch"]),
            packages=dict(sorted(packages.items())),
            tag=found.tag,
            inputs=image.inputs,
        )
        seconds = time.monotonic() - started
        report.results.append(
            ImageResult(profile, image.hash, action, found.ref, found.tag, len(packages), seconds, image.roles)
        )
        events.phase_done(PHASE, message=f"{profile} {action} {found.tag or found.ref}")
    lock = Lock(
        cluster=plan.cluster.name,
        clusterctl=__version__,
        collections_hash=_collections_hash(),
        roles_hash=roles_hash(roles_root),
        images=dict(sorted(images.items())),
    )
    report.lock_changed = write_lock(lock_file, lock)
    return report


def _collections_hash() -> str:
    try:
        paths = [Path(p) for p in collections_path().split(os.pathsep) if p]
    except AnsibleSetupError:  # the collections are missing: the build itself says so
        paths = []
    return collections_hash(paths, REQUIRED_COLLECTIONS)


def _build_one(
    validated: Validated,
    target: ImageTarget,
    image: ImageHash,
    state: StateDir,
    events: EventBus,
    build_root: Path,
    roles_root: Path | None,
) -> FoundImage:
    plan = validated.plan
    builder = builder_for(plan, image.profile)
    build_dir = image_build_dir(build_root, plan, image.profile)
    run_state = _builder_state(state, image.profile)

    def install(connection: dict[str, Any]) -> ConfigureResult:
        write_build_dir(validated, builder, connection, build_dir)
        playbook = (roles_root or roles_dir()) / "site.yml"
        return run_playbook(build_dir, run_state, events, playbook=playbook)

    job = BuildJob(plan=plan, builder=builder, image=image, build_dir=build_dir)
    return target.build(job, install, events)


def _builder_state(state: StateDir, profile: str) -> Path:
    """A fresh state directory for one builder run (its facts must not be any node's)."""
    state.ensure()
    images = ensure_private_dir(state.path / "images", base=state.path)
    folder = images / profile
    if folder.exists() and not folder.is_symlink():
        shutil.rmtree(folder)
    return ensure_private_dir(folder, base=images)


def failure_message(profile: str, result: ConfigureResult) -> str:
    """Why the install stage failed on a builder, with the log to read."""
    failures = "; ".join(f"{f.task}: {f.message}" for f in result.failures[:3]) or f"ansible exit {result.rc}"
    where = f" (log: {result.log})" if result.log else ""
    return f"the install stage failed on the builder of {profile}: {failures}{where}"


def target_for(plan: Plan, *, state_dir: Path | None = None, build_dir: Path | None = None) -> ImageTarget:
    """The image target of the plan's provider.

    ``state_dir`` (the cluster's) and ``build_dir`` (its rendered build directory) are where the
    cloud targets keep their stack, keys and records and the bare-metal target its archives;
    ``up`` checking a lock needs neither.

    Raises:
        ImageBuildError: the provider has no image target in this clusterctl.
    """
    if plan.cluster.provider == "local":
        from clusterctl.image.local import LocalImageTarget
        from clusterctl.run.providers.local import node_image

        return LocalImageTarget(node_image(plan))
    if plan.cluster.provider in ("aws", "gcp", "azure"):
        from clusterctl.image.cloud import CloudImageTarget

        return CloudImageTarget(plan, state_dir, build_dir or Path("build") / plan.cluster.name)
    if plan.cluster.provider == "baremetal":
        from clusterctl.image.baremetal import BaremetalImageTarget, default_base

        return BaremetalImageTarget(plan, build_dir or Path("build") / plan.cluster.name, default_base())
    raise ImageBuildError(
        f"baked images for provider {plan.cluster.provider} are not available in this clusterctl; "
        "its nodes install everything at `clusterctl up`"
    )


def check_locked(
    plan: Plan,
    lock: Lock,
    target: ImageTarget,
    *,
    lock_file: Path,
    roles_root: Path | None = None,
) -> dict[str, LockCheck]:
    """Each profile of ``plan`` against ``lock`` on ``target`` (see :func:`clusterctl.image.lock.check_lock`)."""
    hashes = current_hashes(plan, arch=target.arch(), base=target.base, roles_root=roles_root)
    return check_lock(lock, plan.cluster.name, hashes, target.name, target.present, path=lock_file)


__all__ = [
    "BUILDER_HOSTNAME",
    "BuildJob",
    "BuildReport",
    "FoundImage",
    "ImageBuildError",
    "ImageResult",
    "ImageTarget",
    "InstallRunner",
    "build_images",
    "check_locked",
    "current_hashes",
    "failure_message",
    "target_for",
]
