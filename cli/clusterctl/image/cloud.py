"""The cloud targets (AWS, GCP, Azure): a builder instance made by ``stacks/image``, converged, captured.

One Pulumi stack per cluster and hardware profile (program ``stacks/image``, project
``clusterctl-image``, stack ``<cluster>-<profile>``) in the cluster's file backend, run through the
same adapter as the cluster's own stack (:mod:`clusterctl.run.pulumi`; without the Pulumi CLI it
stops with that adapter's message before anything is made). :meth:`CloudImageTarget.build`:

1. phase ``build``: the builder, from the base image of the spec's OS, with clusterctl's key and
   the SSH host key clusterctl generated for it (``secrets/ssh/host_keys/image.<profile>``),
   pinned in a known_hosts of its own before the first connection, exactly as for the nodes;
2. the install stage (site.yml with ``clusterctl_stage=install``, through ``build.py``'s runner),
   the package list read over SSH (the lock's ``packages``), then roles/image_seal.yml, which
   removes what makes the builder one machine and powers it off;
3. phase ``capture``: the AMI / GCP image / Azure gallery image version, wired to the builder;
4. phase ``done``: the image alone, so Pulumi deletes the builder and its network.

A failed build deletes the builder (``pulumi destroy`` of the image stack; captured images are
never deleted by Pulumi, see stacks/image). What was built is recorded in the state directory
(``images/cloud/<target>-<hash>.json``: reference, name, packages), which is how an unchanged
spec finds its image again without asking the cloud.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from clusterctl.bounded import json_document
from clusterctl.image.build import BuildJob, FoundImage, ImageBuildError, InstallRunner, failure_message
from clusterctl.image.drift import DPKG_QUERY, installed_packages
from clusterctl.image.hash import ImageHash
from clusterctl.image.lock import LockedImage
from clusterctl.paths import roles_dir
from clusterctl.plan.models import Plan
from clusterctl.run.ansible import ConfigureResult, run_playbook
from clusterctl.run.events import EventBus
from clusterctl.run.executor import Executor, SshExecutor
from clusterctl.run.providers.base import ProviderError, ProvisionedHost
from clusterctl.run.providers.images import (
    RECORDS,
)
from clusterctl.run.providers.ssh_inventory import host_key_line, ssh_access, ssh_common_args, write_known_hosts
from clusterctl.run.pulumi import (
    ORGANIZATION,
    PLUGIN_VERSIONS,
    PulumiError,
    PulumiStack,
    StackTarget,
    require_pulumi_cli,
)
from clusterctl.run.sshkeys import KeyPair, ensure_client_key, ensure_host_keys
from clusterctl.run.sshopts import SshEndpoint
from clusterctl.run.state import StateDirError, ensure_private_dir, read_text_nofollow, write_atomic

PROGRAM = "image"  # stacks/image
PROJECT = "clusterctl-image"
TARGETS = ("aws", "gcp", "azure")
# The stack's names (stacks/image/clusterctl_image.py: BUILDER, *_KEY, OUT_*).
BUILDER = "builder"
CONFIG = {
    "profile": "clusterctl:imageProfile",
    "hash": "clusterctl:imageHash",
    "phase": "clusterctl:imagePhase",
    "source": "clusterctl:imageSource",
}
OUT_IMAGE = "image"
OUT_IMAGE_SOURCE = "imageSource"
SEAL_PLAYBOOK = "image_seal.yml"
PHASE = "image"
SSH_PORT = 22
# Builder instances take a minute or two to boot and run cloud-init; a sealed one a minute to stop.
SSH_WAIT_S = 900.0
POWEROFF_WAIT_S = 300.0
POLL_S = 5.0
# The builder's architecture (stacks/image BUILDER_TYPES are x86-64 types).
ARCH = "amd64"


class ImageStack(Protocol):
    """The part of :class:`~clusterctl.run.pulumi.PulumiStack` a build uses."""

    def up(self) -> Any:
        """Run the program; the result has ``outputs`` (a mapping)."""
        ...

    def destroy(self) -> Any:
        """Delete what the stack made (captured images stay: retain_on_delete)."""
        ...


StackFactory = Callable[[StackTarget, KeyPair], ImageStack]
RemoteFactory = Callable[[SshEndpoint, Path, Path], Executor]
Sealer = Callable[[BuildJob, Path, EventBus], ConfigureResult]


def stack_name(plan: Plan, profile: str) -> str:
    """The image stack's fully qualified name: ``organization/clusterctl-image/<cluster>-<profile>``."""
    return f"{ORGANIZATION}/{PROJECT}/{plan.cluster.name}-{profile}"


