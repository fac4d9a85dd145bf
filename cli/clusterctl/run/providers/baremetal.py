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
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from clusterctl.plan.models import BaremetalPlan, Plan
from clusterctl.render.builddir import BuildDirError, write_run_file
from clusterctl.run.events import EventBus
from clusterctl.run.hostkey_server import HostKeyGrant, HostKeyServerError, ServeLog, serving_host_keys
from clusterctl.run.providers.base import ProviderError, ProvisionedHost
from clusterctl.run.providers.cloud import Confirm, default_confirm
from clusterctl.run.providers.ssh_inventory import build_inventory, hosts_from_outputs, write_ssh_inventory
from clusterctl.run.providers.stack_nodes import destroy_stack, stack_node_status
from clusterctl.run.pulumi import PulumiError, PulumiStack, require_pulumi_cli
from clusterctl.run.redfish import BmcCredentials, BmcTransport, RedfishError, tls_context
from clusterctl.run.sshkeys import HOST_KEYS_DIR, KeyPair, ensure_client_key, ensure_host_keys

# serving_host_keys' signature: (bind, grants, *, on_event) -> context manager yielding the ServeLog.
ServeHostKeys = Callable[..., AbstractContextManager[ServeLog]]

PHASE = "provision"
PUBLIC_KEY_PATH = "pxe/http/autoinstall/clusterctl.pub"


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


class BaremetalProvider:
    """Provisions bare-metal machines with Redfish and PXE from ``plan.baremetal``.

    Args:
        confirm: asks before machines are installed (their disks are wiped).
        serve_host_keys: the host key server (``run.hostkey_server.serving_host_keys``; tests
            replace it).
    """

    def __init__(self, confirm: Confirm | None = None, serve_host_keys: ServeHostKeys | None = None) -> None:
        self.confirm = confirm or default_confirm
        self.serve_host_keys = serve_host_keys or serving_host_keys

    def provision(
        self, plan: Plan, build_dir: Path, state_dir: Path, *, yes: bool, events: EventBus
    ) -> list[ProvisionedHost]:
        """Install and boot every machine, then write the SSH inventory; return the nodes."""
        require_pulumi_cli()
        bm = plan.baremetal
        if bm is None:
            raise ProviderError("the plan is not a bare-metal plan; re-render it with `clusterctl render`")
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
        stack = PulumiStack(
            plan,
            build_dir,
            state_dir,
            ssh_public_key=client.public,
            host_keys={name: KeyPair(private="", public=line) for name, line in public.items()},
            events=events,
        )
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
            raise ProviderError(str(exc)) from None
        discard_repeated(log, state_dir)
        check_recorded_host_keys(result.outputs, public)
        hosts, _ = hosts_from_outputs(plan, result.outputs, user=bm.ssh_user, host_keys=public)
        write_ssh_inventory(
            plan,
            hosts,
            **build_inventory(build_dir, state_dir),
            private_key=key_path,
        )
        return hosts

    def retire(self, plan: Plan, hosts: list[str], events: EventBus) -> None:
        """Nothing left to do: the stack has no resources for nodes the plan lacks, so provision removed them."""

    def destroy(self, plan: Plan, build_dir: Path, state_dir: Path, *, yes: bool, events: EventBus) -> None:
        """Power every machine off and forget the stack."""
        require_pulumi_cli()
        if not yes and not self.confirm(f"Power off every machine of {plan.cluster.name}?"):
            raise ProviderError("not destroyed: not confirmed")
        if plan.baremetal is not None:
            check_bmc_transport(plan.baremetal, events)
        destroy_stack(PulumiStack(plan, build_dir, state_dir, events=events), events, "machines powered off")

    def status(self, plan: Plan, state_dir: Path) -> dict[str, str]:
        """``installed`` or ``missing`` per machine, from the stack outputs."""
        return stack_node_status(plan, state_dir, "installed")


__all__ = ["BaremetalProvider", "check_bmc_transport", "publish_public_key"]
