"""The Redfish client and the bare-metal dynamic provider against a real Redfish server.

sushy-tools' ``sushy-emulator`` with its fake driver runs on 127.0.0.1 (a free port) with
HTTP basic auth from a bcrypt htpasswd file, over HTTPS with a certificate from a CA made for
the test (``cryptography``); a second emulator serves plain http for the ``insecure_http``
checks. The fake driver applies power changes after a random 1-11 s, so every check polls. A
plain TCP listener stands in for the node's sshd: the provider waits for it exactly as it waits
for an installed node.

The trust-boundary checks (SECURITY.md): plain http is refused unless ``insecure_http``; a
self-signed BMC is refused unless its CA is the ``ca_bundle`` (or ``verify_tls`` is off); a
redirect to another host is not followed, so the credentials never reach it; junk answers
(not JSON, wrong shapes, too big, too slow, a broken status line) are clear ``RedfishError``s.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import bcrypt
import pytest

from clusterctl.environ import Env
from clusterctl.pipeline import load_and_validate
from clusterctl.run.providers.baremetal import power_states
from clusterctl.run.redfish import (
    MAX_ANSWER_BYTES,
    BmcAnswerError,
    BmcAuthError,
    BmcCredentials,
    BmcInsecureError,
    BmcTlsError,
    BmcUnreachableError,
    NodeNotReadyError,
    RedfishClient,
    RedfishError,
)
from clusterctl.run.redfish_provider import RedfishNodeProvider
from tests.conftest import EXAMPLES
from tests.integration.redfish_servers import Answer, RawServer, RecordingServer, TlsFiles, make_tls

pytestmark = [pytest.mark.integration, pytest.mark.slow]

USER, PASSWORD = "admin", "s3cret-pass"
SYSTEM_UUID = str(uuid.UUID(int=0x2E7A))  # fixed so the system path is predictable
SYSTEM = f"/redfish/v1/Systems/{SYSTEM_UUID}"
POWER_TIMEOUT = 40.0  # the fake driver takes up to 11 s per change


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Emulator:
    """A running sushy-emulator."""

    url: str
    system: str
    ca_pem: str | None = None


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    """The emulator's certificate for 127.0.0.1 and the CA that signed it."""
    return make_tls(tmp_path_factory.mktemp("tls"))


def _start_emulator(work: Path, tls: TlsFiles | None) -> tuple[subprocess.Popen[bytes], str]:
    exe = shutil.which("sushy-emulator") or str(Path(sys.executable).with_name("sushy-emulator"))
    if not Path(exe).exists():
        pytest.skip("sushy-emulator (sushy-tools) not installed")
    port = _free_port()
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
    (work / "htpasswd").write_text(f"{USER}:{hashed}\n")
    settings = [
        "SUSHY_EMULATOR_LISTEN_IP = '127.0.0.1'",
        f"SUSHY_EMULATOR_LISTEN_PORT = {port}",
        f"SUSHY_EMULATOR_STATE_DIR = '{work / 'state'}'",
        f"SUSHY_EMULATOR_AUTH_FILE = '{work / 'htpasswd'}'",
        "SUSHY_EMULATOR_FAKE_DRIVER = True",
        # external_notifier False: otherwise every change is PUT to localhost:9999.
        "SUSHY_EMULATOR_FAKE_SYSTEMS = [{"
        f"'uuid': '{SYSTEM_UUID}', 'name': 'gpu001', 'power_state': 'Off', 'external_notifier': False,"
        " 'nics': [{'mac': '3c:ec:ef:10:00:04', 'ip': '127.0.0.1'}]}]",
    ]
    if tls is not None:
        settings += [f"SUSHY_EMULATOR_SSL_CERT = '{tls.cert}'", f"SUSHY_EMULATOR_SSL_KEY = '{tls.key}'"]
    (work / "emulator.conf").write_text("\n".join([*settings, ""]))
    log = (work / "emulator.log").open("w")
    process = subprocess.Popen([exe, "--config", str(work / "emulator.conf")], stdout=log, stderr=subprocess.STDOUT)
    log.close()  # the child holds its own copy
    scheme = "https" if tls else "http"
    url = f"{scheme}://127.0.0.1:{port}"
    # Readiness only: any answer (401 included) means it is up. The test's own checks verify TLS.
    context = None
    if tls is not None:
        import ssl

        context = ssl.create_default_context(cadata=tls.ca_pem)
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(url + "/redfish/v1", timeout=2, context=context):
                break
        except urllib.error.HTTPError as exc:
            exc.close()
            break  # 401: up and asking for credentials
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                _stop(process)
                pytest.fail(f"sushy-emulator did not start: {(work / 'emulator.log').read_text()[-2000:]}")
            time.sleep(0.2)
    return process, url


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=10)
    if process.poll() is None:
        process.kill()
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory, tls: TlsFiles) -> Iterator[Emulator]:
    """sushy-emulator over HTTPS, its certificate signed by the test's own CA."""
    process, url = _start_emulator(tmp_path_factory.mktemp("sushy-https"), tls)
    try:
        yield Emulator(url=url, system=SYSTEM, ca_pem=tls.ca_pem)
    finally:
        _stop(process)


