"""The Redfish client's rules that need no BMC: addresses, TLS settings, warnings, provider inputs.

The same rules against real servers (sushy-emulator, redirecting and junk-answering BMCs) are in
tests/integration/test_redfish.py.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from clusterctl.plan.models import BaremetalPlan, BmcPlan
from clusterctl.run.events import Event, EventBus
from clusterctl.run.providers.baremetal import check_bmc_transport
from clusterctl.run.providers.base import ProviderError
from clusterctl.run.pulumi import PulumiError, output_mapping
from clusterctl.run.redfish import (
    BmcInsecureError,
    BmcTlsError,
    BmcTransport,
    RedfishClient,
    RedfishError,
    parse_bmc,
    tls_context,
)
from clusterctl.run.redfish_provider import RedfishNodeProvider, _client
from tests.integration.redfish_servers import make_tls


@pytest.mark.parametrize(
    ("bmc", "base", "system"),
    [
        ("10.10.0.11", "https://10.10.0.11", None),
        ("bmc1.mgmt:8443", "https://bmc1.mgmt:8443", None),
        ("redfish://10.10.0.11", "https://10.10.0.11", None),
        ("https://10.10.0.11/redfish/v1/Systems/1/", "https://10.10.0.11", "/redfish/v1/Systems/1"),
        ("https://[fd00::1]:443", "https://[fd00::1]:443", None),
    ],
)
def test_addresses_default_to_https(bmc: str, base: str, system: str | None) -> None:
    assert parse_bmc(bmc) == (base, system)


def test_http_needs_insecure_http() -> None:
    with pytest.raises(BmcInsecureError, match="insecure_http: true"):
        parse_bmc("http://10.10.0.11")
    assert parse_bmc("http://10.10.0.11:8000", insecure_http=True) == ("http://10.10.0.11:8000", None)
    with pytest.raises(BmcInsecureError):
        RedfishClient("http://10.10.0.11", None)


@pytest.mark.parametrize(
    ("bmc", "fragment"),
    [
        ("https://admin:secret@10.10.0.11", "user name or password"),
        ("https://10.10.0.11/?x=1", "query"),
        ("ftp://10.10.0.11", "not a BMC address"),
        ("https://10.10.0.11:99999", "bad port"),
        ("https://", "not a BMC address"),
        ("https://10.10.0.11/redfish/v1/Systems/a b", "characters"),
    ],
)
def test_bad_addresses(bmc: str, fragment: str) -> None:
    with pytest.raises(RedfishError) as info:
        parse_bmc(bmc, insecure_http=True)
    assert fragment in str(info.value)
    assert "secret" not in str(info.value)


def test_tls_contexts(tmp_path: Path) -> None:
    assert tls_context(BmcTransport()).verify_mode is ssl.CERT_REQUIRED
    off = tls_context(BmcTransport(verify_tls=False))
    assert (off.verify_mode, off.check_hostname) == (ssl.CERT_NONE, False)
    pinned = tls_context(BmcTransport(ca_bundle=make_tls(tmp_path).ca_pem))
    assert (pinned.verify_mode, pinned.check_hostname) == (ssl.CERT_REQUIRED, True)
    assert len(pinned.get_ca_certs()) == 1  # only the bundle, not the system's CAs
    with pytest.raises(BmcTlsError, match="no usable PEM CA certificate"):
        tls_context(BmcTransport(ca_bundle="-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n"))


def _plan(bmc: BmcPlan) -> BaremetalPlan:
    return BaremetalPlan(
        machines=[],
        autoinstall=[],
        pxe_server="10.20.0.2",
        pxe_interface="eno1",
        http_port=8080,
        http_url="http://10.20.0.2:8080",
        installer_iso="x.iso",
        boot_mode="UEFI",
        bmc=bmc,
        ready_port=22,
        ready_timeout_s=60,
        ssh_user="ubuntu",
        netmask="255.255.0.0",
        prefix_length=16,
        gateway="10.20.0.1",
        dns=[],
        domain="atlas.internal",
    )


def _events() -> tuple[EventBus, list[Event]]:
    bus, seen = EventBus(), []
    bus.subscribe(seen.append)
    return bus, seen


def test_weakened_settings_are_warned_once_each() -> None:
    bus, seen = _events()
    check_bmc_transport(_plan(BmcPlan(insecure_http=True, verify_tls=False)), bus)
    assert [e.status for e in seen] == ["warning", "warning"]
    assert "insecure_http" in seen[0].message
    assert "verify_tls" in seen[1].message
    bus, seen = _events()
    check_bmc_transport(_plan(BmcPlan()), bus)
    assert seen == []


def test_a_ca_bundle_the_plan_lost_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ProviderError, match="holds no certificate"):
        check_bmc_transport(_plan(BmcPlan(ca_bundle_file="bmc-ca.pem")), EventBus())
    with pytest.raises(ProviderError, match="no usable PEM"):
        check_bmc_transport(_plan(BmcPlan(ca_bundle_file="bmc-ca.pem", ca_bundle="junk")), EventBus())
    check_bmc_transport(_plan(BmcPlan(ca_bundle_file="ca.pem", ca_bundle=make_tls(tmp_path).ca_pem)), EventBus())


def test_provider_inputs_are_strict_unless_said_so_exactly() -> None:
    props: dict[str, object] = {"bmc": "http://10.0.0.1", "insecure_http": "true", "verify_tls": "false"}
    with pytest.raises(BmcInsecureError):
        _client(props)  # a string is not `true`
    props = {"bmc": "10.0.0.1", "verify_tls": 0}
    assert _client(props).transport.verify_tls is True
    props = {"bmc": "http://10.0.0.1", "insecure_http": True, "verify_tls": False}
    assert _client(props).transport == BmcTransport(insecure_http=True, verify_tls=False)


def test_new_transport_settings_update_in_place() -> None:
    provider = RedfishNodeProvider()
    olds = {"bmc": "10.0.0.1", "hostname": "gpu001", "mac": "m", "address": "a", "verify_tls": False, "host_key": "k"}
    news = {**olds, "verify_tls": True, "ca_bundle": "PEM"}
    del news["host_key"]
    diff = provider.diff("id", olds, news)
    assert diff.changes is True
    assert diff.replaces == []
    updated = provider.update("id", olds, news)
    assert updated.outs is not None
    assert (updated.outs["verify_tls"], updated.outs["ca_bundle"], updated.outs["host_key"]) == (True, "PEM", "k")
    assert provider.diff("id", olds, {**olds, "mac": "other"}).replaces == ["mac"]


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("10.0.0.1", "is a str, not a mapping"),
        (["gpu001"], "is a list"),
        ({"gpu001": 42}, "whose value is a int"),
        ({"gpu001": "x" * 20_000}, "20000 characters long"),
        ({7: "10.0.0.1"}, "entry '7'"),
    ],
)
def test_stack_outputs_of_the_wrong_shape_are_clear_errors(value: object, fragment: str) -> None:
    with pytest.raises(PulumiError) as info:
        output_mapping({"nodes": value}, "nodes", "atlas")
    assert "stack atlas: output `nodes`" in str(info.value)
    assert fragment in str(info.value)


def test_stack_outputs_of_the_right_shape() -> None:
    assert output_mapping({}, "nodes", "s") == {}
    assert output_mapping({"nodes": None}, "nodes", "s") == {}
    assert output_mapping({"nodes": {"a": "10.0.0.1", "b": None}}, "nodes", "s") == {"a": "10.0.0.1"}
