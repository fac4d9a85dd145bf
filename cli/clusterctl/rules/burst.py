"""Rules for elastic (burst) node groups: partitions, hardware on the burst provider, timeouts.

Why these: Slurm powers burst nodes up for jobs in their partitions only; a node that does not
register within ResumeTimeout is marked DOWN and its job requeued, so the timeout must cover
the provider's boot plus clusterctl's configuration of a fresh node.
"""

from __future__ import annotations

from collections.abc import Iterator

from clusterctl.catalog.instances import instance_type
from clusterctl.rules.engine import RuleContext, rule
from clusterctl.spec.findings import Finding, Level

# Seconds from "resume" to a registered slurmd: machine boot + a first converge of a fresh node.
# Local: container start is seconds, the converge installs Slurm, munge and exporters (~2-4 min
# on 2 cores). Clouds: GPU instance boot (3-8 min, longer for capacity blocks) + a first converge.
BOOT_PLUS_CONFIGURE_S = {"local": 300, "aws": 900, "gcp": 900, "azure": 1200}
BURST_PROVIDERS = tuple(BOOT_PLUS_CONFIGURE_S)


@rule("BUR001", "burst-in-partition", Level.ERROR, phase=1, tags=("burst",))
def burst_in_partition(ctx: RuleContext) -> Iterator[Finding]:
    """A burst group is a compute group, has no spares, and is named in at least one partition."""
    named = {g for p in ctx.spec.slurm.partitions for g in p.groups}
    for i, group in enumerate(ctx.spec.nodes):
        if group.burst is None:
            continue
        if group.role != "compute":
            yield burst_in_partition.finding(
                ("nodes", i, "burst"), f"Burst group `{group.group}` has role {group.role}; only compute nodes burst."
            )
        if group.spares:
            yield burst_in_partition.finding(
                ("nodes", i, "spares"),
                f"Burst group `{group.group}` has spares; elastic nodes are created on demand, spares make no sense.",
                "Remove `spares`.",
            )
        if group.group not in named:
            yield burst_in_partition.finding(
                ("nodes", i, "burst"),
                f"Burst group `{group.group}` is in no partition, so Slurm would never power it up.",
                f"Add a partition such as `{{name: burst, groups: [{group.group}]}}`.",
            )


@rule("BUR002", "burst-provider-hardware", Level.ERROR, phase=1, tags=("burst",))
def burst_provider_hardware(ctx: RuleContext) -> Iterator[Finding]:
    """The burst group's hardware profile exists on its provider."""
    for i, group in enumerate(ctx.spec.nodes):
        if group.burst is None:
            continue
        kind = group.burst.provider.kind
        if kind not in BURST_PROVIDERS:
            yield burst_provider_hardware.finding(
                ("nodes", i, "burst", "provider", "kind"),
                f"Burst group `{group.group}` uses provider {kind}; bursting needs on-demand machines.",
                f"Use one of: {', '.join(BURST_PROVIDERS)}.",
            )
            continue
        if kind == "local":
            continue
        profile = ctx.spec.hardware.get(group.hardware)
        if profile is None:
            continue
        itype = instance_type(profile.instance_type)
        if itype is None or itype.provider != kind:
            yield burst_provider_hardware.finding(
                ("hardware", group.hardware, "instance_type"),
                f"Burst group `{group.group}` runs on {kind}, but hardware `{group.hardware}` has no {kind} "
                f"instance type (instance_type: {profile.instance_type!r}).",
                f"Set `instance_type` to a {kind} GPU type from clusterctl's catalog.",
            )
        elif profile.gpus and itype.gpu_model and itype.gpu_model != profile.gpus.model:
            yield burst_provider_hardware.finding(
                ("hardware", group.hardware, "gpus", "model"),
                f"{itype.name} has {itype.gpu_model} GPUs, the profile says {profile.gpus.model}.",
            )


@rule("BUR003", "burst-resume-timeout", Level.ERROR, tags=("burst",), phase=1, gates_plan=False)
def burst_resume_timeout(ctx: RuleContext) -> Iterator[Finding]:
    """resume_timeout covers the provider's boot plus configuration of a fresh node."""
    for i, group in enumerate(ctx.spec.nodes):
        if group.burst is None or group.burst.provider.kind not in BOOT_PLUS_CONFIGURE_S:
            continue
        need = BOOT_PLUS_CONFIGURE_S[group.burst.provider.kind]
        got = group.burst.resume_timeout.seconds
        if got < need:
            yield burst_resume_timeout.finding(
                ("nodes", i, "burst", "resume_timeout"),
                f"resume_timeout {group.burst.resume_timeout} is shorter than a {group.burst.provider.kind} node "
                f"takes to boot and be configured (about {need // 60} min); Slurm would mark nodes DOWN and requeue "
                "their jobs.",
                f'Set resume_timeout to at least "{need // 60}m".',
            )
