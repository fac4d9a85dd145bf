"""The cause of a failed task, read from the node, and the summary lines that show it.

Node outputs are replayed through an executor that answers as a node would (the `Executor`
protocol's recorded-output pattern); the texts are in the formats apt, python-apt and systemd
print them.
"""

from __future__ import annotations

import pytest

from clusterctl.run.ansible import HostFailure, failure_from_event
from clusterctl.run.failure_cause import (
    APT_UPDATE_COMMAND,
    MAX_FAILURES,
    apt_errors,
    cause_of,
    failed_unit,
    journal_command,
    summary_lines,
    with_causes,
)

# `journalctl -o cat -u prometheus.service` after a reload whose ExecReload names a missing program.
PROMETHEUS_JOURNAL = """\
Started prometheus.service - Monitoring system and time series database.
ts=2026-12-02T10:00:01Z caller=main.go:1143 level=info msg="Server is ready to receive web requests."
Reloading prometheus.service - Monitoring system and time series database...
prometheus.service: Failed to locate executable /bin/kill: No such file or directory
prometheus.service: Failed at step EXEC spawning /bin/kill: No such file or directory
prometheus.service: Control process exited, code=exited, status=203/EXEC
Reload failed for prometheus.service - Monitoring system and time series database.
"""
SERVICE_MESSAGE = (
    "Unable to reload service prometheus: Job for prometheus.service failed.\n"
    'See "systemctl status prometheus.service" and "journalctl -xeu prometheus.service" for details.\n'
)
# The apt module when the cache update fails (python-apt joins the errors with ", ").
APT_UPDATE_MESSAGE = (
    "Failed to update apt cache: W:Updating from such a repository can't be done securely, and is therefore "
    "disabled by default., E:Failed to fetch http://10.0.0.9/debian/dists/bookworm/InRelease  Could not connect "
    "to 10.0.0.9:80 (10.0.0.9). - connect (113: No route to host), E:Some index files failed to download. "
    "They have been ignored, or old ones used instead."
)


class Node:
    """Answers each command with a recorded output and remembers what it was asked."""

    def __init__(self, outputs: dict[str, tuple[int, str]]) -> None:
        self.outputs = outputs
        self.asked: list[tuple[str, str]] = []

    def run(self, host: str, command: str, timeout: float) -> tuple[int, str, str]:
        self.asked.append((host, command))
        rc, out = self.outputs.get(command, (1, ""))
        return rc, out, ""


def _service_failure(host: str = "ctl001") -> HostFailure:
    data = {
        "resolved_action": "ansible.builtin.systemd_service",
        "res": {"msg": SERVICE_MESSAGE, "invocation": {"module_args": {"name": "prometheus", "state": "reloaded"}}},
    }
    return failure_from_event(host, "monitoring : Reload prometheus", data)


def test_a_failed_reload_shows_the_units_journal_lines_that_say_why() -> None:
    node = Node({journal_command("prometheus"): (0, PROMETHEUS_JOURNAL)})
    cause = cause_of(_service_failure(), node)

    assert node.asked == [("ctl001", journal_command("prometheus"))]
    assert cause == (
        "prometheus: prometheus.service: Failed to locate executable /bin/kill: No such file or directory",
        "prometheus: prometheus.service: Failed at step EXEC spawning /bin/kill: No such file or directory",
        "prometheus: Reload failed for prometheus.service - Monitoring system and time series database.",
    )


@pytest.mark.parametrize("exec_first", [False, True])
def test_the_cause_is_the_specific_lines_then_systemds_last_word(exec_first: bool) -> None:
    """The executor's own lines may reach the journal just before PID 1's "Starting ..." line."""
    failed_exec = (
        "munge.service: Failed to locate executable /usr/local/sbin/check: No such file or directory\n"
        "munge.service: Failed at step EXEC spawning /usr/local/sbin/check: No such file or directory\n"
    )
    starting = "Starting munge.service - MUNGE authentication service...\n"
    journal = (
        "Starting munge.service - MUNGE authentication service...\n"
        "munge.service: Failed with result 'exit-code'.\n"
        + (failed_exec + starting if exec_first else starting + failed_exec)
        + "munge.service: Control process exited, code=exited, status=203/EXEC\n"
        "munge.service: Failed with result 'exit-code'.\n"
        "Failed to start munge.service - MUNGE authentication service.\n"
    )
    failure = HostFailure("gpu004", "munge : Start munge", "Job for munge.service failed.", action="systemd_service")
    cause = cause_of(failure, Node({journal_command("munge.service"): (0, journal)}))
    assert cause == (
        "munge.service: munge.service: Failed to locate executable /usr/local/sbin/check: No such file or directory",
        "munge.service: munge.service: Failed at step EXEC spawning /usr/local/sbin/check: No such file or directory",
        "munge.service: Failed to start munge.service - MUNGE authentication service.",
    )


