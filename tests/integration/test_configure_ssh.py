"""The configure-over-SSH path end to end, as `up` runs it after a cloud stack.

Containers running sshd stand in for provisioned machines. They get what cloud-init would
give a node (clusterctl's user and key, the host key clusterctl generated); an inventory is
built from stack-shaped outputs (hostname -> address, host keys); the roles' ``site.yml``
(or, until it exists, a playbook running the ``common`` role) converges them over SSH with
``StrictHostKeyChecking=yes`` against the known_hosts clusterctl wrote. A node presenting a
different host key is refused.
"""

from __future__ import annotations

import shlex
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterctl.paths import roles_dir
from clusterctl.pipeline import load_and_validate, render
from clusterctl.render import ansible_yaml
from clusterctl.run.ansible import run_playbook
from clusterctl.run.events import EventBus
from clusterctl.run.executor import SshExecutor, executor_for
from clusterctl.run.providers.base import ProvisionedHost
from clusterctl.run.providers.ssh_inventory import hosts_from_outputs, write_ssh_inventory
from clusterctl.run.redfish import NodeNotReadyError, check_host_key
from clusterctl.run.sshkeys import ensure_client_key, ensure_host_keys, generate_ed25519
from clusterctl.run.sshopts import SshAccess, load_access
from tests.docker_helpers import SYSTEMD_FLAGS, docker, image_with_packages

pytestmark = [pytest.mark.integration, pytest.mark.docker, pytest.mark.slow]

IMAGE = "clusterctl-test/sshd:bookworm"
USER = "ubuntu"
SPEC = """\
version: 1
name: sshtest
provider: {kind: aws, region: us-east-1, zone: us-east-1a, ssh_user: ubuntu}
network: {management_cidr: 10.70.0.0/16, domain: sshtest.internal}
os: debian-12
versions: {nvidia_driver: "570.133.20", cuda: "12.8", nccl: "2.26.2", slurm: "22.05", dcgm: "3.3.9"}
hardware:
  small:
    instance_type: m6i.2xlarge
    cpus: {sockets: 1, cores_per_socket: 4, threads_per_core: 2}
    memory_gib: 16
nodes:
  - {group: ctl, role: controller, hardware: small, count: 1}
  - {group: login, role: login, hardware: small, count: 1}
  - {group: cpu, role: compute, hardware: small, count: 1}
fabric: {kind: efa, speed_gbps: 100}
slurm:
  partitions:
    - {name: cpu, groups: [cpu], default: true}
"""
MINIMAL_PLAYBOOK = """\
---
- name: Converge the base role over SSH
  hosts: all
  become: true
  roles:
    - role: common
"""


def _exec(container: str, script: str, stdin: str | None = None) -> str:
    return docker("exec", "-i", container, "bash", "-c", script, input_text=stdin).stdout


def _wait_boot(container: str) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        result = docker("exec", container, "systemctl", "is-system-running", "--wait", check=False, timeout=100)
        if result.stdout.strip() in ("running", "degraded"):
            return
        time.sleep(1)
    raise AssertionError(f"{container} did not boot systemd")


