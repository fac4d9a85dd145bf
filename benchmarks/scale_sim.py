"""Simulate N nodes configuring themselves from the real controller side, and push beside it.

What is real: the controller (a container running clusterctl's bundle server, slurmctld with the
rendered slurm.conf of an N-node cluster, and munged), the render and bundles of that cluster, the
publishing and the wait of `up` (ops/pull.py, through `docker exec` as for the local provider),
and on the node side clusterctl's agent loop (clusterctl.agent.loop: long-poll of the node's
pointer from its own 10.77.x.y address, signature and generation checks, layer downloads checked
against their sha256, jitter and backoff, reports with a real `scontrol update` through munge).
What is simulated: each node is a thread of a process in one "nodes" container (its own address,
state directory and tiny file tree); its apply is a sleep as long as one real node's apply, which
is measured first in the same run (a real container pulls the real bundle and applies it with
ansible-playbook -c local); its check hashes its own small tree instead of /etc; layers are
verified but not unpacked (node-local work a real node does on its own CPU).

The controller container is its own cgroup: its CPU (cpuacct.usage) and peak memory
(memory.max_usage_in_bytes) are read before and after each scenario, its bytes and TCP
connections from its network namespace. The control machine's side (render, bundles, publish,
wait) is this process and its children (getrusage).

Scenarios, each repeated: all nodes booting at once; a no-change `up`; one changed file (a new
files layer); 5 % of the nodes dead (named after one timeout, --dead-timeout). Push runs beside
(N = 8 and 32 by default): ansible-playbook over SSH to the same simulated nodes (sshd in the
nodes container), as many trivial tasks as the real apply ran (or --push-tasks), the playbook in
its own cgroup.

Run (as root, with Docker and the local base image; under the shared heavy lock):
    python benchmarks/scale_sim.py                       # N = 8, 32, 128, 512; 3 repeats; push at 8, 32
    python benchmarks/scale_sim.py --sizes 8 --repeats 1 --push 8
    python benchmarks/scale_sim.py --repeats 1 --push-tasks 15      # what fits about 13 minutes here
Prints one table row per (N, scenario) (medians of the repeats) and the line fit of controller
CPU = a + b*N per scenario; --json FILE keeps every measurement.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
NETWORK = "clusterctl-scalesim"
SUBNET = "10.77.0.0/16"
GATEWAY = "10.77.0.1"
CONTROLLER = "clusterctl-scalesim-ctl"
NODES = "clusterctl-scalesim-nodes"
REAL = "clusterctl-scalesim-real"
NODES_ADDRESS = "10.77.255.250"
IMAGE = "local/debian:bookworm"
CGROUP_CPU = Path("/sys/fs/cgroup/cpuacct")
CGROUP_MEM = Path("/sys/fs/cgroup/memory")
TICKS = os.sysconf("SC_CLK_TCK")
# The controller's long-lived processes, by their /proc comm (a script's name is cut to 15 characters).
PROCESS_NAMES = {"slurmctld": "slurmctld", "munged": "munged", "clusterctl-bund": "bundle server"}
PUSH_CGROUP = "clusterctl-scalesim-push"
JITTER_S = 5.0
RUNNERS = 4


# --------------------------------------------------------------------------------------------
# The node side: `python3 scale_sim.py nodes ...` in the nodes container (standard library and
# clusterctl's shipped agent modules only).
# --------------------------------------------------------------------------------------------


def run_nodes(argv: list[str]) -> int:
    """Run simulated nodes until killed: one agent loop per node, in threads."""
    parser = argparse.ArgumentParser(prog="scale_sim.py nodes")
    parser.add_argument("--lib", required=True)
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--server", required=True)
    parser.add_argument("--munge-key", required=True)
    parser.add_argument("--state", required=True)
    parser.add_argument("--apply-seconds", type=float, required=True)
    parser.add_argument("--tasks", type=int, required=True)
    parser.add_argument("--jitter", type=float, required=True)
    parser.add_argument("--engine", required=True, help="the engine layer's digest: the image has it")
    parser.add_argument("nodes", help="name=address,name=address,...")
    args = parser.parse_args(argv)
    sys.path.insert(0, args.lib)
    from clusterctl.agent.apply import ApplyResult
    from clusterctl.agent.fetch import Server
    from clusterctl.agent.loop import Agent, Settings, Steps
    from clusterctl.agent.pointer import signing_key
    from clusterctl.slurm.applied import set_report

    host, port = args.server.split(":")
    key = signing_key(Path(args.munge_key).read_bytes())

    def start(name: str, address: str) -> None:
        server = Server(host, int(port), source=address)
        root = Path(args.state) / name
        tree = root / "etc"
        tree.mkdir(parents=True, exist_ok=True)
        # The node was made from its baked image, which carries the engine (as `clusterctl image build` bakes it).
        (root / "agent" / "layers" / args.engine).mkdir(parents=True, exist_ok=True)

        def apply(pointer: Any, layout: Any) -> ApplyResult:
            time.sleep(args.apply_seconds)
            (tree / "applied").write_text(pointer.bundle)
            return ApplyResult(rc=0, tasks=args.tasks, changed=args.tasks)

        def digest() -> str:
            hasher = hashlib.sha256()
            for path in sorted(tree.iterdir()):
                info = path.stat()
                hasher.update(f"{path.name}\t{info.st_size}\t{info.st_mtime_ns}\n".encode())
            return hasher.hexdigest()

        def report(applied: Any) -> bool:
            done = subprocess.run(set_report(name, applied), capture_output=True, timeout=30, check=False)
            return done.returncode == 0

        def unpack(archive: Path, target: Path) -> Path:
            target.mkdir(parents=True, exist_ok=True)
            return target

        agent = Agent(
            Settings(args.cluster, name, key, root / "agent", jitter_s=args.jitter),
            Steps(
                pointer=lambda known, wait: server.pointer(name, known, wait),
                layer=server.layer,
                apply=apply,
                digest=digest,
                report=report,
                unpack=unpack,
            ),
        )
        threading.Thread(target=agent.run, name=name, daemon=True).start()

    threading.stack_size(512 * 1024)
    for item in args.nodes.split(","):
        name, address = item.split("=")
        start(name, address)
    while True:
        time.sleep(3600)


# --------------------------------------------------------------------------------------------
# The orchestrator: on this machine, in clusterctl's virtual environment.
# --------------------------------------------------------------------------------------------


def sh(*argv: str, data: bytes | None = None, check: bool = True, timeout: float = 900) -> str:
    """Run ``argv``; its stdout."""
    done = subprocess.run(list(argv), input=data, capture_output=True, timeout=timeout, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:6])}: exit {done.returncode}: {done.stderr.decode()[-2000:]}")
    return done.stdout.decode()


def dexec(container: str, command: str, data: bytes | None = None, check: bool = True) -> str:
    """``bash -c command`` in ``container``."""
    return sh(
        "docker",
        "exec",
        *(["-i"] if data is not None else []),
        container,
        "bash",
        "-c",
        command,
        data=data,
        check=check,
    )


def container_id(name: str) -> str:
    return sh("docker", "inspect", "-f", "{{.Id}}", name).strip()


class Meter:
    """The controller container's CPU, peak memory, bytes and TCP connections out."""

    def __init__(self, name: str) -> None:
        ident = container_id(name)
        self.cpu = CGROUP_CPU / "docker" / ident / "cpuacct.usage"
        self.procs = CGROUP_CPU / "docker" / ident / "cgroup.procs"
        self.mem = CGROUP_MEM / "docker" / ident / "memory.max_usage_in_bytes"
        self.name = name

    def _net(self) -> tuple[int, int]:
        text = dexec(self.name, "cat /sys/class/net/eth0/statistics/tx_bytes; grep '^Tcp:' /proc/net/snmp")
        lines = text.splitlines()
        tcp = [line.split() for line in lines[1:]]
        fields = dict(zip(tcp[0][1:], tcp[1][1:], strict=True))
        # Accepted connections: the nodes' requests and reports (and the wait's own scontrol, one a poll).
        return int(lines[0]), int(fields["PassiveOpens"])

    def by_process(self) -> dict[int, tuple[str, float]]:
        """CPU seconds so far of each process in the controller's cgroup (its own and its reaped children's)."""
        out: dict[int, tuple[str, float]] = {}
        for pid in self.procs.read_text().split():
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = Path(f"/proc/{pid}/stat").read_text()
                comm = stat[stat.index("(") + 1 : stat.rindex(")")]
                fields = stat[stat.rindex(")") + 2 :].split()
                out[int(pid)] = (comm, sum(int(f) for f in fields[11:15]) / TICKS)
        return out

    def start(self) -> dict[str, Any]:
        self.mem.write_text("0")
        sent, opened = self._net()
        usage = resource_usage()
        return {
            "cpu": int(self.cpu.read_text()) / 1e9,
            "sent": sent,
            "opened": opened,
            "here": usage,
            "procs": self.by_process(),
        }

    def stop(self, begun: dict[str, Any]) -> dict[str, Any]:
        sent, opened = self._net()
        total = int(self.cpu.read_text()) / 1e9 - begun["cpu"]
        split: dict[str, float] = {}
        for pid, (comm, seconds) in self.by_process().items():
            name = PROCESS_NAMES.get(comm, "other")
            split[name] = split.get(name, 0.0) + seconds - begun["procs"].get(pid, (comm, 0.0))[1]
        # What no long-lived process accounts for: short-lived ones (the wait's scontrol, publishing).
        split["other"] = split.get("other", 0.0) + total - sum(split.values())
        return {
            "controller_cpu_s": round(total, 2),
            "controller_cpu_split": {k: round(v, 2) for k, v in sorted(split.items())},
            "controller_peak_mib": round(int(self.mem.read_text()) / 2**20, 1),
            "bytes_out": sent - int(begun["sent"]),
            "connections": opened - int(begun["opened"]),
            "control_machine_cpu_s": round(resource_usage() - begun["here"], 2),
        }


