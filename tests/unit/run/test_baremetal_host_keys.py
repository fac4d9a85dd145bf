"""Bare-metal host keys are pinned, never learnt: clusterctl generates each machine's key, serves
it once to that machine's installer (planned address and MAC only), writes known_hosts from the
generated keys, and only compares what the installed node presents -- nothing secret enters the
build directory, and a key asked for twice is discarded."""

from __future__ import annotations

import contextlib
import http.client
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from clusterctl.image.baremetal import with_archives
from clusterctl.image.lock import LockedImage
from clusterctl.image.stage import baked_hosts
from clusterctl.pipeline import load_and_validate, render
from clusterctl.run import redfish
from clusterctl.run.events import EventBus
from clusterctl.run.hostkey_server import (
    PATH_PREFIX,
    HostKeyGrant,
    HostKeyServerError,
    ServeLog,
    neighbour_mac,
    serving_host_keys,
)
from clusterctl.run.providers import baremetal as baremetal_module
from clusterctl.run.providers.base import ProviderError
from clusterctl.run.pulumi import StackOutputs, UpSummary
from clusterctl.run.redfish import NodeNotReadyError, check_host_key
from clusterctl.run.redfish_provider import RedfishNodeProvider
from clusterctl.run.sshkeys import ensure_host_keys, generate_ed25519, public_of
from clusterctl.run.sshopts import load_access
from tests.conftest import EXAMPLES

SPEC = EXAMPLES / "onprem-h100-256.yaml"
VALIDATED = load_and_validate(SPEC)
PLAN = VALIDATED.plan
# A PEM private key block (the late-command's check names the header alone, in quotes).
PRIVATE = re.compile(rb"PRIVATE KEY-----\s*\n[A-Za-z0-9+/=]{20,}")


def _grant(name: str = "gpu001", address: str = "127.0.0.1", mac: str = "3c:ec:ef:10:00:04") -> HostKeyGrant:
    pair = generate_ed25519(f"root@{name}")
    return HostKeyGrant(name, address, mac, pair.public, pair.private)


def _get(port: int, path: str, source: str = "127.0.0.1", method: str = "GET") -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5, source_address=(source, 0))
    try:
        conn.request(method, path)
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


# --- the server ----------------------------------------------------------------------------


def test_a_key_is_served_once_to_its_machine() -> None:
    grant = _grant()
    seen: list[tuple[str, bool]] = []
    with serving_host_keys(
        ("127.0.0.1", 0), [grant], neighbour=lambda ip: None, on_event=lambda m, w: seen.append((m, w))
    ) as log:
        status, body = _get(log.port, PATH_PREFIX + "gpu001")
        again, _ = _get(log.port, PATH_PREFIX + "gpu001")
    assert status == 200
    public, private = body.decode().split("\n", 1)
    assert public == grant.public
    assert public_of(private) == " ".join(grant.public.split()[:2])
    assert again == 409
    assert log.served == {"gpu001": "127.0.0.1"}
    assert log.repeated == {"gpu001": "127.0.0.1"}
    assert any(w and "asked again" in m for m, w in seen)
    assert not any(grant.private.splitlines()[1] in m for m, _ in seen)  # no key material in any report


def test_only_the_planned_address_and_mac_get_a_key() -> None:
    grants = [_grant("gpu001", "127.0.0.2"), _grant("gpu002", "127.0.0.1", mac="3c:ec:ef:10:00:05")]
    macs = {"127.0.0.1": "02:00:00:00:00:99"}
    with serving_host_keys(("127.0.0.1", 0), grants, neighbour=macs.get) as log:
        wrong_address = _get(log.port, PATH_PREFIX + "gpu001")[0]
        wrong_mac = _get(log.port, PATH_PREFIX + "gpu002")[0]
        unknown = _get(log.port, PATH_PREFIX + "gpu999")[0]
        traversal = _get(log.port, PATH_PREFIX + "../secrets")[0]
        posted = _get(log.port, PATH_PREFIX + "gpu001", source="127.0.0.2", method="POST")[0]
        right = _get(log.port, PATH_PREFIX + "gpu001", source="127.0.0.2")[0]
    assert (wrong_address, wrong_mac, unknown, traversal, posted, right) == (403, 403, 404, 404, 405, 200)
    assert log.served == {"gpu001": "127.0.0.2"}
    assert len(log.refused) == 4


def test_the_server_must_run_on_the_pxe_server() -> None:
    refused = pytest.raises(HostKeyServerError, match="Run `clusterctl up` on the PXE server")
    with refused, serving_host_keys(("192.0.2.1", 0), [_grant()]):
        pass


