"""The bare-metal provider: PXE-install the machines of machines.csv through their BMCs.

provision: publish clusterctl's public key where the autoinstall fetches it
(``<build>/pxe/http/autoinstall/clusterctl.pub``; the PXE server serves ``<build>/pxe/http``),
generate each machine's SSH host key (state directory) and serve it to that machine's installer
while ``stacks/baremetal`` runs (Redfish: one-time PXE boot, power on, wait for SSH, check the
node presents its key; see run/hostkey_server.py), then write known_hosts and the SSH inventory
from those generated keys -- never from a key read off the network. destroy: power the
machines off (disks are left alone). BMC credentials: ``CLUSTERCTL_BMC_USERNAME`` and
``CLUSTERCTL_BMC_PASSWORD`` (or the stack's secret config), never the spec. How the BMCs are
reached (https, certificate checks, CA bundle) comes from ``plan.baremetal.bmc``; a weakened
setting is warned about once per run, here, before any BMC is contacted.

When a machine fails to come up, the error names it and the step, and shows the last lines of
its serial console where a console server records it as ``<build>/lab/<machine>.console.log``
(the bare-metal lab does; the node-side cause, such as the initramfs refusing an archive, is there).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol, cast

from clusterctl.plan.models import BaremetalPlan, Plan
from clusterctl.remote import Executor, Sender, run_many
from clusterctl.render.builddir import BuildDirError, write_run_file
from clusterctl.render.escape import printable
from clusterctl.render.pulling import pulls
from clusterctl.run import pull_bootstrap
from clusterctl.run.events import EventBus
from clusterctl.run.failure_cause import shown
from clusterctl.run.hostkey_server import HostKeyGrant, HostKeyServerError, ServeLog, serving_host_keys
from clusterctl.run.providers.base import ProviderError, ProvisionedHost
from clusterctl.run.providers.cloud import Confirm, default_confirm
from clusterctl.run.providers.ssh_inventory import build_inventory, hosts_from_outputs, write_ssh_inventory
from clusterctl.run.providers.stack_nodes import destroy_stack
from clusterctl.run.pulumi import (
    DestroySummary,
    PreviewSummary,
    PulumiError,
    PulumiStack,
    StackOutputs,
    UpSummary,
    output_mapping,
    require_pulumi_cli,
)
from clusterctl.run.redfish import BmcCredentials, BmcTransport, RedfishClient, RedfishError, tls_context
from clusterctl.run.sshkeys import HOST_KEYS_DIR, KeyPair, ensure_client_key, ensure_host_keys
from clusterctl.run.state import StateDir

# serving_host_keys' signature: (bind, grants, *, on_event) -> context manager yielding the ServeLog.
ServeHostKeys = Callable[..., AbstractContextManager[ServeLog]]

PHASE = "provision"
PUBLIC_KEY_PATH = "pxe/http/autoinstall/clusterctl.pub"
CONSOLE_DIR = "lab"
CONSOLE_LINES = 8
# Where a machine booted from an archive keeps its sha256 (templates/pxe/image/initramfs-boot.sh writes it).
IMAGE_RECORD = "/etc/clusterctl/image.sha256"
_CONSOLE_TAIL_BYTES = 64 * 1024
# Terminal control sequences firmware and boot loaders draw their menus with.
_ESCAPES = re.compile(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|[()][0-9A-Za-z]|[@-Z\\-_])|[\x00-\x08\x0b-\x1f\x7f]")
# A console keeps every boot. The firmware speaking starts a boot (SeaBIOS, iPXE, OVMF's boot manager);
# the kernel's banner starts the operating system's part of one.
_FIRMWARE = re.compile(r"SeaBIOS \(version|iPXE |>>Start |BdsDxe: ")
_KERNEL = re.compile(r"\bLinux version \d")
# Why a network boot stopped in the firmware: UEFI's PXE errors and boot manager, iPXE, SeaBIOS.
_FIRMWARE_FAILURE = re.compile(
    r"PXE-E[0-9A-F]{2}|BdsDxe: failed to load|No configuration methods succeeded|No bootable device"
)
_FIRMWARE_FAILURE_LINES = 2


class StackEngine(Protocol):
    """What the provider needs of the bare-metal stack: :class:`~clusterctl.run.pulumi.PulumiStack`'s operations."""

    def preview(self) -> PreviewSummary:
        """What an update would change."""
        ...

    def up(self) -> UpSummary:
        """Create or update every machine; the counts and outputs."""
        ...

    def destroy(self) -> DestroySummary:
        """Delete every machine (power off), then the stack."""
        ...

    def outputs(self) -> StackOutputs:
        """The stack's outputs."""
        ...


