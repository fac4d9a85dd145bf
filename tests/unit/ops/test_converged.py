"""The converge record: what makes `up` skip the configure stage, and everything that must not."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from ansible_runner.utils import dump_artifacts

from clusterctl.ops import converged
from clusterctl.ops.converged import DIGEST_COMMAND, check, fingerprint, node_digests, record
from tests.verify_testkit import ReplayExecutor

HOSTS = ["ctl001", "gpu001", "gpu002"]


@pytest.fixture
def inputs(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    build = tmp_path / "build"
    (build / "ansible" / "inventory").mkdir(parents=True)
    (build / "ansible" / "inventory" / "hosts.yml").write_text("all: {}\n")
    (build / "slurm").mkdir()
    (build / "slurm" / "slurm.conf").write_text("ClusterName=local\n")
    (build / "logs").mkdir()
    secret = tmp_path / "munge.key"
    secret.write_bytes(b"k" * 1024)
    return build, {"munge_key_file": str(secret)}


def _nodes(digests: dict[str, str], rc: int = 0) -> ReplayExecutor:
    def answer(host: str, command: str) -> tuple[int, str, str]:
        assert command == DIGEST_COMMAND
        return (rc, digests[host] + "\n", "") if host in digests else (255, "", f"{host}: unreachable")

    return ReplayExecutor(answer)


def _digest(n: int) -> str:
    return f"{n:064x}"


def test_the_fingerprint_follows_every_input_but_what_a_run_writes(inputs: tuple[Path, dict[str, str]]) -> None:
    build, extravars = inputs
    first = fingerprint(build, extravars, None)
    assert fingerprint(build, extravars, None) == first
    (build / "logs" / "ansible.log").write_text("a run\n")
    assert fingerprint(build, extravars, None) == first, "the configure stage does not read its own log"

    # What ansible-runner writes into its private data directory on the first run, as run_playbook calls it.
    dump_artifacts({"private_data_dir": str(build / "ansible"), "cmdline": "-e @/state/extravars.json"})
    assert (build / "ansible" / "env" / "cmdline").is_file()
    assert fingerprint(build, extravars, None) == first, "the command line ansible-runner records is not an input"

    (build / "slurm" / "slurm.conf").write_text("ClusterName=local\nMaxJobCount=20000\n")
    edited = fingerprint(build, extravars, None)
    assert edited != first
    Path(extravars["munge_key_file"]).write_bytes(b"r" * 1024)
    rotated = fingerprint(build, extravars, None)
    assert rotated != edited, "a rotated secret (same path, new content) converges again"
    assert fingerprint(build, extravars, ["all", "!burst"]) != rotated


def test_the_record_keeps_one_digest_and_no_secret(inputs: tuple[Path, dict[str, str]]) -> None:
    build, extravars = inputs
    kept = record(fingerprint(build, extravars, None), {"gpu001": _digest(1), "ctl001": _digest(2)})
    assert list(kept["nodes"]) == ["ctl001", "gpu001"]
    assert "k" * 64 not in repr(kept)
    assert set(kept) == {"fingerprint", "nodes", "at"}


def test_unchanged_only_when_every_node_answers_its_recorded_digest() -> None:
    digests = {h: _digest(i) for i, h in enumerate(HOSTS)}
    kept = record("f" * 64, digests)
    result = check(kept, "f" * 64, HOSTS, _nodes(digests))
    assert result.unchanged, result.reason
    assert "all 3 nodes" in result.reason


@pytest.mark.parametrize(
    ("recorded", "inputs_now", "hosts", "answers", "why"),
    [
        (None, "f" * 64, HOSTS, {}, "no completed converge"),
        ("f" * 64, "e" * 64, HOSTS, {}, "rendered files, roles, secrets or stages changed"),
        ("f" * 64, "f" * 64, [*HOSTS, "gpu003"], {}, "the nodes changed"),
        ("f" * 64, "f" * 64, HOSTS, {"ctl001": _digest(0), "gpu001": _digest(1), "gpu002": _digest(9)}, ": gpu002"),
        ("f" * 64, "f" * 64, HOSTS, {"ctl001": _digest(0), "gpu001": _digest(1)}, ": gpu002"),
    ],
    ids=["never-converged", "inputs-changed", "node-added", "node-drifted", "node-silent"],
)
def test_anything_else_runs_the_configure_stage(
    recorded: str | None, inputs_now: str, hosts: list[str], answers: dict[str, str], why: str
) -> None:
    kept = record(recorded, {h: _digest(i) for i, h in enumerate(HOSTS)}) if recorded else None
    result = check(kept, inputs_now, hosts, _nodes(answers))
    assert not result.unchanged
    assert why in result.reason


def test_a_node_whose_digest_command_fails_has_no_digest() -> None:
    assert node_digests(_nodes({"gpu001": _digest(1)}, rc=1), ["gpu001"]) == {"gpu001": ""}
    assert node_digests(_nodes({"gpu001": "not a digest"}), ["gpu001"]) == {"gpu001": ""}


def test_the_digest_command_runs_in_bash_and_is_stable() -> None:
    """The real command on this machine: one sha256, the same twice when nothing changed."""
    runs = [subprocess.run(["bash", "-c", DIGEST_COMMAND], capture_output=True, text=True, check=True) for _ in "ab"]
    assert len(runs[0].stdout.strip()) == 64
    assert runs[0].stdout == runs[1].stdout
    assert converged.STATE_KEY == "converged"
