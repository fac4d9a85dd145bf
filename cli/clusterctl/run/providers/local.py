"""The local provider: nodes are systemd containers on this machine's Docker; GPUs are emulated.

Why containers with systemd: the same roles that configure real machines run unchanged
(services, units, PAM). Containers run unprivileged with the flags that boot systemd on
these hosts; `down` removes exactly what carries this cluster's label.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from clusterctl.paths import data_root
from clusterctl.plan import Plan, PlanNode
from clusterctl.render.inventory import container_name, host_container
from clusterctl.render.pulling import pulls
from clusterctl.run.ansible import forget_facts
from clusterctl.run.docker import LABEL_HASH, DockerError, docker, engine_available, inspect, labelled
from clusterctl.run.events import EventBus
from clusterctl.run.providers.base import ProviderError, ProvisionedHost
from clusterctl.run.sshkeys import ensure_host_keys
from clusterctl.run.state import StateDir

# (node, container) -> None: puts the agent, its settings and the node's secrets on a pulling node.
Bootstrap = Callable[[PlanNode, str], None]

LABEL = "clusterctl.cluster"
DEFAULT_IMAGE = "local/debian:bookworm"
# Flags that boot systemd in an unprivileged container on cgroup v1 and v2 hosts.
SYSTEMD_FLAGS = [
    "--cap-add",
    "SYS_ADMIN",
    "--tmpfs",
    "/run",
    "--tmpfs",
    "/run/lock",
    "--tmpfs",
    "/tmp",
    "-v",
    "/sys/fs/cgroup:/sys/fs/cgroup:rw",
    "--cgroupns=host",
    "-e",
    "container=docker",
    "--stop-signal",
    "SIGRTMIN+3",
]
BOOT_TIMEOUT_S = 120
PHASE = "provision"


def network_name(plan: Plan) -> str:
    """The cluster's Docker network."""
    return f"clusterctl-{plan.cluster.name}"


def node_image(plan: Plan) -> str:
    """The image local nodes start from: the local provider's ``image``, else the default one."""
    return plan.cluster.local_image or DEFAULT_IMAGE


def ensure_engine_and_image(image: str, events: EventBus) -> None:
    """Start nothing silently: check the engine; build the default image when missing."""
    if not engine_available():
        raise ProviderError(
            "no Docker engine answers. Start one (as root: scripts/docker-bootstrap.sh installs docker.io and "
            "starts dockerd), then run `clusterctl up` again."
        )
    if inspect("image", image) is not None:
        return
    if image != DEFAULT_IMAGE:
        raise ProviderError(
            f"image {image} is not present; pull or build it, or drop provider.image to use "
            f"the locally built {DEFAULT_IMAGE}."
        )
    script = data_root() / "scripts" / "docker-bootstrap.sh"
    events.info(f"building {image} with debootstrap (about 90 s, once)", phase=PHASE)
    result = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise ProviderError(f"building {image} failed:\n{result.stderr.strip()[-2000:]}")


def _ensure_network(plan: Plan) -> str:
    name = network_name(plan)
    existing = inspect("network", name)
    subnet = plan.cluster.management_cidr
    if existing is not None:
        configs = existing.get("IPAM", {}).get("Config") or []
        if not any(c.get("Subnet") == subnet for c in configs):
            raise ProviderError(
                f"Docker network {name} exists with another subnet; remove it or run `clusterctl "
                "down` for the cluster that made it."
            )
        return name
    result = docker(
        "network",
        "create",
        "--driver",
        "bridge",
        "--subnet",
        subnet,
        "--gateway",
        plan.cluster.gateway,
        "--label",
        f"{LABEL}={plan.cluster.name}",
        name,
        check=False,
    )
    if result.returncode != 0:
        raise ProviderError(
            f"cannot create Docker network {name} on {subnet}: {result.stderr.strip()}. "
            "If another network uses an overlapping subnet, change network.management_cidr."
        )
    return name


def burst_controller_mounts(plan: Plan, node: PlanNode) -> list[str]:
    """Docker socket and CLI for the controller of a cluster with local burst groups.

    Why: slurmctld's ResumeProgram runs `clusterctl burst resume` on the controller, which creates
    burst nodes as sibling containers. Giving a container the Docker socket gives it root on the
    host: a development setup, documented as such.
    """
    if node.role != "controller" or not any(b.provider == "local" for b in plan.slurm.burst):
        return []
    client = shutil.which("docker") or "/usr/bin/docker"
    return ["-v", "/var/run/docker.sock:/var/run/docker.sock", "-v", f"{client}:/usr/local/bin/docker:ro"]