@pytest.fixture(scope="module")
def http_emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    """sushy-emulator over plain http (what an emulator or a lab BMC often is)."""
    process, url = _start_emulator(tmp_path_factory.mktemp("sushy-http"), None)
    try:
        yield Emulator(url=url, system=SYSTEM)
    finally:
        _stop(process)


def _client(emulator: Emulator, credentials: BmcCredentials | None, **extra: object) -> RedfishClient:
    """A client that trusts the emulator's CA (the spec's ``bmc.ca_bundle``)."""
    return RedfishClient(emulator.url, credentials, ca_bundle=emulator.ca_pem, **extra)  # type: ignore[arg-type]


@pytest.fixture
def creds() -> BmcCredentials:
    return BmcCredentials(USER, PASSWORD)


@pytest.fixture
def no_env_creds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(Env.BMC_USER, raising=False)
    monkeypatch.delenv(Env.BMC_PASSWORD, raising=False)


@pytest.fixture
def fake_sshd() -> Iterator[int]:
    """A TCP listener that accepts connections, standing in for an installed node's sshd."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.5)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                conn, _ = server.accept()
                conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield int(server.getsockname()[1])
    stop.set()
    thread.join(timeout=2)
    server.close()


def _wait_state(client: RedfishClient, state: str) -> None:
    client.wait_power(state, timeout=POWER_TIMEOUT, poll=0.5)


def _props(emulator: Emulator, port: int, **extra: object) -> dict[str, object]:
    return {
        "hostname": "gpu001",
        "bmc": emulator.url,  # the single system is found through /redfish/v1/Systems
        "mac": "3c:ec:ef:10:00:04",
        "address": "127.0.0.1",
        "ready_port": port,
        "ready_timeout_s": 30,
        "verify_tls": True,
        "ca_bundle": emulator.ca_pem,
        "boot_mode": "UEFI",
        "scan_host_key": False,  # a bare TCP listener has no host key; the SSH test scans real sshd
        "poll_s": 0.5,
        "power_timeout_s": POWER_TIMEOUT,
        **extra,
    }


def test_create_read_delete(emulator: Emulator, fake_sshd: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(Env.BMC_USER, USER)
    monkeypatch.setenv(Env.BMC_PASSWORD, PASSWORD)
    client = _client(emulator, BmcCredentials(USER, PASSWORD))
    # Start from Off (the fake system is created Off; a previous test may have changed it).
    client.power_off()
    _wait_state(client, "Off")
    provider = RedfishNodeProvider()

    created = provider.create(_props(emulator, fake_sshd))

    assert created.id == f"gpu001@{emulator.url}{emulator.system}"
    assert created.outs["system"] == emulator.system
    assert created.outs["power_state"] == "On"
    assert created.outs["boot_target"] == "Pxe"
    assert "bmc_password" not in created.outs
    # What the BMC says now: PXE is the boot override, the system is on.
    assert client.boot_override()["BootSourceOverrideTarget"] == "Pxe"
    assert client.power_state() == "On"

    read = provider.read(created.id, created.outs)
    assert read.id == created.id
    assert read.outs["power_state"] == "On"

    provider.delete(created.id, created.outs)
    assert client.power_state() == "Off"
    assert provider.read(created.id, created.outs).outs["power_state"] == "Off"


def test_create_restarts_a_node_that_is_on(
    emulator: Emulator, fake_sshd: int, creds: BmcCredentials, no_env_creds: None
) -> None:
    client = _client(emulator, creds)
    if client.power_state() != "On":
        client.reset("On")
        _wait_state(client, "On")
    # Credentials from the (secret) inputs when the environment has none.
    props = _props(emulator, fake_sshd, bmc_username=USER, bmc_password=PASSWORD)
    created = RedfishNodeProvider().create(props)
    assert created.outs["power_state"] == "On"
    assert client.boot_override()["BootSourceOverrideTarget"] == "Pxe"
    RedfishNodeProvider().delete(created.id, props)
    assert client.power_state() == "Off"


def test_system_path_in_bmc_address(emulator: Emulator, creds: BmcCredentials) -> None:
    client = RedfishClient(emulator.url + emulator.system, creds, ca_bundle=emulator.ca_pem)
    assert client.system_path == emulator.system
    assert client.power_state() in ("On", "Off")


def test_wrong_bmc_address_is_a_clear_error(creds: BmcCredentials) -> None:
    address = f"https://127.0.0.1:{_free_port()}"  # nothing listens there
    with pytest.raises(BmcUnreachableError) as info:
        RedfishClient(address, creds, timeout=3).power_state()
    message = str(info.value)
    assert address in message
    assert "machines.csv" in message


def test_bad_credentials_are_a_clear_error(emulator: Emulator, no_env_creds: None) -> None:
    with pytest.raises(BmcAuthError) as info:
        _client(emulator, BmcCredentials(USER, "wrong")).power_state()
    message = str(info.value)
    assert emulator.url in message
    assert Env.BMC_USER in message
    assert Env.BMC_PASSWORD in message
    assert "wrong" not in message  # the password never reaches output
    with pytest.raises(BmcAuthError):
        _client(emulator, None).power_state()


def test_provider_reports_bad_credentials(emulator: Emulator, fake_sshd: int, no_env_creds: None) -> None:
    props = _props(emulator, fake_sshd, bmc_username=USER, bmc_password="nope")
    with pytest.raises(BmcAuthError) as info:
        RedfishNodeProvider().create(props)
    assert str(info.value).startswith("gpu001: BMC ")  # the machine first, then the BMC and the fix
    assert "powered off" not in str(info.value)  # it was never powered on


def test_node_that_never_answers_times_out_and_is_powered_off_again(
    emulator: Emulator, creds: BmcCredentials, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(Env.BMC_USER, USER)
    monkeypatch.setenv(Env.BMC_PASSWORD, PASSWORD)
    props = _props(emulator, _free_port(), ready_timeout_s=2)
    with pytest.raises(NodeNotReadyError) as info:
        RedfishNodeProvider().create(props)
    message = str(info.value)
    assert message.startswith("gpu001: 127.0.0.1:")
    assert "did not answer" in message
    assert message.endswith("(powered off again)")
    assert _client(emulator, creds).power_state() == "Off"


def test_create_sets_the_boot_device_the_machine_keeps(
    emulator: Emulator, fake_sshd: int, creds: BmcCredentials, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An installed machine keeps its disk after the one-time PXE boot (Ironic's local boot)."""
    monkeypatch.setenv(Env.BMC_USER, USER)
    monkeypatch.setenv(Env.BMC_PASSWORD, PASSWORD)
    props = _props(emulator, fake_sshd, boot_after="Hdd")
    created = RedfishNodeProvider().create(props)
    boot = _client(emulator, creds).boot_override()
    assert (boot["BootSourceOverrideTarget"], boot["BootSourceOverrideEnabled"]) == ("Hdd", "Continuous")
    assert created.outs["boot_target"] == "Pxe"  # what it booted for the install
    RedfishNodeProvider().delete(created.id, props)


