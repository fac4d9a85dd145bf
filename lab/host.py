"""The lab's host side: libvirt, the management bridge, the BMC emulator, the PXE server.

Each ``*_up`` is idempotent and each ``*_down`` removes exactly what its ``*_up`` made, so
``python -m lab down`` leaves no bridge, dnsmasq, BMC emulator or lab daemon behind (libvirtd and
virtlogd too, when the lab started them).
"""

from __future__ import annotations

import contextlib
import ipaddress
import secrets
import shutil
import socket
import ssl
import stat
import subprocess
import sys
import time
from pathlib import Path

from clusterctl.render.escape import printable
from lab import processes
from lab.config import BMC_USER, SEABIOS, Lab, LabError

LIBVIRT_URI = "qemu:///system"
QEMU_CONF = Path("/etc/libvirt/qemu.conf")
LIBVIRTD_PID = Path("/run/libvirtd.pid")
VIRTLOGD_PID = Path("/run/virtlogd.pid")
PXE_ROOT = Path("/srv/clusterctl")
# The boot programs a PXE server hands out, from Debian's packages (a site has its own copies):
# shim and GRUB's network image for UEFI (GRUB then reads grub/grub.cfg-01-<mac>), PXELINUX for BIOS.
BOOT_PACKAGES = ("shim-signed", "grub-efi-amd64-signed", "pxelinux", "syslinux-common")
BOOT_FILES = {
    "bootx64.efi": "usr/lib/shim/shimx64.efi.signed",
    "grubx64.efi": "usr/lib/grub/x86_64-efi-signed/grubnetx64.efi.signed",
    "pxelinux.0": "usr/lib/PXELINUX/pxelinux.0",
    "ldlinux.c32": "usr/lib/syslinux/modules/bios/ldlinux.c32",
}
CERT_DAYS = 30
WAIT_S = 30.0


