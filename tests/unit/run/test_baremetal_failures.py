"""When a bare-metal machine does not come up, `up` names it, the step, and the node's own words.

The node's words are the last lines of its serial console where a console server records it
(``<build>/lab/<machine>.console.log``; the bare-metal lab does): the initramfs's ``clusterctl:``
line survives the firmware's and boot loader's screen-drawing around it. Also here: machines that
would get an installer the spec rules out are refused before any is touched, the stack can run
on a stand-in for the engine (the lab's), and a reboot of machines that run from RAM serves their
host keys again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clusterctl.image.baremetal import with_archives
from clusterctl.image.lock import LockedImage
from clusterctl.pipeline import load_and_validate, render
from clusterctl.plan import Plan
from clusterctl.run.events import EventBus
from clusterctl.run.hostkey_server import HostKeyGrant, ServeLog
from clusterctl.run.providers import baremetal as baremetal_module
from clusterctl.run.providers.baremetal import (
    BaremetalProvider,
    check_images,
    check_no_machine_moves,
    console_tail,
    drive_stack_with,
    with_consoles,
)
from clusterctl.run.providers.base import ProviderError
from clusterctl.run.pulumi import PulumiError, StackOutputs, UpSummary
from clusterctl.run.sshkeys import ensure_host_keys
from tests.conftest import EXAMPLES

VALIDATED = load_and_validate(EXAMPLES / "onprem-h100-256.yaml")
PLAN = VALIDATED.plan
ARCHIVE = "http://10.20.0.2:8080/images/clusterctl-ubuntu-22.04-a37b78055ae6.tar.zst"
# What a BIOS machine's console holds when the initramfs refuses the archive: SeaBIOS and iPXE
# drawing their screens, the kernel, then the boot script's own line and busybox's shell.
CONSOLE = (
    "\x1bc\x1b[?7l\x1b[2J\x1b[0mSeaBIOS (version 1.16.2-debian-1.16.2-1)\r\n"
    "iPXE initialising devices...ok\r\n\x1b[05;02H\x1b[0;41;1m  run image stateless  (3)\x1b[0m\r\n"
    "[    0.000000] Linux version 6.1.0-50-amd64 (debian-kernel@lists.debian.org) #1 SMP Debian 6.1.164-1\r\n"
    "[    2.000000] Run /init as init process\r\n"
    f"Begin: clusterctl: fetching {ARCHIVE} ... done.\r\n"
    f"clusterctl: refusing to boot {ARCHIVE}: its sha256 is {'d4' * 32}, not the locked {'99' * 32}\r\n"
    + "".join(f"line {i}\r\n" for i in range(12))
    + "(initramfs) \x1b[6n"
)


def _console(build: Path, name: str, text: str = CONSOLE) -> Path:
    path = build / "lab" / f"{name}.console.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode())
    return path


def test_the_console_tail_keeps_the_nodes_own_words(tmp_path: Path) -> None:
    _console(tmp_path, "gpu001")
    tail = console_tail(tmp_path, "gpu001")
    assert len(tail) == 8
    assert tail[0].startswith(f"clusterctl: refusing to boot {ARCHIVE}: its sha256 is {'d4' * 32}, not the locked 99")
    assert tail[0].endswith("...")  # longer than a quoted line may be
    assert tail[-1] == "(initramfs)"
    assert not any("\x1b" in line or "\r" in line for line in tail)
    assert console_tail(tmp_path, "gpu002") == []  # no console recorded


# A UEFI machine's next boot, its MAC unknown to the PXE server: OVMF's network boot options fail one
# after another and it ends in the EFI shell (the lab's consoles, appended across boots).
NO_DHCP_ANSWER = (
    "\x1b[2J\x1b[01;01H>>Start PXE over IPv4.\r\n"
    "  PXE-E18: Server response timeout.\r\n"
    'BdsDxe: failed to load Boot0001 "UEFI PXEv4 (MAC:525400C71005)" from PciRoot(0x0)/Pci(0x1,0x0): Not Found\r\n'
    ">>Start PXE over IPv6.\r\n"
    "  PXE-E16: No valid offer received.\r\n"
    'BdsDxe: failed to load Boot0002 "UEFI PXEv6 (MAC:525400C71005)" from PciRoot(0x0)/Pci(0x1,0x0): Not Found\r\n'
    ">>Start HTTP Boot over IPv4.\r\n"
    "  Error: Could not retrieve NBP file size from HTTP server.\r\n"
    'BdsDxe: failed to load Boot0003 "UEFI HTTPv4 (MAC:525400C71005)" from PciRoot(0x0)/Pci(0x1,0x0): Not Found\r\n'
    'BdsDxe: loading Boot0005 "EFI Internal Shell" from Fv(7CB8BDC9-F8EB-4F34-AAEA-3EE4AF6516A1)\r\n'
    "\x1b[2J\x1b[01;01HUEFI Interactive Shell v2.2\r\nEDK II\r\nUEFI v2.70 (EDK II, 0x00010000)\r\n"
    "Mapping table\r\nmap: No mapping found.\r\n"
    "Press ESC in 5 seconds to skip startup.nsh or any other key to continue.\r\n"
    "\x1b[1m\x1b[33m\x1b[40mShell> \x1b[0m"
)


def test_a_boot_that_never_reached_the_network_shows_the_firmwares_words_not_an_earlier_boots(
    tmp_path: Path,
) -> None:
    _console(tmp_path, "gpu001", CONSOLE + "\r\n" + NO_DHCP_ANSWER)
    tail = console_tail(tmp_path, "gpu001")
    assert len(tail) == 8
    assert not [line for line in tail if line.startswith("clusterctl: ")]  # the earlier boot's refusal
    assert tail[:2] == [
        "PXE-E18: Server response timeout.",
        'BdsDxe: failed to load Boot0001 "UEFI PXEv4 (MAC:525400C71005)" from PciRoot(0x0)/Pci(0x1,0x0): Not Found',
    ]
    assert tail[-1] == "Shell>"


def test_a_firmware_failure_the_kernel_followed_is_an_earlier_boots(tmp_path: Path) -> None:
    """The PXE failure, then a boot that reached Linux and stopped in the initramfs: that boot's words."""
    _console(tmp_path, "gpu001", NO_DHCP_ANSWER + "\r\n" + CONSOLE)
    tail = console_tail(tmp_path, "gpu001")
    assert not [line for line in tail if "PXE-E" in line]
    assert tail[0].startswith(f"clusterctl: refusing to boot {ARCHIVE}")
    assert tail[-1] == "(initramfs)"


