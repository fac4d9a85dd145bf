"""Cloud burst groups: resume and suspend hosts through the group's own Pulumi stack.

Each cloud burst group has one stack (program ``stacks/burst``, project ``clusterctl-burst``,
stack ``<cluster>-burst-<group>``) in the cluster's file backend. Its input is the plan plus the
group's *active set*: the hosts Slurm has resumed and not yet suspended, kept in the state
directory (``burst/cloud/<group>.json``). ``resume`` adds hosts to the set and runs ``up``;
``suspend`` removes them and runs ``up`` again, so Pulumi deletes exactly those instances.
Both are idempotent: a host already in (or already out of) the set changes nothing, and no
``up`` runs unless the set changed or the last ``up`` did not finish.

One lock per group serializes the read-modify-``up`` of the set: slurmctld runs
``ResumeProgram``/``SuspendProgram`` concurrently for different nodes, and two ``up`` runs of one
stack would collide on the backend's lock anyway.

A failed resume takes the hosts it added out of the set again and runs ``up`` once more, so
a half-created request (two of four instances before capacity ran out) costs nothing while
Slurm retries; the error says what happened (no capacity, quota, permissions, Pulumi CLI
missing, provider error) in words that fit Slurm's node reason.

The group's base (the same program with ``clusterctl:part = base``, stack
``<cluster>-burst-<group>-base``: security group or firewalls or NSGs, placement, launch
templates) is made by :func:`prepare_cloud_groups` during ``clusterctl up``, with the
operator's credentials; the controller's credentials cannot change it (render/burst.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from clusterctl.plan.burst import burst_stack_name
from clusterctl.plan.models import CloudPlan, Plan, PlanNode
from clusterctl.render import ansible_yaml
from clusterctl.run.events import EventBus
from clusterctl.run.providers.base import ProviderError, ProvisionedHost
from clusterctl.run.providers.ssh_inventory import ssh_common_args, write_known_hosts
from clusterctl.run.pulumi import (
    ORGANIZATION,
    PLUGIN_VERSIONS,
    PulumiCliMissingError,
    PulumiError,
    PulumiStack,
    StackTarget,
    output_mapping,
    require_pulumi_cli,
)
from clusterctl.run.sshkeys import ensure_client_key, ensure_host_keys
from clusterctl.run.state import open_lock, write_atomic

PHASE = "burst"
PROGRAM = "burst"  # stacks/burst
PROJECT = "clusterctl-burst"
# Stack config keys the program reads (stacks/burst/clusterctl_burst.py: GROUP_KEY, ACTIVE_HOSTS_KEY).
GROUP_CONFIG = "clusterctl:group"
ACTIVE_HOSTS_CONFIG = "clusterctl:activeHosts"
PART_CONFIG = "clusterctl:part"  # stacks/burst/clusterctl_burst.py: PART_KEY; "base" or "nodes" (default)
PART_BASE = "base"
STATE_SUBDIR = Path("burst") / "cloud"
# Ansible reads inventory files in name order; "provisioned-*" sorts after the rendered
# hosts.yml, so these addresses and SSH settings win for the burst hosts.
INVENTORY_PREFIX = "provisioned-burst-"
SSH_PORT = 22
# A resumed node still has to be configured after SSH answers: SSH may take at most this share
# of Slurm's ResumeTimeout (and never less than MIN_SSH_WAIT_S).
SSH_SHARE_OF_RESUME_TIMEOUT = 0.5
MIN_SSH_WAIT_S = 120.0

# Substrings of provider errors, most specific first: what Slurm's node reason should say.
CAPACITY_MARKERS: dict[str, tuple[str, ...]] = {
    "aws": (
        "InsufficientInstanceCapacity",
        "InsufficientReservedInstanceCapacity",
        "ReservationCapacityExceeded",
        "InsufficientCapacity",
        "InsufficientHostCapacity",
    ),
    "gcp": ("ZONE_RESOURCE_POOL_EXHAUSTED", "RESOURCE_POOL_EXHAUSTED", "does not have enough resources available"),
    "azure": (
        "ZonalAllocationFailed",
        "AllocationFailed",
        "OverconstrainedZonalAllocationRequest",
        "OverconstrainedAllocationRequest",
        "SkuNotAvailable",
    ),
}
QUOTA_MARKERS: dict[str, tuple[str, ...]] = {
    "aws": ("VcpuLimitExceeded", "InstanceLimitExceeded", "MaxSpotInstanceCountExceeded"),
    "gcp": ("QUOTA_EXCEEDED", "Quota '"),
    "azure": ("QuotaExceeded", "exceeding approved"),
}
# The nodes part finds the base by name: these say it is not there (yet).
BASE_MISSING_MARKERS: tuple[str, ...] = (
    "InvalidLaunchTemplateName.NotFoundException",
    "InvalidLaunchTemplateId.NotFound",
)
PERMISSION_MARKERS: tuple[str, ...] = (
    "UnauthorizedOperation",
    "AccessDenied",
    "AuthorizationFailed",
    "PERMISSION_DENIED",
    "NoCredentialProviders",
    "no valid credential",
    "could not find default credentials",
)


@dataclass
class GroupState:
    """What the state directory remembers of one cloud burst group.

    Attributes:
        active: hosts that should exist (plan order).
        converged: the last ``up`` deployed exactly ``active``; False while an ``up`` runs or
            after one failed, so the next call runs ``up`` even when the set is unchanged.
        addresses: hostname -> private address, from the last successful ``up``.
    """

    active: list[str] = field(default_factory=list)
    converged: bool = True
    addresses: dict[str, str] = field(default_factory=dict)


def state_path(state_dir: Path, group: str) -> Path:
    """Where the group's active set lives."""
    return state_dir / STATE_SUBDIR / f"{group}.json"


