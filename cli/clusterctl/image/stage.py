"""Which stage each node runs: ``configure`` only on a node made from its profile's locked image.

A node made from the baked image of its hardware profile, the one clusterctl.lock names now,
already has everything the install stage would put there: ``up`` runs only the configure stage
on it. Every other node (a plain base image, an image of an older lock, ``--no-image``) runs
both, as before. The choice is a host variable, ``clusterctl_stage: configure``, in a file ``up``
writes next to the rendered inventory at run time (:data:`STAGE_INVENTORY`), as ``!unsafe`` data
like every inventory clusterctl writes; Ansible reads inventory files in name order, and the
rendered ``hosts.yml`` sets no stage, so nothing else decides it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from clusterctl.image.lock import LockedImage
from clusterctl.plan.models import Plan
from clusterctl.render import ansible_yaml
from clusterctl.render.builddir import write_run_file
from clusterctl.run.providers.base import ProvisionedHost

STAGE_INVENTORY = "ansible/inventory/images.yml"
CONFIGURE = "configure"


def baked_hosts(plan: Plan, hosts: Iterable[ProvisionedHost], images: Mapping[str, LockedImage]) -> list[str]:
    """The hosts made from the locked image of their hardware profile, sorted."""
    profile = {n.hostname: n.hardware for n in plan.nodes}
    out = []
    for host in hosts:
        locked = images.get(profile.get(host.hostname, ""))
        if locked is not None and host.image_hash and host.image_hash == locked.hash:
            out.append(host.hostname)
    return sorted(out)


def write_stage_inventory(build_dir: Path, plan: Plan, baked: Iterable[str]) -> Path | None:
    """Write :data:`STAGE_INVENTORY`: ``clusterctl_stage: configure`` for each of ``baked``.

    With no baked host, an earlier run's file is emptied (never left naming hosts) and none is
    created where there was none, so a cluster without a lock has the inventory it always had.

    Raises:
        BuildDirError: the build directory is not one clusterctl made, or a link stands at the file.
    """
    names = sorted(baked)
    path = build_dir / STAGE_INVENTORY
    if not names and not path.exists():
        return None
    data = {"all": {"hosts": {name: {"clusterctl_stage": CONFIGURE} for name in names}}}
    header = (
        f"written by clusterctl up for {plan.cluster.name}: nodes made from their profile's locked image "
        "(clusterctl.lock) run the configure stage only"
    )
    return write_run_file(build_dir, STAGE_INVENTORY, ansible_yaml.dump(data, header).encode())
