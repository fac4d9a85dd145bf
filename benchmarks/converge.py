"""Time the cluster scenario's converge against its floor.

With the four containers of the Molecule ``cluster`` scenario already running (image build and
container creation are not timed), this measures:

* first converge: ``ansible-playbook roles/site.yml`` on fresh containers, with the rendered
  inventory and the rendered ansible-runner environment (build/ansible/env/envvars), as
  ``clusterctl up`` runs it;
* no-change re-run: the same command again (it must report changed=0);
* the floor: four fresh containers from the same image, in parallel, each doing ``apt-get update``
  plus ``apt-get install --no-install-recommends`` of exactly the packages the roles installed on
  the matching node (its ``apt-mark showmanual`` minus the image's) plus copying the rendered files;
* for scale, Ansible's own share of the floor: the same packages installed by one
  ``ansible.builtin.apt`` task and nothing else, in four more fresh containers, with the same
  settings as the converge (it shows how much of the 1.5 x a single Ansible task already uses);
* with ``--stages``, the two stages apart on fresh scenario containers (roles/README.md, "Stages"):
  the install stage alone (``-e clusterctl_stage=install``, what ``clusterctl image build`` runs),
  then the configure stage alone on those nodes (what a node booted from a baked image runs), then
  a no-change configure-only re-run.

Targets: first converge <= 1.5 x floor; re-run <= 25 % of the first converge. Run from the
repository root, with nothing else using the scenario's container names:

    python benchmarks/converge.py [--keep] [--enforce] [--stages]

Figures go to stdout and test-artifacts/benchmark/converge.json; the run's secrets, logs and a
copy of the build directory are left in test-artifacts/benchmark/ (the layout the secrets test
reads: CLUSTERCTL_CLUSTER_ARTIFACTS=test-artifacts/benchmark pytest tests/integration).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from clusterctl.render import ansible_yaml

REPO = Path(__file__).resolve().parents[1]
SCENARIO_DIR = REPO / "roles" / "slurm"
BUILD = REPO / "test-artifacts" / "molecule-cluster" / "build"
OUT = REPO / "test-artifacts" / "benchmark"
IMAGE = "local/debian:bookworm"
# clusterctl's own collection (clusterctl.node) first, then the extracted ones, as `up` has them.
COLLECTIONS = f"{REPO / 'collections'}:{REPO / '.ansible-collections'}"
# The same flags as the scenario's platforms (.config/molecule/config.yml).
DOCKER_FLAGS = [
    "--cap-add", "SYS_ADMIN", "--cap-add", "SYS_NICE",
    "--tmpfs", "/run", "--tmpfs", "/run/lock", "--tmpfs", "/tmp",
    "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw", "--cgroupns=host",
    "-e", "container=docker", "--stop-signal", "SIGRTMIN+3",
]  # fmt: skip
FIRST_LIMIT = 1.5
RERUN_LIMIT = 0.25


def run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run ``cmd``; raise with its output when it fails."""
    result = subprocess.run(cmd, capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
    if result.returncode != 0:
        raise SystemExit(
            f"failed ({result.returncode}): {' '.join(cmd)}\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
        )
    return result


def molecule(action: str) -> None:
    """``molecule ACTION -s cluster`` in roles/slurm."""
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": COLLECTIONS, "NO_COLOR": "1"}
    run(["molecule", action, "--scenario-name", "cluster"], cwd=SCENARIO_DIR, env=env)


def rendered_hosts() -> dict[str, dict[str, object]]:
    """Rendered inventory host -> its variables (ansible_host, ansible_connection, ...)."""
    # Its strings are !unsafe (Ansible must not template spec data); ansible_yaml.load reads them.
    return ansible_yaml.load((BUILD / "ansible" / "inventory" / "hosts.yml").read_text())["all"]["hosts"]


def inventory_hosts() -> dict[str, str]:
    """Rendered inventory host -> container name."""
    return {host: str(hv["ansible_host"]) for host, hv in rendered_hosts().items()}


def runner_env() -> dict[str, str]:
    """The environment `clusterctl up` gives ansible-runner (envvars, ansible.cfg), plus paths and secrets' home."""
    envvars = yaml.safe_load((BUILD / "ansible" / "env" / "envvars").read_text()) or {}
    env = {**os.environ, **{k: str(v) for k, v in envvars.items()}}
    env.update(
        ANSIBLE_CONFIG=str(BUILD / "ansible" / "ansible.cfg"),
        ANSIBLE_ROLES_PATH=str(REPO / "roles"),
        ANSIBLE_COLLECTIONS_PATH=COLLECTIONS,
        ANSIBLE_CACHE_PLUGIN_CONNECTION=str(OUT / "facts"),
        ANSIBLE_LOG_PATH=str(OUT / "ansible.log"),
        ANSIBLE_PYTHON_INTERPRETER="/usr/bin/python3",
        ANSIBLE_NOCOLOR="1",
    )
    return env


def container_cpu(names: list[str]) -> float | None:
    """CPU seconds the containers ``names`` have used so far (cgroup v1 or v2), or None if unreadable."""
    total = 0.0
    for name in names:
        cid = run(["docker", "inspect", "-f", "{{.Id}}", name]).stdout.strip()
        v1 = Path(f"/sys/fs/cgroup/cpuacct/docker/{cid}/cpuacct.usage")
        v2 = Path(f"/sys/fs/cgroup/system.slice/docker-{cid}.scope/cpu.stat")
        if v1.exists():
            total += int(v1.read_text()) / 1e9
        elif v2.exists():
            total += int(re.search(r"usage_usec (\d+)", v2.read_text()).group(1)) / 1e6  # type: ignore[union-attr]
        else:
            return None
    return total


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's finished children."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def converge(label: str, stage: str | None = None) -> tuple[float, int]:
    """Seconds and changed-task count of one ``ansible-playbook roles/site.yml`` run (``stage``: clusterctl_stage)."""
    extra: dict[str, object] = {
        "munge_key_file": str(OUT / "secrets" / "munge.key"),
        "slurm_dbd_password_file": str(OUT / "secrets" / "slurmdbd.password"),
        # Same small MariaDB buffer pool as the Molecule scenario (shared test host).
        "slurm_mariadb_config": {
            "innodb_buffer_pool_size": "128M",
            "innodb_log_file_size": "64M",
            "innodb_lock_wait_timeout": 900,
        },
    }
    if stage:
        extra["clusterctl_stage"] = stage
    cmd = [
        "ansible-playbook",
        "-i",
        str(BUILD / "ansible" / "inventory"),
        "-e",
        json.dumps(extra),
        str(REPO / "roles" / "site.yml"),
    ]
    started = time.monotonic()
    result = subprocess.run(cmd, capture_output=True, text=True, env=runner_env(), check=False)
    seconds = time.monotonic() - started
    (OUT / f"{label}.log").write_text(result.stdout + result.stderr)
    if result.returncode != 0:
        raise SystemExit(f"{label} failed; see {OUT / f'{label}.log'}")
    changed = sum(int(n) for n in re.findall(r"changed=(\d+)", result.stdout.split("PLAY RECAP")[-1]))
    return seconds, changed


def manual_packages(container: str) -> set[str]:
    return set(run(["docker", "exec", container, "apt-mark", "showmanual"]).stdout.split())


def start_container(name: str) -> None:
    subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)
    run(["docker", "run", "-d", "--name", name, "--hostname", name[-30:], *DOCKER_FLAGS, IMAGE, "/lib/systemd/systemd"])


