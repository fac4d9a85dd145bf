"""Clock synchronisation: ``chronyc tracking`` (``timedatectl`` where chrony is absent), judged
against the largest offset that keeps cross-node logs and traces meaningful.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from clusterctl.spec.findings import Finding
from clusterctl.verify.base import CONTAINER, NodeCheck, VerifyContext
from clusterctl.verify.parsers.chronyc import TRACKING_COMMAND, parse_chronyc_tracking
from clusterctl.verify.result import failed, passed

if TYPE_CHECKING:
    from clusterctl.plan.models import PlanNode


class TimeSyncCheck(NodeCheck):
    """Clock synchronisation from ``chronyc tracking`` (timedatectl where chrony is absent)."""

    name = "time"
    title = "time sync"
    result_name = "time.sync"
    tool = "chronyc"
    every_node = True

    def skip_reason(self, ctx: VerifyContext, node: PlanNode) -> str | None:
        """Containers share the host's clock and cannot set it (no CAP_SYS_TIME)."""
        return CONTAINER if ctx.plan.slurm.container_nodes else None

    def command(self, ctx: VerifyContext, node: PlanNode) -> str:
        """chrony's view; systemd-timesyncd's yes/no where chrony is not installed."""
        return (
            f"if command -v chronyc >/dev/null 2>&1; then {TRACKING_COMMAND}; "
            "else echo NTPSynchronized=$(timedatectl show -p NTPSynchronized --value 2>/dev/null || echo unknown); fi"
        )

    def judge(self, ctx: VerifyContext, node: PlanNode, output: str) -> Finding:
        """Synchronised, with the offset within ``max_time_offset_s``."""
        return judge_time(output, ctx.options.max_time_offset_s, target=node.hostname)


def judge_time(output: str, max_offset_s: float, *, target: str = "") -> Finding:
    """Judge ``chronyc tracking`` (or the ``NTPSynchronized=`` fallback line).

    Raises:
        ParseError: The chronyc output cannot be read.
    """
    text = output.strip()
    if text.startswith("NTPSynchronized="):
        value = text.split("=", 1)[1].strip()
        if value == "yes":
            return passed(
                "time.sync", target, "systemd-timesyncd reports the clock synchronised.", {"source": "timedatectl"}
            )
        return failed(
            "time.sync",
            target,
            f"The clock is not synchronised (timedatectl NTPSynchronized={value or 'unknown'}).",
            "Install and enable chrony pointed at the site's NTP servers.",
            source="timedatectl",
        )
    tracking = parse_chronyc_tracking(output)
    figures: dict[str, float | int | str] = {
        "offset_s": tracking.offset_s,
        "stratum": tracking.stratum,
        "reference": tracking.reference,
        "leap_status": tracking.leap_status,
        "max_offset_s": max_offset_s,
    }
    if not tracking.synchronised:
        return failed(
            "time.sync",
            target,
            f"chronyd is not synchronised (leap status {tracking.leap_status}, reference {tracking.reference}).",
            "Check that the NTP sources answer: chronyc sources -v.",
            **figures,
        )
    if abs(tracking.offset_s) > max_offset_s:
        return failed(
            "time.sync",
            target,
            f"The clock is {abs(tracking.offset_s):.3f} s off NTP time, more than {max_offset_s:g} s.",
            "chronyd is still slewing or its sources are far; check chronyc sources -v.",
            **figures,
        )
    return passed(
        "time.sync",
        target,
        f"Synchronised to {tracking.reference}, {abs(tracking.offset_s) * 1e3:.3f} ms off.",
        figures,
    )
