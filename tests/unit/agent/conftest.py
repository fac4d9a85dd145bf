"""A real bundle server on a free local port, serving a temporary directory, for the agent's tests."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterctl.agent.fetch import Server
from clusterctl.agent.server import serve


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, Server]]:
    """``(root, client)``: the server's directory and a client of it."""
    root = tmp_path / "bundles"
    for sub in ("layers", "nodes"):
        (root / sub).mkdir(parents=True)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    stop = asyncio.Event()

    async def main() -> None:
        started = asyncio.Event()
        task = asyncio.create_task(serve(root, "127.0.0.1", port, started))
        await started.wait()
        ready.set()
        await stop.wait()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    thread = threading.Thread(target=lambda: loop.run_until_complete(main()), daemon=True)
    thread.start()
    assert ready.wait(10)
    yield root, Server("127.0.0.1", port)
    loop.call_soon_threadsafe(stop.set)
    thread.join(10)
    loop.close()
