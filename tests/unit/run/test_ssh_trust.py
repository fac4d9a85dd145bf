"""Every SSH connection clusterctl makes checks the host key against clusterctl's known_hosts.

One builder (run/sshopts.py) gives the options of Ansible's inventories, of the executor behind
``up``'s readiness check, ``status`` and ``verify``, and of the bastion hop of each. These tests
run the real callers with a stand-in ``ssh`` on PATH that records its command line, and scan the
sources for any option that would trust a key on first use.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from clusterctl.commands import cli
from clusterctl.ops import up as orchestrate
from clusterctl.ops.readiness import Readiness
from clusterctl.ops.status import collect_status
from clusterctl.pipeline import load_and_validate, render
from clusterctl.plan import Plan
from clusterctl.render import render_files
from clusterctl.run.ansible import SSH_ENV, ConfigureResult
from clusterctl.run.burst_cloud import GroupState, write_state
from clusterctl.run.events import EventBus
from clusterctl.run.executor import UNREACHABLE_RC, RoutingExecutor, SshExecutor, executor_for
from clusterctl.run.providers.base import ProvisionedHost
from clusterctl.run.providers.ssh_inventory import ssh_common_args, write_ssh_inventory
from clusterctl.run.sshkeys import ensure_client_key, ensure_host_keys
from clusterctl.run.sshopts import (
    ACCESS_FILE,
    SshAccess,
    SshAccessError,
    SshEndpoint,
    control_path_dir,
    load_access,
    save_access,
    ssh_command,
    ssh_options,
)
from clusterctl.run.state import StateDir
from tests.conftest import EXAMPLES, REPO_ROOT

BAREMETAL = load_and_validate(EXAMPLES / "onprem-h100-256.yaml").plan
AWS = load_and_validate(EXAMPLES / "aws-p5.yaml").plan
HYBRID = load_and_validate(EXAMPLES / "aws-burst.yaml").plan
# Options that trust a host key nobody pinned (or skip the check): none may appear in what ships.
TOFU = re.compile(
    r"accept-new|StrictHostKeyChecking[\s=\"']+(no|off|false|ask)\b|UserKnownHostsFile[\s=\"']+/dev/null"
    r"|host_key_checking[\s=:\"']+(false|no|off)\b",
    re.IGNORECASE,
)


def _strict(argv: list[str], known_hosts: Path) -> bool:
    """Whether ``argv`` checks host keys strictly against ``known_hosts`` and nothing else."""
    return (
        "StrictHostKeyChecking=yes" in argv
        and f"UserKnownHostsFile={known_hosts.resolve()}" in argv
        and "GlobalKnownHostsFile=/dev/null" in argv
        and not any(TOFU.search(a) for a in argv)
    )


def _provisioned(plan: Plan, state: Path, tmp_path: Path, bastion: bool = False) -> Path:
    """What `up` leaves after provisioning ``plan``: known_hosts, inventory and access record."""
    key_path, _ = ensure_client_key(state, plan.cluster.name)
    names = [n.hostname for n in plan.nodes if not n.burst]
    keys = ensure_host_keys(state, [*names, "bastion"])
    hosts = [
        ProvisionedHost(hostname=n, address=plan.node(n).address, user="ubuntu", host_key=keys[n].public) for n in names
    ]
    jump = ProvisionedHost("bastion", "198.51.100.9", "ubuntu", host_key=keys["bastion"].public) if bastion else None
    write_ssh_inventory(
        plan,
        hosts,
        inventory_dir=tmp_path / "inventory",
        known_hosts=state / "known_hosts",
        private_key=key_path,
        bastion=jump,
    )
    return state / "known_hosts"


@pytest.fixture
def recorded_ssh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in ``ssh`` first on PATH: records each command line (JSON lines), answers nothing."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "ssh-calls.jsonl"
    script = bin_dir / "ssh"
    script.write_text(
        "#!/usr/bin/env python3\nimport json, sys\n"
        f"with open({str(log)!r}, 'a') as f:\n    f.write(json.dumps(sys.argv) + '\\n')\n"
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path('/usr/bin')}:{Path('/bin')}")
    return log


def _calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


# --- the builder ---------------------------------------------------------------------------


def test_options_check_host_keys_against_clusterctls_known_hosts_only(tmp_path: Path) -> None:
    access = SshAccess(known_hosts=tmp_path / "known_hosts", identity_file=tmp_path / "id")
    options = ssh_options(access)
    assert _strict(options, tmp_path / "known_hosts")
    assert f"IdentityFile={(tmp_path / 'id').resolve()}" in options
    assert "IdentitiesOnly=yes" in options
    assert "UpdateHostKeys=no" in options
    assert not any(o.startswith("ProxyCommand=") for o in options)


def test_the_bastion_hop_is_checked_the_same_way(tmp_path: Path) -> None:
    bastion = SshEndpoint("198.51.100.9", "ubuntu", 2222)
    access = SshAccess(known_hosts=tmp_path / "known_hosts", identity_file=tmp_path / "id", bastion=bastion)
    options = ssh_options(access)
    proxy = shlex.split(next(o for o in options if o.startswith("ProxyCommand=")).removeprefix("ProxyCommand="))
    assert proxy[:3] == ["ssh", "-W", "%h:%p"]
    assert _strict(proxy, tmp_path / "known_hosts")
    assert proxy[-3:] == ["-p", "2222", "ubuntu@198.51.100.9"]


def test_ansible_and_the_executor_get_the_same_options(tmp_path: Path) -> None:
    bastion = ProvisionedHost("bastion", "198.51.100.9", "ubuntu", host_key="ssh-ed25519 AAAA")
    access = SshAccess(tmp_path / "kh", tmp_path / "key", SshEndpoint("198.51.100.9", "ubuntu"))
    ansible = shlex.split(ssh_common_args(tmp_path / "kh", tmp_path / "key", bastion))
    executor = ssh_command(access, SshEndpoint("10.0.0.5", "ubuntu"), "true")
    assert ansible == ssh_options(access)
    start = executor.index(ansible[1]) - 1  # the "-o" before the first option
    assert executor[start : start + len(ansible)] == ansible


def test_a_state_dir_ssh_would_misread_is_refused(tmp_path: Path) -> None:
    spaced = tmp_path / "with space"
    options = ssh_options(SshAccess(spaced / "known_hosts", spaced / "id"))
    assert f'UserKnownHostsFile="{(spaced / "known_hosts").resolve()}"' in options
    for bad in ("a%hb", 'a"b', "a\\b"):
        with pytest.raises(SshAccessError, match="plain path"):
            ssh_options(SshAccess(tmp_path / bad / "known_hosts", tmp_path / "id"))


@pytest.mark.skipif(shutil.which("ssh") is None, reason="no ssh client")
def test_ssh_reads_the_options_as_meant(tmp_path: Path) -> None:
    spaced = tmp_path / "state dir"
    bastion = SshEndpoint("198.51.100.9", "ubuntu")
    argv = ssh_command(SshAccess(spaced / "known_hosts", spaced / "id", bastion), SshEndpoint("10.0.0.5", "ubuntu"), "")
    done = subprocess.run(
        [shutil.which("ssh") or "ssh", "-G", *argv[1:-1]], capture_output=True, text=True, check=True, timeout=10
    )
    config = done.stdout.splitlines()
    assert "stricthostkeychecking true" in config
    assert f"userknownhostsfile {(spaced / 'known_hosts').resolve()}" in config
    assert "globalknownhostsfile /dev/null" in config
    assert f"identityfile {(spaced / 'id').resolve()}" in config
    assert "updatehostkeys false" in config


def test_an_output_user_ssh_would_read_as_an_option_never_reaches_a_command_line(tmp_path: Path) -> None:
    access = SshAccess(tmp_path / "kh", tmp_path / "id")
    with pytest.raises(SshAccessError, match="login name"):
        ssh_command(access, SshEndpoint("10.0.0.5", "-oProxyCommand=touch x"), "true")
    with pytest.raises(SshAccessError, match="IP address"):
        ssh_command(access, SshEndpoint("-oProxyCommand=x", "ubuntu"), "true")
    with pytest.raises(SshAccessError, match="login name"):
        ssh_options(SshAccess(tmp_path / "kh", tmp_path / "id", SshEndpoint("10.0.0.9", "-x")))


def test_the_executor_never_rides_a_shared_connection(tmp_path: Path) -> None:
    argv = ssh_command(SshAccess(tmp_path / "kh", tmp_path / "id"), SshEndpoint("10.0.0.5", "ubuntu"), "true")
    # A master connection from a user's ssh config skips the host key check: never used.
    assert argv[argv.index("ControlPath=none") - 1] == "-o"
    assert "ControlMaster=no" in argv


def test_ansible_shares_connections_within_one_state_dir_only(tmp_path: Path) -> None:
    one, other = control_path_dir(tmp_path / "a"), control_path_dir(tmp_path / "b")
    assert one != other
    assert one == control_path_dir(tmp_path / "a" / ".." / "a")
    assert len(str(one / ("0" * 40)).encode()) < 108  # ssh's socket name (%C) still fits a Unix socket


# --- the access record ---------------------------------------------------------------------


def test_up_records_how_each_node_is_reached(tmp_path: Path) -> None:
    state = tmp_path / "state"
    known = _provisioned(AWS, state, tmp_path, bastion=True)
    recorded = load_access(state)
    assert recorded is not None
    hosts, access = recorded
    assert hosts["gpu001"] == SshEndpoint(AWS.node("gpu001").address, "ubuntu")
    assert access.known_hosts == known.resolve()
    assert access.bastion == SshEndpoint("198.51.100.9", "ubuntu")
    assert (state / ACCESS_FILE).stat().st_mode & 0o777 == 0o600


def test_a_record_that_is_a_link_or_junk_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere.json").write_text("{}")
    (tmp_path / ACCESS_FILE).symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(SshAccessError, match="symbolic link"):
        load_access(tmp_path)
    (tmp_path / ACCESS_FILE).unlink()
    (tmp_path / ACCESS_FILE).write_text("[1, 2]")
    with pytest.raises(SshAccessError, match="not an SSH access record"):
        load_access(tmp_path)


def test_save_access_replaces_a_planted_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / ACCESS_FILE).symlink_to(victim)
    save_access(tmp_path, {"a": SshEndpoint("10.0.0.1", "root")}, SshAccess(tmp_path / "kh", tmp_path / "id"))
    assert victim.read_text() == "keep"
    assert not (tmp_path / ACCESS_FILE).is_symlink()


# --- every caller --------------------------------------------------------------------------


def test_executor_routes_every_ssh_node_through_the_builder(tmp_path: Path) -> None:
    state = tmp_path / "state"
    known = _provisioned(AWS, state, tmp_path, bastion=True)
    executor = executor_for(AWS, state)
    assert isinstance(executor, RoutingExecutor)
    for node in AWS.nodes:
        route = executor.routes[node.hostname]
        assert isinstance(route, SshExecutor)
        argv = route.argv(node.hostname, "true")
        assert _strict(argv, known)
        proxy = next(a for a in argv if a.startswith("ProxyCommand="))
        assert _strict(shlex.split(proxy.removeprefix("ProxyCommand=")), known)


def test_no_record_no_connection(tmp_path: Path, recorded_ssh: Path) -> None:
    executor = executor_for(BAREMETAL, tmp_path / "state")
    rc, _, err = executor.run("gpu001", "true", 5)
    assert rc == UNREACHABLE_RC
    assert "clusterctl up" in err
    assert _calls(recorded_ssh) == []


def test_cloud_burst_hosts_use_their_groups_known_hosts(tmp_path: Path) -> None:
    state = tmp_path / "state"
    _provisioned(HYBRID, state, tmp_path)
    write_state(state, "gpu-b", GroupState(active=["gpu-b001"], addresses={"gpu-b001": "10.20.0.17"}))
    executor = executor_for(HYBRID, state)
    assert isinstance(executor, RoutingExecutor)
    burst = executor.routes["gpu-b001"]
    assert isinstance(burst, SshExecutor)
    assert _strict(burst.argv("gpu-b001", "true"), state / "burst" / "cloud" / "gpu-b.known_hosts")
    assert executor.run("gpu-b002", "true", 5)[0] == UNREACHABLE_RC  # not resumed: no record, no connection


def test_status_connects_with_checked_host_keys(tmp_path: Path, recorded_ssh: Path) -> None:
    root = tmp_path / "dot-clusterctl"
    state = StateDir(root, BAREMETAL.cluster.name)
    state.ensure()
    known = _provisioned(BAREMETAL, state.path, tmp_path)
    collect_status(BAREMETAL, state)
    calls = _calls(recorded_ssh)
    assert calls
    assert all(_strict(argv, known) for argv in calls)


def test_verify_connects_with_checked_host_keys(tmp_path: Path, recorded_ssh: Path) -> None:
    root = tmp_path / "dot-clusterctl"
    state = StateDir(root, BAREMETAL.cluster.name)
    state.ensure()
    known = _provisioned(BAREMETAL, state.path, tmp_path)
    result = CliRunner().invoke(
        cli,
        ["verify", str(EXAMPLES / "onprem-h100-256.yaml"), "--state-dir", str(root), "--out", str(tmp_path / "b")],
        catch_exceptions=False,
    )
    assert result.exit_code in (0, 1), result.output
    calls = _calls(recorded_ssh)
    assert len(calls) > 1
    assert all(_strict(argv, known) for argv in calls)


def test_verify_without_up_connects_to_nothing(tmp_path: Path, recorded_ssh: Path) -> None:
    result = CliRunner().invoke(
        cli,
        ["verify", str(EXAMPLES / "onprem-h100-256.yaml"), "--state-dir", str(tmp_path / "s"), "--out", str(tmp_path)],
        catch_exceptions=False,
    )
    assert result.exit_code == 1
    assert "clusterctl up" in result.output
    assert _calls(recorded_ssh) == []


def test_ups_readiness_check_connects_with_checked_host_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recorded_ssh: Path
) -> None:
    validated = load_and_validate(EXAMPLES / "onprem-h100-256.yaml")
    state = StateDir(tmp_path / "dot-clusterctl", validated.plan.cluster.name)
    state.ensure()
    seen: dict[str, Any] = {}

    class Provider:
        def provision(self, plan: Plan, build_dir: Path, state_dir: Path, **_: Any) -> list[ProvisionedHost]:
            seen["known"] = _provisioned(plan, state_dir, tmp_path)
            return []

    def readiness(plan: Plan, executor: Any, events: EventBus) -> Readiness:
        executor.run(plan.slurm.controllers[0], "sinfo", 5)
        return Readiness()

    monkeypatch.setattr(orchestrate, "for_kind", lambda kind: Provider())
    monkeypatch.setattr(orchestrate, "run_playbook", lambda *a, **k: ConfigureResult(status="successful", rc=0))
    monkeypatch.setattr(orchestrate, "check_cluster", readiness)
    result = orchestrate.up(validated, state, EventBus(), out_dir=tmp_path / "build", yes=True)
    assert result.ok, result.error
    calls = _calls(recorded_ssh)  # the bundles published on the controller, then readiness
    assert calls[-1][-1] == "sudo -n bash -c sinfo", calls
    for argv in calls:
        assert _strict(argv, seen["known"])


def test_ansible_runs_check_host_keys_whatever_the_environment_says(tmp_path: Path) -> None:
    for spec in ("local.yaml", "onprem-h100-256.yaml", "aws-p5.yaml"):
        envvars = next(
            f.text for f in render_files(load_and_validate(EXAMPLES / spec).plan) if f.path.endswith("envvars")
        )
        # The rendered env/envvars wins over the process environment in ansible-runner: it must say the same.
        for key, value in SSH_ENV.items():
            assert f'{key}: "{value}"' in envvars, spec
    assert SSH_ENV["ANSIBLE_HOST_KEY_CHECKING"] == "True"
    assert SSH_ENV["ANSIBLE_SSH_ARGS"].startswith("-o StrictHostKeyChecking=yes ")


def test_the_provisioned_inventory_carries_the_builders_options(tmp_path: Path) -> None:
    state = tmp_path / "state"
    known = _provisioned(AWS, state, tmp_path, bastion=True)
    from clusterctl.render import ansible_yaml

    hosts = ansible_yaml.load((tmp_path / "inventory" / "provisioned.yml").read_text())["all"]["hosts"]
    for entry in hosts.values():
        assert _strict(shlex.split(entry["ansible_ssh_common_args"]), known)


# --- nothing that ships trusts a key on first use ------------------------------------------


def _shipped_files() -> list[Path]:
    files: list[Path] = []
    for top in ("cli", "stacks", "templates", "roles", "scripts", "inventory"):
        for path in sorted((REPO_ROOT / top).rglob("*")):
            # Molecule scenarios are tests: their throw-away containers are not clusterctl's connections.
            if path.is_file() and "molecule" not in path.parts and "__pycache__" not in path.parts:
                files.append(path)
    return files


def test_no_source_trusts_a_host_key_on_first_use() -> None:
    found = []
    for path in _shipped_files():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        found += [f"{path.relative_to(REPO_ROOT)}:{m.group(0)}" for m in TOFU.finditer(text)]
    assert found == []


def test_the_scan_finds_what_it_looks_for() -> None:
    for planted in (
        "-o StrictHostKeyChecking=accept-new",
        "StrictHostKeyChecking=no",
        "StrictHostKeyChecking no",
        "-o UserKnownHostsFile=/dev/null",
        "host_key_checking = False",
        'ANSIBLE_HOST_KEY_CHECKING: "False"',
    ):
        assert TOFU.search(planted), planted


def test_render_output_trusts_no_host_key_on_first_use(tmp_path: Path) -> None:
    for spec in ("local.yaml", "onprem-h100-256.yaml", "aws-p5.yaml", "aws-burst.yaml"):
        build, _ = render(load_and_validate(EXAMPLES / spec), tmp_path / spec)
        for path in build.rglob("*"):
            if path.is_file():
                assert not TOFU.search(path.read_text(errors="replace")), path