def _start_node(plan: Plan, node: PlanNode, network: str, image: str) -> str:
    """Create or start the node's container; return what was done."""
    name = container_name(plan, node)
    info = inspect("container", name)
    if info is not None:
        if info["Config"].get("Labels", {}).get(LABEL) != plan.cluster.name:
            raise ProviderError(f"container {name} exists but does not belong to cluster {plan.cluster.name}")
        if info["State"]["Running"]:
            return "running"
        docker("start", name)
        return "started"
    docker(
        "run",
        "-d",
        "--name",
        name,
        "--hostname",
        node.hostname,
        "--network",
        network,
        "--ip",
        node.address,
        "--network-alias",
        node.hostname,
        "--label",
        f"{LABEL}={plan.cluster.name}",
        "--label",
        f"clusterctl.node={node.hostname}",
        "--label",
        f"clusterctl.role={node.role}",
        *burst_controller_mounts(plan, node),
        *SYSTEMD_FLAGS,
        image,
        "/lib/systemd/systemd",
    )
    return "created"


def wait_booted(name: str) -> None:
    """Wait until systemd in container ``name`` finished booting (running or degraded)."""
    deadline = time.monotonic() + BOOT_TIMEOUT_S
    while True:
        # is-system-running exits 0 (running) or 1 (degraded) once boot has finished.
        result = docker("exec", name, "systemctl", "is-system-running", "--wait", check=False, timeout=BOOT_TIMEOUT_S)
        if result.stdout.strip() in ("running", "degraded"):
            return
        if time.monotonic() > deadline:
            raise ProviderError(f"{name}: systemd did not finish booting ({result.stdout.strip() or result.stderr})")
        time.sleep(1)


# A container reports the host's boot time, older than slurmctld's power-up request, and slurmctld keeps
# a POWERING_UP node waiting for a boot that never comes. `slurmd -b` reports slurmd's start as the boot.
# Debian's slurmd.service reads SLURMD_OPTIONS from here; the package keeps an existing file.
SLURMD_FRESH_BOOT = '# clusterctl (local burst node): report slurmd start as boot time\nSLURMD_OPTIONS="-b"\n'


def _report_fresh_boot(name: str) -> None:
    docker("exec", name, "sh", "-c", f"printf '%s' '{SLURMD_FRESH_BOOT}' > /etc/default/slurmd")


def _has_agent(plan: Plan, node: PlanNode) -> bool:
    result = docker(
        "exec", container_name(plan, node), "systemctl", "is-enabled", "--quiet", "clusterctl-agent", check=False
    )
    return result.returncode == 0


def pull_bootstrap(
    plan: Plan, build_dir: Path, state_dir: Path, munge_key: Callable[[], bytes] | None = None
) -> Bootstrap:
    """The bootstrap of pulling nodes through ``docker exec`` (run.pull_bootstrap says what it puts there).

    The munge key is the state directory's (``munge_key`` reads another: the controller's own, for
    a burst node); each node's host key is generated once into ``state_dir`` and kept.
    """
    from clusterctl.run import pull_bootstrap as setup
    from clusterctl.run.executor import DockerExecutor

    def bootstrap(node: PlanNode, container: str) -> None:
        key = munge_key() if munge_key is not None else StateDir.at(state_dir).munge_key().read_bytes()
        host_key = ensure_host_keys(state_dir, [node.hostname])[node.hostname]
        data = setup.payload(plan, node, build_dir, key, host_key)
        rc, out, err = DockerExecutor({node.hostname: container}).send(node.hostname, setup.COMMAND, data, 120)
        if rc != 0:
            raise ProviderError(
                f"{node.hostname}: setting up its configuration agent failed: {(err or out).strip()[-500:]}"
            )

    return bootstrap


def image_hash_of(name: str) -> str | None:
    """The content hash of the baked image container ``name`` was made from (None: a plain image)."""
    info = inspect("container", name)
    labels = ((info or {}).get("Config") or {}).get("Labels") or {}
    return labels.get(LABEL_HASH) or None


