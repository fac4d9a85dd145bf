"""Pulumi mocks for the stacks in ``stacks/``: run a program without the engine, record what it creates.

``pulumi.runtime.set_mocks`` replaces the engine; every resource registration lands in
``RecordingMocks.resources`` with its inputs, so tests assert on what the program would ask the
cloud for. No plugin binary or credentials are needed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pytest

from tests.conftest import EXAMPLES, REPO_ROOT

STACKS = REPO_ROOT / "stacks"
for _folder in (STACKS / "common", STACKS / "aws", STACKS / "gcp", STACKS / "azure", STACKS / "baremetal"):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))

from clusterctl.pipeline import load_and_validate  # noqa: E402
from clusterctl.plan import Plan  # noqa: E402

MOCK_SUBSCRIPTION = "00000000-0000-0000-0000-000000000001"


@dataclass
class Recorded:
    """One resource the program registered."""

    typ: str
    name: str
    inputs: dict[str, Any]
    custom: bool


class RecordingMocks(pulumi.runtime.Mocks):
    """Mocks that keep every resource and answer with plausible outputs."""

    def __init__(self, template_ips: dict[str, str] | None = None) -> None:
        self.resources: list[Recorded] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self._counter = 0
        # launch template id or name -> its primary address (seeded for a stack that launches
        # from templates another stack made, as a burst group's nodes part does)
        self._template_ips: dict[str, str] = dict(template_ips or {})

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self._counter += 1
        rid = f"{args.name}-id"
        self.resources.append(Recorded(args.typ, args.name, dict(args.inputs), bool(args.custom)))
        outputs: dict[str, Any] = dict(args.inputs)
        if args.typ == "aws:ec2/launchTemplate:LaunchTemplate":
            primary = next(
                n
                for n in args.inputs["networkInterfaces"]
                if n.get("deviceIndex") == 0 and n.get("networkCardIndex") == 0
            )
            self._template_ips[rid] = primary["privateIpAddress"]
            if args.inputs.get("name"):
                self._template_ips[args.inputs["name"]] = primary["privateIpAddress"]
            outputs["latestVersion"] = 1
        if args.typ == "aws:ec2/instance:Instance":
            template = args.inputs.get("launchTemplate")
            outputs["privateIp"] = (
                self._template_ips.get(template.get("id") or template.get("name"))
                if template
                else args.inputs.get("privateIp", "10.255.0.1")
            )
            outputs["publicIp"] = f"198.51.100.{self._counter % 250}"
        if args.typ == "aws:fsx/lustreFileSystem:LustreFileSystem":
            outputs.update(dnsName=f"{rid}.fsx.example.com", mountName="abcdefgh")
        if args.typ == "aws:ec2/placementGroup:PlacementGroup":
            outputs["name"] = args.name
        if args.typ.startswith("gcp:compute/"):
            outputs.setdefault("selfLink", f"https://www.googleapis.com/compute/v1/{args.name}")
        if args.typ == "gcp:compute/instance:Instance":
            nics = args.inputs.get("networkInterfaces", [])
            if nics:
                outputs["networkInterfaces"] = [{**nics[0], "networkIp": nics[0].get("networkIp", "10.255.0.1")}]
        if args.typ == "gcp:lustre/instance:Instance":
            outputs["mountPoint"] = f"10.9.0.2@tcp:/{args.inputs.get('filesystem')}"
        if args.typ == "azure-native:storagecache:AmlFilesystem":
            outputs["clientInfo"] = {"mgsAddress": "10.60.129.4", "mountCommand": "mount -t lustre ..."}
        if args.typ == "azure-native:network:PublicIPAddress":
            outputs["ipAddress"] = "203.0.113.7"
        return rid, outputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        """Answer the lookups the programs make (a burst group's nodes part finds its base by name)."""
        self.calls.append((args.token, dict(args.args)))
        if args.token == "gcp:compute/getResourcePolicy:getResourcePolicy":
            project = args.args.get("project") or "mock-project"
            link = f"projects/{project}/regions/{args.args['region']}/resourcePolicies/{args.args['name']}"
            return {"selfLink": f"https://www.googleapis.com/compute/v1/{link}", "name": args.args["name"]}, []
        if args.token == "azure-native:authorization:getClientConfig":
            return {
                "subscriptionId": MOCK_SUBSCRIPTION,
                "tenantId": "00000000-0000-0000-0000-00000000000a",
                "clientId": "00000000-0000-0000-0000-00000000000b",
                "objectId": "00000000-0000-0000-0000-00000000000c",
            }, []
        return {}, []

    def of_type(self, typ: str) -> list[Recorded]:
        """The recorded resources of one type token."""
        return [r for r in self.resources if r.typ == typ]


def unsecret(value: Any) -> tuple[bool, Any]:
    """(was it marked secret, the plain value) of a recorded input.

    Mocks receive secrets wrapped the way the engine would ({sig: secret-sig, value: ...}); a
    test can therefore check that what carries a private key really is marked secret.
    """
    from pulumi.runtime import rpc

    if isinstance(value, dict) and value.get(rpc._special_sig_key) == rpc._special_secret_sig:
        return True, value["value"]
    return False, value


def example_plan(name: str) -> Plan:
    """The plan of ``examples/<name>``, exactly as `clusterctl plan` builds it."""
    return load_and_validate(EXAMPLES / name).plan


def run(program: Callable[[], Any], mocks: RecordingMocks | None = None) -> RecordingMocks:
    """Run ``program`` under fresh mocks (or ``mocks``); return them once every registration settled."""
    mocks = mocks or RecordingMocks()
    pulumi.runtime.set_mocks(mocks, project="clusterctl-test", stack="test", preview=False)

    @pulumi.runtime.test
    def body() -> Any:
        return program()

    body()
    return mocks


@pytest.fixture
def run_program() -> Iterator[Callable[[Callable[[], Any]], RecordingMocks]]:
    """:func:`run` as a fixture."""
    return run


_PACKAGES = {"aws": "pulumi_aws", "gcp": "pulumi_gcp", "azure-native": "pulumi_azure_native"}


def takes_param(token: str, param: str) -> bool:
    """Whether the resource class behind a type token accepts ``param`` (e.g. ``tags``, ``labels``).

    Why: "every resource is tagged" can only be asked of resources that can carry tags; the
    SDK's own constructor signature says which ones can.
    """
    import importlib
    import inspect

    package, module, name = token.split(":")
    if package not in _PACKAGES:
        return False
    mod = importlib.import_module(f"{_PACKAGES[package]}.{module.split('/')[0]}")
    cls = getattr(mod, name)
    return param in inspect.signature(cls._internal_init).parameters


@pytest.fixture
def fixture_path() -> Path:
    """Where the example specs live."""
    return EXAMPLES