def host_key_name(profile: str) -> str:
    """The builder's host key in ``secrets/ssh/host_keys`` (a dot: no node hostname has one)."""
    return f"image.{profile}"


def image_target(plan: Plan, profile: str, digest: str, phase: str, source: str = "") -> StackTarget:
    """The image stack of ``profile`` set to ``phase``."""
    kind = plan.cluster.provider
    return StackTarget(
        program=PROGRAM,
        project=PROJECT,
        stack=stack_name(plan, profile),
        plugins=dict(PLUGIN_VERSIONS[kind]),
        config={
            CONFIG["profile"]: profile,
            CONFIG["hash"]: digest,
            CONFIG["phase"]: phase,
            CONFIG["source"]: source,
        },
        workspace=f"image-{profile}",
    )


@dataclass(frozen=True)
class BuiltRecord:
    """What the state directory remembers of one captured image."""

    ref: str
    name: str
    hash: str
    profile: str
    packages: dict[str, str]


def _default_stack(plan: Plan, build_dir: Path, state_dir: Path, events: EventBus) -> StackFactory:
    def make(target: StackTarget, builder_key: KeyPair) -> ImageStack:
        _, client = ensure_client_key(state_dir, plan.cluster.name)
        return PulumiStack(
            plan,
            build_dir,
            state_dir,
            ssh_public_key=client.public,
            host_keys={BUILDER: builder_key},
            events=events,
            target=target,
        )

    return make


def _default_remote(endpoint: SshEndpoint, known_hosts: Path, key: Path) -> Executor:
    return SshExecutor({BUILDER: endpoint}, ssh_access(known_hosts, key))


def _default_seal(kind: str) -> Sealer:
    def seal(job: BuildJob, run_state: Path, events: EventBus) -> ConfigureResult:
        return run_playbook(
            job.build_dir,
            run_state,
            events,
            playbook=roles_dir() / SEAL_PLAYBOOK,
            extravars={"clusterctl_image_target": kind},
            ident="image-seal",
        )

    return seal


def _port_open(address: str, port: int = SSH_PORT, timeout: float = 5.0) -> bool:
    try:
        with socket.create_connection((address, port), timeout=timeout):
            return True
    except OSError:
        return False