def test_the_unit_comes_from_the_message_when_the_task_names_none() -> None:
    failure = HostFailure("gpu001", "slurm : Start slurmd", "Job for slurmd.service failed because ...")
    assert failed_unit(failure) == "slurmd.service"


def test_a_unit_name_from_the_node_is_quoted_for_the_shell() -> None:
    failure = HostFailure("gpu001", "t", "m", action="ansible.builtin.systemd", unit="x;touch /tmp/PWNED")
    assert failed_unit(failure) is None
    assert journal_command("a b") == "journalctl --no-pager --output=cat --lines=40 --unit='a b'"


def test_an_apt_failure_shows_apts_errors_without_asking_the_node() -> None:
    node = Node({})
    failure = failure_from_event(
        "gpu002", "common : Install", {"task_action": "apt", "res": {"msg": APT_UPDATE_MESSAGE}}
    )
    cause = cause_of(failure, node)

    assert node.asked == []
    assert cause == (
        "E:Failed to fetch http://10.0.0.9/debian/dists/bookworm/InRelease  Could not connect to 10.0.0.9:80 "
        "(10.0.0.9). - connect (113: No route to host)",
        "E:Some index files failed to download. They have been ignored, or old ones used instead.",
    )


def test_an_apt_failure_without_text_asks_apt_get_on_the_node() -> None:
    # `apt-get update -q` with a source nothing listens on (LC_ALL=C, as the command sets it).
    update = (
        "Hit:1 http://deb.debian.org/debian bookworm InRelease\n"
        "Err:2 http://127.0.0.1:9/debian bookworm InRelease\n"
        "  Could not connect to 127.0.0.1:9 (127.0.0.1). - connect (111: Connection refused)\n"
        "Reading package lists...\n"
        "W: Failed to fetch http://127.0.0.1:9/debian/dists/bookworm/InRelease  Could not connect to 127.0.0.1:9 "
        "(127.0.0.1). - connect (111: Connection refused)\n"
        "E: Some index files failed to download. They have been ignored, or old ones used instead.\n"
    )
    node = Node({APT_UPDATE_COMMAND: (100, update)})
    failure = failure_from_event(
        "gpu004",
        "Install the missing ones",
        {"resolved_action": "ansible.builtin.apt", "res": {"msg": "Failed to update apt cache after 5 retries: "}},
    )
    assert cause_of(failure, node) == (
        "Err:2 http://127.0.0.1:9/debian bookworm InRelease",
        "W: Failed to fetch http://127.0.0.1:9/debian/dists/bookworm/InRelease  Could not connect to 127.0.0.1:9 "
        "(127.0.0.1). - connect (111: Connection refused)",
        "E: Some index files failed to download. They have been ignored, or old ones used instead.",
    )
    assert node.asked == [("gpu004", APT_UPDATE_COMMAND)]


def test_apt_get_stderr_lines_each_once() -> None:
    stderr = "Reading package lists...\nE: Unable to locate package foo\nE: Unable to locate package foo\n"
    assert apt_errors(stderr) == ["E: Unable to locate package foo"]


def test_node_text_is_shown_escaped_and_cut() -> None:
    journal = "unit: Failed \x1b[2J to start " + "x" * 500 + "\n"
    node = Node({journal_command("prometheus"): (0, journal)})
    (line,) = cause_of(_service_failure(), node)
    assert "\x1b" not in line
    assert "\\x1b[2J" in line
    assert len(line) <= len("prometheus: ") + 240


def test_unreachable_nodes_and_failed_reads_add_nothing() -> None:
    node = Node({})
    gone = HostFailure("gpu003", "Gathering Facts", "ssh: connect to host", unreachable=True)
    assert cause_of(gone, node) == ()
    assert cause_of(_service_failure(), node) == ()  # journalctl answered rc 1


def test_summary_shows_a_few_failures_with_their_causes_and_counts_the_rest() -> None:
    node = Node({journal_command("prometheus"): (0, PROMETHEUS_JOURNAL)})
    failures = with_causes([_service_failure(f"gpu{i:03d}") for i in range(1, 8)], node)
    lines = summary_lines(failures)

    assert len(node.asked) == MAX_FAILURES
    assert lines[0].startswith("  gpu001: failed in task 'monitoring : Reload prometheus': Unable to reload")
    assert lines[1] == "    on gpu001: prometheus: prometheus.service: Failed to locate executable /bin/kill: " + (
        "No such file or directory"
    )
    assert lines[-1] == f"  ({7 - MAX_FAILURES} more failure(s) in the Ansible log)"
    assert len(lines) == MAX_FAILURES * 4 + 1
