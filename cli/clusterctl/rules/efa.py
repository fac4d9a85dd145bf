"""Rules for the AWS EFA software the efa role installs: the installer and aws-ofi-nccl pair up.

The installer ships aws-ofi-nccl since the 1.3x releases (catalog/efa.py); a node then has the
plugin release of the installer, whatever the spec says, so the two must agree. Every download is
checked against a checksum, so one must be known for what the role downloads.
"""

from __future__ import annotations

from collections.abc import Iterator

from clusterctl.catalog import efa
from clusterctl.catalog.compat import version_tuple
from clusterctl.rules.cloud import CloudUse, cloud_uses
from clusterctl.rules.engine import RuleContext, rule
from clusterctl.spec.findings import Finding, Level
from clusterctl.spec.providers import AwsProvider


def _efa_uses(ctx: RuleContext) -> Iterator[tuple[CloudUse, AwsProvider]]:
    """The AWS providers (the top level's, each burst group's) with GPU profiles on EFA instance types."""
    for use in cloud_uses(ctx.spec):
        if isinstance(use.provider, AwsProvider) and any(t.fabric == "efa" and t.is_gpu for _, _, t in use.profiles):
            yield use, use.provider


@rule("CLD090", "efa-installer-ships-plugin", Level.ERROR, tags=("cloud",), phase=1, gates_plan=False)
def efa_installer_ships_plugin(ctx: RuleContext) -> Iterator[Finding]:
    """The aws-ofi-nccl release is the one the EFA installer ships, when it ships one."""
    for use, provider in _efa_uses(ctx):
        shipped = efa.installer_ships(provider.efa_installer)
        if shipped.version is not None and shipped.version != provider.aws_ofi_nccl:
            yield efa_installer_ships_plugin.finding(
                use.where("aws_ofi_nccl"),
                f"EFA installer {provider.efa_installer}{use.label} installs aws-ofi-nccl {shipped.version} (its "
                f"libnccl-ofi package), but the spec pins {provider.aws_ofi_nccl}; the NCCL settings would be for the "
                "wrong plugin.",
                f'Set aws_ofi_nccl: "{shipped.version}", or pick the installer that ships {provider.aws_ofi_nccl} '
                "(EFA release notes).",
            )


@rule("CLD091", "efa-downloads-checksummed", Level.ERROR, tags=("cloud",), phase=1, gates_plan=False)
def efa_downloads_checksummed(ctx: RuleContext) -> Iterator[Finding]:
    """Every tarball the efa role downloads has a known checksum."""
    for use, provider in _efa_uses(ctx):
        yield from _checksummed(use, provider)


def _checksummed(use: CloudUse, provider: AwsProvider) -> Iterator[Finding]:
    if not (provider.efa_installer_checksum or efa.installer_checksum(provider.efa_installer)):
        known = ", ".join(sorted(efa.INSTALLER_CHECKSUMS, key=version_tuple))
        yield efa_downloads_checksummed.finding(
            use.where("efa_installer"),
            f"clusterctl knows no checksum for EFA installer {provider.efa_installer}{use.label} (it knows {known}).",
            f'Set {use.named("efa_installer_checksum")} to "sha256:<digest>" (sha256sum of '
            f"{efa.INSTALLER_URL.format(version=provider.efa_installer)}), or use a release it knows.",
        )
    shipped = efa.installer_ships(provider.efa_installer)
    if shipped.ships or provider.aws_ofi_nccl_checksum or efa.OFI_NCCL_CHECKSUMS.get(provider.aws_ofi_nccl):
        return
    url = efa.ofi_nccl_url(provider.aws_ofi_nccl)
    hint = (
        f"Set {use.named('aws_ofi_nccl_checksum')} (the plugin's GitHub release notes list the tarball's digest), or "
        "use an installer that ships the plugin (1.40.0 or newer)."
    )
    if shipped.known:
        yield efa_downloads_checksummed.finding(
            use.where("aws_ofi_nccl"),
            f"EFA installer {provider.efa_installer}{use.label} does not ship aws-ofi-nccl, so the efa role builds "
            f"{provider.aws_ofi_nccl} from {url}, whose checksum clusterctl does not know.",
            hint,
        )
    else:
        yield efa_downloads_checksummed.finding(
            use.where("efa_installer"),
            f"clusterctl does not know whether EFA installer {provider.efa_installer}{use.label} ships aws-ofi-nccl: "
            f"the efa role reads its package list, and where it ships none builds {provider.aws_ofi_nccl} from {url}, "
            "which fails without a checksum.",
            hint,
            level=Level.WARNING,
        )