# PulumiStack's signature: (plan, build_dir, state_dir, *, ssh_public_key, host_keys, events).
StackFactory = Callable[..., StackEngine]
_engine: StackFactory | None = None


def drive_stack_with(factory: StackFactory | None) -> None:
    """Run the bare-metal stack with ``factory`` instead of the Pulumi engine; None: the engine again.

    Only the bare-metal lab calls this (lab/engine.py, where the engine cannot be installed): its
    stand-in drives this stack's own dynamic provider for each machine, as the engine would.
    """
    global _engine
    _engine = factory


def require_engine() -> None:
    """The Pulumi CLI, unless the stack runs with a stand-in (:func:`drive_stack_with`).

    Raises:
        PulumiCliMissingError: the CLI is not on PATH.
    """
    if _engine is None:
        require_pulumi_cli()


def _stack(plan: Plan, build_dir: Path, state_dir: Path, **kwargs: Any) -> StackEngine:
    return (_engine or PulumiStack)(plan, build_dir, state_dir, **kwargs)


def console_tail(build_dir: Path, hostname: str, lines: int = CONSOLE_LINES) -> list[str]:
    """The last lines of a machine's recorded serial console (empty when none is recorded).

    Control sequences are dropped and each line is shown as text (run/failure_cause.py). Why the
    last boot stopped is kept even when more lines follow: the initramfs' ``clusterctl:`` line, or
    the firmware's first words on a network boot that failed (a PXE error, no DHCP offer). Words of
    an earlier boot are not: a ``clusterctl:`` line the firmware spoke after, a firmware failure
    the kernel's banner followed.
    """
    path = build_dir / CONSOLE_DIR / f"{hostname}.console.log"
    try:
        with path.open("rb") as handle:
            handle.seek(max(0, path.stat().st_size - _CONSOLE_TAIL_BYTES))
            raw = handle.read().decode("utf-8", "replace")
    except OSError:
        return []
    text = _ESCAPES.sub("", raw.replace("\r\n", "\n").replace("\r", "\n"))
    kept = [shown(line) for line in text.split("\n") if line.strip()]
    last_firmware = max((i for i, line in enumerate(kept) if _FIRMWARE.search(line)), default=-1)
    last_kernel = max((i for i, line in enumerate(kept) if _KERNEL.search(line)), default=-1)
    ours = [i for i, line in enumerate(kept) if i > last_firmware and line.startswith("clusterctl: ")]
    failed = [i for i, line in enumerate(kept) if i > last_kernel and _FIRMWARE_FAILURE.search(line)]
    why = ours[-1:] if ours else failed[:_FIRMWARE_FAILURE_LINES]
    shown_from = len(kept) - lines
    early = [kept[i] for i in why if i < shown_from]
    return early + kept[max(0, shown_from + len(early)) :]


def with_consoles(message: str, build_dir: Path, hostnames: list[str]) -> str:
    """``message`` with the console tail of each machine it names."""
    parts = [message]
    for name in hostnames:
        if not re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", message):
            continue
        tail = console_tail(build_dir, name)
        if tail:
            where = build_dir / CONSOLE_DIR / f"{name}.console.log"
            parts.append(f"last lines of {name}'s console ({where}):")
            parts.extend(f"  {line}" for line in tail)
    return "\n".join(parts)


def publish_public_key(build_dir: Path, public_key: str, extra: list[str]) -> Path:
    """Write the key file the autoinstall fetches (public keys only; nothing secret).

    Written like every file of the build directory (atomically, never through a link) but
    outside its manifest, so a re-render keeps it.

    Raises:
        ProviderError: a link stands at the file or a directory above it, or the build
            directory is not one clusterctl made.
    """
    try:
        return write_run_file(build_dir, PUBLIC_KEY_PATH, ("\n".join([public_key, *extra]) + "\n").encode(), 0o644)
    except BuildDirError as exc:
        raise ProviderError(f"clusterctl's public key was not published: {exc}") from None


