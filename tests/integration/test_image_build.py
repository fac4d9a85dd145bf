"""``clusterctl image build`` on real Docker, then the lock against real nodes made from the image.

Kept small for CI: one hardware profile (a controller and a compute node), and a roles tree of one
role whose install stage installs one small Debian package (``hello``), with the same ``site.yml``
shape and ``clusterctl_stage`` switch as the real roles. What is checked is clusterctl's part: the
build, the reuse of an unchanged image (with its hash printed), the lock listing exactly what
dpkg-query reports in a node made from the image, and a version changed by hand on a node showing
as drift in ``status`` and failing ``verify`` with the package named.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from clusterctl.commands import cli
from clusterctl.image.drift import DPKG_QUERY, parse_packages
from clusterctl.image.lock import read_lock
from clusterctl.pipeline import load_and_validate, render
from clusterctl.run.events import EventBus
from clusterctl.run.providers.local import LocalProvider
from clusterctl.run.state import StateDir
from tests.docker_helpers import docker

pytestmark = [pytest.mark.integration, pytest.mark.docker, pytest.mark.slow]

SPEC = """\
version: 1
name: imgtest
provider: {kind: local}
network: {management_cidr: 172.31.77.0/24, domain: imgtest.internal}
os: debian-12
versions: {nvidia_driver: "570.133.20", cuda: "12.8", nccl: "2.26.2", slurm: "22.05", dcgm: "3.3.9",
           enroot: "3.5.0", pyxis: "0.20.0"}
container_runtime: enroot
hardware:
  small:
    cpus: {sockets: 1, cores_per_socket: 1, threads_per_core: 1}
    memory_gib: 1
nodes:
  - {group: ctl, role: controller, hardware: small, count: 1}
  - {group: cpu, role: compute, hardware: small, count: 1}
fabric: {kind: ethernet, speed_gbps: 100}
slurm:
  partitions:
    - {name: cpu, groups: [cpu], default: true}
  accounting: false
  topology: none
monitoring: {prometheus: false, node_exporter: false, dcgm_exporter: false}
"""
SITE = """\
---
- name: Apply the roles
  hosts: controller:login:compute
  gather_facts: false
  roles:
    - role: tiny
"""
TINY_MAIN = """\
---
- name: Install the package
  ansible.builtin.import_tasks: install.yml
  when: clusterctl_stage | default('all') in ['all', 'install']
  tags: [tiny_install]
- name: Configure
  ansible.builtin.import_tasks: configure.yml
  when: clusterctl_stage | default('all') in ['all', 'configure']
  tags: [tiny_configure]
"""
TINY_INSTALL = """\
---
- name: Install hello
  ansible.builtin.apt:
    name: hello
    update_cache: true
    install_recommends: false
"""
TINY_CONFIGURE = """\
---
- name: Write the cluster's file (never in the image)
  ansible.builtin.copy:
    content: "configured\\n"
    dest: /etc/clusterctl-tiny.conf
    mode: "0644"
"""


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, docker_ready: None) -> Iterator[Path]:
    """A spec, its small roles tree (in place of clusterctl's), and cleanup of what the test made."""
    roles = tmp_path / "roles"
    for rel, text in {
        "site.yml": SITE,
        "tiny/tasks/main.yml": TINY_MAIN,
        "tiny/tasks/install.yml": TINY_INSTALL,
        "tiny/tasks/configure.yml": TINY_CONFIGURE,
    }.items():
        (roles / rel).parent.mkdir(parents=True, exist_ok=True)
        (roles / rel).write_text(text)
    (tmp_path / "spec.yaml").write_text(SPEC)
    monkeypatch.setattr("clusterctl.image.hash.roles_dir", lambda: roles)
    monkeypatch.setattr("clusterctl.image.build.roles_dir", lambda: roles)
    monkeypatch.chdir(tmp_path)
    plan = load_and_validate(tmp_path / "spec.yaml").plan
    try:
        yield tmp_path
    finally:
        LocalProvider().destroy(plan, tmp_path / "build", tmp_path / "state", yes=True, events=EventBus())
        lock = read_lock(tmp_path / "clusterctl.lock") if (tmp_path / "clusterctl.lock").exists() else None
        for image in lock.images.values() if lock else []:
            docker("image", "rm", "-f", image.tag, check=False)


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, [*args, "--state-dir", "state"], catch_exceptions=False)