@pytest.fixture(scope="module")
def nodes(docker_ready: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    image_with_packages(IMAGE, ["openssh-server"], "systemctl enable ssh; rm -f /etc/ssh/ssh_host_*")
    work = tmp_path_factory.mktemp("ssh")
    spec = work / "sshtest.yaml"
    spec.write_text(SPEC)
    validated = load_and_validate(spec)
    build, _ = render(validated, work / "build")
    state = work / "state"
    key_path, client = ensure_client_key(state, "sshtest")
    names = [n.hostname for n in validated.plan.nodes]
    host_keys = ensure_host_keys(state, names)
    prefix = f"clusterctl-sshtest-{uuid.uuid4().hex[:6]}"
    containers = {name: f"{prefix}-{name}" for name in names}
    network = f"{prefix}-net"
    try:
        # The stand-ins sit at their planned addresses, as a stack's instances do: slurm.conf and
        # /etc/hosts name those, and the controller must answer on its own.
        docker("network", "create", "--subnet", str(validated.loaded.spec.network.management_cidr), network)
        for name, container in containers.items():
            # --hostname: cloud-init sets the planned hostname on a real node (Docker owns it here).
            docker(
                "run", "-d", "--name", container, "--hostname", name, "--network", network,
                "--ip", str(validated.plan.node(name).address), *SYSTEMD_FLAGS, IMAGE, "/lib/systemd/systemd",
            )  # fmt: skip
        addresses: dict[str, str] = {}
        for name, container in containers.items():
            _wait_boot(container)
            # What cloud-init does on a real node: the user with the key, our host key, sshd.
            _exec(
                container,
                f"set -e; useradd -m -s /bin/bash {USER}; install -d -m 700 -o {USER} -g {USER} /home/{USER}/.ssh; "
                f"cat > /home/{USER}/.ssh/authorized_keys; chown {USER}: /home/{USER}/.ssh/authorized_keys; "
                f"chmod 600 /home/{USER}/.ssh/authorized_keys; "
                f"echo '{USER} ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/90-{USER}; "
                # The test image's package lists were emptied seconds ago; a cloud image's are
                # old, which is what makes apt's cache_valid_time refresh them.
                "touch -d '2 days ago' /var/lib/apt/lists",
                stdin=client.public + "\n",
            )
            _exec(container, "umask 077; cat > /etc/ssh/ssh_host_ed25519_key", stdin=host_keys[name].private)
            _exec(
                container,
                "cat > /etc/ssh/ssh_host_ed25519_key.pub; printf 'HostKey /etc/ssh/ssh_host_ed25519_key\\n' "
                "> /etc/ssh/sshd_config.d/10-hostkey.conf; systemctl reset-failed ssh; systemctl restart ssh",
                stdin=host_keys[name].public + "\n",
            )
            addresses[name] = docker(
                "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", container
            ).stdout.strip()
        # Stack-shaped outputs, exactly what `pulumi up` of a stacks/<cloud> program exports.
        outputs = {
            "nodes": addresses,
            "sshUser": USER,
            "hostKeys": {name: pair.public for name, pair in host_keys.items()},
        }
        hosts, bastion = hosts_from_outputs(validated.plan, outputs, user="root")
        inventory = write_ssh_inventory(
            validated.plan,
            hosts,
            inventory_dir=build / "ansible" / "inventory",
            known_hosts=state / "known_hosts",
            private_key=key_path,
            bastion=bastion,
        )
        yield {
            "plan": validated.plan,
            "build": build,
            "state": state,
            "inventory": inventory,
            "containers": containers,
            "addresses": addresses,
            "key": key_path,
            "work": work,
        }
    finally:
        for container in containers.values():
            docker("rm", "-f", container, check=False)
        docker("network", "rm", network, check=False)


def _ssh_args(inventory: Path, host: str) -> list[str]:
    entry = ansible_yaml.load(inventory.read_text())["all"]["hosts"][host]
    return [
        "ssh",
        "-o",
        "BatchMode=yes",
        "-i",
        entry["ansible_ssh_private_key_file"],
        *shlex.split(entry["ansible_ssh_common_args"]),
        f"{entry['ansible_user']}@{entry['ansible_host']}",
    ]


def test_ssh_checks_host_keys(nodes: dict) -> None:
    args = _ssh_args(nodes["inventory"], "ctl001")
    done = subprocess.run([*args, "echo ok"], capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_wrong_host_key_is_refused(nodes: dict, tmp_path: Path) -> None:
    args = _ssh_args(nodes["inventory"], "ctl001")
    impostor = tmp_path / "known_hosts"
    impostor.write_text(f"{nodes['addresses']['ctl001']} {generate_ed25519().public}\n")
    args = [a.replace(str((nodes["state"] / "known_hosts").resolve()), str(impostor)) for a in args]
    done = subprocess.run([*args, "true"], capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 255
    assert "host key" in done.stderr.lower() or "identification has changed" in done.stderr.lower()


def test_site_converges_over_ssh(nodes: dict) -> None:
    site = roles_dir() / "site.yml"
    playbook = site
    if not site.exists():
        # site.yml is being written by the roles' author; converge the base role meanwhile.
        playbook = nodes["work"] / "converge.yml"
        playbook.write_text(MINIMAL_PLAYBOOK)
    # The stand-ins are containers sharing this host's kernel: no sysctl, no time service
    # (what the roles do on the local provider's nodes). Everything else runs as on a VM.
    extravars = {"clusterctl_container_nodes": True, "common_container_node": True}
    result = run_playbook(nodes["build"], nodes["state"], EventBus(), playbook=playbook, extravars=extravars)
    log = result.log.read_text()[-4000:] if result.log else ""
    assert result.succeeded, f"{result.failures}\n{log}"
    assert set(result.ok) == set(nodes["containers"])
    for name, container in nodes["containers"].items():
        assert _exec(container, "hostname").strip() == name
        assert f"{nodes['plan'].node(name).address} " in _exec(container, "cat /etc/hosts")


def test_status_and_verify_reach_the_nodes_as_ansible_does(nodes: dict) -> None:
    """The executor (readiness, status, verify) connects with the access up recorded, host keys checked."""
    executor = executor_for(nodes["plan"], nodes["state"])
    rc, out, err = executor.run("ctl001", "hostname", 30)
    assert (rc, out.strip()) == (0, "ctl001"), err


def test_the_executor_refuses_a_node_with_another_key(nodes: dict, tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    recorded = load_access(nodes["state"])
    assert recorded is not None
    targets, access = recorded
    impostor = state / "known_hosts"
    impostor.write_text(f"{nodes['addresses']['ctl001']} {generate_ed25519().public}\n")
    executor = SshExecutor(targets, SshAccess(impostor, access.identity_file))
    rc, _, err = executor.run("ctl001", "true", 30)
    assert rc == 255
    assert "host key" in err.lower()
    # Nothing was learnt: the file still pins the impostor's key only.
    assert len(impostor.read_text().splitlines()) == 1


def test_the_pinned_key_check_after_an_install(nodes: dict) -> None:
    address = nodes["addresses"]["ctl001"]
    pinned = ensure_host_keys(nodes["state"], ["ctl001"])["ctl001"].public
    assert check_host_key(address, 22, pinned).startswith("SHA256:")
    with pytest.raises(NodeNotReadyError, match="not the pinned"):
        check_host_key(address, 22, generate_ed25519().public)


def test_ansible_refuses_another_key_whatever_the_environment_says(
    nodes: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Host key checking turned off in the operator's environment does not reach clusterctl's runs."""
    validated = load_and_validate(nodes["work"] / "sshtest.yaml")
    build, _ = render(validated, tmp_path / "build")
    state = tmp_path / "state"
    key_path, _ = ensure_client_key(nodes["state"], "sshtest")
    impostors = [
        ProvisionedHost(hostname=n, address=a, user=USER, host_key=generate_ed25519().public)
        for n, a in nodes["addresses"].items()
    ]
    write_ssh_inventory(
        validated.plan,
        impostors,
        inventory_dir=build / "ansible" / "inventory",
        known_hosts=state / "known_hosts",
        private_key=key_path,
    )
    monkeypatch.setenv("ANSIBLE_HOST_KEY_CHECKING", "False")
    monkeypatch.setenv("ANSIBLE_SSH_ARGS", "-o StrictHostKeyChecking=no")
    playbook = tmp_path / "ping.yml"
    playbook.write_text(
        "---\n- name: Reach every node\n  hosts: all\n  gather_facts: false\n  tasks:\n"
        "    - name: Ping\n      ansible.builtin.ping:\n"
    )
    result = run_playbook(build, state, EventBus(), playbook=playbook)
    assert not result.succeeded
    assert {f.host for f in result.failures if f.unreachable} == set(nodes["containers"])