def check_bmc_transport(bm: BaremetalPlan, events: EventBus) -> None:
    """Refuse a plan whose CA bundle went missing; warn (once) about weakened BMC transport settings.

    Raises:
        ProviderError: the spec names a CA bundle the plan does not hold, or the bundle is unusable.
    """
    settings = bm.bmc
    if settings.ca_bundle_file is not None and settings.ca_bundle is None:
        raise ProviderError(
            f"the spec names the BMC CA bundle {settings.ca_bundle_file!a} but the plan holds no certificate from it "
            "(`clusterctl validate` says why); fix the file and run `clusterctl render` again"
        )
    transport = BmcTransport(
        insecure_http=settings.insecure_http, verify_tls=settings.verify_tls, ca_bundle=settings.ca_bundle
    )
    try:
        tls_context(transport)
    except RedfishError as exc:
        raise ProviderError(str(exc)) from None
    for warning in transport.warnings():
        events.info(warning, phase=PHASE, status="warning")


# The moved machines an error lists before "... and N more".
MAX_MOVED_SHOWN = 20
# One BMC question per machine still waiting, at most every 10 polls of `up`'s wait: a BMC slow to
# answer costs that wait this long, not the default's 30 s.
POWER_STATE_TIMEOUT_S = 10.0


def power_states(plan: Plan, hosts: Sequence[str], *, workers: int = 8) -> dict[str, str]:
    """``powered off`` for each of ``hosts`` whose BMC says its machine is off; nothing for the others.

    For ``up``'s wait on pulling nodes: a machine that is off never reports, so it is named at once,
    not when --apply-timeout runs out. A BMC that does not answer, or answers anything else, says
    nothing here (the wait goes on, and its timeout names the node). Only with the credentials in
    ``up``'s environment: those kept as the stack's Pulumi secrets are the engine's to read.
    """
    bm = plan.baremetal
    credentials = BmcCredentials.from_env()
    if bm is None or credentials is None:
        return {}
    wanted = set(hosts)
    machines = [m for m in bm.machines if m.hostname in wanted]
    settings = bm.bmc

    def ask(bmc: str) -> str | None:
        try:
            client = RedfishClient(
                bmc,
                credentials,
                verify_tls=settings.verify_tls,
                ca_bundle=settings.ca_bundle,
                insecure_http=settings.insecure_http,
                timeout=POWER_STATE_TIMEOUT_S,
            )
            return client.power_state()
        except RedfishError:
            return None

    if not machines:
        return {}
    with ThreadPoolExecutor(max_workers=min(workers, len(machines))) as pool:
        answers = list(pool.map(ask, [m.bmc for m in machines]))
    return {m.hostname: "powered off" for m, state in zip(machines, answers, strict=True) if state == "Off"}


def check_no_machine_moves(plan: Plan, recorded: Mapping[str, str]) -> None:
    """Refuse a plan that gives a machine the stack already made another address, before any is touched.

    Why: the plan numbers addresses in the spec's order of node groups, so a group added before
    others (or a count raised in an earlier group) moves every later machine; the stack then makes
    each moved machine again: a PXE boot that wipes an installed disk, or a reboot from the network.
    ``recorded``: host name -> address, the stack's ``nodes`` output.

    Raises:
        ProviderError: one machine or more would move; names each, old and new address.
    """
    bm = plan.baremetal
    if bm is None:
        return
    moved = [m for m in bm.machines if m.hostname in recorded and recorded[m.hostname] != m.address]
    if not moved:
        return
    lines = "\n".join(
        f"  {m.hostname}: {printable(recorded[m.hostname])} -> {m.address}" for m in moved[:MAX_MOVED_SHOWN]
    )
    more = f"\n  ... and {len(moved) - MAX_MOVED_SHOWN} more" if len(moved) > MAX_MOVED_SHOWN else ""
    raise ProviderError(
        f"this spec moves {len(moved)} machine(s) the cluster already has to another address, and the "
        f"stack would make each again (PXE, its disk wiped when installed):\n{lines}{more}\n"
        "Addresses follow the order of the spec's node groups: add new groups after the existing ones, "
        "and raise a count only in the last group. To install a machine again on purpose, take it out of "
        "machines.csv, run `clusterctl up`, then put it back. No machine was touched."
    )


def check_images(plan: Plan) -> None:
    """Refuse, before any machine is touched, machines that would get an installer the spec rules out.

    With ``provider.image`` every machine boots the baked image, so each group needs its profile's
    archive in the lock; without it, machines of a group without an image get Ubuntu's autoinstall,
    which installs nothing but Ubuntu.

    Raises:
        ProviderError: which machines, why, and what to run.
    """
    bm = plan.baremetal
    if bm is None:
        return
    bare = sorted(m.hostname for m in bm.machines if m.group not in bm.images)
    if not bare:
        return
    if bm.image_boot:
        why = "the spec's provider.image says they boot the baked image, but the lock has none for their profile"
    elif not plan.cluster.os.startswith("ubuntu"):
        why = f"they would be installed with Ubuntu's autoinstall, which cannot install {plan.cluster.os}"
    else:
        return
    raise ProviderError(
        f"{', '.join(bare)}: {why}. Run `clusterctl image build` on this spec (with the same --lock as `up`); "
        "no machine was touched"
    )