def resource_usage() -> float:
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class Sim:
    """The simulated cluster of ``count`` compute nodes and its controller."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.state = work / "state" / "sim"
        self.count = 0
        self.plan: Any = None
        self.build = work / "build"
        self.runner: subprocess.Popen[bytes] | None = None

    # --- setup ---
    def setup(self) -> None:
        from clusterctl.run.state import StateDir

        self.teardown()
        sh("docker", "network", "create", "--subnet", SUBNET, "--gateway", GATEWAY, NETWORK)
        mounts = ["-v", f"{REPO / 'cli'}:/sim/cli:ro", "-v", f"{REPO / 'benchmarks'}:/sim/benchmarks:ro"]
        sh(
            "docker",
            "run",
            "-d",
            "--name",
            CONTROLLER,
            "--hostname",
            "simctl001",
            "--network",
            NETWORK,
            "--ip",
            "10.77.0.10",
            "--network-alias",
            "simctl001",
            "--cap-add",
            "NET_ADMIN",
            *mounts,
            IMAGE,
            "sleep",
            "infinity",
        )
        sh(
            "docker",
            "run",
            "-d",
            "--name",
            NODES,
            "--network",
            NETWORK,
            "--ip",
            NODES_ADDRESS,
            "--cap-add",
            "NET_ADMIN",
            "--ulimit",
            "nofile=16384:16384",
            *mounts,
            IMAGE,
            "sleep",
            "infinity",
        )
        packages = {
            CONTROLLER: "slurmctld slurm-client munge iproute2",
            NODES: "slurm-client munge iproute2 openssh-server",
        }
        threads = [
            threading.Thread(
                target=dexec,
                args=(
                    name,
                    "apt-get update -qq && DEBIAN_FRONTEND=noninteractive "
                    f"apt-get install -y -qq --no-install-recommends {p} >/dev/null",
                ),
            )
            for name, p in packages.items()
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.munge = StateDir.at(self.state).munge_key().read_bytes()
        for name in (CONTROLLER, NODES):
            dexec(
                name,
                "cat > /etc/munge/munge.key && chown munge: /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key",
                self.munge,
            )
            dexec(name, "mkdir -p /run/munge && chown munge: /run/munge && runuser -u munge -- /usr/sbin/munged")

    def teardown(self) -> None:
        for name in (REAL, NODES, CONTROLLER):
            sh("docker", "rm", "-f", name, check=False)
        sh("docker", "network", "rm", NETWORK, check=False)

    # --- the cluster of N nodes ---
    def spec(self, count: int, ntp: str = "") -> Path:
        from ruamel.yaml import YAML

        yaml = YAML(typ="safe")
        data = yaml.load((REPO / "examples" / "local.yaml").read_text())
        data["name"] = "sim"
        data["network"] = {"management_cidr": SUBNET, "domain": "sim.internal"}
        data["nodes"] = [
            {"group": "simctl", "role": "controller", "hardware": "small", "count": 1},
            {"group": "simgpu", "role": "compute", "hardware": "emu-h100", "count": count},
        ]
        data["fabric"] = {
            "kind": "infiniband",
            "speed_gbps": 400,
            "layout": "rack-leaf",
            "nodes_per_rack": 32,
            "switch_ports": 64,
        }
        data["slurm"] = {
            "partitions": [{"name": "gpu", "groups": ["simgpu"], "default": True, "max_time": "1-00:00:00"}],
            "accounting": False,
            "topology": "tree",
        }
        data["monitoring"] = {"prometheus": False, "node_exporter": False, "dcgm_exporter": False}
        if ntp:
            data["site"] = {"ntp_servers": [ntp]}
        path = self.work / "sim.yaml"
        with path.open("w") as out:
            yaml.dump(data, out)
        return path

    def render(self, count: int, ntp: str = "") -> Any:
        from clusterctl.pipeline import load_and_validate, render

        validated = load_and_validate(self.spec(count, ntp))
        render(validated, self.build)
        self.plan = validated.plan
        return validated.plan

    def start_controller(self, count: int, *, addresses: bool = True) -> None:
        """slurmctld with this N's slurm.conf (state cleared), the bundle server, the nodes' addresses."""
        plan = self.render(count)
        self.count = count
        with contextlib.suppress(RuntimeError):
            dexec(CONTROLLER, "test -f /run/slurmctld.pid && kill $(cat /run/slurmctld.pid); sleep 1; true")
        files = {p.name: p.read_bytes() for p in (self.build / "slurm").glob("*.conf") if p.name != "configless.conf"}
        for container in (CONTROLLER, NODES):
            for name, data in files.items():
                dexec(container, f"mkdir -p /etc/slurm && cat > /etc/slurm/{name}", data)
        # The site's DNS, for slurmctld: it resolves every node name when it starts.
        names = "".join(f"{n.address} {n.hostname} # sim\n" for n in plan.nodes if n.role == "compute")
        dexec(CONTROLLER, "grep -v ' # sim$' /etc/hosts > /tmp/hosts; cat /tmp/hosts - > /etc/hosts", names.encode())
        dexec(
            CONTROLLER,
            "rm -rf /var/spool/slurmctld && mkdir -p /var/spool/slurmctld /var/log/slurm && "
            "chown slurm: /var/spool/slurmctld /var/log/slurm && slurmctld -c -i",
        )
        for _ in range(60):
            if dexec(CONTROLLER, "scontrol ping", check=False).count("UP"):
                break
            time.sleep(1)
        lib = self.build / "agent" / "lib"
        archive = subprocess.run(["tar", "-C", str(lib), "-c", "."], capture_output=True, check=True).stdout
        dexec(
            CONTROLLER, "mkdir -p /usr/local/lib/clusterctl/agent && tar -x -C /usr/local/lib/clusterctl/agent", archive
        )
        dexec(
            CONTROLLER,
            "cat > /usr/local/sbin/clusterctl-bundles && chmod 0755 /usr/local/sbin/clusterctl-bundles",
            (self.build / "agent" / "clusterctl-bundles").read_bytes(),
        )
        dexec(NODES, "mkdir -p /usr/local/lib/clusterctl/agent && tar -x -C /usr/local/lib/clusterctl/agent", archive)
        if not dexec(
            CONTROLLER, "test -f /run/simserver.pid && kill -0 $(cat /run/simserver.pid) && echo up", check=False
        ):
            sh(
                "docker",
                "exec",
                "-d",
                CONTROLLER,
                "bash",
                "-c",
                "echo $$ > /run/simserver.pid; exec /usr/local/sbin/clusterctl-bundles serve /srv/clusterctl/bundles "
                "10.77.0.10 8780 2>>/var/log/simserver.log",
            )
            time.sleep(1)
        dexec(NODES, "ip -4 addr flush dev eth0 label eth0:s 2>/dev/null; true")
        if addresses:
            wanted = "".join(
                f"addr add {n.address}/16 dev eth0 label eth0:s\n" for n in plan.nodes if n.role == "compute"
            )
            dexec(NODES, "ip -batch -", wanted.encode())

    def compute(self) -> list[Any]:
        return [n for n in self.plan.nodes if n.role == "compute"]

    # --- the up side ---
    def publish(self, generation: int, stages: dict[str, str] | None = None) -> float:
        from clusterctl.ops import pull
        from clusterctl.run.engine import engine_layer
        from clusterctl.run.executor import DockerExecutor

        engine = engine_layer()
        items = pull.assignments(self.plan, self.build, engine.digest, stages or {})

        def layer(digest: str) -> bytes:
            if digest == engine.digest:
                return engine.data
            return (self.build / "bundles" / "layers" / f"{digest}.tar.gz").read_bytes()

        started = time.monotonic()
        pull.publish(
            DockerExecutor({"simctl001": CONTROLLER}), "simctl001", self.plan, self.munge, generation, items, layer
        )
        return time.monotonic() - started

    def wait(self, generation: int, nodes: list[str], timeout: float) -> Any:
        from clusterctl.ops import pull
        from clusterctl.run.events import EventBus
        from clusterctl.run.executor import DockerExecutor
        from clusterctl.slurm.client import Slurm, SlurmError

        slurm = Slurm(DockerExecutor({"simctl001": CONTROLLER}), "simctl001", timeout_s=30)

        def read() -> dict[str, Any]:
            try:
                return {n.name: n for n in slurm.nodes()}
            except SlurmError:
                return {}

        return pull.wait(read, nodes, generation, EventBus(), timeout=timeout, poll=1.0)

    # --- the nodes ---
    def start_nodes(self, apply_s: float, tasks: int, dead: set[str], fresh: bool) -> None:
        self.stop_nodes()
        from clusterctl.run.engine import engine_layer

        if fresh:
            dexec(NODES, "rm -rf /tmp/sim")
        live = [n for n in self.compute() if n.hostname not in dead]
        chunks = [live[i::RUNNERS] for i in range(RUNNERS)]
        for index, chunk in enumerate(c for c in chunks if c):
            nodes = ",".join(f"{n.hostname}={n.address}" for n in chunk)
            command = (
                f"echo $$ > /run/simnodes-{index}.pid; exec python3 /sim/benchmarks/scale_sim.py nodes "
                "--lib /usr/local/lib/clusterctl/agent --cluster sim --server 10.77.0.10:8780 "
                f"--munge-key /etc/munge/munge.key --state /tmp/sim --apply-seconds {apply_s} --tasks {tasks} "
                f"--jitter {JITTER_S} --engine {engine_layer().digest} {nodes} > /var/log/simnodes-{index}.log 2>&1"
            )
            sh("docker", "exec", "-d", NODES, "bash", "-c", command)

    def stop_nodes(self) -> None:
        dexec(
            NODES,
            "for f in /run/simnodes-*.pid; do [ -f $f ] && kill $(cat $f) 2>/dev/null; rm -f $f; done; true",
            check=False,
        )


def generation() -> int:
    return int(time.time() * 1000)


def measure_real_apply(sim: Sim, baked: str | None) -> tuple[float, int, str]:
    """One real node applies its real bundle (as the local provider makes and bootstraps it): the seconds it took."""
    from clusterctl.run.providers.local import SYSTEMD_FLAGS, pull_bootstrap, wait_booted

    sim.start_controller(8, addresses=False)
    node = sim.compute()[0]
    image = baked or IMAGE
    sh(
        "docker",
        "run",
        "-d",
        "--name",
        REAL,
        "--hostname",
        node.hostname,
        "--network",
        NETWORK,
        "--ip",
        node.address,
        *SYSTEMD_FLAGS,
        image,
        "/lib/systemd/systemd",
    )
    wait_booted(REAL)
    stage = "configure" if baked else "all"
    gen = generation()
    sim.publish(gen, {n.hostname: stage for n in sim.compute()})
    bootstrap = pull_bootstrap(sim.plan, sim.build, sim.state, munge_key=lambda: sim.munge)
    bootstrap(node, REAL)
    waited = sim.wait(gen, [node.hostname], timeout=1800)
    journal = dexec(REAL, "journalctl -u clusterctl-agent --no-pager -o cat")
    sh("docker", "rm", "-f", REAL)
    # The simulated node that takes its address next has another MAC: the controller must not wait out its ARP entry.
    dexec(CONTROLLER, "ip neigh flush all")
    line = next((x for x in journal.splitlines() if x.startswith("applied bundle")), "")
    if not line:
        raise RuntimeError(f"the real node did not apply its bundle: {waited.failures}\n{journal[-3000:]}")
    # "applied bundle <digest> (generation G): T task(s), C changed, in S s"
    words = line.replace(",", "").split()
    seconds = float(words[words.index("in") + 1])
    tasks = int(words[words.index("task(s)") - 1])
    return seconds, tasks, stage


def scenarios(
    sim: Sim, count: int, apply_s: float, tasks: int, repeats: int, timeout: float, dead_timeout: float
) -> list[dict[str, Any]]:
    """Every pull scenario at ``count`` nodes, ``repeats`` times each.

    ``timeout`` is the wait's one deadline where nodes apply; ``dead_timeout`` where the live nodes only
    report (the 5 % dead scenario: the dead are named when it passes)."""
    rows: list[dict[str, Any]] = []
    sim.start_controller(count)
    meter = Meter(CONTROLLER)
    names = [n.hostname for n in sim.compute()]
    for repeat in range(repeats):
        # All nodes booting at once: their pointer is there, they have nothing yet.
        gen = generation()
        sim.publish(gen)
        begun = meter.start()
        started = time.monotonic()
        sim.start_nodes(apply_s, tasks, set(), fresh=True)
        waited = sim.wait(gen, names, timeout)
        rows.append(
            {
                "n": count,
                "scenario": "boot",
                "repeat": repeat,
                "seconds": round(time.monotonic() - started, 1),
                "failed": len(waited.failures),
                **meter.stop(begun),
            }
        )

        # A no-change `up`: render, bundles, publish, wait (the control machine's whole pull side).
        begun = meter.start()
        started = time.monotonic()
        sim.render(count)
        gen = generation()
        sim.publish(gen)
        waited = sim.wait(gen, names, timeout)
        rows.append(
            {
                "n": count,
                "scenario": "no-change up",
                "repeat": repeat,
                "seconds": round(time.monotonic() - started, 1),
                "failed": len(waited.failures),
                **meter.stop(begun),
            }
        )

        # One changed file (chrony's servers: the files layer changes, nothing else).
        begun = meter.start()
        started = time.monotonic()
        sim.render(count, ntp=f"ntp{repeat}.sim.internal")
        gen = generation()
        sim.publish(gen)
        waited = sim.wait(gen, names, timeout)
        rows.append(
            {
                "n": count,
                "scenario": "one changed file",
                "repeat": repeat,
                "seconds": round(time.monotonic() - started, 1),
                "failed": len(waited.failures),
                **meter.stop(begun),
            }
        )
        sim.render(count)

        # 5 % dead: their agents stopped; the rest answer; the dead are named after one timeout.
        dead = set(names[::20]) if count >= 20 else {names[0]}
        sim.start_nodes(apply_s, tasks, dead, fresh=False)
        settle = generation()
        sim.publish(settle)
        sim.wait(settle, [n for n in names if n not in dead], timeout)
        begun = meter.start()
        started = time.monotonic()
        gen = generation()
        sim.publish(gen)
        waited = sim.wait(gen, names, dead_timeout)
        named = {f.host for f in waited.failures}
        rows.append(
            {
                "n": count,
                "scenario": "5% dead",
                "repeat": repeat,
                "seconds": round(time.monotonic() - started, 1),
                "failed": len(waited.failures),
                "dead_named": named == dead and waited.seconds <= dead_timeout + 2,
                **meter.stop(begun),
            }
        )
        sim.start_nodes(apply_s, tasks, set(), fresh=False)
    sim.stop_nodes()
    return rows


def push(sim: Sim, count: int, tasks: int, repeats: int) -> list[dict[str, Any]]:
    """Today's push: ansible-playbook over SSH, `tasks` tasks on each of ``count`` simulated nodes."""
    from clusterctl.render.inventory import forks
    from clusterctl.run.sshkeys import ensure_client_key

    sim.start_controller(count)
    sim.stop_nodes()
    key_path, pair = ensure_client_key(sim.state, "sim")
    dexec(
        NODES,
        "mkdir -p /root/.ssh && cat > /root/.ssh/authorized_keys && chmod 600 /root/.ssh/authorized_keys",
        (pair.public + "\n").encode(),
    )
    dexec(
        NODES,
        "test -f /etc/ssh/ssh_host_ed25519_key || ssh-keygen -A; mkdir -p /run/sshd; "
        "pgrep -x sshd >/dev/null || /usr/sbin/sshd -o MaxStartups=2000:30:4000 -o MaxSessions=1000 -o UseDNS=no",
    )
    host_key = dexec(NODES, "cat /etc/ssh/ssh_host_ed25519_key.pub").split()[:2]
    work = sim.work / f"push-{count}"
    work.mkdir(exist_ok=True)
    nodes = sim.compute()
    (work / "known_hosts").write_text("".join(f"{n.address} {' '.join(host_key)}\n" for n in nodes))
    hosts = {n.hostname: {"ansible_host": n.address, "ansible_user": "root"} for n in nodes}
    (work / "inventory.json").write_text(json.dumps({"all": {"hosts": hosts}}))
    plays = [
        {
            "name": "Push",
            "hosts": "all",
            "gather_facts": False,
            "tasks": [
                {"name": f"Task {i}", "ansible.builtin.command": "/bin/true", "changed_when": False}
                for i in range(tasks)
            ],
        }
    ]
    (work / "play.yml").write_text(json.dumps(plays))
    env = dict(
        os.environ,
        ANSIBLE_HOST_KEY_CHECKING="True",
        ANSIBLE_SSH_ARGS=f"-o UserKnownHostsFile={work / 'known_hosts'} -o StrictHostKeyChecking=yes "
        "-o ControlMaster=auto -o ControlPersist=300s",
        ANSIBLE_PRIVATE_KEY_FILE=str(key_path),
        ANSIBLE_PYTHON_INTERPRETER="/usr/bin/python3",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_SSH_CONTROL_PATH_DIR=str(work / "cp"),
    )
    cpu = CGROUP_CPU / PUSH_CGROUP
    mem = CGROUP_MEM / PUSH_CGROUP
    for group in (cpu, mem):
        group.mkdir(exist_ok=True)
    rows = []
    playbook = str(Path(sys.executable).parent / "ansible-playbook")
    for repeat in range(repeats):
        mem.joinpath("memory.max_usage_in_bytes").write_text("0")
        before = int(cpu.joinpath("cpuacct.usage").read_text())
        started = time.monotonic()
        command = (
            f"echo $$ > {cpu}/cgroup.procs; echo $$ > {mem}/cgroup.procs; "
            f"exec {playbook} -i {work / 'inventory.json'} -f {forks(sim.plan)} {work / 'play.yml'}"
        )
        done = subprocess.run(["sh", "-c", command], env=env, capture_output=True, check=False)
        seconds = time.monotonic() - started
        # ControlPersist masters live on in the cgroup: end them so the next run starts cold, as `up` does.
        for pid in (cpu / "cgroup.procs").read_text().split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), 15)
        rows.append(
            {
                "n": count,
                "scenario": "push",
                "tasks": tasks,
                "repeat": repeat,
                "seconds": round(seconds, 1),
                "failed": int(done.returncode != 0),
                "controller_cpu_s": round((int(cpu.joinpath("cpuacct.usage").read_text()) - before) / 1e9, 2),
                "controller_peak_mib": round(int(mem.joinpath("memory.max_usage_in_bytes").read_text()) / 2**20, 1),
                "bytes_out": None,
                "connections": None,
                "control_machine_cpu_s": None,
            }
        )
        if done.returncode != 0:
            print(done.stdout.decode()[-2000:], done.stderr.decode()[-2000:], file=sys.stderr)
    return rows


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least squares a + b*N."""
    ns = [p[0] for p in points]
    ys = [p[1] for p in points]
    mean_n, mean_y = statistics.fmean(ns), statistics.fmean(ys)
    b = sum((n - mean_n) * (y - mean_y) for n, y in points) / (sum((n - mean_n) ** 2 for n in ns) or 1)
    return mean_y - b * mean_n, b


def table(rows: list[dict[str, Any]], apply_s: float, tasks: int, stage: str) -> str:
    keys = ("seconds", "controller_cpu_s", "controller_peak_mib", "bytes_out", "connections", "control_machine_cpu_s")
    groups: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["n"], row["scenario"]), []).append(row)
    lines = [
        f"apply time of one real node (stage {stage}, {tasks} tasks): {apply_s:.1f} s; jitter up to {JITTER_S:.0f} s",
        "",
        "| N | scenario | seconds to all applied | controller CPU s | controller peak MiB | bytes out "
        "| connections accepted | control machine CPU s | failed/named |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    order = {"boot": 0, "no-change up": 1, "one changed file": 2, "5% dead": 3, "push": 4}
    for (n, scenario), items in sorted(groups.items(), key=lambda kv: (order[kv[0][1]], kv[0][0])):
        med = {k: statistics.median(r[k] for r in items) if items[0][k] is not None else None for k in keys}
        named = f"{items[0]['failed']}" + (
            f" (dead named: {all(r.get('dead_named') for r in items)})" if scenario == "5% dead" else ""
        )
        cells = [
            f"{med[k]:,.1f}" if isinstance(med[k], float) else (f"{med[k]:,}" if med[k] is not None else "-")
            for k in keys
        ]
        label = f"push, {items[0]['tasks']} tasks" if scenario == "push" else scenario
        lines.append(f"| {n} | {label} | " + " | ".join(cells) + f" | {named} |")
    lines.append("")
    for scenario in order:
        points = [(r["n"], r["controller_cpu_s"]) for r in rows if r["scenario"] == scenario]
        if len({p[0] for p in points}) >= 2:
            a, b = fit(points)
            lines.append(f"{scenario}: controller CPU = {a:.3f} + {b * 1000:.3f}e-3 * N s")
            split = [r for r in rows if r["scenario"] == scenario and r.get("controller_cpu_split")]
            parts = sorted({k for r in split for k in r["controller_cpu_split"]})
            per_part = []
            for part in parts:
                pa, pb = fit([(r["n"], r["controller_cpu_split"].get(part, 0.0)) for r in split])
                per_part.append(f"{part} {pa:.3f} + {pb * 1000:.3f}e-3 * N")
            if per_part:
                lines.append(f"  of which: {'; '.join(per_part)}")
    return "\n".join(lines)


def baked_image() -> str | None:
    """The newest baked image of the local example's emu-h100 profile (clusterctl image build), if any."""
    out = sh(
        "docker",
        "images",
        "--filter",
        "label=clusterctl.image.profile=emu-h100",
        "--format",
        "{{.Repository}}:{{.Tag}}",
        check=False,
    )
    return out.split()[0] if out.split() else None


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "nodes":
        return run_nodes(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 32, 128, 512])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--push", type=int, nargs="*", default=[8, 32])
    parser.add_argument("--push-repeats", type=int, help="repeats of push (default: --repeats)")
    parser.add_argument("--push-tasks", type=int, help="tasks per pushed node (default: as many as the real apply ran)")
    parser.add_argument("--timeout", type=float, default=60.0, help="the wait's one timeout where nodes apply (s)")
    parser.add_argument("--dead-timeout", type=float, default=30.0, help="the wait's one timeout with dead nodes (s)")
    parser.add_argument("--image", help="the baked image the real node is made from (default: the newest emu-h100 one)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--keep", action="store_true", help="leave the containers (debugging)")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO / "cli"))
    with tempfile.TemporaryDirectory(prefix="scale-sim-") as tmp:
        sim = Sim(Path(tmp))
        try:
            sim.setup()
            apply_s, tasks, stage = measure_real_apply(sim, args.image or baked_image())
            print(f"real apply: {apply_s:.1f} s, {tasks} tasks (stage {stage})", flush=True)
            rows: list[dict[str, Any]] = []
            for count in args.sizes:
                begun = time.monotonic()
                rows += scenarios(
                    sim, count, apply_s, tasks, args.repeats, max(args.timeout, 3 * apply_s), args.dead_timeout
                )
                print(table(rows, apply_s, tasks, stage), flush=True)
                print(f"N = {count}: {time.monotonic() - begun:.0f} s for the pull scenarios", flush=True)
            for count in args.push:
                begun = time.monotonic()
                rows += push(sim, count, args.push_tasks or tasks, args.push_repeats or args.repeats)
                print(f"N = {count}: {time.monotonic() - begun:.0f} s for push", flush=True)
            text = table(rows, apply_s, tasks, stage)
            print(text)
            if args.json:
                args.json.write_text(
                    json.dumps({"apply_s": apply_s, "tasks": tasks, "stage": stage, "rows": rows}, indent=1)
                )
        finally:
            if not args.keep:
                sim.teardown()
                for group in (CGROUP_CPU / PUSH_CGROUP, CGROUP_MEM / PUSH_CGROUP):
                    with contextlib.suppress(OSError):
                        group.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