def read_state(state_dir: Path, group: str) -> GroupState:
    """The group's state (empty when the group was never resumed)."""
    path = state_path(state_dir, group)
    if not path.exists():
        return GroupState()
    data = json.loads(path.read_text())
    return GroupState(
        active=list(data.get("active", [])),
        converged=bool(data.get("converged", True)),
        addresses=dict(data.get("addresses", {})),
    )


def write_state(state_dir: Path, group: str, state: GroupState) -> None:
    """Persist the group's state atomically (a crash leaves the old or the new file)."""
    path = state_path(state_dir, group)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(
        {"active": state.active, "converged": state.converged, "addresses": state.addresses},
        indent=2,
        sort_keys=True,
    )
    write_atomic(path, (text + "\n").encode(), 0o600)


def active_hosts(state_dir: Path, group: str) -> list[str]:
    """The hosts of ``group`` that exist (or are being created) now -- for ``status``."""
    return read_state(state_dir, group).active


@contextlib.contextmanager
def group_lock(state_dir: Path, group: str) -> Iterator[None]:
    """Exclusive lock of one group's active set and stack."""
    path = state_path(state_dir, group).with_suffix(".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open_lock(path) as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def burst_target(plan: Plan, group: str, active: list[str]) -> StackTarget:
    """The group's stack: program ``stacks/burst`` with the group and its active set as config."""
    cloud = plan.burst_cloud[group]
    short = burst_stack_name(plan.cluster.name, group)
    return StackTarget(
        program=PROGRAM,
        project=PROJECT,
        stack=f"{ORGANIZATION}/{PROJECT}/{short}",
        plugins=dict(PLUGIN_VERSIONS[cloud.provider]),
        config={GROUP_CONFIG: group, ACTIVE_HOSTS_CONFIG: json.dumps(active)},
        workspace=short,
    )


def base_target(plan: Plan, group: str) -> StackTarget:
    """The group's base: program ``stacks/burst``, part ``base``, its own stack next to the group's."""
    cloud = plan.burst_cloud[group]
    short = f"{burst_stack_name(plan.cluster.name, group)}-{PART_BASE}"
    return StackTarget(
        program=PROGRAM,
        project=PROJECT,
        stack=f"{ORGANIZATION}/{PROJECT}/{short}",
        plugins=dict(PLUGIN_VERSIONS[cloud.provider]),
        config={GROUP_CONFIG: group, PART_CONFIG: PART_BASE},
        workspace=short,
    )


def prepare_cloud_groups(
    plan: Plan,
    build_dir: Path,
    state_dir: Path,
    events: EventBus,
    *,
    yes: bool,
    confirm: Callable[[str], bool],
) -> list[str]:
    """Make or update every cloud burst group's base with the caller's (the operator's) credentials.

    For ``clusterctl up``: the base holds what decides a burst node's exposure (security group,
    firewalls, NSGs) and launch configuration, so the controller, which only launches and deletes
    instances, never needs the rights to change it.

    Returns:
        The groups whose base was brought up.

    Raises:
        ProviderError: the Pulumi CLI is missing, a change was not confirmed, or ``up`` failed.
    """
    groups = sorted(plan.burst_cloud)
    if not groups:
        return []
    _require_cli("prepare burst groups", groups)
    for group in groups:
        stack = PulumiStack(plan, build_dir, state_dir, events=events, target=base_target(plan, group))
        try:
            if not yes:
                preview = stack.preview()
                kind = plan.burst_cloud[group].provider
                question = f"burst group {group} base ({kind}): {preview.describe()}. Apply?"
                if preview.has_changes and not confirm(question):
                    raise ProviderError(f"not applied: the base of burst group {group} was not confirmed")
            result = stack.up()
        except PulumiError as exc:
            raise ProviderError(str(exc)) from None
        events.info(f"burst group {group} base ({stack.target.stack}): {result.describe()}", phase="provision")
    return groups


def classify(kind: str, detail: str) -> str:
    """What went wrong, first words first (Slurm shows the start of the node reason)."""
    for marker in CAPACITY_MARKERS.get(kind, ()):
        if marker in detail:
            return f"no capacity ({marker})"
    for marker in QUOTA_MARKERS.get(kind, ()):
        if marker in detail:
            name = marker.strip(" '")
            return f"quota exceeded ({name})"
    for marker in PERMISSION_MARKERS:
        if marker in detail:
            return f"not permitted ({marker}): check the controller's {kind} credentials against the rendered policy"
    if any(marker in detail for marker in BASE_MISSING_MARKERS):
        return "burst group base missing: run `clusterctl up` (it makes the group's network and launch templates)"
    if "ResourceGroupNotFound" in detail:
        # The burst stack does not create its Azure resource group (the role is scoped to it).
        return "resource group missing (ResourceGroupNotFound): create it once, see burst/README.md in the build"
    return f"{kind} provider error"


# The adapter's advice after a failed `up` is for `clusterctl up`, not for a burst node's reason.
_ADAPTER_ADVICE = "What was created is recorded in"


def _detail(kind: str, text: str, lines: int = 3) -> str:
    """The informative part of an engine error on one line: the line naming a known cause, else the last lines."""
    kept = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith(_ADAPTER_ADVICE)]
    markers = (*CAPACITY_MARKERS.get(kind, ()), *QUOTA_MARKERS.get(kind, ()), *PERMISSION_MARKERS)
    named = next((line for line in kept if any(m in line for m in markers)), None)
    return named or " | ".join(kept[-lines:])