def test_credentials_repr_hides_password() -> None:
    assert PASSWORD not in repr(BmcCredentials(USER, PASSWORD))


def test_env_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(Env.BMC_USER, "u")
    monkeypatch.setenv(Env.BMC_PASSWORD, "p")
    assert BmcCredentials.from_env() == BmcCredentials("u", "p")
    monkeypatch.delenv(Env.BMC_PASSWORD)
    assert BmcCredentials.from_env() is None
    assert os.environ.get(Env.BMC_USER) == "u"


# --- http: refused unless the spec says insecure_http ---------------------------------------------------


def test_http_is_refused_without_insecure_http(http_emulator: Emulator, creds: BmcCredentials) -> None:
    with RecordingServer() as recorder:
        for url in (http_emulator.url, recorder.url, recorder.url + SYSTEM):
            with pytest.raises(BmcInsecureError) as info:
                RedfishClient(url, creds).power_state()
            assert "plain http" in str(info.value)
            assert "insecure_http" in str(info.value)
        assert recorder.seen == []  # refused before any request: no credentials on the wire


def test_provider_refuses_http_without_insecure_http(http_emulator: Emulator, fake_sshd: int) -> None:
    props = _props(http_emulator, fake_sshd, bmc_username=USER, bmc_password=PASSWORD)
    with pytest.raises(BmcInsecureError):
        RedfishNodeProvider().create(props)