def wait_booted(name: str) -> None:
    subprocess.run(
        ["docker", "exec", name, "systemctl", "is-system-running", "--wait"], capture_output=True, check=False
    )


def floor_one(container: str, packages: list[str]) -> float:
    """apt-get update + install of ``packages`` + copying the rendered files, in ``container``."""
    started = time.monotonic()
    script = (
        "set -e; apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "
        + " ".join(packages)
        + " >/dev/null"
    )
    run(["docker", "exec", container, "sh", "-c", script])
    run(["docker", "cp", f"{BUILD}/.", f"{container}:/tmp/render"])
    return time.monotonic() - started


APT_TASK_ONLY = """\
---
- name: Install each node's packages with one apt task and nothing else
  hosts: all
  gather_facts: false
  tasks:
    - name: Install the packages the roles installed on the matching node
      ansible.builtin.apt:
        name: "{{ benchmark_packages }}"
        update_cache: true
        install_recommends: false
"""


def apt_task_only(names: dict[str, str], packages: dict[str, list[str]]) -> float:
    """Seconds one ``ansible.builtin.apt`` task takes to install ``packages`` in the containers ``names``."""
    work = OUT / "apt-task-only"
    work.mkdir()
    rendered = rendered_hosts()
    hosts = {
        host: {**rendered[host], "ansible_host": name, "benchmark_packages": packages[host]}
        for host, name in names.items()
    }
    (work / "inventory.yml").write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    (work / "playbook.yml").write_text(APT_TASK_ONLY)
    started = time.monotonic()
    result = subprocess.run(
        ["ansible-playbook", "-i", str(work / "inventory.yml"), str(work / "playbook.yml")],
        capture_output=True,
        text=True,
        env={**runner_env(), "ANSIBLE_LOG_PATH": str(work / "ansible.log")},
        check=False,
    )
    seconds = time.monotonic() - started
    if result.returncode != 0:
        raise SystemExit(f"the apt-task-only run failed:\n{result.stdout[-3000:]}{result.stderr[-3000:]}")
    return seconds


