"""Small local servers that play a hostile or broken BMC for the Redfish client tests.

- :class:`RecordingServer`: answers every request from a table of canned answers and records
  each request's path and ``Authorization`` header (a redirect target, a junk BMC).
- :class:`RawServer`: writes whatever bytes a callback produces on each connection (a broken
  status line, a body that drips in slowly).
- :func:`make_tls`: a CA and a server certificate for 127.0.0.1 signed by it (``cryptography``).
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass
class Answer:
    """One canned HTTP answer."""

    status: int = 200
    body: bytes = b"{}"
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    # False: no Content-Length; the body ends when the connection closes (HTTP/1.0).
    send_length: bool = True


@dataclass
class Seen:
    """One request a server received."""

    method: str
    path: str
    authorization: str | None


class RecordingServer:
    """An HTTP server on ``host`` answering from ``answers`` (by path; ``"*"`` for any other path)."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.answers: dict[str, Answer] = {}
        self.seen: list[Seen] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                owner.seen.append(Seen(self.command, self.path, self.headers.get("Authorization")))
                answer = owner.answers.get(self.path) or owner.answers.get("*") or Answer(404, b"")
                self.send_response(answer.status)
                for key, value in answer.headers.items():
                    self.send_header(key, value)
                if answer.send_length:
                    self.send_header("Content-Length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)

            do_GET = do_POST = do_PATCH = _answer

            def log_message(self, format: str, *args: object) -> None:  # keep pytest output clean
                return

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)

    @property
    def url(self) -> str:
        """``http://host:port`` of the server."""
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> RecordingServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


class RawServer:
    """A TCP server that hands each connection to ``respond`` (which writes raw bytes)."""

    def __init__(self, respond: Callable[[socket.socket, threading.Event], None]) -> None:
        self.respond = respond
        self.stop = threading.Event()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.threads: list[threading.Thread] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            worker = threading.Thread(target=self._handle, args=(conn,), daemon=True)
            worker.start()
            self.threads.append(worker)

    def _handle(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            conn.settimeout(5)
            conn.recv(65536)  # the request; its content does not matter here
            self.respond(conn, self.stop)

    def __enter__(self) -> RawServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        for worker in self.threads:
            worker.join(timeout=5)
        self.sock.close()


@dataclass(frozen=True)
class TlsFiles:
    """A CA and a server certificate/key it signed, for ``127.0.0.1`` only."""

    ca_pem: str
    cert: Path
    key: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def make_tls(directory: Path, label: str = "test") -> TlsFiles:
    """A fresh CA, and a server certificate with subjectAltName IP:127.0.0.1 (not ``localhost``)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name(f"{label} BMC CA"))
        .issuer_name(_name(f"{label} BMC CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("127.0.0.1"))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    cert_path = directory / f"{label}-server.pem"
    key_path = directory / f"{label}-server.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    key_path.chmod(0o600)
    return TlsFiles(ca_pem=ca_cert.public_bytes(serialization.Encoding.PEM).decode(), cert=cert_path, key=key_path)