def run(*argv: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run a host command; a failure is a :class:`LabError` with its output."""
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    if check and done.returncode != 0:
        raise LabError(f"{' '.join(argv)} failed ({done.returncode}): {(done.stderr or done.stdout).strip()[-600:]}")
    return done


def virsh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``virsh -c qemu:///system ARGS``."""
    return run("virsh", "-c", LIBVIRT_URI, *args, check=check)


# --- libvirt -------------------------------------------------------------------------------------


def libvirt_up(lab: Lab) -> None:
    """Start virtlogd and libvirtd unless they run (this machine has no systemd to start them).

    qemu runs as root: /dev/kvm is root's here, and the consoles and disks live in the build directory.
    """
    if virsh("version", check=False).returncode == 0:
        return
    text = QEMU_CONF.read_text()
    if '\nuser = "root"' not in text:
        text = text.replace('\n#user = "libvirt-qemu"', '\nuser = "root"').replace(
            '\n#group = "libvirt-qemu"', '\ngroup = "root"'
        )
        QEMU_CONF.write_text(text)
    marker = lab.work / "run" / "libvirtd.started"
    marker.parent.mkdir(parents=True, exist_ok=True)
    if processes.running(VIRTLOGD_PID, "virtlogd") is None:
        run("/usr/sbin/virtlogd", "-d", "--pid-file", str(VIRTLOGD_PID))
    run("/usr/sbin/libvirtd", "-d", "--pid-file", str(LIBVIRTD_PID))
    marker.write_text("the lab started libvirtd and virtlogd\n")
    deadline = time.monotonic() + WAIT_S
    while virsh("version", check=False).returncode != 0:
        if time.monotonic() > deadline:
            raise LabError(f"libvirtd did not answer within {WAIT_S:.0f} s; see /var/log/libvirt/libvirtd.log")
        time.sleep(0.5)


def libvirt_down(lab: Lab) -> None:
    """Stop libvirtd and virtlogd if the lab started them and no domain is left."""
    marker = lab.work / "run" / "libvirtd.started"
    if not marker.exists():
        return
    left = virsh("list", "--all", "--name", check=False).stdout.split()
    if left:
        return
    processes.stop(LIBVIRTD_PID, "libvirtd")
    processes.stop(VIRTLOGD_PID, "virtlogd")
    marker.unlink(missing_ok=True)


# --- the management network --------------------------------------------------------------------


# Docker loads br_netfilter, so traffic between two ports of any Linux bridge crosses iptables'
# FORWARD chain, whose policy Docker sets to DROP: machines could reach this host, not each other.
FORWARD_CHAINS = ("DOCKER-USER", "FORWARD")
FORWARD_COMMENT = "clusterctl bare-metal lab"


def _forward_rule(lab: Lab) -> list[str]:
    return ["-i", lab.bridge, "-o", lab.bridge, "-m", "comment", "--comment", FORWARD_COMMENT, "-j", "ACCEPT"]


def _forward_chain() -> str:
    for chain in FORWARD_CHAINS:
        if run("iptables", "-S", chain, check=False).returncode == 0:
            return chain
    return "FORWARD"


def forwarding_up(lab: Lab) -> None:
    """Let the machines on the bridge reach each other (see FORWARD_CHAINS)."""
    chain = _forward_chain()
    if run("iptables", "-C", chain, *_forward_rule(lab), check=False).returncode != 0:
        run("iptables", "-I", chain, *_forward_rule(lab))


def forwarding_down(lab: Lab) -> None:
    """Remove the rule :func:`forwarding_up` added."""
    for chain in FORWARD_CHAINS:
        while run("iptables", "-D", chain, *_forward_rule(lab), check=False).returncode == 0:
            pass


def bridge_up(lab: Lab) -> None:
    """The management network: a Linux bridge with the PXE server's address."""
    cidr = f"{lab.address}/{lab.prefix}"
    if run("ip", "link", "show", lab.bridge, check=False).returncode != 0:
        network = ipaddress.ip_network(cidr, strict=False)
        routes = run("ip", "-4", "route", "show").stdout
        for line in routes.splitlines():
            target = line.split()[0]
            if target != "default" and ipaddress.ip_network(target, strict=False).overlaps(network):
                raise LabError(f"{network} overlaps a network this machine already routes ({line.strip()})")
        run("ip", "link", "add", lab.bridge, "type", "bridge")
    if cidr not in run("ip", "-4", "-o", "addr", "show", "dev", lab.bridge).stdout:
        run("ip", "addr", "add", cidr, "dev", lab.bridge)
    run("ip", "link", "set", lab.bridge, "up")
    forwarding_up(lab)


def bridge_down(lab: Lab) -> None:
    """Remove the bridge (and the rule that let its machines reach each other)."""
    forwarding_down(lab)
    if run("ip", "link", "show", lab.bridge, check=False).returncode == 0:
        run("ip", "link", "del", lab.bridge)


# --- the BMC emulator ----------------------------------------------------------------------------


def ensure_tls(lab_secrets: Path, ca_bundle: Path, address: str) -> None:
    """A CA (its certificate at ``ca_bundle``, beside the spec) and the emulator's certificate for ``address``.

    A site's BMCs carry certificates of the site's CA, which the spec names as ``bmc.ca_bundle``.
    """
    lab_secrets.mkdir(mode=0o700, parents=True, exist_ok=True)
    ca_key, cert, key = lab_secrets / "ca.key", lab_secrets / "bmc.pem", lab_secrets / "bmc.key"
    if ca_key.exists() and cert.exists() and key.exists() and ca_bundle.exists() and _signed_by(cert, ca_bundle):
        return
    with contextlib.suppress(FileNotFoundError):
        for stale in (ca_key, cert, key):
            stale.unlink()
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes")
    run(
        "openssl", "req", "-x509", *ec, "-keyout", str(ca_key), "-out", str(ca_bundle), "-days", str(CERT_DAYS),
        "-subj", "/CN=clusterctl lab BMC CA", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    csr = lab_secrets / "bmc.csr"
    run("openssl", "req", *ec, "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={address}")
    extensions = lab_secrets / "bmc.ext"
    extensions.write_text(
        f"subjectAltName=IP:{address}\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\n"
        "extendedKeyUsage=serverAuth\n"
    )
    run(
        "openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca_bundle), "-CAkey", str(ca_key),
        "-CAserial", str(lab_secrets / "ca.srl"), "-CAcreateserial", "-out", str(cert), "-days", str(CERT_DAYS),
        "-extfile", str(extensions),
    )  # fmt: skip
    for path in (ca_key, key):
        path.chmod(0o600)
    ca_bundle.chmod(0o644)


def _signed_by(cert: Path, ca: Path) -> bool:
    return run("openssl", "verify", "-CAfile", str(ca), str(cert), check=False).returncode == 0


def bmc_password(lab: Lab) -> str:
    """The emulated BMCs' password, generated once (0600 in the lab's secrets folder)."""
    lab.secrets.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = lab.secrets / "bmc-password"
    if not path.exists():
        path.touch(mode=0o600)
        path.write_text(secrets.token_urlsafe(18) + "\n")
    return path.read_text().strip()


def sushy_up(lab: Lab) -> None:
    """sushy-tools' emulator with its libvirt driver: HTTPS, basic auth, only the lab's domains."""
    import bcrypt

    pid_file = lab.work / "run" / "sushy.pid"
    host, port = lab.bmc_endpoint
    htpasswd = lab.secrets / "htpasswd"
    digest = bcrypt.hashpw(bmc_password(lab).encode(), bcrypt.gensalt(rounds=10)).decode()
    htpasswd.write_text(f"{BMC_USER}:{digest}\n")
    htpasswd.chmod(0o600)
    config = lab.work / "sushy.conf"
    # sushy resolves a name to the domain's UUID before it checks the list: both are listed.
    names = sorted(m.domain for m in lab.machines)
    names += [virsh("domuuid", name).stdout.strip() for name in names]
    text = (
        "# sushy-emulator for the clusterctl bare-metal lab (written by python -m lab)\n"
        f"SUSHY_EMULATOR_LISTEN_IP = {host!r}\n"
        f"SUSHY_EMULATOR_LISTEN_PORT = {port}\n"
        f"SUSHY_EMULATOR_SSL_CERT = {str(lab.secrets / 'bmc.pem')!r}\n"
        f"SUSHY_EMULATOR_SSL_KEY = {str(lab.secrets / 'bmc.key')!r}\n"
        f"SUSHY_EMULATOR_AUTH_FILE = {str(htpasswd)!r}\n"
        f"SUSHY_EMULATOR_LIBVIRT_URI = {LIBVIRT_URI!r}\n"
        f"SUSHY_EMULATOR_ALLOWED_INSTANCES = {names!r}\n"
        "SUSHY_EMULATOR_IGNORE_BOOT_DEVICE = False\n"
        # Legacy machines name SeaBIOS as their loader (lab/domains.py); UEFI ones let libvirt pick OVMF.
        f"SUSHY_EMULATOR_BOOT_LOADER_MAP = {{'UEFI': {{'x86_64': None}}, 'Legacy': {{'x86_64': {SEABIOS!r}}}}}\n"
    )
    if processes.running(pid_file, "sushy-emulator") is not None:
        if config.read_text() == text:
            return
        processes.stop(pid_file, "sushy-emulator")  # the lab has other machines now
    config.write_text(text)
    emulator = Path(sys.executable).parent / "sushy-emulator"
    processes.start([str(emulator), "--config", str(config)], pid_file, lab.work / "run" / "sushy.log")
    _wait_tls(host, port, pid_file, "sushy-emulator", lab.work / "run" / "sushy.log")


def sushy_down(lab: Lab) -> None:
    """Stop the emulator."""
    processes.stop(lab.work / "run" / "sushy.pid", "sushy-emulator")


def _last_lines(log: Path, count: int = 15) -> str:
    """The end of a process's log, for the error (the lab's folder may be gone by the time one looks)."""
    try:
        lines = log.read_text(errors="replace").splitlines()[-count:]
    except OSError:
        return ""
    return "".join(f"\n  {printable(line)}" for line in lines)


def _wait_tls(host: str, port: int, pid_file: Path, marker: str, log: Path) -> None:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            with socket.create_connection((host, port), timeout=2) as raw, context.wrap_socket(raw):
                return
        except OSError:
            if processes.running(pid_file, marker) is None or time.monotonic() > deadline:
                raise LabError(f"{marker} did not start on {host}:{port}; see {log}{_last_lines(log)}") from None
            time.sleep(0.5)


# --- the PXE server ------------------------------------------------------------------------------


def boot_files(lab: Lab, cache: Path) -> None:
    """Put shim, GRUB's network image and PXELINUX into ``<build>/pxe/tftp`` (from Debian's packages)."""
    tftp = lab.build_dir / "pxe" / "tftp"
    tftp.mkdir(parents=True, exist_ok=True)
    root = cache / "root"
    if not all((root / source).is_file() for source in BOOT_FILES.values()):
        debs = cache / "debs"
        debs.mkdir(parents=True, exist_ok=True)
        # apt-get download: the packages are unpacked here, never installed on the host.
        done = subprocess.run(
            ["apt-get", "download", *BOOT_PACKAGES], cwd=debs, capture_output=True, text=True, check=False, timeout=300
        )
        if done.returncode != 0:
            raise LabError(f"apt-get download {' '.join(BOOT_PACKAGES)} failed: {done.stderr.strip()[-400:]}")
        for deb in sorted(debs.glob("*.deb")):
            run("dpkg-deb", "-x", str(deb), str(root))
    for name, source in BOOT_FILES.items():
        shutil.copyfile(root / source, tftp / name)


def closed_folder(path: Path) -> Path | None:
    """The first folder on the way to ``path`` that other users may not enter (None when all may)."""
    for folder in [*reversed(path.parents), path]:
        if not folder.stat().st_mode & stat.S_IXOTH:
            return folder
    return None


def pxe_link_up(lab: Lab) -> None:
    """The build's ``pxe/`` at ``/srv/clusterctl/<cluster>``, where the rendered dnsmasq.conf says it is.

    Raises:
        LabError: dnsmasq (which runs as its own user, as libvirt's qemu does) could not reach it.
    """
    pxe = (lab.build_dir / "pxe").resolve()
    if (closed := closed_folder(pxe)) is not None:
        raise LabError(
            f"{closed} is closed to other users: dnsmasq and libvirt's qemu, which run as their own, could "
            f"not read the PXE tree and the disks under it. Give `--out` a build directory outside it, or "
            f"`chmod o+x {closed}`"
        )
    PXE_ROOT.mkdir(parents=True, exist_ok=True)
    link = PXE_ROOT / lab.name
    if link.is_symlink() or not link.exists():
        link.unlink(missing_ok=True)
        link.symlink_to(pxe)
    else:
        raise LabError(f"{link} exists and is not the lab's link; remove it")


def pxe_link_down(lab: Lab) -> None:
    """Remove the ``/srv/clusterctl/<cluster>`` link."""
    link = PXE_ROOT / lab.name
    if link.is_symlink():
        link.unlink()
    with contextlib.suppress(OSError):
        PXE_ROOT.rmdir()


def daemon_up(lab: Lab) -> None:
    """The lab's daemon: dnsmasq as rendered, the PXE server's HTTP side, warm reboots (lab/daemon.py)."""
    pid_file = lab.work / "run" / "daemon.pid"
    if processes.running(pid_file, "lab.daemon") is not None:
        return
    conf = PXE_ROOT / lab.name / "dnsmasq.conf"
    if not conf.is_file():
        raise LabError(f"{conf} is missing: render the spec first")
    argv = [sys.executable, "-m", "lab.daemon", "--http-root", str((lab.build_dir / "pxe" / "http").resolve())]
    argv += ["--address", lab.address, "--port", str(lab.bm.http_port)]
    argv += ["--domains", str((lab.work / "domains.list").resolve()), "--dnsmasq-conf", str(conf)]
    argv += ["--run-dir", str((lab.work / "run").resolve())]
    processes.start(argv, pid_file, lab.work / "run" / "daemon.log")
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            with socket.create_connection((lab.address, lab.bm.http_port), timeout=2):
                return
        except OSError:
            if processes.running(pid_file, "lab.daemon") is None or time.monotonic() > deadline:
                log = lab.work / "run" / "daemon.log"
                raise LabError(f"the lab daemon did not start; see {log}{_last_lines(log)}") from None
            time.sleep(0.3)


def daemon_down(lab: Lab) -> None:
    """Stop the lab daemon."""
    processes.stop(lab.work / "run" / "daemon.pid", "lab.daemon")