def fresh_containers(names: list[str]) -> None:
    """Start ``names`` anew from the image and wait until systemd has booted them (not timed)."""
    for name in names:
        start_container(name)
    for name in names:
        wait_booted(name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="leave the cluster containers running")
    parser.add_argument("--enforce", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--stages", action="store_true", help="also time the install and configure stages apart")
    args = parser.parse_args(argv)

    shutil.rmtree(OUT, ignore_errors=True)
    (OUT / "secrets").mkdir(parents=True)
    (OUT / "secrets").chmod(0o700)
    print("creating the cluster scenario's containers (not timed) ...", flush=True)
    molecule("destroy")
    molecule("create")  # dependency (render), create, prepare (systemd booted)
    hosts = inventory_hosts()
    shutil.copytree(BUILD, OUT / "build")

    floor_names = {host: f"clusterctl-benchfloor-{host}" for host in hosts}
    base = "clusterctl-benchfloor-image"
    try:
        print("first converge ...", flush=True)
        nodes = list(hosts.values())
        cpu_before = (children_cpu(), container_cpu(nodes))
        first, first_changed = converge("first-converge")
        # Controller CPU: ansible-playbook, its workers and the docker clients they spawn; node CPU:
        # everything that ran inside the containers (apt, dpkg, modules, services starting).
        first_cpu = (children_cpu() - cpu_before[0], _delta(container_cpu(nodes), cpu_before[1]))
        print(f"  {first:.1f} s, changed={first_changed}", flush=True)
        print("no-change re-run ...", flush=True)
        rerun, rerun_changed = converge("rerun")
        print(f"  {rerun:.1f} s, changed={rerun_changed}", flush=True)

        # Exactly what the roles installed: each node's manual packages minus the image's own.
        start_container(base)
        wait_booted(base)
        image_manual = manual_packages(base)
        packages = {host: sorted(manual_packages(container) - image_manual) for host, container in hosts.items()}

        print("floor: fresh containers (boot not timed) ...", flush=True)
        fresh_containers(list(floor_names.values()))
        floor_before = container_cpu(list(floor_names.values()))
        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(hosts)) as pool:
            per_host = dict(zip(hosts, pool.map(lambda h: floor_one(floor_names[h], packages[h]), hosts), strict=True))
        floor = time.monotonic() - started
        floor_cpu = _delta(container_cpu(list(floor_names.values())), floor_before)
        print(f"  {floor:.1f} s ({', '.join(f'{h} {s:.0f} s' for h, s in per_host.items())})", flush=True)

        print("one Ansible apt task, nothing else: fresh containers (boot not timed) ...", flush=True)
        fresh_containers(list(floor_names.values()))
        apt_only = apt_task_only(floor_names, packages)
        print(f"  {apt_only:.1f} s", flush=True)

        stages: dict[str, tuple[float, int]] = {}
        if args.stages:
            print("stages apart: fresh scenario containers (not timed) ...", flush=True)
            molecule("cleanup")
            molecule("destroy")
            molecule("create")
            shutil.rmtree(OUT / "facts", ignore_errors=True)
            for label, stage in (
                ("install-stage", "install"),
                ("configure-stage", "configure"),
                ("configure-rerun", "configure"),
            ):
                stages[label] = converge(label, stage)
                print(f"  {label}: {stages[label][0]:.1f} s, changed={stages[label][1]}", flush=True)
    finally:
        for name in [*floor_names.values(), base]:
            subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)
        if not args.keep:
            molecule("cleanup")
            molecule("destroy")

    report = {
        "nodes": len(hosts),
        "first_converge_s": round(first, 1),
        "rerun_s": round(rerun, 1),
        "rerun_changed": rerun_changed,
        "floor_s": round(floor, 1),
        "first_over_floor": round(first / floor, 2),
        "rerun_over_first": round(rerun / first, 3),
        "first_converge_cpu_s": {"controller": round(first_cpu[0], 1), "nodes": _round(first_cpu[1])},
        "floor_nodes_cpu_s": _round(floor_cpu),
        "apt_task_only_s": round(apt_only, 1),
        "apt_task_only_over_floor": round(apt_only / floor, 2),
        "stages_s": {label: {"seconds": round(sec, 1), "changed": ch} for label, (sec, ch) in stages.items()},
        "packages": packages,
        "load_average": os.getloadavg(),
        "cpus": os.cpu_count(),
    }
    (OUT / "converge.json").write_text(json.dumps(report, indent=2) + "\n")
    ok_first = first <= FIRST_LIMIT * floor
    ok_rerun = rerun <= RERUN_LIMIT * first and rerun_changed == 0
    print()
    rows = [
        ("first converge", first, f"{first / floor:5.2f} x floor ", f"<= {FIRST_LIMIT} x floor", ok_first),
        ("no-change re-run", rerun, f"{rerun / first:6.1%} of first", f"<= {RERUN_LIMIT:.0%} of first", ok_rerun),
    ]
    for label, seconds, ratio, target, ok in rows:
        print(f"{label:<18}{seconds:8.1f} s  {ratio}  target {target}  {'ok' if ok else 'MISSED'}")
    print(f"{'floor':<18}{floor:8.1f} s   ({len(hosts)} containers in parallel)")
    print(f"{'apt task only':<18}{apt_only:8.1f} s  {apt_only / floor:5.2f} x floor  (one Ansible task installs them)")
    for label, (seconds, changed) in stages.items():
        print(f"{label:<18}{seconds:8.1f} s  {seconds / first:5.2f} x first converge  (changed={changed})")
    if first_cpu[1] is not None and floor_cpu is not None:
        cpus = os.cpu_count() or 1
        bound = (first_cpu[0] + first_cpu[1]) / cpus
        print(
            f"CPU: first converge used {first_cpu[0]:.0f} s on the controller + {first_cpu[1]:.0f} s in the nodes,"
            f" the floor {floor_cpu:.0f} s in the nodes; on {cpus} CPUs the first converge cannot finish in"
            f" under {bound:.0f} s ({bound / floor:.2f} x floor)"
        )
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; details in {OUT / 'converge.json'}")
    return 1 if args.enforce and not (ok_first and ok_rerun) else 0


def _delta(after: float | None, before: float | None) -> float | None:
    return None if after is None or before is None else after - before


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


if __name__ == "__main__":
    sys.exit(main())