def test_only_the_machines_the_error_names_get_their_console(tmp_path: Path) -> None:
    _console(tmp_path, "gpu001")
    _console(tmp_path, "gpu0011", "something else\n")
    message = with_consoles("up failed:\n  gpu001: 10.20.0.14:22 did not answer", tmp_path, ["gpu001", "gpu0011"])
    assert f"last lines of gpu001's console ({tmp_path / 'lab' / 'gpu001.console.log'}):" in message
    assert f"  clusterctl: refusing to boot {ARCHIVE}: its sha256 is {'d4' * 32}" in message
    assert "gpu0011" not in message


def _locked() -> dict[str, LockedImage]:
    image = LockedImage(
        profile="dgx-h100", hash="5e" * 32, target="baremetal", ref="sha256:" + "a1" * 32, os="ubuntu-24.04",
        arch="amd64", tag="clusterctl-ubuntu-2404-5e5e5e5e5e5e.tar.zst",
    )  # fmt: skip
    return {"dgx-h100": image}


def _with(plan: Plan, **changes: Any) -> Plan:
    assert plan.baremetal is not None
    return plan.model_copy(update={"baremetal": plan.baremetal.model_copy(update=changes)})


def test_machines_without_their_image_are_refused_before_any_is_touched() -> None:
    stateless = _with(PLAN, image_boot={g.group: "stateless" for g in PLAN.baremetal.autoinstall})
    with pytest.raises(ProviderError) as info:
        check_images(with_archives(stateless, _locked()))
    message = str(info.value)
    assert message.startswith("ctl001, ctl002, login001: the spec's provider.image says they boot the baked image")
    assert "gpu001" not in message
    assert message.endswith("no machine was touched")
    check_images(with_archives(stateless, {**_locked(), "cpu-1u": _locked()["dgx-h100"]}))
    check_images(PLAN)  # Ubuntu machines without an image get Ubuntu's autoinstall
    debian = PLAN.model_copy(update={"cluster": PLAN.cluster.model_copy(update={"os": "debian-12"})})
    with pytest.raises(ProviderError, match="Ubuntu's autoinstall, which cannot install debian-12"):
        check_images(debian)


