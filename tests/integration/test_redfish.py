"""The Redfish client and the bare-metal dynamic provider against a real Redfish server.

sushy-tools' ``sushy-emulator`` with its fake driver runs on 127.0.0.1 (a free port) with
HTTP basic auth from a bcrypt htpasswd file. The fake driver applies power changes after a
random 1-11 s, so every check polls. A plain TCP listener stands in for the node's sshd: the
provider waits for it exactly as it waits for an installed node.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import bcrypt
import pytest

from clusterctl.app import Env
from clusterctl.run.redfish import (
    BmcAuthError,
    BmcCredentials,
    BmcUnreachableError,
    NodeNotReadyError,
    RedfishClient,
)
from clusterctl.run.redfish_provider import RedfishNodeProvider

pytestmark = [pytest.mark.integration, pytest.mark.slow]

USER, PASSWORD = "admin", "s3cret-pass"
SYSTEM_UUID = str(uuid.UUID(int=0x2E7A))  # fixed so the system path is predictable
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


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    exe = shutil.which("sushy-emulator") or str(Path(sys.executable).with_name("sushy-emulator"))
    if not Path(exe).exists():
        pytest.skip("sushy-emulator (sushy-tools) not installed")
    work = tmp_path_factory.mktemp("sushy")
    port = _free_port()
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
    (work / "htpasswd").write_text(f"{USER}:{hashed}\n")
    (work / "emulator.conf").write_text(
        "\n".join(
            [
                "SUSHY_EMULATOR_LISTEN_IP = '127.0.0.1'",
                f"SUSHY_EMULATOR_LISTEN_PORT = {port}",
                f"SUSHY_EMULATOR_STATE_DIR = '{work / 'state'}'",
                f"SUSHY_EMULATOR_AUTH_FILE = '{work / 'htpasswd'}'",
                "SUSHY_EMULATOR_FAKE_DRIVER = True",
                # external_notifier False: otherwise every change is PUT to localhost:9999.
                "SUSHY_EMULATOR_FAKE_SYSTEMS = [{"
                f"'uuid': '{SYSTEM_UUID}', 'name': 'gpu001', 'power_state': 'Off', 'external_notifier': False,"
                " 'nics': [{'mac': '3c:ec:ef:10:00:04', 'ip': '127.0.0.1'}]}]",
                "",
            ]
        )
    )
    log = (work / "emulator.log").open("w")
    process = subprocess.Popen([exe, "--config", str(work / "emulator.conf")], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(url + "/redfish/v1", timeout=2):
                    break
            except urllib.error.HTTPError as exc:
                exc.close()
                break  # 401: up and asking for credentials
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"sushy-emulator did not start: {(work / 'emulator.log').read_text()[-2000:]}")
                time.sleep(0.2)
        yield Emulator(url=url, system=f"/redfish/v1/Systems/{SYSTEM_UUID}")
    finally:
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)
        if process.poll() is None:
            process.kill()
        log.close()


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
        "boot_mode": "UEFI",
        "scan_host_key": False,  # a bare TCP listener has no host key; the SSH test scans real sshd
        "poll_s": 0.5,
        "power_timeout_s": POWER_TIMEOUT,
        **extra,
    }


def test_create_read_delete(emulator: Emulator, fake_sshd: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(Env.BMC_USER, USER)
    monkeypatch.setenv(Env.BMC_PASSWORD, PASSWORD)
    client = RedfishClient(emulator.url, BmcCredentials(USER, PASSWORD))
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
    client = RedfishClient(emulator.url, creds)
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
    client = RedfishClient(emulator.url + emulator.system, creds)
    assert client.system_path == emulator.system
    assert client.power_state() in ("On", "Off")


def test_wrong_bmc_address_is_a_clear_error(creds: BmcCredentials) -> None:
    address = f"http://127.0.0.1:{_free_port()}"  # nothing listens there
    with pytest.raises(BmcUnreachableError) as info:
        RedfishClient(address, creds, timeout=3).power_state()
    message = str(info.value)
    assert address in message
    assert "machines.csv" in message


def test_bad_credentials_are_a_clear_error(emulator: Emulator, no_env_creds: None) -> None:
    with pytest.raises(BmcAuthError) as info:
        RedfishClient(emulator.url, BmcCredentials(USER, "wrong")).power_state()
    message = str(info.value)
    assert emulator.url in message
    assert Env.BMC_USER in message
    assert Env.BMC_PASSWORD in message
    assert "wrong" not in message  # the password never reaches output
    with pytest.raises(BmcAuthError):
        RedfishClient(emulator.url, None).power_state()


def test_provider_reports_bad_credentials(emulator: Emulator, fake_sshd: int, no_env_creds: None) -> None:
    props = _props(emulator, fake_sshd, bmc_username=USER, bmc_password="nope")
    with pytest.raises(BmcAuthError):
        RedfishNodeProvider().create(props)


def test_node_that_never_answers_times_out(
    emulator: Emulator, creds: BmcCredentials, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(Env.BMC_USER, USER)
    monkeypatch.setenv(Env.BMC_PASSWORD, PASSWORD)
    props = _props(emulator, _free_port(), ready_timeout_s=2)
    with pytest.raises(NodeNotReadyError) as info:
        RedfishNodeProvider().create(props)
    assert "did not answer" in str(info.value)
    client = RedfishClient(emulator.url, creds)
    client.power_off()
    _wait_state(client, "Off")


def test_credentials_repr_hides_password() -> None:
    assert PASSWORD not in repr(BmcCredentials(USER, PASSWORD))


def test_env_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(Env.BMC_USER, "u")
    monkeypatch.setenv(Env.BMC_PASSWORD, "p")
    assert BmcCredentials.from_env() == BmcCredentials("u", "p")
    monkeypatch.delenv(Env.BMC_PASSWORD)
    assert BmcCredentials.from_env() is None
    assert os.environ.get(Env.BMC_USER) == "u"
