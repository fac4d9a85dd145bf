"""Safety rules: the checks that keep spec values from becoming names, paths or config they must not be.

Each is tagged ``safety``, and ``--skip-rule`` refuses them (``engine.check_skip``): a skipped
uniqueness check lets two nodes share a name (one overwrites the other's inventory, keys and
DNS record), a skipped mount check lets a file system hide /etc. The spec types already refuse
bad characters field by field; these rules check what only the whole spec shows.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from clusterctl.catalog.slurm_conf import OWNED, SECRET, SPEC_FIELD
from clusterctl.rules.engine import SAFETY_TAG, RuleContext, rule
from clusterctl.spec.findings import Finding, Level
from clusterctl.spec.types import HOSTNAME_PATTERN_HINT, hostname_from_pattern, system_dir_problem

_HOST_RE = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?", re.ASCII)
_ENDS_IN_NUMBER_RE = re.compile(r".*[a-z-].*[0-9]", re.ASCII)
# Longest name DNS (and so /etc/hosts, munge, Slurm's NodeAddr) takes for host.domain.
MAX_FQDN = 253
# Names slurm.conf reads as "set the defaults for every partition/node" (compared case-blind).
SLURM_RESERVED = ("default",)


@rule("NAM001", "unique-names", Level.ERROR, phase=1, tags=(SAFETY_TAG,))
def unique_names(ctx: RuleContext) -> Iterator[Finding]:
    """Group, partition, storage names, mount points and hostnames (after pattern expansion) are unique."""
    spec = ctx.spec
    checks: list[tuple[str, list[tuple[tuple[str | int, ...], str]]]] = [
        ("node group", [(("nodes", i, "group"), g.group) for i, g in enumerate(spec.nodes)]),
        ("partition", [(("slurm", "partitions", i, "name"), p.name) for i, p in enumerate(spec.slurm.partitions)]),
        ("storage tier", [(("storage", i, "name"), s.name) for i, s in enumerate(spec.storage)]),
        ("mount point", [(("storage", i, "mount"), s.mount) for i, s in enumerate(spec.storage)]),
    ]
    for what, items in checks:
        seen: set[str] = set()
        for path, value in items:
            if value in seen:
                yield unique_names.finding(path, f"Duplicate {what} `{value}`; each must be unique.")
            seen.add(value)
    # Node counts are capped by the spec model (MAX_NODES_TOTAL), so this loop is bounded.
    hosts: dict[str, str] = {}
    for i, group in enumerate(spec.nodes):
        for index in range(1, group.count + 1):
            name = hostname_from_pattern(group.hostname, group.group, index)
            if name in hosts:
                yield unique_names.finding(
                    ("nodes", i, "hostname"),
                    f"Hostname `{name}` of group `{group.group}` is also produced by "
                    + ("another node of the same group." if hosts[name] == group.group else f"group `{hosts[name]}`."),
                    "Give the groups different names or hostname patterns, and put {index} in every pattern.",
                )
                break
            hosts[name] = group.group


@rule("NAM002", "dns-safe-hostnames", Level.ERROR, phase=1, tags=(SAFETY_TAG,))
def dns_safe_hostnames(ctx: RuleContext) -> Iterator[Finding]:
    """Hostname patterns give DNS-safe names ending in a number; hardware profile names are safe file names."""
    domain = ctx.spec.network.domain
    for i, group in enumerate(ctx.spec.nodes):
        # The widest index gives the longest name; the pattern type allows only {group} and {index}.
        for sample in {hostname_from_pattern(group.hostname, group.group, n) for n in (1, group.count)}:
            if not _HOST_RE.fullmatch(sample) or not _ENDS_IN_NUMBER_RE.fullmatch(sample):
                # All digits is refused too: resolvers read `001` as the address 0.0.0.1.
                yield dns_safe_hostnames.finding(
                    ("nodes", i, "hostname"),
                    f"Hostname pattern `{group.hostname}` gives `{sample}`, which is not a DNS-safe name ending in "
                    "a number (with a letter before it: all-digit names read as addresses).",
                    "Use lower-case letters, digits and '-' and end with {index}. " + HOSTNAME_PATTERN_HINT,
                )
                break
            if len(sample) + 1 + len(domain) > MAX_FQDN:
                yield dns_safe_hostnames.finding(
                    ("nodes", i, "hostname"),
                    f"`{sample}.{domain}` is longer than the {MAX_FQDN} characters DNS allows.",
                    "Shorten the hostname pattern or `network.domain`.",
                )
                break
    for name in ctx.spec.hardware:
        if not _HOST_RE.fullmatch(name):
            yield dns_safe_hostnames.finding(
                ("hardware", name),
                f"Hardware profile name `{name}` is not DNS-safe; it names generated files.",
                "Use lower-case letters, digits and '-'.",
            )


@rule("SAF001", "safe-mount-points", Level.ERROR, phase=1, tags=(SAFETY_TAG,))
def safe_mount_points(ctx: RuleContext) -> Iterator[Finding]:
    """Mount points are not system directories and no tier is mounted inside another."""
    mounts = [(i, tier.name, tier.mount) for i, tier in enumerate(ctx.spec.storage)]
    for i, name, mount in mounts:
        # The MountPoint type refuses these already; checked again for specs built in code.
        problem = system_dir_problem(mount)
        if problem:
            yield safe_mount_points.finding(("storage", i, "mount"), f"Tier `{name}`: {problem}.")
            continue
        for _, other, outer in mounts:
            if mount != outer and mount.startswith(outer.rstrip("/") + "/"):
                yield safe_mount_points.finding(
                    ("storage", i, "mount"),
                    f"Tier `{name}` is mounted at {mount}, inside tier `{other}` at {outer}; whichever mounts "
                    "last hides the other's files there, and unmounting one breaks the other.",
                    f"Mount `{name}` beside `{other}`, e.g. at /{name}, not below it.",
                )
                break


@rule("SAF002", "slurm-reserved-names", Level.ERROR, phase=1, tags=(SAFETY_TAG,))
def slurm_reserved_names(ctx: RuleContext) -> Iterator[Finding]:
    """Partition names are not names slurm.conf gives a meaning (PartitionName=DEFAULT)."""
    for i, part in enumerate(ctx.spec.slurm.partitions):
        if part.name.lower() in SLURM_RESERVED:
            yield slurm_reserved_names.finding(
                ("slurm", "partitions", i, "name"),
                f"Partition name `{part.name}` is reserved: slurm.conf reads `PartitionName=DEFAULT` as the defaults "
                "of every partition, so this partition would change them all.",
                "Choose another name, e.g. `main`.",
            )


@rule("SAF003", "slurm-conf-owned", Level.ERROR, phase=1, tags=(SAFETY_TAG,), gates_plan=False)
def slurm_conf_owned(ctx: RuleContext) -> Iterator[Finding]:
    """Extra slurm.conf parameters are neither ones clusterctl writes itself nor passwords."""
    for name in ctx.spec.site.slurm_conf:
        path = ("site", "slurm_conf", name)
        if name in SECRET:
            yield slurm_conf_owned.finding(
                path,
                f"`{name}` is a password: slurm.conf is readable by every user on every node.",
                "Keep it out of the spec; slurmdbd holds the database password (slurm.accounting).",
            )
        elif name in OWNED:
            field = SPEC_FIELD.get(name)
            yield slurm_conf_owned.finding(
                path,
                f"clusterctl writes `{name}` in slurm.conf itself; a second value would contradict it (and some, "
                "like AuthType or the controller lines, would open or break the cluster).",
                f"Set `{field}` in the spec instead."
                if field
                else "Remove it; `clusterctl render` shows the value used.",
            )
