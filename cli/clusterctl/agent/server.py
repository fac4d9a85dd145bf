"""The bundle server: static files from one directory, and pointers that wait for a change.

Runs on the controller (``clusterctl-bundles.service``). It serves exactly two kinds of paths,
both read-only, nothing else (no listing, no other method):

- ``/layers/<sha256>.tar.gz``: a content-addressed layer, sent with ``sendfile`` (the kernel copies
  it; the server's CPU per node is a few system calls). Its name never changes meaning, so it may
  be cached for good.
- ``/nodes/<node>.json``: the node's signed pointer (``pointer.py``). With ``?wait=S`` the answer
  waits up to S seconds until there is a pointer that differs from the one the node has
  (``If-None-Match``), a blocking query as Consul and etcd watches do: an idle node costs an open
  socket, not a request every few seconds, and a node made before ``up`` published gets its
  pointer the moment it is there. A change is seen by one ``stat`` of the ``nodes/`` directory every
  ``WATCH_S``, whatever the number of nodes waiting.

Each request and answer is bounded (request line, headers, time to send them, concurrent
connections); a slow or hostile client costs one socket until its deadline. Counters of requests,
connections and bytes are written to stderr (the journal) on SIGUSR1 and at exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

WATCH_S = 0.25
MAX_WAIT_S = 300
HEADER_TIMEOUT_S = 10.0
MAX_LINE = 4096
MAX_HEADERS = 64
MAX_CONNECTIONS = 8192
MAX_POINTER_BYTES = 64 * 1024
_LAYER = re.compile(r"/layers/(?P<digest>[0-9a-f]{64})\.tar\.gz")
_NODE = re.compile(r"/nodes/(?P<node>[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?)\.json")
_WAIT = re.compile(r"wait=(?P<s>\d{1,4})")
_ETAG = re.compile(r'"(?P<tag>[0-9a-f]{32})"')


@dataclass
class Counters:
    """What the server has done since it started."""

    connections: int = 0
    requests: int = 0
    bytes_out: int = 0
    layers: int = 0
    pointers: int = 0
    waits: int = 0
    not_found: int = 0
    started: float = field(default_factory=time.time)

    def line(self) -> str:
        """One JSON line for the journal."""
        return json.dumps({"clusterctl_bundle_server": self.__dict__}, sort_keys=True)


def etag(data: bytes) -> str:
    """The entity tag of a pointer: its sha256, cut to 32 hex characters."""
    return hashlib.sha256(data).hexdigest()[:32]


class BundleServer:
    """Serves ``root``/layers and ``root``/nodes (see the module docstring)."""

    def __init__(self, root: Path) -> None:
        """Serve the files under ``root``."""
        self.root = root
        self.counters = Counters()
        self._changed = asyncio.Event()
        self._stamp = self._nodes_stamp()
        self._open = 0

    def _nodes_stamp(self) -> tuple[int, int]:
        try:
            info = (self.root / "nodes").stat()
        except OSError:
            return (0, 0)
        return (info.st_mtime_ns, info.st_ino)

    async def watch(self) -> None:
        """Wake the waiting requests whenever ``nodes/`` changed (a pointer was written or renamed in)."""
        while True:
            await asyncio.sleep(WATCH_S)
            stamp = self._nodes_stamp()
            if stamp != self._stamp:
                self._stamp = stamp
                changed, self._changed = self._changed, asyncio.Event()
                changed.set()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One connection: one request, one answer, then close."""
        self.counters.connections += 1
        self._open += 1
        try:
            if self._open > MAX_CONNECTIONS:
                await self._answer(writer, 503, b"too many connections\n")
                return
            try:
                method, target, headers = await asyncio.wait_for(self._request(reader), HEADER_TIMEOUT_S)
            except (TimeoutError, ValueError, ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                await self._answer(writer, 400, b"bad request\n")
                return
            self.counters.requests += 1
            await self._route(writer, method, target, headers)
        except (ConnectionError, OSError):
            pass
        finally:
            self._open -= 1
            with contextlib.suppress(ConnectionError, OSError):
                writer.close()
                await writer.wait_closed()

    async def _request(self, reader: asyncio.StreamReader) -> tuple[str, str, dict[str, str]]:
        line = await reader.readuntil(b"\n")
        if len(line) > MAX_LINE:
            raise ValueError("request line too long")
        parts = line.decode("latin-1").split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise ValueError("not an HTTP/1 request")
        headers: dict[str, str] = {}
        for _ in range(MAX_HEADERS + 1):
            raw = await reader.readuntil(b"\n")
            if len(raw) > MAX_LINE:
                raise ValueError("header too long")
            text = raw.decode("latin-1").strip()
            if not text:
                return parts[0], parts[1], headers
            name, _, value = text.partition(":")
            headers[name.strip().lower()] = value.strip()
        raise ValueError("too many headers")

    async def _route(self, writer: asyncio.StreamWriter, method: str, target: str, headers: dict[str, str]) -> None:
        if method not in ("GET", "HEAD"):
            await self._answer(writer, 405, b"only GET and HEAD\n")
            return
        path, _, query = target.partition("?")
        if found := _LAYER.fullmatch(path):
            await self._layer(writer, found.group("digest"), head=method == "HEAD")
        elif found := _NODE.fullmatch(path):
            wait = _WAIT.fullmatch(query)
            seconds = min(int(wait.group("s")), MAX_WAIT_S) if wait else 0
            tag = _ETAG.fullmatch(headers.get("if-none-match", ""))
            await self._pointer(writer, found.group("node"), tag.group("tag") if tag else "", seconds, method == "HEAD")
        else:
            self.counters.not_found += 1
            await self._answer(writer, 404, b"not found\n")

    def _read_pointer(self, node: str) -> bytes | None:
        try:
            with open(self.root / "nodes" / f"{node}.json", "rb") as handle:
                data = handle.read(MAX_POINTER_BYTES + 1)
        except OSError:
            return None
        return data if len(data) <= MAX_POINTER_BYTES else None

    async def _pointer(self, writer: asyncio.StreamWriter, node: str, known: str, wait_s: int, head: bool) -> None:
        deadline = time.monotonic() + wait_s
        if wait_s and known:
            self.counters.waits += 1
        while True:
            changed = self._changed
            data = self._read_pointer(node)
            current = "" if data is None else etag(data)
            if data is not None and current != known:
                self.counters.pointers += 1
                await self._answer(writer, 200, b"" if head else data, {"ETag": f'"{current}"'}, length=len(data))
                return
            left = deadline - time.monotonic()
            if left <= 0:
                if not current:
                    self.counters.not_found += 1
                    await self._answer(writer, 404, b"no pointer for this node\n")
                else:
                    await self._answer(writer, 304, b"", {"ETag": f'"{current}"'})
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), left)

    async def _layer(self, writer: asyncio.StreamWriter, digest: str, *, head: bool) -> None:
        path = self.root / "layers" / f"{digest}.tar.gz"
        try:
            handle = open(path, "rb")  # noqa: SIM115 -- closed below, after sendfile
        except OSError:
            self.counters.not_found += 1
            await self._answer(writer, 404, b"no such layer\n")
            return
        with handle:
            size = os.fstat(handle.fileno()).st_size
            headers = {"Content-Type": "application/gzip", "Cache-Control": "public, max-age=31536000, immutable"}
            await self._answer(writer, 200, b"", headers, length=size)
            if head:
                return
            self.counters.layers += 1
            loop = asyncio.get_running_loop()
            sent = await loop.sendfile(writer.transport, handle, 0, size)
            self.counters.bytes_out += sent

    async def _answer(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        body: bytes,
        headers: dict[str, str] | None = None,
        *,
        length: int | None = None,
    ) -> None:
        reason = {200: "OK", 304: "Not Modified", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}
        lines = [f"HTTP/1.1 {status} {reason.get(status, 'Service Unavailable')}", "Connection: close"]
        if status != 304:
            lines.append(f"Content-Length: {len(body) if length is None else length}")
        lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        writer.write(head + body)
        self.counters.bytes_out += len(head) + len(body)
        await writer.drain()


def _say(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


async def serve(root: Path, host: str, port: int, ready: asyncio.Event | None = None) -> None:
    """Serve ``root`` on ``host``:``port`` until cancelled."""
    server = BundleServer(root)
    listener = await asyncio.start_server(server.handle, host, port, backlog=4096, limit=MAX_LINE * 2)
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGUSR1, lambda: _say(server.counters.line()))
    watcher = asyncio.create_task(server.watch())
    if ready is not None:
        ready.set()
    try:
        async with listener:
            await listener.serve_forever()
    finally:
        watcher.cancel()
        _say(server.counters.line())


def main(argv: list[str]) -> int:
    """``serve ROOT ADDRESS PORT``."""
    if len(argv) != 3 or not argv[2].isdigit():
        sys.stderr.write("usage: python3 -m clusterctl.agent serve ROOT ADDRESS PORT\n")
        return 2
    root = Path(argv[0])
    for sub in ("layers", "nodes"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(root, argv[1], int(argv[2])))
    return 0
