"""The AWS EFA software stack: the EFA installer releases and the aws-ofi-nccl plugin they ship.

What a node on EFA needs (targets.md §1): the EFA installer (libfabric in /opt/amazon/efa,
Open MPI in /opt/amazon/openmpi, AWS's rdma-core and the efa kmod) and the aws-ofi-nccl plugin
(NCCL's network plugin for libfabric). Recent installers ship the plugin as the ``libnccl-ofi``
package; older ones do not, and the plugin is then built from its release tarball.

Sources, each pinned:

- Installer checksums: aws/aws-parallelcluster-cookbook
  ``cookbooks/aws-parallelcluster-environment/attributes/environment.rb`` @ f75d84c (1.34.0) and
  the cookbook's EFA upgrade commits d9013ae (1.36.0), 05b17d7 (1.38.0, 1.38.1) and PR #2953
  (1.41.0): ParallelCluster pins each installer tarball by sha256.
- Which plugin an installer ships: the EFA release notes
  (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-changelog.html, read in the
  stored es_es/it_it/id_id copies for 1.40.0-1.43.2 and the docs.amazonaws.cn copy for 1.50.0,
  1.51.0): "Upgrade to libnccl-ofi 1.14.2" (1.40.0), "1.15.0" (1.42.0), "1.16.1" (1.43.0),
  "1.16.2" (1.43.1), "1.16.3" (1.43.2), "Amazon OFI NCCL Plugin 1.21.1" (1.50.0), "1.22.0"
  (1.51.0); 1.41.0 changed only rdma-core. Up to 1.24.1 the installer shipped no plugin: the
  installer's own ChangeLog.md and README.md ("Additional software may be required, such as
  ... the nccl-ofi-plugin") in the copy vanderlei-filho/efa-installer @ f45e1ea. Releases in
  between are not in the table: the efa role reads the tarball's package list instead.
- Plugin file names and library directory per release: aws/aws-ofi-nccl ``src/Makefile.am``
  at each tag (v1.9.0-aws adds libnccl-ofi-tuner.so; v1.15.0 renames the plugin
  libnccl-net-ofi.so with a libnccl-net.so symlink; v1.16.0 makes the tuner names symlinks to
  the plugin; v1.17.0 builds each name as its own library) and ``contrib/debian-template/rules``
  (the .deb installs to /opt/amazon/ofi-nccl/lib/$(DEB_HOST_MULTIARCH) up to v1.16.3; commit
  6eb0870a, first in v1.17.0, moves it to /opt/amazon/ofi-nccl/lib).
- Who sets NCCL_TUNER_PLUGIN: aws/aws-ofi-nccl ``src/platform-aws.cpp`` ``configure_tuner``
  (from v1.16.0 the plugin sets it to itself when it is unset).
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterctl.catalog.compat import at_least, version_tuple

# Where the installer puts things (efa_installer.sh LIBFABRIC_INSTALL_PATH, OPENMPI_INSTALL_PATH)
# and where the plugin's packages install (contrib/debian-template/rules OFI_NCCL_PREFIX).
EFA_PREFIX = "/opt/amazon/efa"
OPENMPI_PREFIX = "/opt/amazon/openmpi"
OFI_NCCL_PREFIX = "/opt/amazon/ofi-nccl"
INSTALLED_PACKAGES_FILE = "/opt/amazon/efa_installed_packages"
# NVIDIA GDRCopy as ParallelCluster pins it for its GPU nodes (aws/aws-parallelcluster-cookbook:
# cookbooks/aws-parallelcluster-platform/resources/gdrcopy/partial/_gdrcopy_common.rb@f75d84c lines
# 15-21): release 2.4 and the sha256 of its release archive.
GDRCOPY_VERSION = "2.4"
GDRCOPY_CHECKSUM = "sha256:39e74d505ca16160567f109cc23478580d157da897f134989df1d563e55f7a5b"

INSTALLER_URL = "https://efa-installer.amazonaws.com/aws-efa-installer-{version}.tar.gz"

# Installer release -> "sha256:<hex>" of its tarball, as ParallelCluster pins it.
INSTALLER_CHECKSUMS: dict[str, str] = {
    "1.34.0": "sha256:bd68839e741b0afd3ec2e37d50603803cfa7a279c120f0a736cc57c2ff2d7fdc",
    "1.36.0": "sha256:de183f333cfb58aeb7908a67bf9106985ba3ccb7f8638b851d2a0d8dbfacaec4",
    "1.38.0": "sha256:4f436954f35ad53754b4d005fd8d0be63de3b4184de41a695b504bdce0fecb22",
    "1.38.1": "sha256:83923374afd388b1cfcf4b3a21a2b1ba7cf46a01a587f7b519b8386cb95e4f81",
    "1.41.0": "sha256:3506354cdfbe31ff552fe75f5d0d9bb7efd29cf79bd99457347d29c751c38f9f",
}

# Installer release -> the aws-ofi-nccl release its libnccl-ofi package carries.
INSTALLER_SHIPS_OFI_NCCL: dict[str, str] = {
    "1.40.0": "1.14.2",
    "1.41.0": "1.14.2",
    "1.42.0": "1.15.0",
    "1.43.0": "1.16.1",
    "1.43.1": "1.16.2",
    "1.43.2": "1.16.3",
    "1.50.0": "1.21.1",
    "1.51.0": "1.22.0",
}
# The newest installer known to ship no plugin (its ChangeLog.md, see above).
LAST_INSTALLER_WITHOUT_OFI_NCCL = "1.24.1"

# aws-ofi-nccl release tarballs: tags up to v1.13.x end in "-aws" (the GitHub release names).
OFI_NCCL_URL = "https://github.com/aws/aws-ofi-nccl/releases/download/v{tag}/aws-ofi-nccl-{tag}.tar.gz"
# Release -> checksum of its tarball, from the release notes on GitHub.
OFI_NCCL_CHECKSUMS: dict[str, str] = {
    "1.11.1": "sha256:6d95eff619208e30d11044068c3781c1c079b180a683d422ce9f6a96ebeadb80",
    "1.12.1": "sha256:3722e0790b98e65d04f143fe8484fd0a05dcec6419eeac1cdcad5e49f6c7cf8e",
}


@dataclass(frozen=True)
class Shipped:
    """What an EFA installer release is known to ship of aws-ofi-nccl."""

    known: bool
    version: str | None = None

    @property
    def ships(self) -> bool:
        return self.version is not None


def installer_ships(installer: str) -> Shipped:
    """The aws-ofi-nccl release ``installer`` ships: known with a version, known with none, or unknown."""
    if installer in INSTALLER_SHIPS_OFI_NCCL:
        return Shipped(True, INSTALLER_SHIPS_OFI_NCCL[installer])
    if version_tuple(installer) <= version_tuple(LAST_INSTALLER_WITHOUT_OFI_NCCL):
        return Shipped(True, None)
    return Shipped(False)


def installer_checksum(installer: str) -> str | None:
    """The known ``sha256:<hex>`` of an installer tarball, None when clusterctl does not know it."""
    return INSTALLER_CHECKSUMS.get(installer)


def ofi_nccl_tag(plugin: str) -> str:
    """The git tag (and tarball name part) of a plugin release: ``1.13.2-aws``, ``1.14.0``."""
    return f"{plugin}-aws" if version_tuple(plugin) < (1, 14, 0) else plugin


def ofi_nccl_url(plugin: str) -> str:
    """The GitHub release tarball of a plugin release."""
    return OFI_NCCL_URL.format(tag=ofi_nccl_tag(plugin))


def ofi_nccl_libdir(plugin: str, arch: str = "x86_64") -> str:
    """Where the plugin's libraries are: the .deb's multiarch directory before v1.17.0, lib/ since.

    The efa role builds a plugin from source into the same directory its package would use, so
    the job environment depends on the plugin release only.
    """
    if at_least(plugin, "1.17.0"):
        return f"{OFI_NCCL_PREFIX}/lib"
    return f"{OFI_NCCL_PREFIX}/lib/{arch}-linux-gnu"


@dataclass(frozen=True)
class PluginFiles:
    """The library names a plugin release installs (``links``: name -> the file it points at)."""

    libraries: tuple[str, ...]
    links: dict[str, str]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(sorted({*self.libraries, *self.links}))


def ofi_nccl_files(plugin: str) -> PluginFiles:
    """The shared objects a plugin release installs on AWS (``--enable-platform-aws``)."""
    if at_least(plugin, "1.17.0"):
        return PluginFiles(("libnccl-net-ofi.so", "libnccl-net.so", "libnccl-ofi-tuner.so", "libnccl-tuner-ofi.so"), {})
    if at_least(plugin, "1.16.0"):
        return PluginFiles(
            ("libnccl-net-ofi.so",),
            {n: "libnccl-net-ofi.so" for n in ("libnccl-net.so", "libnccl-ofi-tuner.so", "libnccl-tuner-ofi.so")},
        )
    if at_least(plugin, "1.15.0"):
        return PluginFiles(("libnccl-net-ofi.so", "libnccl-ofi-tuner.so"), {"libnccl-net.so": "libnccl-net-ofi.so"})
    if at_least(plugin, "1.9.0"):
        return PluginFiles(("libnccl-net.so", "libnccl-ofi-tuner.so"), {})
    return PluginFiles(("libnccl-net.so",), {})


def ofi_nccl_net_plugin(plugin: str) -> str | None:
    """NCCL_NET_PLUGIN that selects this release (``ofi`` -> libnccl-net-ofi.so), None before v1.15.0.

    Before v1.15.0 the plugin is only ``libnccl-net.so``, the name NCCL loads when the variable
    is unset; naming ``ofi`` there would make NCCL look for a file that does not exist.
    """
    return "ofi" if at_least(plugin, "1.15.0") else None


def ofi_nccl_tuner(plugin: str, arch: str = "x86_64") -> str | None:
    """NCCL_TUNER_PLUGIN a job must set, None where there is no tuner or the plugin sets it itself.

    v1.9.0-v1.15.x ship the tuner as its own library that NCCL 2.19-2.20 only loads when named
    (awsome-distributed-training nccl-tests-container.sbatch names it); from v1.16.0 the plugin
    sets the variable itself when it is unset (platform-aws.cpp ``configure_tuner``).
    """
    if at_least(plugin, "1.16.0") or not at_least(plugin, "1.9.0"):
        return None
    return f"{ofi_nccl_libdir(plugin, arch)}/libnccl-ofi-tuner.so"
