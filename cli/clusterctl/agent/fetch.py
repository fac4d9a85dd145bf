"""The agent's side of the bundle server: wait for its pointer, download a layer and check its digest.

Plain HTTP/1.1 with the standard library, one connection per request, a deadline on each. A
layer is written to a temporary file as it arrives, hashed on the way, and kept only when its
sha256 is the one the (signed) pointer named and its size is within ``MAX_LAYER_BYTES``.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

MAX_LAYER_BYTES = 1024 * 1024 * 1024
MAX_POINTER_BYTES = 64 * 1024
CONNECT_TIMEOUT_S = 10.0
CHUNK = 1024 * 1024
_ETAG = re.compile(r'"[0-9a-f]{32}"')


class FetchError(Exception):
    """The server could not be reached, or answered with something that is not what was asked."""


@dataclass(frozen=True)
class Server:
    """One bundle server: ``http://host:port``, and the local address to connect from (None: any)."""

    host: str
    port: int
    source: str | None = None

    @classmethod
    def parse(cls, url: str, source: str | None = None) -> Server:
        """``http://ADDRESS:PORT``.

        Raises:
            FetchError: Any other URL.
        """
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname or parts.path not in ("", "/") or parts.query:
            raise FetchError(f"not a bundle server URL (http://ADDRESS:PORT): {url[:80]!r}")
        return cls(parts.hostname, parts.port or 80, source)

    def __str__(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(
            self.host, self.port, timeout=timeout, source_address=(self.source, 0) if self.source else None
        )

    def pointer(self, node: str, known: str = "", wait_s: int = 0) -> tuple[str, bytes] | None:
        """``(etag, data)`` of the node's pointer; None when it is still ``known`` after ``wait_s`` seconds.

        Raises:
            FetchError: No answer, no pointer for this node, or an answer out of bounds.
        """
        headers = {"If-None-Match": known} if known and _ETAG.fullmatch(known) else {}
        # Without a known tag the server answers at once when there is a pointer, else when one appears.
        query = f"?wait={int(wait_s)}" if wait_s else ""
        connection = self._connection(CONNECT_TIMEOUT_S + wait_s)
        try:
            connection.request("GET", f"/nodes/{node}.json{query}", headers=headers)
            answer = connection.getresponse()
            if answer.status == 304:
                return None
            if answer.status != 200:
                raise FetchError(f"{self} answered {answer.status} for {node}'s pointer")
            data = answer.read(MAX_POINTER_BYTES + 1)
            tag = answer.getheader("ETag") or ""
        except (OSError, http.client.HTTPException) as exc:
            raise FetchError(f"{self}: {exc}") from None
        finally:
            connection.close()
        if len(data) > MAX_POINTER_BYTES or not _ETAG.fullmatch(tag):
            raise FetchError(f"{self} answered a pointer out of bounds")
        return tag, data

    def layer(self, digest: str, target: Path, timeout: float = 300.0) -> int:
        """Download layer ``digest`` to ``target`` (atomically); returns its size.

        Raises:
            FetchError: No answer, no such layer, too large, or its content is not ``digest``.
        """
        if not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise FetchError("not a layer digest")
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(dir=target.parent, prefix=".fetch-")
        hasher = hashlib.sha256()
        size = 0
        connection = self._connection(timeout)
        try:
            with os.fdopen(handle, "wb") as out:
                connection.request("GET", f"/layers/{digest}.tar.gz")
                answer = connection.getresponse()
                if answer.status != 200:
                    raise FetchError(f"{self} answered {answer.status} for layer {digest[:12]}")
                while chunk := answer.read(CHUNK):
                    size += len(chunk)
                    if size > MAX_LAYER_BYTES:
                        raise FetchError(f"layer {digest[:12]} from {self} is larger than {MAX_LAYER_BYTES} bytes")
                    hasher.update(chunk)
                    out.write(chunk)
            if hasher.hexdigest() != digest:
                raise FetchError(f"layer {digest[:12]} from {self} does not have that digest: discarded")
            Path(name).replace(target)
            return size
        except (OSError, http.client.HTTPException) as exc:
            raise FetchError(f"{self}: {exc}") from None
        finally:
            connection.close()
            Path(name).unlink(missing_ok=True)
