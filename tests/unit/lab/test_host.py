"""The lab's own errors: a process that does not start is named with the end of its log."""

from __future__ import annotations

from pathlib import Path

import pytest
from lab import host
from lab.config import LabError


def test_a_daemon_that_exits_is_named_with_its_logs_last_lines_made_printable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "daemon.log"
    log.write_text("".join(f"line {n}\n" for n in range(40)) + "OSError: [Errno 98] Address in use \x1b[2J\n")
    monkeypatch.setattr(host.processes, "running", lambda pid_file, marker: None)
    with pytest.raises(LabError) as raised:
        host._wait_tls("127.0.0.1", 1, tmp_path / "pid", "sushy-emulator", log)
    message = str(raised.value)
    assert "sushy-emulator did not start on 127.0.0.1:1" in message
    assert "Address in use" in message
    assert "\x1b" not in message
    assert "line 26" in message
    assert "line 25" not in message


def test_a_log_that_is_not_there_adds_nothing(tmp_path: Path) -> None:
    assert host._last_lines(tmp_path / "missing.log") == ""