def test_image_build_reuse_lock_and_drift(workdir: Path) -> None:
    # Build: the install stage runs on a builder, which is committed and removed.
    first = run("image", "build", "spec.yaml")
    assert first.exit_code == 0, first.output
    lock = read_lock(workdir / "clusterctl.lock")
    assert lock is not None
    image = lock.images["small"]
    assert f"small: built {image.tag} in " in first.stdout
    assert image.tag == f"clusterctl/node:debian-12-{image.hash[:12]}"
    assert image.packages["hello"]
    labels = json.loads(docker("image", "inspect", "-f", "{{json .Config.Labels}}", image.ref).stdout)
    assert labels["clusterctl.image.hash"] == image.hash
    assert labels["clusterctl.image.profile"] == "small"
    assert not docker("ps", "-aq", "--filter", f"name=clusterctl-image-{image.hash[:12]}").stdout.strip()

    # The same spec again: nothing is built, the hash is printed, the lock stays as it was.
    text = (workdir / "clusterctl.lock").read_text()
    second = run("image", "build", "spec.yaml")
    assert second.exit_code == 0, second.output
    assert f"small: reused {image.tag} (hash {image.hash}, " in second.stdout
    assert "Lock unchanged" in second.stdout
    assert (workdir / "clusterctl.lock").read_text() == text

    # Nodes made from the image: the lock lists exactly what dpkg-query reports there.
    validated = load_and_validate(workdir / "spec.yaml")
    plan = validated.plan
    # As up does first: cpu001 pulls, and its agent comes from the render.
    build, _ = render(validated, workdir / "build" / plan.cluster.name)
    hosts = LocalProvider({"small": image.ref}).provision(plan, build, workdir / "state", yes=True, events=EventBus())
    assert {h.hostname: h.image_hash for h in hosts} == {"ctl001": image.hash, "cpu001": image.hash}
    ids = set()
    for host in hosts:
        assert host.container is not None
        installed = parse_packages(docker("exec", host.container, "bash", "-c", DPKG_QUERY).stdout)
        assert installed == image.packages
        ids.add(docker("exec", host.container, "cat", "/etc/machine-id").stdout.strip())
        # The configure stage's file is not in the image.
        assert docker("exec", host.container, "test", "-e", "/etc/clusterctl-tiny.conf", check=False).returncode
        # No stamp that would call the image's emptied package lists a fresh cache.
        stamp = "/var/lib/apt/periodic/update-success-stamp"
        assert docker("exec", host.container, "test", "-e", stamp, check=False).returncode
        # ... nor lists that look fresh by their directory's time (Ansible's cache_valid_time falls back to it).
        assert docker("exec", host.container, "stat", "-c", "%Y", "/var/lib/apt/lists").stdout.strip() == "0"
    assert len(ids) == 2  # every node made from the image is a machine of its own
    # Recorded as up's provision phase records its machines: status reads a cluster that is there.
    StateDir(workdir / "state", plan.cluster.name).update(
        nodes={h.hostname: h.container or h.address for h in hosts}, status="provisioned"
    )

    status = run("status", "spec.yaml", "-o", "json")
    assert status.exit_code == 0, status.output
    nodes = {n["hostname"]: n for n in json.loads(status.stdout)["nodes"]}
    assert nodes["cpu001"]["packages"]["drifted"] is False

    # A package version changed by hand on one node (dpkg's own record of it).
    locked = image.packages["hello"]
    docker(
        "exec",
        "clusterctl-imgtest-cpu001",
        "sed",
        "-i",
        rf"/^Package: hello$/,/^$/ s/^Version: .*/Version: {locked}+hand1/",
        "/var/lib/dpkg/status",
    )
    status = run("status", "spec.yaml", "-o", "json")
    assert status.exit_code == 0, status.output
    data = json.loads(status.stdout)
    nodes = {n["hostname"]: n for n in data["nodes"]}
    assert nodes["cpu001"]["packages"]["changed"] == {"hello": {"locked": locked, "installed": f"{locked}+hand1"}}
    assert nodes["ctl001"]["packages"]["drifted"] is False
    assert any(line.startswith("cpu001: packages differ") and "hello" in line for line in data["drift"])

    verify = run("verify", "spec.yaml", "--only", "packages", "--no-drain", "--out", "build/imgtest", "-o", "json")
    assert verify.exit_code == 1, verify.output
    results = {f["node"]: f for f in json.loads(verify.stdout)["findings"] if f["rule"] == "packages"}
    assert results["cpu001"]["level"] == "error"  # failed
    assert f"hello {locked} -> {locked}+hand1" in results["cpu001"]["message"]
    assert results["ctl001"]["level"] == "info"  # passed
