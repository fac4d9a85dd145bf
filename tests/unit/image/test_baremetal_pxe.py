"""PXE entries that boot a bare-metal image, rendered and checked (not booted), and the initramfs script.

The GRUB files must pass GRUB's own parser (grub-script-check, Debian's grub-common); the iPXE
scripts a small checker of iPXE's syntax (:func:`ipxe_problems`). Every entry points at the
archive's URL and checksum, and names only kernel parameters the initramfs script reads. The
script itself runs here under dash with the initramfs' helpers stubbed: it unpacks a real archive
into a stand-in root and writes the machine's identity, and refuses an archive with another
checksum before unpacking anything.
"""

from __future__ import annotations

import io
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from clusterctl.image.baremetal import with_archives
from clusterctl.image.build import ImageBuildError
from clusterctl.image.lock import LockedImage
from clusterctl.image.rootfs import write_archive
from clusterctl.paths import templates_dir
from clusterctl.pipeline import load_and_validate
from clusterctl.plan import Plan
from clusterctl.render.escape import RenderError
from clusterctl.render.pxe_image import mac_file
from clusterctl.render.tree import render_files
from tests.conftest import EXAMPLES
from tests.plan_edits import replaced
from tests.unit.image.test_rootfs import container_export

HASH = "5e" * 32
SCRIPT = templates_dir() / "pxe" / "image" / "initramfs-boot.sh"
HOOK = templates_dir() / "pxe" / "image" / "initramfs-hook.sh"


def _locked(
    sha256: str, tag: str = "clusterctl-ubuntu-2404-5e5e5e5e5e5e.tar.zst", target: str = "baremetal"
) -> LockedImage:
    return LockedImage(
        profile="dgx-h100", hash=HASH, target=target, ref=f"sha256:{sha256}", os="ubuntu-24.04", arch="amd64", tag=tag
    )


def with_archive(plan: Plan, locked: LockedImage, default: str = "install") -> Plan:
    """The plan with every profile booting ``locked`` (the example's two profiles share it here)."""
    return with_archives(plan, {"dgx-h100": locked, "cpu-1u": locked}, default)


SHA = "a1" * 32


@pytest.fixture(scope="module")
def plan() -> Plan:
    return load_and_validate(EXAMPLES / "onprem-h100-256.yaml").plan


def _files(plan: Plan) -> dict[str, str]:
    return {f.path: f.text for f in render_files(plan)}


@pytest.fixture(scope="module")
def imaged(plan: Plan) -> dict[str, str]:
    return _files(with_archive(plan, _locked(SHA)))