def test_http_works_with_insecure_http(http_emulator: Emulator, creds: BmcCredentials) -> None:
    client = RedfishClient(http_emulator.url, creds, insecure_http=True)
    assert client.system_path == SYSTEM
    assert client.power_state() in ("On", "Off")


# --- TLS: verified, against the CA bundle when one is given ----------------------------------------------


def test_self_signed_bmc_is_refused_without_its_ca(emulator: Emulator, creds: BmcCredentials) -> None:
    with pytest.raises(BmcTlsError) as info:
        RedfishClient(emulator.url, creds).power_state()
    message = str(info.value)
    assert emulator.url in message
    assert "certificate" in message
    assert "ca_bundle" in message
    assert "verify_tls" in message


def test_self_signed_bmc_is_accepted_with_its_ca(emulator: Emulator, creds: BmcCredentials) -> None:
    client = RedfishClient(emulator.url, creds, ca_bundle=emulator.ca_pem)
    assert client.system_path == SYSTEM
    assert client.power_state() in ("On", "Off")


def test_another_ca_is_refused(emulator: Emulator, creds: BmcCredentials, tmp_path: Path) -> None:
    other = make_tls(tmp_path, "other")
    with pytest.raises(BmcTlsError) as info:
        RedfishClient(emulator.url, creds, ca_bundle=other.ca_pem).power_state()
    assert "Check that provider.bmc.ca_bundle holds the CA" in str(info.value)


def test_host_name_is_checked_with_the_ca_bundle(emulator: Emulator, creds: BmcCredentials) -> None:
    # The certificate is for IP 127.0.0.1 only; "localhost" reaches the same server under another name.
    with pytest.raises(BmcTlsError):
        RedfishClient(emulator.url.replace("127.0.0.1", "localhost"), creds, ca_bundle=emulator.ca_pem).power_state()


def test_verify_tls_false_skips_the_check(emulator: Emulator, creds: BmcCredentials) -> None:
    assert RedfishClient(emulator.url, creds, verify_tls=False).power_state() in ("On", "Off")