class CloudImageTarget:
    """Images on AWS, GCP or Azure (see the module docstring).

    Args:
        plan: the plan (its cloud section says where, which base image, who may SSH in).
        state_dir: the cluster's state directory (keys, Pulumi backend, records); None only to
            check a lock (``up``), which needs none of them.
        build_dir: the rendered build directory of the cluster.
        stack: makes the image stack for a phase (default: :class:`PulumiStack`).
        remote: runs commands on the builder (default: SSH with the pinned key).
        seal: runs roles/image_seal.yml on the builder (default: ansible-runner).
        port_open: whether the builder's SSH port answers (waiting for the power-off).
    """

    def __init__(
        self,
        plan: Plan,
        state_dir: Path | None,
        build_dir: Path,
        *,
        events: EventBus | None = None,
        stack: StackFactory | None = None,
        remote: RemoteFactory | None = None,
        seal: Sealer | None = None,
        port_open: Callable[[str], bool] = _port_open,
        sleep: Callable[[float], None] = time.sleep,
        ssh_wait_s: float = SSH_WAIT_S,
        poweroff_wait_s: float = POWEROFF_WAIT_S,
    ) -> None:
        if plan.cloud is None or plan.cluster.provider not in TARGETS:
            raise ImageBuildError(
                f"{plan.cluster.name} runs on {plan.cluster.provider}; cloud images are made for aws, gcp or azure"
            )
        self.plan = plan
        self.name: str = plan.cluster.provider
        self.base: str = plan.cloud.image
        self._state_dir = state_dir
        self.build_dir = build_dir
        self._events = events
        self._stack = stack
        self._remote = remote or _default_remote
        self._seal = seal or _default_seal(self.name)
        self._port_open = port_open
        self._sleep = sleep
        self.ssh_wait_s = ssh_wait_s
        self.poweroff_wait_s = poweroff_wait_s

    # --- ImageTarget -----------------------------------------------------------------------------

    def arch(self) -> str:
        """x86-64: the builder types (and every GPU type of the catalog) are."""
        return ARCH

    @property
    def state_dir(self) -> Path:
        """The cluster's state directory.

        Raises:
            ImageBuildError: the target was made without one (to check a lock, not to build).
        """
        if self._state_dir is None:
            raise ImageBuildError("the cloud image target was made without a state directory; it cannot build")
        return self._state_dir

    def record_path(self, digest: str) -> Path:
        """Where the record of the image with content hash ``digest`` lives."""
        return self.state_dir / RECORDS / f"{self.name}-{digest}.json"

    def read_record(self, digest: str) -> BuiltRecord | None:
        """The record of an image this state directory captured (None when there is none or it is unreadable)."""
        path = self.record_path(digest)
        try:
            text = read_text_nofollow(path, "image record")
            data = json_document(text, "image record") if text else None
        except (OSError, ValueError, StateDirError):
            return None
        if not isinstance(data, dict) or data.get("hash") != digest:
            return None
        packages = data.get("packages")
        if not isinstance(data.get("ref"), str) or not isinstance(packages, dict):
            return None
        return BuiltRecord(
            ref=data["ref"],
            name=str(data.get("name", "")),
            hash=digest,
            profile=str(data.get("profile", "")),
            packages={str(k): str(v) for k, v in packages.items()},
        )

    def _write_record(self, record: BuiltRecord) -> None:
        folder = ensure_private_dir(self.state_dir / RECORDS, base=self.state_dir)
        data = {
            "hash": record.hash,
            "name": record.name,
            "packages": dict(sorted(record.packages.items())),
            "profile": record.profile,
            "ref": record.ref,
            "target": self.name,
        }
        write_atomic(folder / f"{self.name}-{record.hash}.json", (json.dumps(data, indent=2) + "\n").encode(), 0o600)

    def find(self, image: ImageHash, os: str) -> FoundImage | None:
        """The image with this content hash when this state directory captured it (no cloud call)."""
        if self._state_dir is None:
            return None
        record = self.read_record(image.hash)
        if record is None:
            return None
        return FoundImage(ref=record.ref, tag=record.name, packages=record.packages)

    def present(self, locked: LockedImage) -> bool:
        """Whether the locked image is still there, as far as clusterctl can tell without the cloud's API.

        Why not asked: the images are in the cloud account, and clusterctl talks to the cloud only
        through Pulumi. A deleted image makes the cluster stack fail at launch, naming the image.
        """
        return bool(locked.ref) and locked.target == self.name

    def packages(self, ref: str) -> dict[str, str]:
        """The packages of an image this state directory captured.

        Raises:
            ImageBuildError: it has no record of ``ref`` (an image another cluster built).
        """
        folder = self.state_dir / RECORDS
        for path in sorted(folder.glob(f"{self.name}-*.json")) if folder.is_dir() else []:
            record = self.read_record(path.stem.removeprefix(f"{self.name}-"))
            if record is not None and record.ref == ref:
                return record.packages
        raise ImageBuildError(
            f"the packages of {ref} are not recorded here (it was not built from this state directory); "
            "run `clusterctl image build --rebuild` to build it here, or copy its entry from the lock of the "
            "cluster that built it"
        )

    def build(self, job: BuildJob, install: InstallRunner, events: EventBus) -> FoundImage:
        """Builder, install stage, packages, seal, capture, builder deleted (see the module docstring).

        Raises:
            ImageBuildError: the Pulumi CLI is missing, a stack operation or the install stage
                failed, or the builder cannot be reached with its pinned key.
        """
        try:
            require_pulumi_cli()
        except PulumiError as exc:
            raise ImageBuildError(str(exc)) from None
        plan, profile, digest = job.plan, job.builder.profile, job.image.hash
        key = ensure_host_keys(self.state_dir, [host_key_name(profile)])[host_key_name(profile)]
        make = self._stack or _default_stack(plan, self.build_dir, self.state_dir, events)
        run_state = ensure_private_dir(self.state_dir / "images" / profile, base=self.state_dir)

        def phase(name: str, source: str = "") -> dict[str, Any]:
            events.host(PHASE, profile, "running", f"image stack {stack_name(plan, profile)}: {name}")
            try:
                result = make(image_target(plan, profile, digest, name, source), key).up()
            except PulumiError as exc:
                raise ImageBuildError(f"{profile}: the image stack's {name} phase failed: {exc}") from None
            return dict(getattr(result, "outputs", None) or {})

        try:
            done, packages = self._converge_and_capture(job, install, events, phase, key, run_state)
        except (ImageBuildError, ProviderError) as exc:
            self._clean_up(make, plan, profile, digest, key, events)
            raise ImageBuildError(f"{exc}\nThe builder was deleted; run `clusterctl image build` again.") from None
        except BaseException:
            # Interrupted (Ctrl-C) or a bug: the builder must not be left running either.
            self._clean_up(make, plan, profile, digest, key, events)
            raise
        image = done.get(OUT_IMAGE)
        if not isinstance(image, dict) or not image.get("ref") or image.get("hash") != digest:
            raise ImageBuildError(
                f"{profile}: the image stack exported no image with hash {digest[:12]} ({str(image)[:120]!a}); "
                "the stack program and this clusterctl do not match"
            )
        record = BuiltRecord(
            ref=str(image["ref"]), name=str(image.get("name", "")), hash=digest, profile=profile, packages=packages
        )
        self._write_record(record)
        events.host(PHASE, profile, "changed", f"captured {record.name} ({record.ref})")
        return FoundImage(ref=record.ref, tag=record.name, packages=packages)

    # --- steps -----------------------------------------------------------------------------------

    def _converge_and_capture(
        self,
        job: BuildJob,
        install: InstallRunner,
        events: EventBus,
        phase: Callable[..., dict[str, Any]],
        key: KeyPair,
        run_state: Path,
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """Phases build, install stage, packages, seal, capture, done: the done phase's outputs, the packages."""
        plan, profile = job.plan, job.builder.profile
        built = phase("build")
        endpoint, known_hosts = self._builder_access(plan, built, key, run_state)
        key_path, _ = ensure_client_key(self.state_dir, plan.cluster.name)
        remote = self._remote(endpoint, known_hosts, key_path)
        self._wait_ready(remote, profile, events)
        result = install(
            {
                "ansible_host": endpoint.address,
                "ansible_port": endpoint.port,
                "ansible_user": endpoint.user,
                "ansible_become": endpoint.user != "root",
                "ansible_ssh_private_key_file": str(key_path.resolve()),
                "ansible_ssh_common_args": ssh_common_args(known_hosts.resolve(), key_path.resolve()),
            }
        )
        if not result.succeeded:
            raise ImageBuildError(failure_message(profile, result))
        packages = self._packages(remote, profile)
        sealed = self._seal(job, run_state, events)
        if not sealed.succeeded:
            raise ImageBuildError(f"sealing the builder of {profile} failed: " + failure_message(profile, sealed))
        self._wait_powered_off(endpoint.address, profile, events)
        captured = phase("capture")
        source = str(captured.get(OUT_IMAGE_SOURCE) or "")
        if not source:
            raise ImageBuildError(
                f"{profile}: the capture phase exported no imageSource; the stack program and this clusterctl "
                "do not match"
            )
        return phase("done", source), packages

    def _builder_access(
        self, plan: Plan, outputs: Mapping[str, Any], key: KeyPair, run_state: Path
    ) -> tuple[SshEndpoint, Path]:
        """The builder's address and user from the outputs, its pinned key written to a known_hosts.

        Raises:
            ImageBuildError: no address, or the outputs' host key is not the one clusterctl generated.
        """
        nodes = outputs.get("nodes") or {}
        address = nodes.get(BUILDER) if isinstance(nodes, dict) else None
        if not address:
            raise ImageBuildError("the image stack's build phase exported no builder address; run again")
        exported = (outputs.get("hostKeys") or {}).get(BUILDER)
        line = host_key_line(exported, BUILDER)
        if line.split()[:2] != key.public.split()[:2]:
            raise ImageBuildError(
                "the builder's SSH host key in the image stack's outputs is not the one clusterctl generated for it; "
                "SSH would refuse it. Run `clusterctl image build` again"
            )
        assert plan.cloud is not None
        user = str(outputs.get("sshUser") or plan.cloud.ssh_user)
        endpoint = SshEndpoint(str(address), user).check()
        known_hosts = run_state / "known_hosts"
        write_known_hosts(known_hosts, [ProvisionedHost(BUILDER, endpoint.address, user, host_key=line)])
        return endpoint, known_hosts

    def _wait_ready(self, remote: Executor, profile: str, events: EventBus) -> None:
        """Until the builder answers over SSH with its pinned key and cloud-init has finished."""
        deadline = time.monotonic() + self.ssh_wait_s
        events.host(PHASE, profile, "running", "waiting for the builder (SSH, cloud-init)")
        while True:
            rc, _, err = remote.run(BUILDER, "cloud-init status --wait >/dev/null 2>&1; true", 600)
            if rc == 0:
                return
            if time.monotonic() >= deadline:
                raise ImageBuildError(
                    f"the builder of {profile} did not answer over SSH within {self.ssh_wait_s:.0f} s "
                    f"({err.strip()[:200]}); check provider.allowed_ssh_cidrs holds the address clusterctl runs from"
                )
            self._sleep(POLL_S)

    def _packages(self, remote: Executor, profile: str) -> dict[str, str]:
        rc, out, err = remote.run(BUILDER, DPKG_QUERY, 120)
        if rc != 0:
            raise ImageBuildError(f"dpkg-query failed on the builder of {profile}: {err.strip()[:200]}")
        return installed_packages(out, f"the builder of {profile}", ImageBuildError, "on")

    def _wait_powered_off(self, address: str, profile: str, events: EventBus) -> None:
        """Until the sealed builder stops answering on its SSH port (it powers itself off)."""
        events.host(PHASE, profile, "running", "waiting for the sealed builder to power off")
        deadline = time.monotonic() + self.poweroff_wait_s
        while self._port_open(address):
            if time.monotonic() >= deadline:
                raise ImageBuildError(
                    f"the sealed builder of {profile} still answers on port {SSH_PORT} after "
                    f"{self.poweroff_wait_s:.0f} s; it did not power off"
                )
            self._sleep(POLL_S)

    def _clean_up(
        self, make: StackFactory, plan: Plan, profile: str, digest: str, key: KeyPair, events: EventBus
    ) -> None:
        events.host(PHASE, profile, "running", "deleting the builder")
        try:
            make(image_target(plan, profile, digest, "build"), key).destroy()
        except PulumiError as exc:
            events.info(
                f"the builder of {profile} could not be deleted ({str(exc).splitlines()[0]}); delete the stack "
                f"{stack_name(plan, profile)} by hand",
                phase=PHASE,
                status="warning",
            )
