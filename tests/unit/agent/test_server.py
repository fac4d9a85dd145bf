"""The bundle server, its publishing side and the agent's client, over real sockets.

A pointer request with the node's entity tag waits until the pointer changes (one stat of the
directory serves every waiting node); layers are only what their sha256 names; nothing else is served.
"""

from __future__ import annotations

import hashlib
import http.client
import io
import json
import os
import tarfile
import threading
import time
from pathlib import Path

import pytest

from clusterctl.agent.fetch import FetchError, Server
from clusterctl.agent.pointer import Pointer, sign, signing_key
from clusterctl.agent.publish import PublishError, have, publish
from clusterctl.render.bundle import archive

KEY = signing_key(os.urandom(64))


def _layer(text: str) -> tuple[str, bytes]:
    data = archive([("file.txt", text.encode(), 0o644)])
    return hashlib.sha256(data).hexdigest(), data


def _pointer(node: str, digest: str, generation: int = 1) -> bytes:
    layers = (("engine", digest), ("roles", digest), ("files", digest))
    return sign(Pointer("local", node, generation, layers, "configure"), KEY)


def _input(entries: list[tuple[str, bytes]]) -> io.BytesIO:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    raw.seek(0)
    return raw


def test_published_layers_and_pointers_are_served(served: tuple[Path, Server], tmp_path: Path) -> None:
    root, server = served
    digest, data = _layer("one")
    done = publish(
        root,
        _input(
            [
                (f"layers/{digest}.tar.gz", data),
                ("nodes/gpu001.json", _pointer("gpu001", digest)),
                ("nodes.json", b'["gpu001"]'),
            ]
        ),
    )
    assert done == {"layers": 1, "pointers": 1, "removed": [], "dropped": []}
    assert have(root) == [digest]
    _tag, body = server.pointer("gpu001") or ("", b"")
    assert json.loads(body)["pointer"]["node"] == "gpu001"
    assert server.layer(digest, tmp_path / "got.tar.gz") == len(data)
    assert (tmp_path / "got.tar.gz").read_bytes() == data


def test_a_waiting_request_returns_when_the_pointer_changes_and_not_before(served: tuple[Path, Server]) -> None:
    root, server = served
    digest, data = _layer("one")
    publish(
        root,
        _input(
            [
                (f"layers/{digest}.tar.gz", data),
                ("nodes/gpu001.json", _pointer("gpu001", digest)),
                ("nodes.json", b'["gpu001"]'),
            ]
        ),
    )
    tag, _ = server.pointer("gpu001") or ("", b"")
    started = time.monotonic()
    assert server.pointer("gpu001", tag, wait_s=1) is None  # unchanged: 304 after the wait
    assert time.monotonic() - started >= 1

    def later() -> None:
        time.sleep(0.6)
        publish(root, _input([("nodes/gpu001.json", _pointer("gpu001", digest, 2)), ("nodes.json", b'["gpu001"]')]))

    threading.Thread(target=later).start()
    started = time.monotonic()
    got = server.pointer("gpu001", tag, wait_s=20)
    assert got is not None
    assert json.loads(got[1])["pointer"]["generation"] == 2
    assert time.monotonic() - started < 5


def test_publishing_drops_what_no_pointer_names(served: tuple[Path, Server]) -> None:
    root, _ = served
    old, old_data = _layer("old")
    new, new_data = _layer("new")
    publish(
        root,
        _input(
            [
                (f"layers/{old}.tar.gz", old_data),
                ("nodes/gpu001.json", _pointer("gpu001", old)),
                ("nodes/gpu002.json", _pointer("gpu002", old)),
                ("nodes.json", b'["gpu001", "gpu002"]'),
            ]
        ),
    )
    done = publish(
        root,
        _input(
            [
                (f"layers/{new}.tar.gz", new_data),
                ("nodes/gpu001.json", _pointer("gpu001", new)),
                ("nodes.json", b'["gpu001"]'),
            ]
        ),
    )
    assert done["removed"] == ["gpu002"]
    assert done["dropped"] == [old]
    assert have(root) == [new]


@pytest.mark.parametrize(
    "entries",
    [
        [("layers/" + "0" * 64 + ".tar.gz", b"not that"), ("nodes.json", b"[]")],
        [("nodes/../../etc/passwd.json", b"{}"), ("nodes.json", b"[]")],
        [("other/file", b"x"), ("nodes.json", b"[]")],
        [("nodes/gpu001.json", b"{}")],
    ],
)
def test_publishing_refuses_what_up_never_sends(served: tuple[Path, Server], entries: list[tuple[str, bytes]]) -> None:
    root, _ = served
    with pytest.raises(PublishError):
        publish(root, _input(entries))
    assert have(root) == []
    assert not list((root / "nodes").iterdir())


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/nodes/../layers", 404),
        ("GET", "/layers/", 404),
        ("GET", "/nodes/gpu001.json", 404),
        ("GET", "/", 404),
        ("POST", "/nodes/gpu001.json", 405),
    ],
)
def test_nothing_else_is_served(served: tuple[Path, Server], method: str, path: str, status: int) -> None:
    _, server = served
    connection = http.client.HTTPConnection(server.host, server.port, timeout=5)
    connection.request(method, path)
    assert connection.getresponse().status == status
    connection.close()


def test_a_layer_that_is_not_its_digest_is_discarded(served: tuple[Path, Server], tmp_path: Path) -> None:
    root, server = served
    digest, _ = _layer("one")
    (root / "layers" / f"{digest}.tar.gz").write_bytes(b"something else")
    with pytest.raises(FetchError, match="does not have that digest"):
        server.layer(digest, tmp_path / "got.tar.gz")
    assert not list(tmp_path.glob("*.tar.gz"))
    assert not list(tmp_path.glob(".fetch-*"))


def test_an_unreachable_server_is_a_fetch_error() -> None:
    with pytest.raises(FetchError):
        Server("127.0.0.1", 9).pointer("gpu001")


def test_the_publish_command_is_what_up_runs_on_the_controller(tmp_path: Path) -> None:
    """The shipped code alone (no clusterctl installed, the system's python3): ``publish`` takes the
    tar on stdin and says what it did; ``--have`` lists the layers."""
    import subprocess
    import sys

    from clusterctl.render.bundle import agent_files_raw

    lib = tmp_path / "lib"
    for name, data, _mode in agent_files_raw():
        (lib / name).parent.mkdir(parents=True, exist_ok=True)
        (lib / name).write_bytes(data)
    digest, data = _layer("one")
    argv = [
        "-I",
        "-c",
        f"import sys; sys.path.insert(0, {str(lib)!r}); "
        "from clusterctl.agent.__main__ import main; sys.exit(main(sys.argv[1:]))",
    ]
    python = "/usr/bin/python3" if Path("/usr/bin/python3").is_file() else sys.executable
    root = tmp_path / "root"
    tar = _input(
        [
            (f"layers/{digest}.tar.gz", data),
            ("nodes/gpu001.json", _pointer("gpu001", digest)),
            ("nodes.json", b'["gpu001"]'),
        ]
    )
    done = subprocess.run([python, *argv, "publish", str(root)], input=tar.read(), capture_output=True, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"layers": 1, "pointers": 1, "removed": [], "dropped": []}
    listed = subprocess.run([python, *argv, "publish", str(root), "--have"], capture_output=True, check=True)
    assert json.loads(listed.stdout) == [digest]
    refused = subprocess.run(
        [python, *argv, "publish", str(root)], input=b"not a tar", capture_output=True, check=False
    )
    assert refused.returncode == 1
    assert refused.stderr.startswith(b"publish: ")