def discard_repeated(log: ServeLog, state_dir: Path) -> None:
    """Discard every host key that was asked for twice, and fail: a copy may be in other hands.

    Raises:
        ProviderError: a key was requested again after it was served (names, addresses, what to do).
    """
    if not log.repeated:
        return
    folder = state_dir / "secrets" / HOST_KEYS_DIR
    for name in log.repeated:
        for path in (folder / name, folder / f"{name}.pub"):
            path.unlink(missing_ok=True)  # unlink removes a link itself, never its target
    detail = "; ".join(
        f"{name} (served to {log.served[name]}, asked again by {peer})" for name, peer in log.repeated.items()
    )
    raise ProviderError(
        f"the SSH host key of {detail} was asked for twice while it installed, so a copy may be in other hands: "
        "clusterctl discarded it and will never trust it. Check who else answers on the provisioning network, "
        "then reinstall the machine (remove it from machines.csv and run `clusterctl up`, add it back and run "
        "`clusterctl up` again): it gets a new key"
    )


def check_recorded_host_keys(outputs: dict[str, Any], public: dict[str, str]) -> None:
    """Refuse a machine the stack recorded with another host key than the one clusterctl keeps for it.

    A machine keeps the key it was installed with; when the state directory's key changed since
    (restored without ``secrets/``, or discarded after a repeated request), SSH could only reach
    the machine by trusting a key clusterctl no longer holds -- so the machine must be reinstalled.

    Raises:
        ProviderError: such a machine (its name, what to do).
    """
    recorded = outputs.get("hostKeys") or {}
    stale = sorted(
        name
        for name, line in public.items()
        if isinstance(recorded.get(name), str) and recorded[name].split()[:2] != line.split()[:2]
    )
    if stale:
        raise ProviderError(
            f"{', '.join(stale)} were installed with an SSH host key that is not the one clusterctl keeps for them "
            "(secrets/ssh/host_keys in the state directory), so clusterctl will not connect to them. Restore the "
            "state directory's keys, or reinstall those machines (remove them from machines.csv and run "
            "`clusterctl up`, add them back and run `clusterctl up` again)"
        )


def booted_archives(plan: Plan, hosts: list[str], executor: Executor) -> dict[str, str]:
    """Hostname -> image content hash, for each machine running its group's locked archive now.

    The initramfs writes the sha256 of the archive it checked and unpacked to :data:`IMAGE_RECORD`
    (an installed machine keeps it until it is installed again). Only a machine whose record is
    its group's archive of this plan may skip the install stage; one that cannot be read, or
    answers anything else, runs both stages.
    """
    bm = plan.baremetal
    if bm is None or not bm.images:
        return {}
    asked = set(hosts)
    wanted = {n.hostname: bm.images[n.group] for n in plan.nodes if n.hostname in asked and n.group in bm.images}
    names = sorted(wanted)
    answers = run_many(executor, [(name, f"cat -- {IMAGE_RECORD}", 60) for name in names], max_workers=8)
    out: dict[str, str] = {}
    for name, (rc, text, _) in zip(names, answers, strict=True):
        if rc == 0 and text.strip() == wanted[name].sha256:
            out[name] = wanted[name].hash
    return out


def _pinned_ssh(plan: Plan, state_dir: Path) -> Sender:
    """The machines over SSH as ``up`` recorded them (pinned host keys); every such executor can send."""
    from clusterctl.run.executor import executor_for

    return cast(Sender, executor_for(plan, state_dir))


