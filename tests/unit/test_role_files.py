"""roles/common/files/node_state.py does what the roles rely on, and it is the only copy.

The roles that gate their tasks on it read it from the common role (roles ship together, in the
repository and in the wheel), so a fix reaches all of them.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COPIES = sorted((ROOT / "roles").glob("*/files/node_state.py"))
SHARED = "role_path ~ '/../common/files/node_state.py'"


def test_one_copy_read_by_every_gated_role() -> None:
    assert [p.relative_to(ROOT).as_posix() for p in COPIES] == ["roles/common/files/node_state.py"]
    users = [p for p in (ROOT / "roles").glob("*/tasks/main.yml") if "node_state.py" in p.read_text()]
    assert len(users) >= 5, users
    for tasks in users:
        if tasks.parts[-3] != "common":
            assert SHARED in tasks.read_text(), f"{tasks.relative_to(ROOT)} must read the common role's node_state.py"


def _run(query: dict) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", COPIES[0].read_text(), json.dumps(query)], capture_output=True, text=True, check=True
    )
    return json.loads(result.stdout)


@pytest.mark.skipif(not COPIES, reason="no roles")
def test_reports_only_unmet_file_expectations(tmp_path: Path) -> None:
    good = tmp_path / "good"
    good.write_text("content\n")
    good.chmod(0o640)
    bad_mode = tmp_path / "bad-mode"
    bad_mode.write_text("x")
    bad_mode.chmod(0o600)
    digest = hashlib.sha1(b"content\n").hexdigest()
    query = {
        "files": [
            [str(good), "file", digest, "0640", None, None],
            [str(bad_mode), "file", None, "0644", None, None],
            [str(tmp_path / "missing"), "file", None, None, None, None],
            [str(tmp_path), "directory", None, None, None, None],
            [str(good), "file", "0" * 40, None, None, None],
        ],
        "blocks": {str(good): "content", str(bad_mode): "nothere"},
        "absent": {str(good): "^cont"},
        "exists": [str(good), str(tmp_path / "missing")],
    }
    out = _run(query)
    assert sorted(out["stale"]) == sorted(
        [str(bad_mode), str(tmp_path / "missing"), str(good), str(bad_mode), str(good)]
    )
    assert out["existing"] == [str(good)]


@pytest.mark.skipif(os.geteuid() != 0 or not Path("/usr/bin/dpkg-query").exists(), reason="needs a Debian host")
def test_reads_package_state() -> None:
    out = _run({"packages": ["dpkg", "no-such-package-xyz"]})
    assert out["installed"] == ["dpkg"]