def _plan_order(cloud: CloudPlan, group: str, hosts: set[str]) -> list[str]:
    return [h for h in cloud.group(group).hosts if h in hosts]


def _groups(plan: Plan, kind: str, nodes: list[PlanNode]) -> dict[str, list[PlanNode]]:
    """Nodes by burst group; refuses groups the plan has no burst stack for."""
    out: dict[str, list[PlanNode]] = {}
    for node in nodes:
        cloud = plan.burst_cloud.get(node.group)
        if cloud is None or cloud.provider != kind:
            raise ProviderError(
                f"{node.hostname}: group {node.group} is not a {kind} burst group in the plan; re-render the build "
                "directory (`clusterctl render`) and reinstall it on the controller (`clusterctl up`)"
            )
        out.setdefault(node.group, []).append(node)
    return out


def _require_cli(action: str, hosts: list[str]) -> None:
    try:
        require_pulumi_cli()
    except PulumiCliMissingError as exc:
        raise ProviderError(f"Pulumi CLI missing, cannot {action} {', '.join(hosts)}: {exc}") from None


class _Group:
    """One burst group's stack operations, with the group lock held by the caller."""

    def __init__(self, plan: Plan, group: str, build_dir: Path, state_dir: Path, events: EventBus) -> None:
        self.plan, self.group = plan, group
        self.cloud = plan.burst_cloud[group]
        self.build_dir, self.state_dir, self.events = build_dir, state_dir, events

    def up(self, active: list[str]) -> dict[str, str]:
        """Deploy exactly ``active``; return hostname -> private address of the active hosts.

        Raises:
            ProviderError: the update failed; the message says why in Slurm-reason words.
        """
        _, client = ensure_client_key(self.state_dir, self.plan.cluster.name)
        host_keys = ensure_host_keys(self.state_dir, self.cloud.group(self.group).hosts)
        stack = PulumiStack(
            self.plan,
            self.build_dir,
            self.state_dir,
            ssh_public_key=client.public,
            host_keys=host_keys,
            events=self.events,
            target=burst_target(self.plan, self.group, active),
        )
        try:
            result = stack.up()
        except PulumiCliMissingError as exc:
            raise ProviderError(f"Pulumi CLI missing: {exc}") from None
        except PulumiError as exc:
            text = str(exc)
            kind = self.cloud.provider
            raise ProviderError(f"{classify(kind, text)}: {_detail(kind, text)}") from None
        self.events.info(f"burst stack {stack.target.stack}: {result.describe()}", phase=PHASE)
        try:
            nodes = output_mapping(result.outputs, "nodes", stack.target.stack)
        except PulumiError as exc:
            raise ProviderError(f"{self.cloud.provider} provider error: {exc}") from None
        missing = [h for h in active if not nodes.get(h)]
        if missing:
            raise ProviderError(
                f"{self.cloud.provider} provider error: the burst stack reports no address for {', '.join(missing)}"
            )
        # Host keys are pinned: the stack must report, for every active host, the key generated here.
        try:
            reported = output_mapping(result.outputs, "hostKeys", stack.target.stack)
        except PulumiError as exc:
            raise ProviderError(f"{self.cloud.provider} provider error: {exc}") from None
        unpinned = [h for h in active if reported.get(h, "").split()[:2] != host_keys[h].public.split()[:2]]
        if unpinned:
            raise ProviderError(
                f"{self.cloud.provider} provider error: the burst stack reports no host key, or not the generated "
                f"one, for {', '.join(unpinned)}"
            )
        return {h: nodes[h] for h in active}

    def hosts(self, names: list[str], addresses: dict[str, str]) -> list[ProvisionedHost]:
        """ProvisionedHost for ``names`` with their clusterctl-generated host keys."""
        keys = ensure_host_keys(self.state_dir, self.cloud.group(self.group).hosts)
        return [
            ProvisionedHost(
                hostname=h, address=addresses[h], user=self.cloud.ssh_user, port=SSH_PORT, host_key=keys[h].public
            )
            for h in names
        ]

    def write_inventory(self, addresses: dict[str, str]) -> Path:
        """The group's SSH inventory and known_hosts, for every active host (removed when none)."""
        inventory = self.build_dir / "ansible" / "inventory" / f"{INVENTORY_PREFIX}{self.group}.yml"
        known_hosts = self.state_dir / STATE_SUBDIR / f"{self.group}.known_hosts"
        hosts = self.hosts(list(addresses), addresses)
        write_known_hosts(known_hosts, hosts)
        if not hosts:
            inventory.unlink(missing_ok=True)
            return inventory
        key_path, _ = ensure_client_key(self.state_dir, self.plan.cluster.name)
        args = ssh_common_args(known_hosts.resolve(), key_path.resolve())
        entries: dict[str, Any] = {
            h.hostname: {
                "ansible_host": h.address,
                "ansible_port": h.port,
                "ansible_user": h.user,
                "ansible_ssh_private_key_file": str(key_path.resolve()),
                "ansible_ssh_common_args": args,
                "clusterctl_address": h.address,
            }
            for h in hosts
        }
        inventory.parent.mkdir(parents=True, exist_ok=True)
        # Ansible skips inventory files ending in "~", so a concurrent run never reads it half-written.
        # Addresses come from the cloud's answers: all !unsafe, never templated.
        tmp = inventory.with_name(f".{inventory.name}.tmp~")
        tmp.write_text(
            ansible_yaml.dump(
                {"all": {"hosts": entries}},
                f"written by clusterctl burst for {self.plan.cluster.name}: active hosts of burst group {self.group}",
            )
        )
        tmp.replace(inventory)
        return inventory