def test_the_neighbour_table_is_read_for_complete_entries(tmp_path: Path) -> None:
    table = tmp_path / "arp"
    table.write_text(
        "IP address       HW type     Flags       HW address            Mask     Device\n"
        "10.20.0.5        0x1         0x2         3C:EC:EF:10:00:04     *        eno1\n"
        "10.20.0.6        0x1         0x0         00:00:00:00:00:00     *        eno1\n"
    )
    assert neighbour_mac("10.20.0.5", table) == "3c:ec:ef:10:00:04"
    assert neighbour_mac("10.20.0.6", table) is None
    assert neighbour_mac("10.20.0.7", table) is None
    assert neighbour_mac("10.20.0.5", tmp_path / "missing") is None


# --- the provider --------------------------------------------------------------------------


class FakeStack:
    """Stands in for PulumiStack: exports the host keys it was given, as stacks/baremetal does."""

    instances: ClassVar[list[FakeStack]] = []
    recorded: ClassVar[dict[str, str] | None] = None  # what an earlier install recorded instead

    def __init__(self, plan: Any, build_dir: Path, state_dir: Path, **kwargs: Any) -> None:
        self.plan = plan
        self.host_keys = kwargs.get("host_keys") or {}
        FakeStack.instances.append(self)

    def outputs(self) -> StackOutputs:
        return StackOutputs(values={})  # a stack that has made no machine yet

    def up(self) -> UpSummary:
        keys = FakeStack.recorded or {name: pair.public for name, pair in self.host_keys.items()}
        outputs = {"nodes": {n.hostname: n.address for n in self.plan.nodes}, "hostKeys": keys, "sshUser": "ubuntu"}
        return UpSummary(changes={"create": 35}, outputs=outputs)


@pytest.fixture
def fake_stack(monkeypatch: pytest.MonkeyPatch) -> type[FakeStack]:
    FakeStack.instances = []
    FakeStack.recorded = None
    monkeypatch.setattr(baremetal_module, "PulumiStack", FakeStack)
    monkeypatch.setattr(baremetal_module, "require_pulumi_cli", lambda: "/usr/bin/pulumi")
    return FakeStack


class Serve:
    """Stands in for the host key server; records what it was asked to serve."""

    def __init__(self, repeated: dict[str, str] | None = None) -> None:
        self.bind: tuple[str, int] | None = None
        self.grants: list[HostKeyGrant] = []
        self.repeated = repeated or {}

    @contextlib.contextmanager
    def __call__(self, bind: tuple[str, int], grants: list[HostKeyGrant], **_: Any) -> Iterator[ServeLog]:
        self.bind, self.grants = bind, grants
        yield ServeLog(port=bind[1], served=dict.fromkeys(self.repeated, "10.20.0.5"), repeated=dict(self.repeated))


class Machines:
    """The machines once up, over (scripted) pinned SSH: none has its agent yet; each takes the tar."""

    def __init__(self) -> None:
        self.sent: dict[str, bytes] = {}

    def run(self, host: str, command: str, timeout: float) -> tuple[int, str, str]:
        return 1, "", ""

    def send(self, host: str, command: str, data: bytes | None, timeout: float) -> tuple[int, str, str]:
        self.sent[host] = data or b""
        return 0, "", ""


def _provision(tmp_path: Path, serve: Serve) -> tuple[Path, Path]:
    build, _ = render(VALIDATED, tmp_path / "build")
    state = tmp_path / "state"
    machines = Machines()
    provider = baremetal_module.BaremetalProvider(serve_host_keys=serve, reach=lambda plan, state_dir: machines)
    provider.provision(PLAN, build, state, yes=True, events=EventBus())
    return build, state


def test_known_hosts_holds_the_generated_keys_and_the_build_dir_no_private_key(
    fake_stack: type[FakeStack], tmp_path: Path
) -> None:
    serve = Serve()
    build, state = _provision(tmp_path, serve)
    generated = ensure_host_keys(state, [m.hostname for m in PLAN.baremetal.machines])
    assert serve.bind == ("10.20.0.2", 8081)
    assert {g.hostname: (g.address, g.mac, g.private) for g in serve.grants} == {
        m.hostname: (m.address, m.mac, generated[m.hostname].private) for m in PLAN.baremetal.machines
    }
    (stack,) = fake_stack.instances
    assert all(not pair.private for pair in stack.host_keys.values())  # the stack gets public halves only
    known = (state / "known_hosts").read_text()
    for name, pair in generated.items():
        assert f"{PLAN.node(name).address},{name} {' '.join(pair.public.split()[:2])}" in known
    secrets = [pair.private.splitlines()[1].encode() for pair in generated.values()]
    for path in build.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not PRIVATE.search(data), path
            assert not any(secret in data for secret in secrets), path
    recorded = load_access(state)
    assert recorded is not None
    assert recorded[1].known_hosts == (state / "known_hosts").resolve()