def test_provider_passes_the_ca_bundle(emulator: Emulator, fake_sshd: int, no_env_creds: None) -> None:
    props = _props(emulator, fake_sshd, bmc_username=USER, bmc_password=PASSWORD, ca_bundle=None)
    with pytest.raises(BmcTlsError):
        RedfishNodeProvider().read("gpu001", props)
    props["ca_bundle"] = emulator.ca_pem
    assert RedfishNodeProvider().read("gpu001", props).outs["power_state"] in ("On", "Off")


# --- redirects: never to another host with the credentials -------------------------------------------------


def _redirect_all_to(server: RecordingServer, target: str, status: int = 307) -> None:
    server.answers["*"] = Answer(status, b"", {"Location": target})


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_redirect_to_another_host_does_not_carry_credentials(creds: BmcCredentials, status: int) -> None:
    # 127.0.0.2 is another host for HTTP (another origin), though it is this machine's loopback.
    with RecordingServer("127.0.0.2") as other, RecordingServer() as bmc:
        other.answers["*"] = Answer(body=json.dumps({"Members": [{"@odata.id": SYSTEM}]}).encode())
        _redirect_all_to(bmc, other.url + SYSTEMS_PATH, status)
        client = RedfishClient(bmc.url, creds, insecure_http=True, timeout=5)
        with pytest.raises(BmcInsecureError) as info:
            client.power_state()
        message = str(info.value)
        assert "127.0.0.2" in message
        assert "did not follow" in message
        assert [s.authorization is not None for s in bmc.seen] == [True]  # the BMC itself got them
        assert other.seen == []  # the other host got nothing, credentials least of all


def test_redirect_to_another_port_or_scheme_is_refused(creds: BmcCredentials) -> None:
    with RecordingServer() as other, RecordingServer() as bmc:
        for target in (other.url + SYSTEMS_PATH, "https://127.0.0.1" + SYSTEMS_PATH):
            _redirect_all_to(bmc, target)
            with pytest.raises(BmcInsecureError):
                RedfishClient(bmc.url, creds, insecure_http=True, timeout=5).power_state()
        assert other.seen == []


def test_the_recorder_would_see_leaked_credentials(creds: BmcCredentials) -> None:
    """Control: urllib's own redirect handling forwards Authorization, and the recorder sees it."""
    with RecordingServer("127.0.0.2") as other, RecordingServer() as bmc:
        other.answers["*"] = Answer(body=b"{}")
        _redirect_all_to(bmc, other.url + SYSTEMS_PATH)
        request = urllib.request.Request(bmc.url + SYSTEMS_PATH, headers={"Authorization": "Basic bGVhaw=="})
        with urllib.request.urlopen(request, timeout=5) as response:
            response.read()
        assert [s.authorization for s in other.seen] == ["Basic bGVhaw=="]


def test_same_origin_redirects_are_followed_with_credentials(creds: BmcCredentials) -> None:
    with RecordingServer() as bmc:
        bmc.answers[SYSTEMS_PATH] = Answer(308, b"", {"Location": SYSTEMS_PATH + "/"})
        bmc.answers[SYSTEMS_PATH + "/"] = Answer(body=json.dumps({"Members": [{"@odata.id": SYSTEM}]}).encode())
        bmc.answers[SYSTEM] = Answer(body=json.dumps({"PowerState": "Off"}).encode())
        assert RedfishClient(bmc.url, creds, insecure_http=True, timeout=5).power_state() == "Off"
        assert [s.path for s in bmc.seen] == [SYSTEMS_PATH, SYSTEMS_PATH + "/", SYSTEM]
        assert all(s.authorization and s.authorization.startswith("Basic ") for s in bmc.seen)


def test_redirect_loops_end(creds: BmcCredentials) -> None:
    with RecordingServer() as bmc:
        _redirect_all_to(bmc, SYSTEMS_PATH)
        with pytest.raises(BmcAnswerError, match="redirected more than"):
            RedfishClient(bmc.url, creds, insecure_http=True, timeout=5).power_state()


