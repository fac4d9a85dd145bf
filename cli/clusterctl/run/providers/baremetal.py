"""The bare-metal provider: PXE-install the machines of machines.csv through their BMCs.

provision: publish clusterctl's public key where the autoinstall fetches it
(``<build>/pxe/http/autoinstall/clusterctl.pub``; the PXE server serves ``<build>/pxe/http``),
run ``stacks/baremetal`` (Redfish: one-time PXE boot, power on, wait for SSH, record the host
key the node generated), then write the SSH inventory with those keys. destroy: power the
machines off (disks are left alone). BMC credentials: ``CLUSTERCTL_BMC_USERNAME`` and
``CLUSTERCTL_BMC_PASSWORD`` (or the stack's secret config), never the spec. How the BMCs are
reached (https, certificate checks, CA bundle) comes from ``plan.baremetal.bmc``; a weakened
setting is warned about once per run, here, before any BMC is contacted.
"""

from __future__ import annotations

from pathlib import Path

from clusterctl.plan.models import BaremetalPlan, Plan
from clusterctl.render.builddir import BuildDirError, write_run_file
from clusterctl.run.events import EventBus
from clusterctl.run.providers.base import ProviderError, ProvisionedHost
from clusterctl.run.providers.cloud import Confirm, default_confirm
from clusterctl.run.providers.ssh_inventory import KNOWN_HOSTS_FILE, hosts_from_outputs, write_ssh_inventory
from clusterctl.run.pulumi import PulumiError, PulumiStack, output_mapping, require_pulumi_cli
from clusterctl.run.redfish import BmcCredentials, BmcTransport, RedfishError, tls_context
from clusterctl.run.sshkeys import ensure_client_key

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


class BaremetalProvider:
    """Provisions bare-metal machines with Redfish and PXE from ``plan.baremetal``."""

    def __init__(self, confirm: Confirm | None = None) -> None:
        self.confirm = confirm or default_confirm

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
        stack = PulumiStack(plan, build_dir, state_dir, ssh_public_key=client.public, events=events)
        try:
            if not yes:
                preview = stack.preview()
                events.info(f"{plan.cluster.name} bare metal: {preview.describe()}", phase=PHASE)
                question = f"PXE-install {preview.changes.get('create', 0)} machine(s) (their disks are wiped)?"
                if preview.has_changes and not self.confirm(question):
                    raise ProviderError("not applied: not confirmed; no machine was touched")
            result = stack.up()
        except PulumiError as exc:
            raise ProviderError(str(exc)) from None
        hosts, _ = hosts_from_outputs(plan, result.outputs, user=bm.ssh_user)
        write_ssh_inventory(
            plan,
            hosts,
            inventory_dir=build_dir / "ansible" / "inventory",
            known_hosts=state_dir / KNOWN_HOSTS_FILE,
            private_key=key_path,
        )
        return hosts

    def destroy(self, plan: Plan, build_dir: Path, state_dir: Path, *, yes: bool, events: EventBus) -> None:
        """Power every machine off and forget the stack."""
        require_pulumi_cli()
        if not yes and not self.confirm(f"Power off every machine of {plan.cluster.name}?"):
            raise ProviderError("not destroyed: not confirmed")
        if plan.baremetal is not None:
            check_bmc_transport(plan.baremetal, events)
        try:
            summary = PulumiStack(plan, build_dir, state_dir, events=events).destroy()
        except PulumiError as exc:
            raise ProviderError(str(exc)) from None
        events.info(f"machines powered off: {summary.describe()}", phase=PHASE)

    def status(self, plan: Plan, state_dir: Path) -> dict[str, str]:
        """``installed`` or ``missing`` per machine, from the stack outputs."""
        names = [n.hostname for n in plan.nodes if not n.burst]
        try:
            require_pulumi_cli()
            stack = PulumiStack(plan, state_dir, state_dir)
            nodes = output_mapping(stack.outputs().values, "nodes", stack.target.stack)
        except (PulumiError, ProviderError) as exc:
            return dict.fromkeys(names, f"unknown ({str(exc).splitlines()[0]})")
        return {name: "installed" if name in nodes else "missing" for name in names}


__all__ = ["BaremetalProvider", "check_bmc_transport", "publish_public_key"]
