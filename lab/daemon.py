"""The lab's daemon: the PXE server (dnsmasq as rendered, and HTTP), and warm reboots through the firmware.

``python -m lab.daemon --http-root DIR --address IP --port N --domains FILE --dnsmasq-conf FILE --run-dir DIR``

- dnsmasq: runs the rendered ``dnsmasq.conf`` and restarts it when ``clusterctl up`` renders it
  anew (a machine added, a MAC changed), as a site's PXE server reloads from its config manager.
- HTTP: serves ``<build>/pxe/http`` (iPXE scripts, kernels, initramfs, the image archive,
  clusterctl's public key) on the PXE server's address, as the site's web server would.
- Warm reboots: a server that reboots goes through its firmware, which boots what the BMC says
  now (a machine installed since its PXE boot boots its disk). qemu instead resets a running VM
  into the boot order it was started with, so when a lab domain reboots, the daemon powers it off
  and on again: it then starts with the boot device the emulated BMC set since.
"""

from __future__ import annotations

import argparse
import functools
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

LIBVIRT_URI = "qemu:///system"
DNSMASQ = "/usr/sbin/dnsmasq"
# The dnsmasq this daemon runs (stopped with it).
_dnsmasq: list[subprocess.Popen[bytes]] = []


def say(message: str) -> None:
    """One line of the daemon's log."""
    sys.stderr.write(f"{time.strftime('%H:%M:%S')} {message}\n")
    sys.stderr.flush()


class _Quiet(SimpleHTTPRequestHandler):
    """Logs one line per request, never the request's headers."""

    def log_message(self, format: str, *args: Any) -> None:
        say(f"http {self.client_address[0]} {format % args}")


def serve_http(root: str, address: str, port: int) -> ThreadingHTTPServer:
    """The HTTP server of ``root`` on ``address:port``, serving in a thread."""
    handler = functools.partial(_Quiet, directory=root)
    server = ThreadingHTTPServer((address, port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def run_dnsmasq(conf: Path, run_dir: Path) -> None:
    """Run dnsmasq on ``conf``; start it again whenever the file changes. Runs forever."""
    proc: subprocess.Popen[bytes] | None = None
    seen = b""
    while True:
        try:
            text = conf.read_bytes()
        except OSError:
            text = b""
        if text != seen or (proc is not None and proc.poll() is not None):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=10)
            seen = text
            if text:
                argv = [
                    DNSMASQ,
                    "--keep-in-foreground",
                    f"--conf-file={conf}",
                    f"--dhcp-leasefile={run_dir / 'dnsmasq.leases'}",
                    f"--log-facility={run_dir / 'dnsmasq.log'}",
                ]
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
                _dnsmasq[:] = [proc]
                say(f"dnsmasq {proc.pid} on {conf}")
        time.sleep(1.0)


def watch_reboots(domains: Path) -> None:
    """Power-cycle each domain listed in the file ``domains`` that reboots (see the module docstring)."""
    import libvirt

    libvirt.virEventRegisterDefaultImpl()
    events = libvirt.open(LIBVIRT_URI)
    todo: queue.Queue[str] = queue.Queue()

    def on_reboot(_conn: Any, domain: Any, _opaque: Any) -> None:
        try:
            lab = set(domains.read_text().split())
        except OSError:
            lab = set()
        if domain.name() in lab:
            todo.put(domain.name())

    events.domainEventRegisterAny(None, libvirt.VIR_DOMAIN_EVENT_ID_REBOOT, on_reboot, None)

    def cycle() -> None:
        control = libvirt.open(LIBVIRT_URI)
        while True:
            name = todo.get()
            try:
                domain = control.lookupByName(name)
                if domain.isActive():
                    domain.destroy()
                domain.create()
                say(f"reboot {name}: powered off and on (it boots the BMC's boot device now)")
            except libvirt.libvirtError as exc:
                say(f"reboot {name}: {exc}")

    threading.Thread(target=cycle, daemon=True).start()
    while True:
        libvirt.virEventRunDefaultImpl()


def _stop(_signum: int, _frame: Any) -> None:
    """SIGTERM: stop dnsmasq with the daemon."""
    for proc in _dnsmasq:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=10)
    say("stopped")
    os._exit(0)


def main(argv: list[str]) -> None:
    """Entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m lab.daemon")
    parser.add_argument("--http-root", required=True)
    parser.add_argument("--address", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--domains", type=Path, required=True)
    parser.add_argument("--dnsmasq-conf", type=Path, required=True)
    parser.add_argument("--run-dir", type=Path, required=True)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _stop)
    serve_http(args.http_root, args.address, args.port)
    say(f"serving {args.http_root} on http://{args.address}:{args.port}/")
    threading.Thread(target=run_dnsmasq, args=(args.dnsmasq_conf, args.run_dir), daemon=True).start()
    watch_reboots(args.domains)


if __name__ == "__main__":
    main(sys.argv[1:])
