"""The Pulumi dynamic provider that brings a bare-metal node up through its BMC.

create: one-time PXE boot override, power on (restart if already on), wait until the BMC says
On, then until the node answers on its ready port (TCP 22 by default: the autoinstall has
finished and sshd runs), and record its SSH host key. read: the power state. delete: power off.

It lives in the clusterctl package (not in stacks/baremetal) because Pulumi pickles a dynamic
provider by reference to its module: the provider host process must be able to import it.
Credentials: ``CLUSTERCTL_BMC_USERNAME``/``CLUSTERCTL_BMC_PASSWORD`` in the environment, else
the secret inputs ``bmc_username``/``bmc_password`` (Pulumi config secrets); never the spec.
Transport: ``insecure_http``, ``verify_tls`` and ``ca_bundle`` (PEM text) from the plan's
``baremetal.bmc`` (see :class:`~clusterctl.run.redfish.BmcTransport`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider, UpdateResult

from clusterctl.run.redfish import (
    BmcCredentials,
    RedfishClient,
    RedfishError,
    scan_host_key,
    wait_for_port,
)

# Changing any of these means another machine (or another address): replace, never update.
REPLACE_ON = ("bmc", "hostname", "mac", "address")
# Changing how the BMC is reached is an update in place: the machine stays as it is.
UPDATE_ON = ("verify_tls", "ca_bundle", "insecure_http", "request_timeout_s")
SECRET_PROPS = ("bmc_username", "bmc_password")


def _credentials(props: dict[str, Any]) -> BmcCredentials | None:
    env = BmcCredentials.from_env()
    if env is not None:
        return env
    if props.get("bmc_username") is not None and props.get("bmc_password") is not None:
        return BmcCredentials(str(props["bmc_username"]), str(props["bmc_password"]))
    return None


def _client(props: dict[str, Any]) -> RedfishClient:
    ca_bundle = props.get("ca_bundle")
    return RedfishClient(
        str(props["bmc"]),
        _credentials(props),
        # Strict unless the input says otherwise in so many words (a missing or odd value is strict).
        verify_tls=props.get("verify_tls", True) is not False,
        ca_bundle=str(ca_bundle) if ca_bundle else None,
        insecure_http=props.get("insecure_http", False) is True,
        timeout=float(props.get("request_timeout_s", 15)),
    )


def _public(props: dict[str, Any]) -> dict[str, Any]:
    # Outputs never carry the credentials back into state.
    return {k: v for k, v in props.items() if k not in SECRET_PROPS and not k.startswith("__")}


class RedfishNodeProvider(ResourceProvider):
    """CRUD of one bare-metal node through Redfish (see the module docstring)."""

    def create(self, props: dict[str, Any]) -> CreateResult:
        """PXE-boot the node once, power it on and wait until it answers."""
        client = _client(props)
        client.set_one_time_boot("Pxe", props.get("boot_mode") or None)
        boot = client.boot_override()
        client.power_on()
        poll = float(props.get("poll_s", 5))
        client.wait_power("On", timeout=float(props.get("power_timeout_s", 300)), poll=min(poll, 2.0))
        waited = wait_for_port(
            str(props["address"]),
            int(props.get("ready_port", 22)),
            float(props.get("ready_timeout_s", 2700)),
            poll=poll,
        )
        host_key = None
        if props.get("scan_host_key", True):
            host_key = scan_host_key(str(props["address"]), int(props.get("ready_port", 22)))
        outs = {
            **_public(props),
            "system": client.system_path,
            "power_state": "On",
            "boot_target": boot.get("BootSourceOverrideTarget"),
            "ready_after_s": round(waited, 1),
            "host_key": host_key,
        }
        return CreateResult(id_=f"{props['hostname']}@{client.base}{client.system_path}", outs=outs)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """Refresh the power state; a system the BMC no longer has is gone."""
        client = _client(props)
        try:
            state = client.power_state()
        except RedfishError as exc:
            if "HTTP 404" in str(exc):
                return ReadResult(id_=None, outs={})
            raise
        return ReadResult(id_=id_, outs={**_public(props), "power_state": state})

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        """Another BMC, MAC or address is another node: replace it; new BMC transport settings: update."""
        replaces = [key for key in REPLACE_ON if olds.get(key) != news.get(key)]
        updates = [key for key in UPDATE_ON if olds.get(key) != news.get(key)]
        return DiffResult(changes=bool(replaces or updates), replaces=replaces, delete_before_replace=True)

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        """Record the new transport settings (the node itself is not touched)."""
        kept = {k: olds.get(k) for k in ("system", "power_state", "boot_target", "ready_after_s", "host_key")}
        return UpdateResult(outs={**_public(news), **kept})

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        """Power the node off (its disk is left as is)."""
        client = _client(props)
        client.power_off()
        client.wait_power(
            "Off", timeout=float(props.get("power_timeout_s", 300)), poll=min(float(props.get("poll_s", 5)), 2.0)
        )


@dataclass
class RedfishNodeArgs:
    """Inputs of :class:`RedfishNode`."""

    hostname: str
    bmc: str
    mac: str
    address: str
    ready_port: int = 22
    ready_timeout_s: int = 2700
    verify_tls: bool = True
    ca_bundle: str | None = None
    insecure_http: bool = False
    boot_mode: str | None = "UEFI"
    scan_host_key: bool = True
    poll_s: float = 5.0
    bmc_username: pulumi.Input[str] | None = None
    bmc_password: pulumi.Input[str] | None = None


class RedfishNode(Resource, module="clusterctl", name="RedfishNode"):
    """A bare-metal node brought up through its BMC."""

    power_state: pulumi.Output[str]
    host_key: pulumi.Output[str]
    address: pulumi.Output[str]

    def __init__(self, name: str, args: RedfishNodeArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        props: dict[str, Any] = {
            "hostname": args.hostname,
            "bmc": args.bmc,
            "mac": args.mac,
            "address": args.address,
            "ready_port": args.ready_port,
            "ready_timeout_s": args.ready_timeout_s,
            "verify_tls": args.verify_tls,
            "ca_bundle": args.ca_bundle,
            "insecure_http": args.insecure_http,
            "boot_mode": args.boot_mode,
            "scan_host_key": args.scan_host_key,
            "poll_s": args.poll_s,
            "bmc_username": pulumi.Output.secret(args.bmc_username) if args.bmc_username is not None else None,
            "bmc_password": pulumi.Output.secret(args.bmc_password) if args.bmc_password is not None else None,
            "power_state": None,
            "host_key": None,
            "system": None,
        }
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(additional_secret_outputs=list(SECRET_PROPS)))
        super().__init__(RedfishNodeProvider(), name, props, opts)
