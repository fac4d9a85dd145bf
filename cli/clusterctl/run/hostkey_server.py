"""Serve each bare-metal machine the SSH host key clusterctl generated for it, once, while it installs.

Why: a host key read from the network after the install (``ssh-keyscan``) is trust on first
use -- whoever answers at the node's address first is believed. Cloud nodes get a key
clusterctl generated through cloud-init; bare-metal machines get theirs here, so clusterctl's
known_hosts holds the generated key before the machine ever answers, and SSH checks it
strictly from the first connection. The build directory (served to every installer over
HTTP by the PXE server, and meant to hold nothing secret) never sees a private key.

How: ``clusterctl up``, which runs on the PXE server, listens on ``pxe_server:host_key_port``
for exactly as long as the bare-metal stack installs machines. The autoinstall's late-command
asks for ``/clusterctl/host-key/<hostname>``; the key is served

- only to a request from the machine's planned address (dnsmasq leases it by MAC) and, when
  the kernel's neighbour table knows the sender, only from the machine's planned MAC;
- only once per ``up``: a second request for the same machine is refused and reported, and
  ``up`` then fails and discards that key, so a copy someone else fetched is never trusted.

Every refusal and every key served is reported (peer address, never key material).
"""

from __future__ import annotations

import contextlib
import errno
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

PATH_PREFIX = "/clusterctl/host-key/"
# A request that has not arrived whole after this long is dropped (no thread held by a slow peer).
REQUEST_TIMEOUT_S = 10.0
_NAME = re.compile(r"\A[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\Z")
_MAC = re.compile(r"\A[0-9a-f]{2}(:[0-9a-f]{2}){5}\Z")
ARP_TABLE = Path("/proc/net/arp")
_ARP_COMPLETE = 0x2


class HostKeyServerError(Exception):
    """The host key server cannot listen where the installers will ask; the message says how to fix it."""


@dataclass(frozen=True)
class HostKeyGrant:
    """One machine's key and where it may be fetched from."""

    hostname: str
    address: str
    mac: str
    public: str
    private: str

    def __repr__(self) -> str:  # keep the private key out of logs and tracebacks
        return f"HostKeyGrant({self.hostname!r}, {self.address!r}, {self.mac!r})"

    def body(self) -> bytes:
        """What the late-command receives: the public line, then the private key."""
        return (self.public.strip() + "\n" + self.private.strip() + "\n").encode()


@dataclass
class ServeLog:
    """What happened while the server listened."""

    port: int = 0  # where the server listened
    served: dict[str, str] = field(default_factory=dict)  # hostname -> peer address
    repeated: dict[str, str] = field(default_factory=dict)  # hostname -> peer of the refused repeat
    refused: list[str] = field(default_factory=list)  # one sentence per refused request


def neighbour_mac(address: str, table: Path = ARP_TABLE) -> str | None:
    """The MAC the kernel's neighbour (ARP) table holds for ``address``; None when it has none.

    Only complete entries count. Routed senders (not on the PXE server's segment) have none,
    and are then checked by address alone.
    """
    try:
        lines = table.read_text().splitlines()[1:]
    except OSError:
        return None
    for line in lines:
        parts = line.split()
        # IP address, HW type, Flags, HW address, Mask, Device
        if len(parts) >= 4 and parts[0] == address:
            try:
                complete = int(parts[2], 16) & _ARP_COMPLETE
            except ValueError:
                return None
            mac = parts[3].lower()
            return mac if complete and _MAC.match(mac) else None
    return None


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = REQUEST_TIMEOUT_S
    server_version = "clusterctl-host-keys"
    sys_version = ""

    def log_message(self, format: str, *args: object) -> None:
        """Silence the default stderr log: the server reports through ``on_event``."""

    def _answer(self, code: int, text: str) -> None:
        self._send(code, (text + "\n").encode())

    def _send(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        """Serve a machine its key, under the rules of the module docstring."""
        peer = str(self.client_address[0])
        name = self.path.removeprefix(PATH_PREFIX) if self.path.startswith(PATH_PREFIX) else ""
        grant = self.server.grants.get(name) if _NAME.match(name) else None
        if grant is None:
            self.server.refuse(f"{peer} asked for {self.path[:80]!a}, which names no machine being installed")
            self._answer(404, "no such machine")
            return
        if peer != grant.address:
            self.server.refuse(f"{peer} asked for the host key of {name}, whose planned address is {grant.address}")
            self._answer(403, "not this machine's address")
            return
        mac = self.server.neighbour(peer)
        if mac is not None and mac != grant.mac:
            self.server.refuse(f"{peer} (MAC {mac}) asked for the host key of {name}, whose planned MAC is {grant.mac}")
            self._answer(403, "not this machine's MAC")
            return
        if not self.server.take(name, peer):
            self._answer(409, "this machine's key was already served; clusterctl up discards it")
            return
        self._send(200, grant.body())

    def _not_allowed(self) -> None:
        self._answer(405, "only GET")

    do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = _not_allowed


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        bind: tuple[str, int],
        grants: dict[str, HostKeyGrant],
        neighbour: Callable[[str], str | None],
        on_event: Callable[[str, bool], None],
    ) -> None:
        super().__init__(bind, _Handler)
        self.grants = grants
        self.neighbour = neighbour
        self.on_event = on_event
        self.log = ServeLog()
        self.lock = threading.Lock()

    def refuse(self, message: str) -> None:
        with self.lock:
            self.log.refused.append(message)
        self.on_event(f"host key refused: {message}", True)

    def take(self, name: str, peer: str) -> bool:
        """Mark ``name``'s key served; False (and reported) when it already was."""
        with self.lock:
            if name in self.log.served:
                self.log.repeated[name] = peer
                first = self.log.served[name]
                fresh = False
            else:
                self.log.served[name] = peer
                fresh = True
        if fresh:
            self.on_event(f"host key of {name} served to {peer}", False)
        else:
            self.on_event(f"{peer} asked again for the host key of {name} (served to {first}): refused", True)
        return fresh


@contextlib.contextmanager
def serving_host_keys(
    bind: tuple[str, int],
    grants: list[HostKeyGrant],
    *,
    neighbour: Callable[[str], str | None] = neighbour_mac,
    on_event: Callable[[str, bool], None] = lambda message, warning: None,
) -> Iterator[ServeLog]:
    """Serve ``grants`` on ``bind`` for the duration of the ``with`` block; yields the log.

    Args:
        bind: the PXE server's address and the host key port (``0`` picks a free port, for tests).
        grants: one per machine that may install now.
        neighbour: address -> MAC lookup (the ARP table).
        on_event: ``(message, is_warning)`` for every key served or request refused.

    Raises:
        HostKeyServerError: the address is not this machine's, or the port is taken.
    """
    try:
        server = _Server(bind, {g.hostname: g for g in grants}, neighbour, on_event)
    except OSError as exc:
        why = {
            errno.EADDRNOTAVAIL: "that address is not one of this machine's",
            errno.EADDRINUSE: "the port is in use",
            errno.EACCES: "the port needs privileges",
        }.get(exc.errno or 0, exc.strerror or str(exc))
        raise HostKeyServerError(
            f"cannot serve the machines' SSH host keys on {bind[0]}:{bind[1]} ({why}). Run `clusterctl up` on the "
            "PXE server (provider.pxe_server) and give provider.host_key_port a free port"
        ) from None
    server.log.port = int(server.server_address[1])
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    thread.start()
    try:
        yield server.log
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
