"""Files a run writes into the build directory (verify report, Ansible log, clusterctl's public
key for the PXE installer) follow the build-dir rules: no link is followed, the write is atomic,
and they stay out of the manifest, so a re-render keeps them and still accepts the directory."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from clusterctl.pipeline import load_and_validate, render
from clusterctl.render.builddir import MANIFEST, BuildDirError, open_run_log, read_manifest, write_run_file
from clusterctl.run import ansible as ansible_module
from clusterctl.run.events import EventBus
from clusterctl.run.providers.baremetal import PUBLIC_KEY_PATH, publish_public_key
from clusterctl.run.providers.base import ProviderError
from clusterctl.run.sshopts import control_path_dir
from clusterctl.verify.report import Report, write_report
from tests.conftest import EXAMPLES

LOCAL = load_and_validate(EXAMPLES / "local.yaml")


@pytest.fixture
def build(tmp_path: Path) -> Path:
    out, _ = render(LOCAL, tmp_path / "build")
    return out


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "victim"
    path.write_text("precious\n")
    return path


def _report() -> Report:
    plan = LOCAL.plan
    return Report(
        cluster=plan.cluster.name,
        spec_file=plan.cluster.spec_file,
        provider=plan.cluster.provider,
        started_at="2025-01-01T00:00:00Z",
        duration_s=1.0,
        checks=[],
        thresholds={},
        findings=[],
        nodes=list(plan.nodes),
    )


def test_run_files_survive_a_rerender_and_stay_out_of_the_manifest(build: Path) -> None:
    json_path, html_path = write_report(_report(), build)
    key = publish_public_key(build, "ssh-ed25519 AAAAC3Nza clusterctl@local", [])
    with open_run_log(build, "logs/ansible.log") as log:
        log.write("one run\n")
    listed = read_manifest(build) or []

    _, changed = render(LOCAL, build)

    assert changed == []
    for path in (json_path, html_path, key, build / "logs" / "ansible.log"):
        assert path.is_file()
        assert str(path.relative_to(build)) not in listed
    assert read_manifest(build) == listed


def test_a_link_at_the_report_is_not_followed(build: Path, victim: Path) -> None:
    (build / "verify").mkdir()
    (build / "verify" / "report.json").symlink_to(victim)
    with pytest.raises(BuildDirError, match="symbolic link"):
        write_report(_report(), build)
    assert victim.read_text() == "precious\n"


def test_a_linked_report_directory_is_not_followed(build: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (build / "verify").symlink_to(elsewhere)
    with pytest.raises(BuildDirError, match="symbolic link"):
        write_report(_report(), build)
    assert list(elsewhere.iterdir()) == []


def test_a_link_at_the_published_key_is_not_followed(build: Path, victim: Path) -> None:
    target = build / PUBLIC_KEY_PATH
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(victim)
    with pytest.raises(ProviderError, match="symbolic link"):
        publish_public_key(build, "ssh-ed25519 AAAAC3Nza clusterctl@local", [])
    assert victim.read_text() == "precious\n"


def test_the_published_key_is_replaced_atomically(build: Path) -> None:
    first = publish_public_key(build, "ssh-ed25519 AAAAfirst", [])
    inode = first.stat().st_ino
    publish_public_key(build, "ssh-ed25519 AAAAsecond", ["ssh-ed25519 AAAAops ops@example"])
    assert first.read_text() == "ssh-ed25519 AAAAsecond\nssh-ed25519 AAAAops ops@example\n"
    assert first.stat().st_ino != inode  # a new file renamed into place, not rewritten in place
    assert first.stat().st_mode & 0o777 == 0o644


def test_a_link_at_the_ansible_log_is_not_followed(
    build: Path, victim: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ansible_runner

    monkeypatch.setattr(ansible_runner, "run", lambda **_: pytest.fail("Ansible ran with its log redirected"))
    (build / "logs").mkdir()
    (build / "logs" / "ansible.log").symlink_to(victim)
    with pytest.raises(BuildDirError, match="symbolic link"):
        ansible_module.run_playbook(build, tmp_path / "state", EventBus())
    assert victim.read_text() == "precious\n"


def test_a_linked_log_directory_is_not_followed(build: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (build / "logs").symlink_to(elsewhere)
    with pytest.raises(BuildDirError, match="symbolic link"), open_run_log(build, "logs/ansible.log"):
        pass
    assert list(elsewhere.iterdir()) == []


def test_a_fifo_at_the_log_is_refused(build: Path) -> None:
    (build / "logs").mkdir()
    os.mkfifo(build / "logs" / "ansible.log")
    with pytest.raises(BuildDirError, match="not a regular file"), open_run_log(build, "logs/ansible.log"):
        pass


def test_a_run_never_overwrites_a_rendered_file(build: Path) -> None:
    before = (build / "slurm" / "slurm.conf").read_text()
    with pytest.raises(BuildDirError, match="rendered file"):
        write_run_file(build, "slurm/slurm.conf", b"x")
    with pytest.raises(BuildDirError, match="climbs out"):
        write_run_file(build, "../outside", b"x")
    with pytest.raises(BuildDirError):
        write_run_file(build, MANIFEST, b"x")
    assert (build / "slurm" / "slurm.conf").read_text() == before


def test_a_directory_clusterctl_did_not_make_is_refused(tmp_path: Path) -> None:
    foreign = tmp_path / "home"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(BuildDirError, match="did not make it"):
        write_report(_report(), foreign)
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]


def test_a_report_into_a_new_directory_leaves_one_render_accepts(tmp_path: Path) -> None:
    out = tmp_path / "fresh"
    write_report(_report(), out)
    assert read_manifest(out) == []
    render(LOCAL, out)  # accepted: the directory is clusterctl's, and the report is kept
    assert (out / "verify" / "report.json").is_file()


def test_ansible_artifacts_go_to_the_state_dir_and_host_keys_are_checked(
    build: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    class Runner:
        status, rc, stats = "successful", 0, {}

    def run(**kwargs: Any) -> Runner:
        seen.update(kwargs)
        return Runner()

    import ansible_runner

    monkeypatch.setattr(ansible_runner, "run", run)
    monkeypatch.setenv("ANSIBLE_HOST_KEY_CHECKING", "False")
    state = tmp_path / "state"
    result = ansible_module.run_playbook(build, state, EventBus())
    assert result.succeeded
    assert Path(seen["artifact_dir"]).is_relative_to(state.resolve())
    assert seen["envvars"]["ANSIBLE_HOST_KEY_CHECKING"] == "True"
    assert seen["envvars"]["ANSIBLE_SSH_ARGS"].startswith("-o StrictHostKeyChecking=yes ")
    assert seen["envvars"]["ANSIBLE_SSH_CONTROL_PATH_DIR"] == str(control_path_dir(state))
    assert (build / "logs" / "ansible.log").read_text().startswith("\n===== clusterctl configure")
    assert not (build / "ansible" / "artifacts").exists()