def test_a_spec_that_moves_machines_the_stack_has_is_refused_before_any_is_touched() -> None:
    """A group added before the others renumbers the machines after it; each would be made again."""
    machines = PLAN.baremetal.machines
    recorded = {m.hostname: m.address for m in machines}
    check_no_machine_moves(PLAN, recorded)
    check_no_machine_moves(PLAN, {})  # nothing made yet
    # The stack made gpu031 and gpu032 at other addresses (and a machine no longer in the plan).
    moved = {**recorded, "gpu031": "10.20.0.42", "gpu032": "10.20.0.43\x1b[2J", "gone001": "10.20.0.99"}
    with pytest.raises(ProviderError) as info:
        check_no_machine_moves(PLAN, moved)
    message = str(info.value)
    assert "moves 2 machine(s)" in message
    assert "  gpu031: 10.20.0.42 -> 10.20.0.43" in message
    assert "\x1b" not in message
    assert "gpu030" not in message
    assert "gone001" not in message
    assert message.endswith("No machine was touched.")


def test_up_refuses_the_move_before_the_stack_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []

    class Made:
        def __init__(self, *_: Any, **__: Any) -> None:
            pass

        def outputs(self) -> StackOutputs:
            nodes = {m.hostname: m.address for m in PLAN.baremetal.machines}
            return StackOutputs(values={"nodes": {**nodes, "gpu001": "10.20.0.200"}})

        def up(self) -> UpSummary:
            ran.append("up")
            raise AssertionError("the stack ran")

    monkeypatch.setattr(baremetal_module, "PulumiStack", Made)
    monkeypatch.setattr(baremetal_module, "require_pulumi_cli", lambda: "/usr/bin/pulumi")
    provider = BaremetalProvider(serve_host_keys=Serve())
    build = tmp_path / "build"
    render(VALIDATED, build)
    with pytest.raises(ProviderError, match=r"gpu001: 10\.20\.0\.200 -> 10\.20\.0\.13"):
        provider.provision(PLAN, build, tmp_path / "state", yes=True, events=EventBus())
    assert ran == []


class Failing:
    """A stack whose machines did not come up (the engine's error names the machine)."""

    def __init__(self, *_: Any, **__: Any) -> None:
        pass

    def outputs(self) -> StackOutputs:
        return StackOutputs(values={})

    def up(self) -> UpSummary:
        raise PulumiError("up of atlas failed:\n  gpu001: 10.20.0.14:22 did not answer within 60 s (powered off again)")


class Serve:
    """Stands in for the host key server; records what it serves."""

    def __init__(self) -> None:
        self.grants: list[HostKeyGrant] = []
        self.bind: tuple[str, int] | None = None

    @contextlib.contextmanager
    def __call__(self, bind: tuple[str, int], grants: list[HostKeyGrant], **_: Any) -> Iterator[ServeLog]:
        self.bind, self.grants = bind, grants
        yield ServeLog(port=bind[1])


@pytest.fixture
def engine() -> Iterator[None]:
    """The stack runs on a stand-in: no Pulumi CLI is needed (the lab's case)."""
    drive_stack_with(Failing)
    yield
    drive_stack_with(None)


def test_a_machine_that_does_not_come_up_is_named_with_its_console(engine: None, tmp_path: Path) -> None:
    build, _ = render(VALIDATED, tmp_path / "build")
    _console(build, "gpu001")
    with pytest.raises(ProviderError) as info:
        BaremetalProvider(serve_host_keys=Serve()).provision(
            PLAN, build, tmp_path / "state", yes=True, events=EventBus()
        )
    message = str(info.value)
    assert message.splitlines()[1] == "  gpu001: 10.20.0.14:22 did not answer within 60 s (powered off again)"
    assert "last lines of gpu001's console" in message
    # The line is longer than a quoted console line may be: the verdict and the archive come first.
    assert f"  clusterctl: refusing to boot {ARCHIVE}: its sha256 is {'d4' * 32}, not the locked 99" in message


def test_without_a_stand_in_the_engine_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    from clusterctl.run.pulumi import PulumiCliMissingError

    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(PulumiCliMissingError):
        baremetal_module.require_engine()
    drive_stack_with(Failing)
    try:
        baremetal_module.require_engine()
    finally:
        drive_stack_with(None)


def test_a_reboot_serves_the_host_keys_of_the_machines_that_run_from_ram(tmp_path: Path) -> None:
    plan = with_archives(_with(PLAN, image_boot={"gpu": "stateless"}), {**_locked(), "cpu-1u": _locked()["dgx-h100"]})
    serve = Serve()
    provider = BaremetalProvider(serve_host_keys=serve)
    state = tmp_path / "state"
    pinned = ensure_host_keys(state, ["gpu001"])["gpu001"]
    with provider.rebooting(plan, tmp_path, state, ["gpu001", "ctl001"], EventBus()) as fresh:
        assert fresh == ["gpu001"]
    assert serve.bind == ("10.20.0.2", 8081)
    assert [(g.hostname, g.public) for g in serve.grants] == [("gpu001", pinned.public)]
    untouched = Serve()
    with BaremetalProvider(serve_host_keys=untouched).rebooting(plan, tmp_path, state, ["ctl001"], EventBus()) as none:
        assert none == []
    assert untouched.bind is None