class Booted(Machines):
    """Machines that booted an archive: each answers the initramfs' record with the sha256 given."""

    def __init__(self, records: dict[str, str]) -> None:
        super().__init__()
        self.records = records
        self.asked: list[tuple[str, str]] = []

    def run(self, host: str, command: str, timeout: float) -> tuple[int, str, str]:
        if command == f"cat -- {baremetal_module.IMAGE_RECORD}":
            self.asked.append((host, command))
            found = self.records.get(host)
            return (0, found + "\n", "") if found is not None else (1, "", "cat: No such file or directory")
        return 1, "", ""


def test_only_a_machine_running_its_groups_locked_archive_is_recorded_as_made_from_it(
    fake_stack: type[FakeStack], tmp_path: Path
) -> None:
    locked = LockedImage(
        profile="dgx-h100",
        hash="5e" * 32,
        target="baremetal",
        ref=f"sha256:{'a1' * 32}",
        os="ubuntu-24.04",
        arch="amd64",
        tag="clusterctl-ubuntu-2404-5e5e5e5e5e5e.tar.zst",
    )
    plan = with_archives(PLAN, {"dgx-h100": locked, "cpu-1u": locked})
    build, _ = render(VALIDATED, tmp_path / "build")
    names = [n.hostname for n in plan.nodes]
    current, older, unread = names[0], names[1], names[2]
    # The right archive; an archive of an earlier lock (installed before it); no record at all
    # (installed by the autoinstall, or rebuilt by hand); a record with more than the checksum.
    records = {current: "a1" * 32, older: "b2" * 32, names[3]: "a1" * 32 + " extra"}
    machines = Booted(records)
    provider = baremetal_module.BaremetalProvider(serve_host_keys=Serve(), reach=lambda plan, state_dir: machines)
    hosts = provider.provision(plan, build, tmp_path / "state", yes=True, events=EventBus())
    made = {h.hostname: h.image_hash for h in hosts}
    assert made[current] == "5e" * 32
    assert [made[older], made[unread], made[names[3]]] == [None, None, None]
    assert sorted(h for h, _ in machines.asked) == sorted(names)  # every machine, controllers too
    assert baked_hosts(plan, hosts, {"dgx-h100": locked, "cpu-1u": locked}) == [current]


def test_without_archives_no_machine_is_asked_which_it_booted(fake_stack: type[FakeStack], tmp_path: Path) -> None:
    build, _ = render(VALIDATED, tmp_path / "build")
    machines = Booted({})
    provider = baremetal_module.BaremetalProvider(serve_host_keys=Serve(), reach=lambda plan, state_dir: machines)
    hosts = provider.provision(PLAN, build, tmp_path / "state", yes=True, events=EventBus())
    assert not machines.asked
    assert all(h.image_hash is None for h in hosts)


def test_a_key_asked_for_twice_is_discarded_and_up_fails(fake_stack: type[FakeStack], tmp_path: Path) -> None:
    first = ensure_host_keys(tmp_path / "state", ["gpu001"])["gpu001"]
    with pytest.raises(ProviderError, match="asked for twice"):
        _provision(tmp_path, Serve(repeated={"gpu001": "10.20.0.99"}))
    assert not (tmp_path / "state" / "known_hosts").exists()
    folder = tmp_path / "state" / "secrets" / "ssh" / "host_keys"
    assert not (folder / "gpu001").exists()
    assert (folder / "gpu002").exists()
    assert ensure_host_keys(tmp_path / "state", ["gpu001"])["gpu001"].public != first.public


def test_a_machine_installed_with_another_key_is_refused(fake_stack: type[FakeStack], tmp_path: Path) -> None:
    # What the stack recorded before this change (ssh-keyscan), or a key the state directory lost.
    FakeStack.recorded = {n.hostname: generate_ed25519().public for n in PLAN.nodes}
    with pytest.raises(ProviderError, match="reinstall those machines"):
        _provision(tmp_path, Serve())
    assert not (tmp_path / "state" / "known_hosts").exists()


def test_a_server_that_cannot_listen_stops_up_before_any_install(fake_stack: type[FakeStack], tmp_path: Path) -> None:
    def cannot(*_: Any, **__: Any) -> Any:
        raise HostKeyServerError("cannot serve ... Run `clusterctl up` on the PXE server")

    with pytest.raises(ProviderError, match="PXE server"):
        _provision(tmp_path, cannot)  # type: ignore[arg-type]
    assert not (tmp_path / "state" / "known_hosts").exists()


# --- the node ------------------------------------------------------------------------------