def _grub_check(text: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    checker = shutil.which("grub-script-check")
    if checker is None:
        if os.environ.get("CI"):
            pytest.fail("grub-script-check is not installed: apt-get install grub-common")
        pytest.skip("grub-script-check is not installed (Debian's grub-common)")
    path = tmp_path / "grub.cfg"
    path.write_text(text)
    return subprocess.run([checker, str(path)], capture_output=True, text=True, check=False)


# --- iPXE's syntax, as far as these scripts use it ------------------------------------------------

IPXE_COMMANDS = frozenset(
    {"kernel", "initrd", "boot", "chain", "menu", "item", "choose", "goto", "set", "echo", "sanboot", "exit", "imgfree"}
)
IPXE_BUILTINS = ("net0/", "clusterctl-target")


def ipxe_problems(text: str) -> list[str]:
    """What iPXE would refuse or trip on in ``text``: the magic line, commands, labels, variables, quotes."""
    lines = text.splitlines()
    problems: list[str] = []
    if not lines or lines[0] != "#!ipxe":
        problems.append("the first line must be #!ipxe")
    labels = {line[1:] for line in lines if line.startswith(":")}
    items = {line.split()[1] for line in lines if line.startswith("item ")}
    defined = {line.split()[1] for line in lines if line.startswith("set ")}
    for number, line in enumerate(lines[1:], 2):
        if not line.strip() or line.startswith("#") or line.startswith(":"):
            continue
        for part in re.split(r"\s*(?:&&|\|\|)\s*", line.strip()):
            words = part.split()
            if words[0] not in IPXE_COMMANDS:
                problems.append(f"line {number}: unknown command {words[0]!r}")
            if words[0] == "goto" and "${" not in words[1] and words[1] not in labels:
                problems.append(f"line {number}: goto {words[1]} has no label")
            if words[0] == "choose" and "--default" in words:
                default = words[words.index("--default") + 1]
                if default not in items:
                    problems.append(f"line {number}: the default {default} is no item")
            if words[0] == "kernel" and "initrd=initrd.img" not in words:
                problems.append(f"line {number}: an EFI kernel needs initrd=<name> for its initrd")
        for name in re.findall(r"\$\{([^}]*)\}", line):
            if name not in defined and not name.startswith(IPXE_BUILTINS):
                problems.append(f"line {number}: ${{{name}}} is never set")
        if line.count('"') % 2 or line.count("'") % 2:
            problems.append(f"line {number}: unbalanced quotes")
    for item in items - labels:
        problems.append(f"item {item} has no label")
    return problems


def test_ipxe_checker_can_fail() -> None:
    assert ipxe_problems("#!ipxe\nkernel x initrd=initrd.img\nboot\n") == []
    broken = "#!ipxe\nkernel x\nfrobnicate\ngoto nowhere\necho ${undefined}\nitem orphan here\n"
    assert ipxe_problems(broken) == [
        "line 2: an EFI kernel needs initrd=<name> for its initrd",
        "line 3: unknown command 'frobnicate'",
        "line 4: goto nowhere has no label",
        "line 5: ${undefined} is never set",
        "item orphan has no label",
    ]
    assert ipxe_problems("boot\n") == ["the first line must be #!ipxe"]


def test_grub_checker_can_fail(tmp_path: Path) -> None:
    assert _grub_check('menuentry "x" {\n  linux /v\n', tmp_path).returncode != 0
    assert _grub_check('menuentry "x" {\n  linux /v\n}\n', tmp_path).returncode == 0


# --- the rendered entries -----------------------------------------------------------------------


def test_every_machine_gets_grub_and_ipxe_entries_that_parse(plan: Plan, imaged: dict[str, str], tmp_path) -> None:
    bm = plan.baremetal
    assert bm.boot_mode == "UEFI"
    assert ipxe_problems(imaged["pxe/http/ipxe/boot.ipxe"]) == []
    for machine in bm.machines:
        grub = imaged[f"pxe/tftp/grub/grub.cfg-{mac_file(machine.mac)}"]
        checked = _grub_check(grub, tmp_path)
        assert checked.returncode == 0, checked.stderr
        ipxe = imaged[f"pxe/http/ipxe/{mac_file(machine.mac)}.ipxe"]
        assert ipxe_problems(ipxe) == [], machine.hostname


def _kernel_lines(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip().startswith(("linux ", "kernel ", "APPEND"))]


def test_entries_point_at_the_archive_and_its_checksum(plan: Plan, imaged: dict[str, str]) -> None:
    bm = plan.baremetal
    url = f"{bm.http_url}/images/clusterctl-ubuntu-2404-5e5e5e5e5e5e.tar.zst"
    for machine in bm.machines:
        name = mac_file(machine.mac)
        for path in (f"pxe/tftp/grub/grub.cfg-{name}", f"pxe/http/ipxe/{name}.ipxe"):
            lines = _kernel_lines(imaged[path])
            assert len(lines) == 2, path  # install and stateless
            for words in lines:
                assert f"clusterctl.url={url}" in words
                assert f"clusterctl.sha256={SHA}" in words
                assert "boot=clusterctl" in words
                assert f"clusterctl.hostname={machine.hostname}" in words
                assert f"clusterctl.hostkey={bm.host_key_url}/clusterctl/host-key/{machine.hostname}" in words
            modes = sorted(w for words in lines for w in words if w.startswith("clusterctl.mode="))
            assert modes == ["clusterctl.mode=install", "clusterctl.mode=stateless"]
        grub = imaged[f"pxe/tftp/grub/grub.cfg-{name}"]
        assert "linux /images/clusterctl-ubuntu-2404-5e5e5e5e5e5e/vmlinuz " in grub
        assert "initrd /images/clusterctl-ubuntu-2404-5e5e5e5e5e5e/initrd.img" in grub
        assert "set default=0" in grub  # install, unless the plan says stateless
    assert "casper" not in "".join(imaged[f"pxe/tftp/grub/grub.cfg-{mac_file(m.mac)}"] for m in bm.machines)
    dnsmasq = imaged["pxe/dnsmasq.conf"]
    assert f"dhcp-boot=tag:ipxe,{bm.http_url}/ipxe/boot.ipxe" in dnsmasq
    assert "dhcp-match=set:ipxe,175" in dnsmasq


def test_without_an_image_the_installer_boots(plan: Plan) -> None:
    plain = _files(plan)
    machine = plan.baremetal.machines[0]
    assert "autoinstall" in plain[f"pxe/tftp/grub/grub.cfg-{mac_file(machine.mac)}"]
    assert not any(p.startswith("pxe/http/ipxe/") for p in plain)
    assert "ipxe" not in plain["pxe/dnsmasq.conf"]


def test_install_disk_and_stateless_default(plan: Plan, tmp_path: Path) -> None:
    autoinstall = [g.model_copy(update={"install_disk": "/dev/nvme0n1"}) for g in plan.baremetal.autoinstall]
    changed = plan.model_copy(update={"baremetal": plan.baremetal.model_copy(update={"autoinstall": autoinstall})})
    imaged = with_archive(changed, _locked(SHA), default="stateless")
    files = _files(imaged)
    machine = changed.baremetal.machines[0]
    grub = files[f"pxe/tftp/grub/grub.cfg-{mac_file(machine.mac)}"]
    assert "set default=1" in grub
    install, stateless = _kernel_lines(grub)
    assert "clusterctl.disk=/dev/nvme0n1" in install
    assert "clusterctl.firmware=uefi" in install
    assert not any(w.startswith(("clusterctl.disk=", "clusterctl.firmware=")) for w in stateless)
    assert "--default stateless" in files[f"pxe/http/ipxe/{mac_file(machine.mac)}.ipxe"]
    assert _grub_check(grub, tmp_path).returncode == 0


def test_legacy_bios_machines_get_pxelinux_entries(plan: Plan) -> None:
    """Each machine boots by its own firmware (machines.csv's boot_mode): a mixed fleet gets both kinds."""
    first, second, *rest = plan.baremetal.machines
    machines = [first.model_copy(update={"boot_mode": "Legacy"}), second, *rest]
    legacy = replaced(plan, {"baremetal.machines": machines})
    files = _files(with_archive(legacy, _locked(SHA)))
    text = files[f"pxe/tftp/pxelinux.cfg/{mac_file(first.mac)}"]
    assert text.count("LABEL ") == 2
    assert "clusterctl.firmware=bios" in text
    assert f"clusterctl.sha256={SHA}" in text
    assert f"pxe/tftp/grub/grub.cfg-{mac_file(first.mac)}" not in files
    assert "clusterctl.firmware=uefi" in files[f"pxe/tftp/grub/grub.cfg-{mac_file(second.mac)}"]
    assert f"pxe/tftp/pxelinux.cfg/{mac_file(second.mac)}" not in files


def test_each_group_boots_as_the_spec_says_with_the_sites_kernel_arguments(plan: Plan, tmp_path: Path) -> None:
    """provider.image: install by default, the groups it names stateless; kernel_args end every entry."""
    console = ["console=tty0", "console=ttyS1,115200n8"]
    modes = {"gpu": "stateless", "ctl": "install"}
    bm = plan.baremetal.model_copy(update={"image_boot": modes, "kernel_args": console})
    imaged = with_archive(plan.model_copy(update={"baremetal": bm}), _locked(SHA))
    assert {g: i.default for g, i in imaged.baremetal.images.items()} == {
        "ctl": "install",
        "login": "install",
        "gpu": "stateless",
    }
    files = _files(imaged)
    for machine in bm.machines:
        grub = files[f"pxe/tftp/grub/grub.cfg-{mac_file(machine.mac)}"]
        assert ("set default=1" in grub) is (machine.group == "gpu"), machine.hostname
        for words in _kernel_lines(grub):
            assert words[-2:] == console
        assert _grub_check(grub, tmp_path).returncode == 0


def test_the_default_grub_file_sends_a_known_machine_to_its_own(imaged: dict[str, str], tmp_path: Path) -> None:
    """Signed GRUB network images read grub/grub.cfg: it goes on to grub.cfg-01-<mac> (dashes, as rendered)."""
    text = imaged["pxe/tftp/grub/grub.cfg"]
    assert 'configfile "$prefix/grub.cfg-01-$m1-$m2-$m3-$m4-$m5-$m6"' in text
    assert text.index("configfile") < text.index('menuentry "Boot from local disk"')
    checked = _grub_check(text, tmp_path)
    assert checked.returncode == 0, checked.stderr


def test_a_value_that_is_no_boot_argument_is_refused(plan: Plan) -> None:
    hostile = with_archive(plan, _locked(SHA, tag="x y;reboot.tar.zst"))
    with pytest.raises(RenderError, match="a boot argument holds only"):
        _files(hostile)


def test_only_a_bare_metal_archive_goes_into_the_plan(plan: Plan) -> None:
    cloud = LockedImage(profile="dgx-h100", hash=HASH, target="aws", ref="ami-1", os="ubuntu-24.04", arch="amd64")
    with pytest.raises(ImageBuildError, match="not a bare-metal archive"):
        with_archive(plan, cloud)


def test_groups_of_a_profile_without_an_image_keep_the_installer(plan: Plan, tmp_path: Path) -> None:
    files = _files(with_archives(plan, {"dgx-h100": _locked(SHA)}))
    by_group = {m.hostname: m for m in plan.baremetal.machines}
    hardware = {g.name: g.hardware for g in plan.groups}
    for name, machine in by_group.items():
        grub = files[f"pxe/tftp/grub/grub.cfg-{mac_file(machine.mac)}"]
        if hardware[machine.group] == "dgx-h100":
            assert "boot=clusterctl" in grub, name
            assert f"pxe/http/ipxe/{mac_file(machine.mac)}.ipxe" in files
        else:
            assert "autoinstall" in grub, name
            assert f"pxe/http/ipxe/{mac_file(machine.mac)}.ipxe" not in files


def test_entries_use_only_parameters_the_initramfs_reads(imaged: dict[str, str], plan: Plan) -> None:
    read = set(re.findall(r"clusterctl_param (clusterctl\.[a-z0-9]+)", SCRIPT.read_text()))
    machine = plan.baremetal.machines[0]
    rendered = {
        w.split("=", 1)[0]
        for words in _kernel_lines(imaged[f"pxe/tftp/grub/grub.cfg-{mac_file(machine.mac)}"])
        for w in words
        if w.startswith("clusterctl.")
    }
    assert rendered
    assert rendered <= read
    assert read - rendered == {"clusterctl.disk"}  # only without an install_disk


# --- the initramfs script -----------------------------------------------------------------------


def test_initramfs_files_parse() -> None:
    for path in (SCRIPT, HOOK):
        assert subprocess.run(["sh", "-n", str(path)], check=False).returncode == 0, path
    if shutil.which("shellcheck"):
        checked = subprocess.run(["shellcheck", "-s", "sh", str(SCRIPT), str(HOOK)], capture_output=True, text=True)
        assert checked.returncode == 0, checked.stdout


STUBS = """
configure_networking() { :; }
log_begin_msg() { :; }
log_end_msg() { :; }
panic() { echo "PANIC: $*" >&2; exit 3; }
mount() { :; }
umount() { :; }
chroot() { echo "chroot $*" >> "$TRACE"; [ "$2" != id ]; }  # the image has no such user yet
busybox() {
  # busybox wget -q -O DEST URL: copy the file the URL names from the stand-in server.
  [ "$1" = wget ] || return 1
  src="$SERVER/${5##*/}"
  [ -f "$src" ] || return 1
  cp "$src" "$4"
}
sleep() { :; }
"""


def _boot(tmp_path: Path, cmdline: str) -> subprocess.CompletedProcess[str]:
    """Run the script's mountroot() under dash with the initramfs' helpers stubbed."""
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    program = (
        STUBS
        + f'cat() {{ if [ "$1" = /proc/cmdline ]; then echo {shlex.quote(cmdline)}; else command cat "$@"; fi; }}\n'
        + f". {shlex.quote(str(SCRIPT))}\n"
        + f"CLUSTERCTL_WORK={shlex.quote(str(tmp_path / 'work'))}\n"
        + f"rootmnt={shlex.quote(str(root))}\n"
        + "mountroot\n"
    )
    env = {"PATH": os.environ["PATH"], "SERVER": str(tmp_path / "server"), "TRACE": str(tmp_path / "trace")}
    return subprocess.run(["dash", "-c", program], capture_output=True, text=True, env=env, check=False)


@pytest.fixture
def server(tmp_path: Path) -> Path:
    """The PXE server's files: a real archive, a host key as clusterctl up serves it, clusterctl's key."""
    folder = tmp_path / "server"
    folder.mkdir()
    (tmp_path / "work").mkdir()
    write_archive(io.BytesIO(container_export()), folder / "rootfs.tar.gz")
    private = "-----BEGIN OPENSSH PRIVATE KEY-----\nKEY\n-----END OPENSSH PRIVATE KEY-----\n"
    (folder / "node001").write_text("ssh-ed25519 AAAAnode001 root@node001\n" + private)
    (folder / "clusterctl.pub").write_text("ssh-ed25519 AAAAclusterctl clusterctl@atlas\n")
    return folder


def _cmdline(sha: str) -> str:
    return (
        "ip=dhcp boot=clusterctl clusterctl.mode=stateless clusterctl.url=http://10.0.0.2:8080/images/rootfs.tar.gz "
        f"clusterctl.sha256={sha} clusterctl.hostname=node001 "
        "clusterctl.hostkey=http://10.0.0.2:8081/clusterctl/host-key/node001 "
        "clusterctl.pubkey=http://10.0.0.2:8080/autoinstall/clusterctl.pub clusterctl.user=ubuntu"
    )


@pytest.mark.skipif(shutil.which("dash") is None, reason="dash is not installed")
def test_stateless_boot_unpacks_the_archive_and_writes_the_identity(tmp_path: Path, server: Path) -> None:
    sha = (server / "rootfs.tar.gz.sha256").read_text().split()[0]
    done = _boot(tmp_path, _cmdline(sha))
    assert done.returncode == 0, done.stderr
    root = tmp_path / "root"
    assert (root / "usr/lib/systemd/systemd").is_file()
    assert (root / "etc/hostname").read_text() == "node001\n"
    assert "127.0.1.1\tnode001" in (root / "etc/hosts").read_text()
    key = root / "etc/ssh/ssh_host_ed25519_key"
    assert key.read_text().startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    assert key.stat().st_mode & 0o777 == 0o600
    assert (root / "etc/ssh/ssh_host_ed25519_key.pub").read_text() == "ssh-ed25519 AAAAnode001 root@node001\n"
    assert (root / "etc/ssh/sshd_config.d/40-clusterctl-hostkey.conf").read_text() == (
        "HostKey /etc/ssh/ssh_host_ed25519_key\n"
    )
    assert (root / "etc/ssh/authorized_keys.d/ubuntu").read_text().startswith("ssh-ed25519 AAAAclusterctl")
    assert (root / "etc/sudoers.d/90-clusterctl").read_text() == "ubuntu ALL=(ALL) NOPASSWD:ALL\n"
    assert "useradd -m -s /bin/bash -c clusterctl ubuntu" in (tmp_path / "trace").read_text()
    assert (root / "etc/clusterctl/image.sha256").read_text() == sha + "\n"  # what up reads: which archive
    assert not (tmp_path / "work" / "rootfs").exists()  # the download is not kept in RAM


@pytest.mark.skipif(shutil.which("dash") is None, reason="dash is not installed")
def test_another_archive_is_refused_before_anything_is_unpacked(tmp_path: Path, server: Path) -> None:
    done = _boot(tmp_path, _cmdline("0" * 64))
    assert done.returncode == 3
    verdict = r"clusterctl: refusing to boot http://\S+: its sha256 is [0-9a-f]{64}, not the locked 0{64}\n"
    assert re.search(verdict, done.stderr)
    assert not any((tmp_path / "root").iterdir())


@pytest.mark.skipif(shutil.which("dash") is None, reason="dash is not installed")
def test_a_machine_without_its_host_key_does_not_boot(tmp_path: Path, server: Path) -> None:
    (server / "node001").unlink()  # served once already, or `clusterctl up` is not running
    sha = (server / "rootfs.tar.gz.sha256").read_text().split()[0]
    done = _boot(tmp_path, _cmdline(sha))
    assert done.returncode == 3
    assert "no SSH host key was served for node001" in done.stderr
    assert not (tmp_path / "root" / "etc/ssh/ssh_host_ed25519_key").exists()


def test_partition_names(tmp_path: Path) -> None:
    program = f". {shlex.quote(str(SCRIPT))}\n" + "".join(
        f"clusterctl_partition_name {disk} 2\n" for disk in ("/dev/nvme0n1", "/dev/sda", "/dev/vdb", "/dev/mmcblk0")
    )
    done = subprocess.run(["sh", "-c", program], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["/dev/nvme0n1p2", "/dev/sda2", "/dev/vdb2", "/dev/mmcblk0p2"]