def test_an_sshd_still_starting_is_asked_again_another_key_is_final(monkeypatch: pytest.MonkeyPatch) -> None:
    """The port opens before a fresh sshd on a slow machine finishes its first key exchange."""
    from clusterctl.run import redfish_provider
    from clusterctl.run.redfish import NodeNotReadyError, NoHostKeyYetError

    class Client:
        def wait_power(self, *_: Any, **__: Any) -> None:
            pass

    answers: list[Exception | None] = [NoHostKeyYetError("no key yet"), NoHostKeyYetError("no key yet"), None]

    def scan(*_: Any) -> str:
        answer = answers.pop(0)
        if answer is not None:
            raise answer
        return "SHA256:x"

    monkeypatch.setattr(redfish_provider, "wait_for_port", lambda *a, **k: 1.0)
    monkeypatch.setattr(redfish_provider, "check_host_key", scan)
    monkeypatch.setattr(redfish_provider.time, "sleep", lambda _s: None)
    props = {"address": "10.20.0.13", "host_key": "ssh-ed25519 AAAA", "poll_s": 0, "ready_timeout_s": 60}
    assert redfish_provider._wait_until_ready(Client(), props) == ("ssh-ed25519 AAAA", 1.0)  # type: ignore[arg-type]
    assert answers == []

    def other(*_: Any) -> str:
        raise NodeNotReadyError("10.20.0.13:22 presents the SSH host key SHA256:a, not the pinned SHA256:b")

    monkeypatch.setattr(redfish_provider, "check_host_key", other)
    with pytest.raises(NodeNotReadyError, match="presents the SSH host key"):
        redfish_provider._wait_until_ready(Client(), props)  # type: ignore[arg-type]


class _Nodes:
    """SSH to the machines, scripted: which have their agent, which refuse the payload; what was sent."""

    def __init__(self, with_agent: set[str], refusing: set[str]) -> None:
        self.with_agent, self.refusing = with_agent, refusing
        self.checked: list[str] = []
        self.sent: dict[str, bytes] = {}

    def run(self, host: str, command: str, timeout: float) -> tuple[int, str, str]:
        self.checked.append(host)
        return (0 if host in self.with_agent else 1), "", ""

    def send(self, host: str, command: str, data: bytes | None, timeout: float) -> tuple[int, str, str]:
        if host in self.refusing:
            return 1, "", "tar: /etc: Read-only file system\x1b[2J"
        self.sent[host] = data or b""
        return 0, "", ""


def test_pulling_machines_get_their_agent_and_munge_key_over_pinned_ssh_once(tmp_path: Path) -> None:
    import io
    import json
    import tarfile

    from clusterctl.render.pulling import pulls
    from clusterctl.run.state import StateDir

    build, _ = render(VALIDATED, tmp_path / "build")
    state = tmp_path / "state"
    computes = [n.hostname for n in PLAN.nodes if pulls(PLAN, n)][:3]
    assert computes
    assert not pulls(PLAN, next(n for n in PLAN.nodes if n.role == "controller"))
    nodes = _Nodes(with_agent={computes[0]}, refusing=set())

    BaremetalProvider(reach=lambda plan, state_dir: nodes).bootstrap(
        PLAN, build, state, [*computes, "ctl001"], EventBus()
    )

    assert sorted(nodes.checked) == sorted(computes)  # the controller is pushed: nothing asked of it
    assert sorted(nodes.sent) == sorted(computes[1:])  # the one with its agent is left alone
    with tarfile.open(fileobj=io.BytesIO(nodes.sent[computes[1]])) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    assert members["etc/clusterctl/agent/munge.key"] == StateDir.at(state).munge_key().read_bytes()
    assert json.loads(members["etc/clusterctl/agent/agent.json"])["node"] == computes[1]
    assert members["etc/ssh/ssh_host_ed25519_key.pub"].decode().strip() == (
        ensure_host_keys(state, [computes[1]])[computes[1]].public.strip()
    )

    failing = _Nodes(with_agent=set(), refusing={computes[2]})
    with pytest.raises(ProviderError) as caught:
        BaremetalProvider(reach=lambda plan, state_dir: failing).bootstrap(PLAN, build, state, computes, EventBus())
    assert f"{computes[2]}: setting up its configuration agent failed: tar: /etc: Read-only file system" in str(
        caught.value
    )
    assert "\x1b" not in str(caught.value)