Connect = Callable[[str, int, float], None]


def _tcp_connect(address: str, port: int, timeout: float) -> None:
    with socket.create_connection((address, port), timeout=timeout):
        pass


def wait_for_ssh(
    hosts: list[ProvisionedHost],
    timeout: float,
    *,
    poll: float = 5.0,
    connect: Connect = _tcp_connect,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Wait until every host accepts TCP on its SSH port, within one shared deadline.

    Raises:
        ProviderError: hosts that did not answer in time (named in the message).
    """
    started = time.monotonic()
    waiting = list(hosts)
    while waiting:
        still: list[ProvisionedHost] = []
        for host in waiting:
            try:
                connect(host.address, host.port, min(poll, 10.0))
            except OSError:
                still.append(host)
        waiting = still
        if not waiting:
            return
        if time.monotonic() - started > timeout:
            names = ", ".join(f"{h.hostname} ({h.address})" for h in waiting)
            raise ProviderError(
                f"no SSH: {names} did not answer on port {waiting[0].port} within {timeout:.0f} s of being created "
                "(boot failure, or the controller cannot reach the burst subnet)"
            )
        sleep(poll)


def ssh_wait_s(plan: Plan, group: str) -> float:
    """How long a resume waits for SSH: a share of the group's ResumeTimeout."""
    burst = next((b for b in plan.slurm.burst if b.group == group), None)
    if burst is None:
        return MIN_SSH_WAIT_S
    return max(MIN_SSH_WAIT_S, burst.resume_timeout_s * SSH_SHARE_OF_RESUME_TIMEOUT)


def resume_cloud(
    plan: Plan, kind: str, nodes: list[PlanNode], build_dir: Path, state_dir: Path, events: EventBus
) -> list[ProvisionedHost]:
    """Create the instances of ``nodes`` (cloud burst hosts) and wait until they answer SSH.

    Adds the hosts to their group's active set (already active: nothing to create), runs the
    group's stack up, writes their SSH inventory and waits for SSH.

    Returns:
        The resumed hosts, with address, SSH user and host key.

    Raises:
        ProviderError: the Pulumi CLI is missing, the cloud had no capacity, or the provider
            failed; the hosts this call added are taken out of the set again.
    """
    _require_cli("resume", [n.hostname for n in nodes])
    out: list[ProvisionedHost] = []
    for group, members in _groups(plan, kind, nodes).items():
        ops = _Group(plan, group, build_dir, state_dir, events)
        requested = [n.hostname for n in members]
        with group_lock(state_dir, group):
            state = read_state(state_dir, group)
            added = [h for h in requested if h not in state.active]
            needs_up = bool(added) or not state.converged or any(h not in state.addresses for h in requested)
            if needs_up:
                state.active = _plan_order(ops.cloud, group, set(state.active) | set(requested))
                state.converged = False  # written before `up`: a crash mid-way makes the next call retry
                write_state(state_dir, group, state)
                try:
                    state.addresses = ops.up(state.active)
                except ProviderError as exc:
                    _roll_back(ops, state, added, exc)
                state.converged = True
                write_state(state_dir, group, state)
            else:
                events.info(f"{', '.join(requested)}: already active in burst group {group}", phase=PHASE)
            ops.write_inventory(state.addresses)
            hosts = ops.hosts(requested, state.addresses)
            try:
                wait_for_ssh(hosts, ssh_wait_s(plan, group))
            except ProviderError as exc:
                _roll_back(ops, state, added, exc)
        out.extend(hosts)
    return out


def _roll_back(ops: _Group, state: GroupState, added: list[str], error: ProviderError) -> NoReturn:
    """Take ``added`` out of the active set, remove what was created for them, re-raise ``error``.

    Why at once and not at the next call: a half-created request (some instances up before
    capacity ran out) would otherwise run, and bill, until Slurm happens to call again.
    """
    state.active = [h for h in state.active if h not in added]
    state.addresses = {h: a for h, a in state.addresses.items() if h not in added}
    state.converged = False
    write_state(ops.state_dir, ops.group, state)
    note = ""
    try:
        state.addresses = ops.up(state.active)
        state.converged = True
        write_state(ops.state_dir, ops.group, state)
        ops.write_inventory(state.addresses)
    except ProviderError as cleanup:
        note = f" (cleanup pending, retried on the next resume or suspend: {cleanup})"
    raise ProviderError(f"{error}{note}") from None


def suspend_cloud(
    plan: Plan, kind: str, nodes: list[PlanNode], build_dir: Path, state_dir: Path, events: EventBus
) -> None:
    """Delete the instances of ``nodes``: take them out of the active set and run the stack up.

    Hosts that are not active are a no-op (no ``up`` runs unless an earlier one did not finish).

    Raises:
        ProviderError: the Pulumi CLI is missing or the update failed; the hosts stay out of
            the set, so the next resume or suspend of the group removes them.
    """
    _require_cli("suspend", [n.hostname for n in nodes])
    for group, members in _groups(plan, kind, nodes).items():
        ops = _Group(plan, group, build_dir, state_dir, events)
        requested = {n.hostname for n in members}
        with group_lock(state_dir, group):
            state = read_state(state_dir, group)
            leaving = [h for h in state.active if h in requested]
            if not leaving and state.converged:
                events.info(f"{', '.join(sorted(requested))}: not active in burst group {group}", phase=PHASE)
                continue
            state.active = [h for h in state.active if h not in requested]
            state.addresses = {h: a for h, a in state.addresses.items() if h not in requested}
            state.converged = False
            write_state(state_dir, group, state)
            state.addresses = ops.up(state.active)
            state.converged = True
            write_state(state_dir, group, state)
            ops.write_inventory(state.addresses)


def destroy_cloud_group(plan: Plan, group: str, build_dir: Path, state_dir: Path, events: EventBus) -> None:
    """Delete a burst group's instances (its ``nodes`` stack) and forget its active set.

    The group's base is the operator's (:func:`destroy_cloud_bases`).

    Raises:
        ProviderError: the Pulumi CLI is missing or the destroy failed.
    """
    _require_cli("destroy burst group", [group])
    with group_lock(state_dir, group):
        stack = PulumiStack(plan, build_dir, state_dir, events=events, target=burst_target(plan, group, []))
        try:
            summary = stack.destroy()
        except PulumiError as exc:
            raise ProviderError(str(exc)) from None
        events.info(f"burst stack {stack.target.stack} destroyed: {summary.describe()}", phase=PHASE)
        for path in (state_path(state_dir, group), state_path(state_dir, group).with_suffix(".known_hosts")):
            path.unlink(missing_ok=True)
        (build_dir / "ansible" / "inventory" / f"{INVENTORY_PREFIX}{group}.yml").unlink(missing_ok=True)


def destroy_cloud_bases(plan: Plan, build_dir: Path, state_dir: Path, events: EventBus) -> list[str]:
    """For ``clusterctl down``: delete every cloud burst group: its instances (the ``nodes`` stack,
    with the group's active set and inventory), then its base (made by :func:`prepare_cloud_groups`).

    Returns:
        The groups destroyed.

    Raises:
        ProviderError: the Pulumi CLI is missing or a destroy failed (burst instances still
            running keep their security group or subnet in use).
    """
    groups = sorted(plan.burst_cloud)
    if not groups:
        return []
    _require_cli("destroy burst group bases", groups)
    for group in groups:
        destroy_cloud_group(plan, group, build_dir, state_dir, events)
        stack = PulumiStack(plan, build_dir, state_dir, events=events, target=base_target(plan, group))
        try:
            summary = stack.destroy()
        except PulumiError as exc:
            raise ProviderError(
                f"{exc}\nIf burst nodes of {group} are still running, suspend them first "
                f"(`clusterctl burst suspend` on the controller), then run `clusterctl down` again."
            ) from None
        events.info(f"burst group {group} base ({stack.target.stack}) destroyed: {summary.describe()}", phase=PHASE)
    return groups