def test_the_installed_node_is_compared_with_its_pinned_key(monkeypatch: pytest.MonkeyPatch) -> None:
    pinned, other = generate_ed25519(), generate_ed25519()
    monkeypatch.setattr(redfish, "scan_host_key", lambda *a, **k: " ".join(pinned.public.split()[:2]))
    assert check_host_key("10.20.0.5", 22, pinned.public).startswith("SHA256:")
    monkeypatch.setattr(redfish, "scan_host_key", lambda *a, **k: " ".join(other.public.split()[:2]))
    with pytest.raises(NodeNotReadyError, match="not the pinned SHA256:"):
        check_host_key("10.20.0.5", 22, pinned.public)


def test_the_stack_keeps_the_key_a_machine_was_installed_with() -> None:
    olds = {"hostname": "gpu001", "host_key": "ssh-ed25519 AAAAold", "system": "/redfish/v1/Systems/1"}
    news = {"hostname": "gpu001", "host_key": "ssh-ed25519 AAAAnew", "verify_tls": False}
    provider = RedfishNodeProvider()
    assert not provider.diff("id", olds, news).replaces  # a new key never reinstalls a machine by itself
    assert provider.update("id", olds, news).outs["host_key"] == "ssh-ed25519 AAAAold"


# --- the installer -------------------------------------------------------------------------


def _late_command(user_data: str) -> str:
    commands = yaml.safe_load(user_data)["autoinstall"]["late-commands"]
    (script,) = [c for c in commands if "/clusterctl/host-key/" in c]
    return script


def test_user_data_fetches_the_key_from_up_and_holds_none() -> None:
    for path in ("ctl", "gpu", "login"):
        text = (Path("tests/golden/onprem-h100-256/expected/pxe/http/autoinstall") / path / "user-data").read_text()
        data = yaml.safe_load(text)
        assert data["autoinstall"]["user-data"]["ssh_deletekeys"] is False
        assert data["autoinstall"]["user-data"]["ssh_genkeytypes"] == []
        assert "http://10.20.0.2:8081/clusterctl/host-key/" in _late_command(text)
        assert not PRIVATE.search(text.encode())


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_the_late_command_installs_the_served_key(tmp_path: Path) -> None:
    user_data = next(f for f in render(VALIDATED, tmp_path / "build")[0].rglob("gpu/user-data"))
    target = tmp_path / "target"
    (target / "etc" / "ssh" / "sshd_config.d").mkdir(parents=True)
    (target / "etc" / "hostname").write_text("gpu001\n")
    for old in ("ssh_host_rsa_key", "ssh_host_rsa_key.pub", "ssh_host_ed25519_key"):
        (target / "etc" / "ssh" / old).write_text("installer's own\n")
    grant = _grant("gpu001", "127.0.0.1")
    with serving_host_keys(("127.0.0.1", 0), [grant], neighbour=lambda ip: None) as log:
        script = _late_command(user_data.read_text())
        script = script.replace("http://10.20.0.2:8081", f"http://127.0.0.1:{log.port}").replace("/target", str(target))
        first = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60, check=False)
        again = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60, check=False)
    ssh = target / "etc" / "ssh"
    assert first.returncode == 0, first.stderr
    assert sorted(p.name for p in ssh.iterdir() if p.name.startswith("ssh_host_")) == [
        "ssh_host_ed25519_key",
        "ssh_host_ed25519_key.pub",
    ]
    assert (ssh / "ssh_host_ed25519_key.pub").read_text().strip() == grant.public
    assert public_of((ssh / "ssh_host_ed25519_key").read_text()) == " ".join(grant.public.split()[:2])
    assert (ssh / "ssh_host_ed25519_key").stat().st_mode & 0o777 == 0o600
    assert (ssh / "sshd_config.d" / "40-clusterctl-hostkey.conf").read_text() == (
        "HostKey /etc/ssh/ssh_host_ed25519_key\n"
    )
    assert not (ssh / ".clusterctl-host-key").exists()
    # A second install asking for the same key gets none: the install fails, the key stays as it was.
    assert again.returncode == 1
    assert "no SSH host key was served for gpu001" in again.stderr
    assert (ssh / "ssh_host_ed25519_key.pub").read_text().strip() == grant.public
    assert log.repeated == {"gpu001": "127.0.0.1"}


def test_the_host_key_port_is_its_own() -> None:
    from pydantic import ValidationError

    from clusterctl.spec.providers import BaremetalProvider

    assert BaremetalProvider.model_validate({"kind": "baremetal", "machines": "m.csv"}).host_key_port == 8081
    with pytest.raises(ValidationError, match="give host_key_port another port"):
        BaremetalProvider.model_validate({"kind": "baremetal", "machines": "m.csv", "host_key_port": 8080})
    assert PLAN.baremetal is not None
    assert PLAN.baremetal.host_key_url == "http://10.20.0.2:8081"