# --- junk answers: a clear error naming the BMC, never a traceback ---------------------------------------------

SYSTEMS_PATH = "/redfish/v1/Systems"
MEMBERS = json.dumps({"Members": [{"@odata.id": SYSTEM}]}).encode()


@pytest.mark.parametrize(
    ("answers", "fragment"),
    [
        ({SYSTEMS_PATH: Answer(body=b"<!doctype html><title>Login</title>")}, "not JSON"),
        ({SYSTEMS_PATH: Answer(body=b"[1, 2, 3]")}, "JSON list, not a Redfish object"),
        ({SYSTEMS_PATH: Answer(body=b"")}, "empty body"),
        ({SYSTEMS_PATH: Answer(body=b"[" * 100_000 + b"]" * 100_000)}, "not JSON"),
        ({SYSTEMS_PATH: Answer(body=b'{"Members": "all of them"}')}, "`Members` is a str"),
        ({SYSTEMS_PATH: Answer(body=b"{}")}, "has no `Members`"),
        ({SYSTEMS_PATH: Answer(body=b'{"Members": [42]}')}, "the member is a int"),
        ({SYSTEMS_PATH: Answer(body=b'{"Members": [{"@odata.id": 7}]}')}, "not a Redfish path"),
        ({SYSTEMS_PATH: Answer(body=b'{"Members": [{"@odata.id": "https://evil.example/x"}]}')}, "another host"),
        ({SYSTEMS_PATH: Answer(body=b'{"Members": [{"@odata.id": "/redfish/v1/../../etc"}]}')}, "not a Redfish path"),
        ({SYSTEMS_PATH: Answer(body=b'{"Members": [{"@odata.id": "/redfish/v1/S y"}]}')}, "not a Redfish path"),
        ({SYSTEMS_PATH: Answer(body=MEMBERS), SYSTEM: Answer(body=b'{"PowerState": 42}')}, "not a power state"),
        ({SYSTEMS_PATH: Answer(body=MEMBERS), SYSTEM: Answer(body=b'{"PowerState": "' + b"O" * 500 + b'"}')}, "power"),
        (
            {SYSTEMS_PATH: Answer(body=b"x" * (MAX_ANSWER_BYTES + 1))},
            f"announced a {MAX_ANSWER_BYTES + 1}-byte answer",
        ),
        (
            # No Content-Length: the cap is enforced while reading.
            {SYSTEMS_PATH: Answer(body=b" " * (MAX_ANSWER_BYTES + 10), send_length=False)},
            "more than",
        ),
        ({SYSTEMS_PATH: Answer(500, b"internal error \x1b[2J")}, "HTTP 500: internal error \\x1b[2J"),
    ],
    ids=lambda value: None if isinstance(value, dict) else str(value)[:30],
)
def test_junk_answers_are_clear_errors(creds: BmcCredentials, answers: dict[str, Answer], fragment: str) -> None:
    with RecordingServer() as bmc:
        bmc.answers.update(answers)
        with pytest.raises(RedfishError) as info:
            RedfishClient(bmc.url, creds, insecure_http=True, timeout=10).power_state()
    message = str(info.value)
    assert bmc.url in message
    assert fragment in message
    assert "\x1b" not in message
    assert len(message) < 800


def test_junk_in_the_system_resource(creds: BmcCredentials) -> None:
    with RecordingServer() as bmc:
        bmc.answers[SYSTEMS_PATH] = Answer(body=MEMBERS)
        bmc.answers[SYSTEM] = Answer(body=json.dumps({"PowerState": "On", "Boot": "Pxe", "Actions": []}).encode())
        client = RedfishClient(bmc.url, creds, insecure_http=True, timeout=5)
        with pytest.raises(BmcAnswerError, match="`Boot` is a str"):
            client.boot_override()
        with pytest.raises(BmcAnswerError, match="`Actions` is a list"):
            client.power_on()
        bmc.answers[SYSTEM] = Answer(
            body=json.dumps(
                {"PowerState": "On", "Actions": {"#ComputerSystem.Reset": {"target": "https://evil.example/reset"}}}
            ).encode()
        )
        with pytest.raises(BmcAnswerError, match="another host"):
            client.power_off()
        assert all(s.method == "GET" for s in bmc.seen)  # nothing was posted anywhere