class LocalProvider:
    """Nodes as containers; see the module docstring."""

    def __init__(self, images: Mapping[str, str] | None = None) -> None:
        """Nodes of a hardware profile in ``images`` (profile -> image ID, from clusterctl.lock) are created
        from that image; the others from the provider's base image."""
        self.images = dict(images or {})

    def provision(
        self, plan: Plan, build_dir: Path, state_dir: Path, *, yes: bool, events: EventBus
    ) -> list[ProvisionedHost]:
        """Create or start one container per (non-burst) node, in parallel, and wait for systemd.

        A compute node gets its agent, the munge key and its generated host key at once (the
        docker channel), and configures itself from the controller's bundles.
        """
        image = node_image(plan)
        if not engine_available() or any(n.hardware not in self.images for n in plan.nodes if not n.burst):
            ensure_engine_and_image(image, events)
        network = _ensure_network(plan)
        nodes = [n for n in plan.nodes if not n.burst]
        setup = pull_bootstrap(plan, build_dir, state_dir) if any(pulls(plan, n) for n in nodes) else None
        return self.start_nodes(plan, nodes, network, image, events, state_dir=state_dir, bootstrap=setup)

    def start_nodes(
        self,
        plan: Plan,
        nodes: list[PlanNode],
        network: str,
        image: str,
        events: EventBus,
        *,
        state_dir: Path | None = None,
        bootstrap: Bootstrap | None = None,
    ) -> list[ProvisionedHost]:
        """Start ``nodes`` (also used to resume burst nodes); a created container's cached facts are dropped.

        ``bootstrap`` sets up the agent of each pulling node that was created or started now, or lacks it.
        """

        def one(node: PlanNode) -> ProvisionedHost:
            events.host(PHASE, node.hostname, "running", "starting container")
            # Burst nodes start from the base image: `clusterctl burst resume` converges them whole.
            node_image = image if node.burst else self.images.get(node.hardware, image)
            try:
                what = _start_node(plan, node, network, node_image)
                if what == "created" and state_dir is not None:
                    forget_facts(state_dir, [node.hostname])
                wait_booted(container_name(plan, node))
                if node.burst:
                    _report_fresh_boot(container_name(plan, node))
                if bootstrap is not None and pulls(plan, node) and (what != "running" or not _has_agent(plan, node)):
                    bootstrap(node, container_name(plan, node))
            except DockerError as exc:
                events.host(PHASE, node.hostname, "failed", str(exc))
                raise
            events.host(PHASE, node.hostname, "changed" if what != "running" else "ok", what)
            return ProvisionedHost(
                hostname=node.hostname,
                address=node.address,
                connection="docker",
                container=container_name(plan, node),
                image_hash=image_hash_of(container_name(plan, node)),
            )

        with ThreadPoolExecutor(max_workers=min(8, max(1, len(nodes)))) as pool:
            return list(pool.map(one, nodes))

    def remove_nodes(self, plan: Plan, nodes: list[PlanNode], events: EventBus) -> None:
        """Remove the containers of ``nodes`` and the cgroup trees their slurmd left on the host."""
        for node in nodes:
            name = container_name(plan, node)
            info = inspect("container", name)
            if info is not None:
                if info["Config"].get("Labels", {}).get(LABEL) != plan.cluster.name:
                    raise ProviderError(f"container {name} exists but does not belong to cluster {plan.cluster.name}")
                docker("rm", "-f", "-v", name)
                events.host("destroy", node.hostname, "changed", "container removed")
            remove_slurm_cgroups(node.hostname)

    def retire(self, plan: Plan, hosts: list[str], events: EventBus) -> None:
        """Remove the containers of ``hosts`` (this cluster's only) and the cgroup trees their slurmd left."""
        for host in hosts:
            name = host_container(plan.cluster.name, host)
            info = inspect("container", name)
            if info is not None and info["Config"].get("Labels", {}).get(LABEL) == plan.cluster.name:
                docker("rm", "-f", "-v", name)
                events.host(PHASE, host, "changed", "container removed: the node left the cluster")
            remove_slurm_cgroups(host)

    def destroy(self, plan: Plan, build_dir: Path, state_dir: Path, *, yes: bool, events: EventBus) -> None:
        """Remove every container, volume and network labelled with this cluster, and slurmd's cgroups."""
        label = f"{LABEL}={plan.cluster.name}"
        containers = labelled("container", label)
        if containers:
            docker("rm", "-f", "-v", *containers, timeout=600)
        for container in containers:
            events.host("destroy", container.removeprefix(host_container(plan.cluster.name, "")), "changed", "removed")
        for volume in labelled("volume", label):
            docker("volume", "rm", "-f", volume)
        for network in labelled("network", label):
            docker("network", "rm", network)
        for node in plan.nodes:
            remove_slurm_cgroups(node.hostname)

    def status(self, plan: Plan, state_dir: Path) -> dict[str, str]:
        """Container state per hostname (running, exited, missing, ...)."""
        out = docker(
            "ps",
            "-a",
            "--filter",
            f"label={LABEL}={plan.cluster.name}",
            "--format",
            '{{.Label "clusterctl.node"}} {{.State}}',
        ).stdout
        states = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
        return {n.hostname: states.get(n.hostname, "missing") for n in plan.nodes} | {
            host: state for host, state in states.items() if host not in {n.hostname for n in plan.nodes}
        }


CGROUP_ROOT = Path("/sys/fs/cgroup")


def slurm_cgroup_dirs(hostname: str, root: Path = CGROUP_ROOT) -> list[Path]:
    """The ``slurm_<node>`` trees Debian's slurmd makes at the host's cgroup root (cgroupns=host)."""
    name = f"slurm_{hostname}"
    found = [root / name] if (root / name).is_dir() else []
    if root.is_dir():
        found += [p / name for p in sorted(root.iterdir()) if p.is_dir() and (p / name).is_dir()]
    return found


def remove_slurm_cgroups(hostname: str, root: Path = CGROUP_ROOT) -> None:
    """Remove slurmd's cgroup trees for ``hostname`` (deepest first: cgroupfs only rmdirs empty groups)."""
    for tree in slurm_cgroup_dirs(hostname, root):
        for sub in sorted((p for p in tree.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):
                sub.rmdir()
        with contextlib.suppress(OSError):
            tree.rmdir()