class BaremetalProvider:
    """Provisions bare-metal machines with Redfish and PXE from ``plan.baremetal``.

    Args:
        confirm: asks before machines are installed (their disks are wiped).
        serve_host_keys: the host key server (``run.hostkey_server.serving_host_keys``; tests
            replace it).
        reach: how the machines are reached once up (``run.executor.executor_for``: SSH with the
            pinned host keys; tests replace it).
    """

    def __init__(
        self,
        confirm: Confirm | None = None,
        serve_host_keys: ServeHostKeys | None = None,
        reach: Callable[[Plan, Path], Sender] | None = None,
    ) -> None:
        self.confirm = confirm or default_confirm
        self.serve_host_keys = serve_host_keys or serving_host_keys
        self.reach = reach

    def provision(
        self, plan: Plan, build_dir: Path, state_dir: Path, *, yes: bool, events: EventBus
    ) -> list[ProvisionedHost]:
        """Install and boot every machine, then write the SSH inventory; return the nodes."""
        require_engine()
        bm = plan.baremetal
        if bm is None:
            raise ProviderError("the plan is not a bare-metal plan; re-render it with `clusterctl render`")
        check_images(plan)
        check_bmc_transport(bm, events)
        if BmcCredentials.from_env() is None:
            events.info(
                "CLUSTERCTL_BMC_USERNAME/CLUSTERCTL_BMC_PASSWORD are not set: the BMC credentials must be in the "
                "stack's secret config (pulumi config set --secret clusterctl:bmcPassword ...)",
                phase=PHASE,
                status="warning",
            )
        key_path, client = ensure_client_key(state_dir, plan.cluster.name)
        published = publish_public_key(build_dir, client.public, bm.ssh_authorized_keys)
        events.info(f"the PXE server must serve {build_dir / 'pxe'} (clusterctl's key: {published})", phase=PHASE)
        # Each machine's host key is generated here and served to its installer by this process
        # (run/hostkey_server.py); the stack only gets the public halves, to check and export.
        pairs = ensure_host_keys(state_dir, [m.hostname for m in bm.machines])
        public = {name: pair.public for name, pair in pairs.items()}
        stack = _stack(
            plan,
            build_dir,
            state_dir,
            ssh_public_key=client.public,
            host_keys={name: KeyPair(private="", public=line) for name, line in public.items()},
            events=events,
        )
        try:
            recorded = output_mapping(stack.outputs().values, "nodes", plan.cluster.name)
        except PulumiError:
            recorded = {}  # no stack yet, or none readable: the engine's own errors come with `up` below
        check_no_machine_moves(plan, recorded)
        grants = [
            HostKeyGrant(m.hostname, m.address, m.mac, pairs[m.hostname].public, pairs[m.hostname].private)
            for m in bm.machines
        ]
        log = ServeLog()
        try:
            if not yes:
                preview = stack.preview()
                events.info(f"{plan.cluster.name} bare metal: {preview.describe()}", phase=PHASE)
                question = f"PXE-install {preview.changes.get('create', 0)} machine(s) (their disks are wiped)?"
                if preview.has_changes and not self.confirm(question):
                    raise ProviderError("not applied: not confirmed; no machine was touched")

            def report(message: str, warning: bool) -> None:
                events.info(message, phase=PHASE, status="warning" if warning else "info")

            # Listening only while the stack installs machines: that is each installer's window.
            with self.serve_host_keys((bm.pxe_server, bm.host_key_port), grants, on_event=report) as log:
                result = stack.up()
        except HostKeyServerError as exc:
            raise ProviderError(str(exc)) from None
        except PulumiError as exc:
            discard_repeated(log, state_dir)
            raise ProviderError(with_consoles(str(exc), build_dir, [m.hostname for m in bm.machines])) from None
        discard_repeated(log, state_dir)
        check_recorded_host_keys(result.outputs, public)
        hosts, _ = hosts_from_outputs(plan, result.outputs, user=bm.ssh_user, host_keys=public)
        write_ssh_inventory(
            plan,
            hosts,
            **build_inventory(build_dir, state_dir),
            private_key=key_path,
        )
        if bm.images:
            baked = booted_archives(plan, [h.hostname for h in hosts], (self.reach or _pinned_ssh)(plan, state_dir))
            hosts = [replace(h, image_hash=baked.get(h.hostname)) for h in hosts]
        self.bootstrap(plan, build_dir, state_dir, [h.hostname for h in hosts], events)
        return hosts

    def bootstrap(self, plan: Plan, build_dir: Path, state_dir: Path, hosts: list[str], events: EventBus) -> None:
        """Give each pulling node of ``hosts`` that lacks it its agent, settings and the munge key.

        Over SSH to the node that has proven itself with the host key clusterctl generated and
        served it (known_hosts pins it, ``StrictHostKeyChecking=yes``): never through the PXE
        server's HTTP, which anyone on the management network can read. A machine running from RAM
        lacks it again after every boot (the roll calls this for those).

        Raises:
            ProviderError: a node could not be reached or its agent not set up; the message names it.
        """
        asked = set(hosts)
        nodes = [n for n in plan.nodes if n.hostname in asked and pulls(plan, n)]
        if not nodes:
            return
        executor = (self.reach or _pinned_ssh)(plan, state_dir)
        munge_key = StateDir.at(state_dir).munge_key().read_bytes()
        host_keys = ensure_host_keys(state_dir, [n.hostname for n in nodes])
        check = f"systemctl is-enabled --quiet {pull_bootstrap.UNIT} && test -s {pull_bootstrap.MUNGE_KEY}"

        def one(node_index: int) -> str:
            node = nodes[node_index]
            rc, _, _ = executor.run(node.hostname, check, 60)
            if rc == 0:
                return ""
            events.host(PHASE, node.hostname, "running", "setting up its configuration agent")
            data = pull_bootstrap.payload(plan, node, build_dir, munge_key, host_keys[node.hostname])
            rc, out, err = executor.send(node.hostname, pull_bootstrap.COMMAND, data, 120)
            if rc != 0:
                why = shown((err or out).strip()[-500:])
                return f"{node.hostname}: setting up its configuration agent failed: {why}"
            events.host(PHASE, node.hostname, "changed", "configuration agent set up")
            return ""

        with ThreadPoolExecutor(max_workers=min(8, len(nodes))) as pool:
            errors = [e for e in pool.map(one, range(len(nodes))) if e]
        if errors:
            raise ProviderError("; ".join(errors))

    @contextlib.contextmanager
    def rebooting(
        self, plan: Plan, build_dir: Path, state_dir: Path, hosts: list[str], events: EventBus
    ) -> Iterator[list[str]]:
        """Around a reboot of ``hosts``: yields those that run the image from RAM, serving their host keys.

        Such a machine PXE-boots the image again and fetches its host key anew (the one known_hosts
        pins), so the key server listens while the block runs; it comes back without the cluster's
        configuration, which the caller runs again.

        Raises:
            ProviderError: a key was asked for twice (it is discarded), or the server cannot listen.
        """
        bm = plan.baremetal
        if bm is None:
            yield []
            return
        stateless = [
            m
            for m in bm.machines
            if m.hostname in hosts and (image := bm.images.get(m.group)) is not None and image.default == "stateless"
        ]
        if not stateless:
            yield []
            return
        pairs = ensure_host_keys(state_dir, [m.hostname for m in stateless])
        grants = [
            HostKeyGrant(m.hostname, m.address, m.mac, pairs[m.hostname].public, pairs[m.hostname].private)
            for m in stateless
        ]

        def report(message: str, warning: bool) -> None:
            events.info(message, phase="configure", status="warning" if warning else "info")

        try:
            with self.serve_host_keys((bm.pxe_server, bm.host_key_port), grants, on_event=report) as log:
                yield [m.hostname for m in stateless]
        except HostKeyServerError as exc:
            raise ProviderError(str(exc)) from None
        discard_repeated(log, state_dir)

    def retire(self, plan: Plan, hosts: list[str], events: EventBus) -> None:
        """Nothing left to do: the stack has no resources for nodes the plan lacks, so provision removed them."""

    def destroy(self, plan: Plan, build_dir: Path, state_dir: Path, *, yes: bool, events: EventBus) -> None:
        """Power every machine off and forget the stack."""
        require_engine()
        if not yes and not self.confirm(f"Power off every machine of {plan.cluster.name}?"):
            raise ProviderError("not destroyed: not confirmed")
        if plan.baremetal is not None:
            check_bmc_transport(plan.baremetal, events)
        destroy_stack(_stack(plan, build_dir, state_dir, events=events), events, "machines powered off")

    def status(self, plan: Plan, state_dir: Path) -> dict[str, str]:
        """``installed`` or ``missing`` per machine, from the stack outputs.

        Raises:
            ProviderError: the outputs cannot be read (the Pulumi CLI is missing, the stack is
                unreadable): one message for the whole cluster, not one per machine.
        """
        names = [n.hostname for n in plan.nodes if not n.burst]
        try:
            require_engine()
            nodes = output_mapping(_stack(plan, state_dir, state_dir).outputs().values, "nodes", plan.cluster.name)
        except PulumiError as exc:
            raise ProviderError(f"the machines of {plan.cluster.name} cannot be read: {exc}") from None
        return {name: "installed" if name in nodes else "missing" for name in names}


__all__ = [
    "BaremetalProvider",
    "booted_archives",
    "check_bmc_transport",
    "check_images",
    "console_tail",
    "drive_stack_with",
    "publish_public_key",
    "require_engine",
]