def _slow_drip(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
    while not stop.is_set():
        conn.sendall(b" ")
        stop.wait(0.2)


def _garbage(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n\x00\x01binary junk\r\n")


def _silent(conn: socket.socket, stop: threading.Event) -> None:
    stop.wait(10)


@pytest.mark.parametrize(
    ("respond", "error", "fragment"),
    [
        (_slow_drip, BmcUnreachableError, "did not finish answering within 2 s"),
        (_garbage, BmcUnreachableError, "BadStatusLine"),
        (_silent, BmcUnreachableError, "no complete answer within 2 s"),
    ],
    ids=["slow-drip", "not-http", "silent"],
)
def test_broken_transports_are_clear_errors(
    creds: BmcCredentials,
    respond: Callable[[socket.socket, threading.Event], None],
    error: type[RedfishError],
    fragment: str,
) -> None:
    with RawServer(respond) as bmc, pytest.raises(error) as info:
        RedfishClient(bmc.url, creds, insecure_http=True, timeout=2).power_state()
    assert fragment in str(info.value)
    assert bmc.url in str(info.value)


def test_provider_reports_junk_as_a_redfish_error(fake_sshd: int, no_env_creds: None) -> None:
    with RecordingServer() as bmc:
        bmc.answers["*"] = Answer(body=b"<!doctype html><title>not redfish</title>")
        props = {
            "hostname": "gpu001",
            "bmc": bmc.url,
            "mac": "3c:ec:ef:10:00:04",
            "address": "127.0.0.1",
            "ready_port": fake_sshd,
            "insecure_http": True,
            "bmc_username": USER,
            "bmc_password": PASSWORD,
        }
        with pytest.raises(BmcAnswerError, match="not JSON"):
            RedfishNodeProvider().create(props)


def test_up_names_a_machine_its_bmc_says_is_off_and_no_other(
    emulator: Emulator, creds: BmcCredentials, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`up`'s wait asks the BMCs of the machines that have not reported: one that is off is named at
    once; one that is on, or whose BMC does not answer, is left to the wait's timeout."""
    monkeypatch.setenv(Env.BMC_USER, USER)
    monkeypatch.setenv(Env.BMC_PASSWORD, PASSWORD)
    plan = load_and_validate(EXAMPLES / "onprem-h100-256.yaml").plan
    bm = plan.baremetal
    assert bm is not None
    bmcs = {"gpu001": emulator.url, "gpu002": f"https://127.0.0.1:{_free_port()}"}
    machines = [m.model_copy(update={"bmc": bmcs.get(m.hostname, m.bmc)}) for m in bm.machines]
    bmc = bm.bmc.model_copy(update={"ca_bundle": emulator.ca_pem})
    plan = plan.model_copy(update={"baremetal": bm.model_copy(update={"machines": machines, "bmc": bmc})})
    client = _client(emulator, creds)
    client.power_off()
    _wait_state(client, "Off")
    assert power_states(plan, ["gpu001", "gpu002"]) == {"gpu001": "powered off"}
    assert power_states(plan, ["gpu002"]) == {}
    monkeypatch.delenv(Env.BMC_USER)
    assert power_states(plan, ["gpu001"]) == {}, "asked without the credentials of up's environment"
    client.reset("On")
    _wait_state(client, "On")
    monkeypatch.setenv(Env.BMC_USER, USER)
    assert power_states(plan, ["gpu001", "gpu002"]) == {}
