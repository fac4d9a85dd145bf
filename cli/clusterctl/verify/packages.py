"""Drift: each node's installed packages against its profile's image in clusterctl.lock
(one ``dpkg-query`` per node; `clusterctl.image.drift` compares them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from clusterctl.image.drift import DPKG_QUERY, PackageListError, compare_packages, parse_packages
from clusterctl.spec.findings import Finding
from clusterctl.verify.base import NodeCheck, VerifyContext
from clusterctl.verify.result import ParseError, failed, passed

if TYPE_CHECKING:
    from clusterctl.plan.models import PlanNode


class PackagesCheck(NodeCheck):
    """A node's installed packages against its profile's image in clusterctl.lock (one dpkg-query per node).

    A package of the image at another version, or gone, fails the node, named; packages the image
    has not (the configure stage installs some on purpose) are counted, never failed
    (`clusterctl.image.drift`).
    """

    name = "packages"
    title = "packages against clusterctl.lock"
    result_name = "packages.lock"
    tool = "dpkg-query"
    every_node = True
    install_hint = "The node is not a Debian or Ubuntu machine; the lock records dpkg's packages."

    def run(self, ctx: VerifyContext) -> list[Finding]:
        """Nothing without a lock (a cluster without baked images verifies as it always did)."""
        return super().run(ctx) if ctx.options.locked_images else []

    def skip_reason(self, ctx: VerifyContext, node: PlanNode) -> str | None:
        """Skipped for a profile the lock has no image of."""
        if node.hardware not in ctx.options.locked_images:
            return f"skipped: clusterctl.lock has no image of hardware profile {node.hardware}"
        return None

    def command(self, ctx: VerifyContext, node: PlanNode) -> str:
        """``dpkg-query -W`` with status, package and version."""
        return DPKG_QUERY

    def judge(self, ctx: VerifyContext, node: PlanNode, output: str) -> Finding:
        """Every package of the image at its locked version; the differences named."""
        image = ctx.options.locked_images[node.hardware]
        try:
            installed = parse_packages(output)
        except PackageListError as exc:
            raise ParseError(str(exc), 0, "") from None
        drift = compare_packages(image.packages, installed)
        figures: dict[str, float | int | str] = {
            "image": image.hash[:12],
            "locked": len(image.packages),
            "changed": len(drift.changed),
            "missing": len(drift.missing),
            "extra": len(drift.extra),
        }
        extra = f"; {len(drift.extra)} package(s) not in the image (not checked)" if drift.extra else ""
        if drift.drifted:
            parts = drift.differences()
            named = "; ".join(parts[:20]) + (f"; {len(parts) - 20} more" if len(parts) > 20 else "")
            return failed(
                self.result_name,
                node.hostname,
                f"{len(parts)} package(s) of the {node.hardware} image differ on {node.hostname}: {named}{extra}.",
                "Install the locked versions again (apt-get install --allow-downgrades NAME=VERSION), or make the "
                "node anew from the locked image.",
                **figures,
            )
        return passed(
            self.result_name,
            node.hostname,
            f"Every package of the {node.hardware} image ({len(image.packages)}) is at its locked version{extra}.",
            figures,
        )
