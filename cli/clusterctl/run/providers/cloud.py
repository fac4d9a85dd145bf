"""The cloud provider (AWS, GCP, Azure): run ``stacks/<cloud>`` through the Automation API.

provision: generate clusterctl's SSH key and one host key per node and the bastion (once),
preview and ask (unless ``--yes``), ``pulumi up``, then write the SSH inventory and known_hosts
from the stack outputs so configuration connects with checked host keys. The outputs must
carry every node's and the bastion's key, and it must be the one clusterctl generated and
injected through cloud-init: a missing or different key is an error, never a key learnt on
first use. destroy: preview, ask, ``pulumi destroy``. status: the stack's view of each node.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from clusterctl.plan.models import Plan
from clusterctl.run.events import EventBus
from clusterctl.run.providers.base import ProviderError, ProvisionedHost
from clusterctl.run.providers.images import apply_locked_images, made_from_locked
from clusterctl.run.providers.ssh_inventory import (
    BASTION,
    build_inventory,
    hosts_from_outputs,
    managed_lustre_sources,
    write_ssh_inventory,
)
from clusterctl.run.providers.stack_nodes import destroy_stack, stack_node_status
from clusterctl.run.pulumi import ChangeSummary, PulumiError, PulumiStack, require_pulumi_cli
from clusterctl.run.sshkeys import ensure_client_key, ensure_host_keys

PHASE = "provision"
Confirm = Callable[[str], bool]


def default_confirm(question: str) -> bool:
    """Ask on a terminal; refuse (and say how to proceed) when nobody can answer."""
    if not sys.stdin.isatty():
        raise ProviderError(f"{question} -- no terminal to confirm on; rerun with --yes to apply without asking")
    import click

    return bool(click.confirm(question, default=False))


class CloudProvider:
    """Provisions a cluster's machines on AWS, GCP or Azure from ``plan.cloud``.

    ``images``: hardware profile -> its locked image (clusterctl.lock: a ``LockedImage``, or just its
    reference). New nodes of those profiles boot it (``CloudInstanceGroupPlan.image``); a node the
    stack reports as made from it (``nodeImages``) is reported so, and `up` runs only the
    configure stage there.
    """

    def __init__(self, kind: str, confirm: Confirm | None = None, images: Mapping[str, Any] | None = None) -> None:
        if kind not in ("aws", "gcp", "azure"):
            raise ValueError(f"not a cloud provider: {kind}")
        self.kind = kind
        self.confirm = confirm or default_confirm
        self.images = dict(images or {})

    def _stack(self, plan: Plan, build_dir: Path, state_dir: Path, events: EventBus) -> PulumiStack:
        if plan.cloud is None or plan.cluster.provider != self.kind:
            raise ProviderError(f"the plan is not a {self.kind} plan; re-render it with `clusterctl render`")
        if self.images:
            plan = apply_locked_images(plan, self.images)
        _, client = ensure_client_key(state_dir, plan.cluster.name)
        bastion = [BASTION] if plan.cloud is not None and plan.cloud.bastion else []
        names = [n.hostname for n in plan.nodes if not n.burst] + bastion
        host_keys = ensure_host_keys(state_dir, names)
        return PulumiStack(plan, build_dir, state_dir, ssh_public_key=client.public, host_keys=host_keys, events=events)

    def _confirmed(self, summary: ChangeSummary, action: str, yes: bool, events: EventBus) -> bool:
        events.info(f"{action}: {summary.describe()}", phase=PHASE)
        if yes or not summary.has_changes:
            return True
        return self.confirm(f"{action}: {summary.describe()}. Apply?")

    def provision(
        self, plan: Plan, build_dir: Path, state_dir: Path, *, yes: bool, events: EventBus
    ) -> list[ProvisionedHost]:
        """Create or update the stack, then write the SSH inventory; return the nodes."""
        require_pulumi_cli()
        stack = self._stack(plan, build_dir, state_dir, events)
        try:
            if not yes and not self._confirmed(stack.preview(), f"{plan.cluster.name} on {self.kind}", yes, events):
                raise ProviderError("not applied: the preview was not confirmed; nothing was changed")
            result = stack.up()
        except PulumiError as exc:
            raise ProviderError(str(exc)) from None
        events.info(f"stack updated: {result.describe()}", phase=PHASE)
        key_path, _ = ensure_client_key(state_dir, plan.cluster.name)
        public_keys = {name: pair.public for name, pair in stack.host_keys.items()}
        assert plan.cloud is not None
        hosts, bastion = hosts_from_outputs(plan, result.outputs, user=plan.cloud.ssh_user, host_keys=public_keys)
        if plan.cloud.bastion is not None and bastion is None:
            raise ProviderError(
                "the plan has a bastion but the stack outputs name none, so the nodes cannot be reached through it; "
                "run `clusterctl up` again"
            )
        if self.images:
            try:
                baked = made_from_locked(plan, self.images, result.outputs, state_dir)
            except PulumiError as exc:
                raise ProviderError(str(exc)) from None
            hosts = [replace(h, image_hash=baked.get(h.hostname)) for h in hosts]
        write_ssh_inventory(
            plan,
            hosts,
            **build_inventory(build_dir, state_dir),
            private_key=key_path,
            bastion=bastion,
            # Managed Lustre's MGS is known only now: the storage role mounts from these sources.
            group_vars={"clusterctl_managed_lustre": managed_lustre_sources(result.outputs)},
        )
        return hosts

    def retire(self, plan: Plan, hosts: list[str], events: EventBus) -> None:
        """Nothing left to do: the stack has no resources for nodes the plan lacks, so provision removed them."""

    def destroy(self, plan: Plan, build_dir: Path, state_dir: Path, *, yes: bool, events: EventBus) -> None:
        """Delete everything the stack created (after a confirmation unless ``yes``)."""
        require_pulumi_cli()
        stack = self._stack(plan, build_dir, state_dir, events)
        if not yes and not self.confirm(f"Destroy every resource of {plan.cluster.name} on {self.kind}?"):
            raise ProviderError("not destroyed: not confirmed")
        destroy_stack(stack, events, "stack destroyed")

    def status(self, plan: Plan, state_dir: Path) -> dict[str, str]:
        """``provisioned`` or ``missing`` per node, from the stack outputs."""
        return stack_node_status(plan, state_dir, "provisioned")
