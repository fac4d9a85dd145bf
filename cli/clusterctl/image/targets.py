"""The image target of each provider: where ``clusterctl image build`` builds and finds images.

Each target implements :class:`clusterctl.image.build.ImageTarget`; the build itself knows only
that protocol, so this module, which knows every target, sits above them.
"""

from __future__ import annotations

from pathlib import Path

from clusterctl.image.baremetal import BaremetalImageTarget, default_base
from clusterctl.image.build import ImageBuildError, ImageTarget
from clusterctl.image.cloud import CloudImageTarget
from clusterctl.image.local import LocalImageTarget
from clusterctl.plan import Plan
from clusterctl.run.providers.local import node_image


def target_for(plan: Plan, *, state_dir: Path | None = None, build_dir: Path | None = None) -> ImageTarget:
    """The image target of the plan's provider.

    ``state_dir`` (the cluster's) and ``build_dir`` (its rendered build directory) are where the
    cloud targets keep their stack, keys and records and the bare-metal target its archives;
    ``up`` checking a lock needs neither.

    Raises:
        ImageBuildError: the provider has no image target in this clusterctl.
    """
    if plan.cluster.provider == "local":
        return LocalImageTarget(node_image(plan))
    if plan.cluster.provider in ("aws", "gcp", "azure"):
        return CloudImageTarget(plan, state_dir, build_dir or Path("build") / plan.cluster.name)
    if plan.cluster.provider == "baremetal":
        return BaremetalImageTarget(plan, build_dir or Path("build") / plan.cluster.name, default_base())
    raise ImageBuildError(
        f"baked images for provider {plan.cluster.provider} are not available in this clusterctl; "
        "its nodes install everything at `clusterctl up`"
    )
