"""Stand-in AWS EFA installer tarballs and aws-ofi-nccl release tarballs (roles/efa's Molecule scenario).

efa-installer.amazonaws.com and GitHub are unreachable from the test machines. These tarballs have
the vendor's real layout, package names and file paths, with harmless contents:

    efa/aws-efa-installer-<ver>.tar.gz
        aws-efa-installer/efa_installer.sh     the real options (-y -n -l -k -m -g -d -u and the long
                                               forms), the real package selection (-k leaves out the
                                               efa-driver/ kmod, -l efa-config, -m libfabric, Open MPI
                                               and efa-profile), the real record
                                               /opt/amazon/efa_installed_packages, and older packages
                                               skipped as the real installer skips them
        aws-efa-installer/{common.sh,env.sh,efa_test.sh,package_list.txt,README.md}
        aws-efa-installer/DEBS/{DEBIAN12,UBUNTU2204,UBUNTU2404}/x86_64/
            libfabric1-aws_<v>_amd64.deb       /opt/amazon/efa/lib/libfabric.so.1 (a real ELF)
            libfabric-aws-bin_<v>_amd64.deb    /opt/amazon/efa/bin/fi_info, fi_pingpong
            openmpi40-aws_<v>_amd64.deb        /opt/amazon/openmpi/{bin/mpirun,lib/libmpi.so.40}
            efa-profile_<v>_all.deb            /etc/profile.d/efa.sh, /etc/ld.so.conf.d/efa.conf
            efa-config_<v>_all.deb             /etc/security/limits.d/01_efa.conf
            libnccl-ofi_<v>-1_amd64.deb        (installers that ship the plugin) the plugin's libraries
                                               under /opt/amazon/ofi-nccl, /etc/ld.so.conf.d/100_ofinccl.conf
            efa-driver/efa_<v>_amd64.deb       the kmod's DKMS source tree (no module is built)
    efa/aws-ofi-nccl-<tag>.tar.gz              ./configure (--prefix, --libdir, --with-libfabric
                                               checked like the real one), make, make install of the
                                               release's library names
    efa/gdrcopy-2.4.tar.gz                     packages/build-deb-packages.sh building gdrdrv-dkms
                                               (gdrdrv.service), libgdrapi, gdrcopy-tests, gdrcopy

Which installer ships which plugin, the plugin's library names and its library directory are the
real ones (cli/clusterctl/catalog/efa.py, with sources); the component versions of each installer
are those its release notes list.

Sources of the layout: the installer's efa_installer.sh, README.md and DEBS/ tree in the copy
vanderlei-filho/efa-installer@f45e1ea (installer 1.24.1); aws/aws-ofi-nccl src/Makefile.am and
contrib/debian-template/rules (per tag).
"""

from __future__ import annotations

import io
import tarfile
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STANDIN = "clusterctl test stand-in"
OFI_PREFIX = "/opt/amazon/ofi-nccl"


@dataclass(frozen=True)
class Installer:
    """One installer release: its component versions and the plugin it ships (None: none)."""

    version: str
    libfabric: str
    openmpi: str
    efa_driver: str
    efa_config: str
    efa_profile: str
    ofi_nccl: str | None


# Component versions as the release notes list them (libfabric, Open MPI, efa driver, efa-config,
# efa-profile, libnccl-ofi).
INSTALLERS: dict[str, Installer] = {
    i.version: i
    for i in (
        Installer("1.24.1", "1.18.1", "4.1.5-1", "2.5.0-1.amzn1", "1.15", "1.5", None),
        Installer("1.41.0", "2.1.0amzn2.0", "4.1.7-2", "2.15.0-1", "1.18", "1.7", "1.14.2"),
        Installer("1.50.0", "2.6.0amzn1.0", "4.1.7-2", "3.3.0-1", "1.18", "1.7", "1.21.1"),
    )
}
# Releases built as plugin source tarballs (installers that ship none).
OFI_NCCL_SOURCES = ("1.13.2",)
DISTRO_DIRS = ("DEBIAN12", "UBUNTU2204", "UBUNTU2404")


def _vt(version: str) -> tuple[int, ...]:
    return tuple(int("".join(c for c in p if c.isdigit()) or 0) for p in version.split("."))


def ofi_libdir(plugin: str) -> str:
    """The .deb's library directory: multiarch before 1.17.0, lib/ since (commit 6eb0870a)."""
    return f"{OFI_PREFIX}/lib" if _vt(plugin) >= (1, 17, 0) else f"{OFI_PREFIX}/lib/x86_64-linux-gnu"


def ofi_files(plugin: str) -> tuple[list[str], dict[str, str]]:
    """(real libraries, symlinks -> target) of a plugin release (src/Makefile.am at its tag)."""
    v = _vt(plugin)
    if v >= (1, 17, 0):
        return ["libnccl-net-ofi.so", "libnccl-net.so", "libnccl-ofi-tuner.so", "libnccl-tuner-ofi.so"], {}
    if v >= (1, 16, 0):
        links = {n: "libnccl-net-ofi.so" for n in ("libnccl-net.so", "libnccl-ofi-tuner.so", "libnccl-tuner-ofi.so")}
        return ["libnccl-net-ofi.so"], links
    if v >= (1, 15, 0):
        return ["libnccl-net-ofi.so", "libnccl-ofi-tuner.so"], {"libnccl-net.so": "libnccl-net-ofi.so"}
    if v >= (1, 9, 0):
        return ["libnccl-net.so", "libnccl-ofi-tuner.so"], {}
    return ["libnccl-net.so"], {}


def _sh(body: str) -> str:
    return "#!/bin/bash\n" + textwrap.dedent(body).lstrip()


def _packages(b: Any, pkg_cls: Any, inst: Installer) -> dict[str, Any]:
    """Relative path in DEBS/<distro>/x86_64 -> Pkg."""
    fi_info = _sh(
        f"""
        # {STANDIN} for libfabric's fi_info {inst.libfabric}: no EFA device is ever found.
        case " $* " in
          *" --version "*) printf 'fi_info: {inst.libfabric}\\nlibfabric: {inst.libfabric}\\nlibfabric api: 2.1\\n' ;;
          *" -p efa "*|*" --provider efa "*|*" -p efa"*) echo "fi_getinfo: -61 (No data available)" >&2; exit 61 ;;
          *) echo "provider: tcp ({STANDIN})" ;;
        esac
        """
    )
    mpirun = _sh(f'echo "mpirun (Open MPI) {inst.openmpi.split("-")[0]} ({STANDIN})"\n')
    libfabric = b.shared_lib("libfabric.so.1", f"libfabric {inst.libfabric}")
    out: dict[str, Any] = {
        f"libfabric1-aws_{inst.libfabric}_amd64.deb": pkg_cls(
            "libfabric1-aws",
            inst.libfabric,
            "AWS libfabric (EFA provider)",
            files={
                "/opt/amazon/efa/lib/libfabric.so.1.0.0": (0o644, libfabric),
                "/opt/amazon/efa/lib/libfabric.so.1": (0o777, "->libfabric.so.1.0.0"),
                "/opt/amazon/efa/lib/libfabric.so": (0o777, "->libfabric.so.1"),
            },
            vendor="AWS",
        ),
        f"libfabric-aws-bin_{inst.libfabric}_amd64.deb": pkg_cls(
            "libfabric-aws-bin",
            inst.libfabric,
            "AWS libfabric utilities",
            files={
                "/opt/amazon/efa/bin/fi_info": (0o755, fi_info),
                "/opt/amazon/efa/bin/fi_pingpong": (0o755, _sh("exit 0\n")),
            },
            vendor="AWS",
        ),
        f"openmpi40-aws_{inst.openmpi}_amd64.deb": pkg_cls(
            "openmpi40-aws",
            inst.openmpi,
            "Open MPI built for EFA",
            files={
                "/opt/amazon/openmpi/bin/mpirun": (0o755, mpirun),
                "/opt/amazon/openmpi/lib/libmpi.so.40": (
                    0o644,
                    b.shared_lib("libmpi.so.40", f"openmpi {inst.openmpi}"),
                ),
            },
            vendor="AWS",
        ),
        f"efa-profile_{inst.efa_profile}_all.deb": pkg_cls(
            "efa-profile",
            inst.efa_profile,
            "EFA profile and loader paths",
            arch="all",
            files={
                "/etc/profile.d/efa.sh": (0o644, "PATH=/opt/amazon/openmpi/bin:/opt/amazon/efa/bin:$PATH\n"),
                "/etc/ld.so.conf.d/efa.conf": (0o644, "/opt/amazon/efa/lib\n/opt/amazon/openmpi/lib\n"),
            },
            conffiles=["/etc/profile.d/efa.sh", "/etc/ld.so.conf.d/efa.conf"],
            vendor="AWS",
        ),
        f"efa-config_{inst.efa_config}_all.deb": pkg_cls(
            "efa-config",
            inst.efa_config,
            "EFA system limits",
            arch="all",
            files={
                "/etc/security/limits.d/01_efa.conf": (0o644, "* soft memlock unlimited\n* hard memlock unlimited\n")
            },
            conffiles=["/etc/security/limits.d/01_efa.conf"],
            vendor="AWS",
        ),
        f"efa-driver/efa_{inst.efa_driver}_amd64.deb": pkg_cls(
            "efa",
            inst.efa_driver,
            "EFA kernel module (DKMS source; the stand-in builds no module)",
            files={f"/usr/src/efa-{inst.efa_driver.split('-')[0]}/dkms.conf": (0o644, f"# {STANDIN}\n")},
            vendor="AWS",
        ),
    }
    if inst.ofi_nccl:
        libdir = ofi_libdir(inst.ofi_nccl)
        libs, links = ofi_files(inst.ofi_nccl)
        files: dict[str, tuple[int, bytes | str]] = {
            f"{libdir}/{n}": (0o644, b.shared_lib(n, f"aws-ofi-nccl {inst.ofi_nccl}")) for n in libs
        }
        files.update({f"{libdir}/{n}": (0o777, f"->{t}") for n, t in links.items()})
        files["/etc/ld.so.conf.d/100_ofinccl.conf"] = (0o644, f"{libdir}\n")
        out[f"libnccl-ofi_{inst.ofi_nccl}-1_amd64.deb"] = pkg_cls(
            "libnccl-ofi",
            f"{inst.ofi_nccl}-1",
            "NCCL libfabric plugin",
            files=files,
            vendor="AWS",
        )
    return out


INSTALLER_SH = r"""#!/bin/bash
# clusterctl test stand-in for the AWS EFA installer's efa_installer.sh: the same options, package
# selection, install paths and record (/opt/amazon/efa_installed_packages) as the real script
# (efa_installer.sh of installer 1.24.1), installing the stand-in .debs of DEBS/. No kernel module.
source ./env.sh
INSTALLED_PKGS_FILE="/opt/amazon/efa_installed_packages"
DBG_PKGS=0; UNINSTALL=0; UNATTENDED=0; NO_VERIFY=0; SKIP_LIMITS=0; SKIP_KMOD=0; MINIMAL=0
mkdir -p /var/lib/clusterctl-standin
echo "$*" > /var/lib/clusterctl-standin/efa_installer.args
if [ ! -e common.sh ]; then echo "Please cd into the installer directory." >&2; exit 1; fi
. common.sh
TEMP=$(getopt -o :dnuylkmg \
	--long debug-packages,no-verify,uninstall,yes,skip-limit-conf,skip-kmod,minimal,enable-gdr -- "$@") || exit 1
eval set -- "$TEMP"
while true; do
	case "$1" in
	-d|--debug-packages) DBG_PKGS=1; shift ;;
	-u|--uninstall) UNINSTALL=1; shift ;;
	-y|--yes) UNATTENDED=1; shift ;;
	-n|--no-verify) NO_VERIFY=1; shift ;;
	-l|--skip-limit-conf) SKIP_LIMITS=1; shift ;;
	-k|--skip-kmod) SKIP_KMOD=1; shift ;;
	-m|--minimal) MINIMAL=1; shift ;;
	-g|--enable-gdr) shift ;;
	--) shift; break ;;
	*) echo "usage: efa_installer.sh [-d] [-u] [-y] [-n] [-l] [-k] [-m] [-g]" >&2; exit 1 ;;
	esac
done
echo "= Starting Amazon Elastic Fabric Adapter Installation Script ($STANDIN) ="
echo "= EFA Installer Version: ${EFA_INSTALLER_VERSION} ="
is_root
detect_os
if [ ${UNATTENDED} -ne 1 ]; then
	read -r -p "This script will install the EFA kernel driver and required user space packages. Continue? [y/N] " reply
	[ "$reply" = y ] || exit 1
fi
if [ ${UNINSTALL} -eq 1 ]; then
	[ -f "$INSTALLED_PKGS_FILE" ] || { echo "Error: EFA is not installed, exiting." >&2; exit 1; }
	dpkg -r $(grep -v '^#' "$INSTALLED_PKGS_FILE" | tr ' ' '\n' | cut -d_ -f1)
	rm -f "$INSTALLED_PKGS_FILE"
	exit 0
fi
base_dir="DEBS/${DISTRO_DIR}/x86_64"
pkgs=(); installed=()
for path in ${base_dir}/*.deb $( [ ${SKIP_KMOD} -eq 0 ] && echo ${base_dir}/efa-driver/*.deb ); do
	name=$(basename "$path" .deb)
	[ ${SKIP_LIMITS} -eq 1 ] && [[ $name = efa-config* ]] && continue
	if [ ${MINIMAL} -eq 1 ] && [[ $name = *libfabric* || $name = *openmpi* || $name = efa-profile* ]]; then
		echo "skipping ${name} because of minimal installation"; continue
	fi
	installed+=("$name")
	pkg_name=${name%%_*}; pkg_ver=$(echo "$name" | cut -d_ -f2)
	have=$(dpkg-query -W -f='${Version}' "$pkg_name" 2>/dev/null)
	if [ -n "$have" ] && dpkg --compare-versions "$pkg_ver" le "$have"; then
		echo "${pkg_name}_${have} already installed"; continue
	fi
	pkgs+=("$path")
done
if [ ${#pkgs[@]} -gt 0 ]; then
	echo "== Installing EFA packages =="
	dpkg -i "${pkgs[@]}" || { echo "Error: failed to install EFA packages, exiting" >&2; exit 1; }
fi
mkdir -p /opt/amazon
debug=no; [ ${DBG_PKGS} -eq 1 ] && debug=yes
cat <<EOF >"${INSTALLED_PKGS_FILE}"
# EFA installer version: ${EFA_INSTALLER_VERSION}
# Debug packages installed: ${debug}
# Packages installed:
${installed[*]}
EOF
if [ ${SKIP_KMOD} -eq 0 ]; then
	echo "Reloading EFA kernel module ($STANDIN: no module is loaded)"
fi
if [ ${NO_VERIFY} -eq 0 ] && [ ${MINIMAL} -eq 0 ]; then
	./efa_test.sh
fi
echo "EFA installation complete."
echo "- Libfabric was installed in /opt/amazon/efa"
echo "- Open MPI was installed in /opt/amazon/openmpi"
"""

COMMON_SH = r"""# clusterctl test stand-in for the EFA installer's common.sh: the OS checks the script uses.
STANDIN="clusterctl test stand-in"
is_root() { [ "$(id -u)" -eq 0 ] || { echo "Error: run as root" >&2; exit 1; }; }
detect_os() {
	. /etc/os-release
	case "${ID}${VERSION_ID}" in
	debian12) DISTRO_DIR=DEBIAN12 ;;
	ubuntu22.04) DISTRO_DIR=UBUNTU2204 ;;
	ubuntu24.04) DISTRO_DIR=UBUNTU2404 ;;
	*) echo "Unsupported operating system." >&2; exit 1 ;;
	esac
	export DEBIAN_FRONTEND=noninteractive
}
"""

EFA_TEST_SH = r"""#!/bin/bash
# clusterctl test stand-in for efa_test.sh: the real one runs fi_pingpong where an EFA device is.
for d in /sys/bus/pci/devices/*; do
	[ "$(cat "$d/vendor" 2>/dev/null)" = 0x1d0f ] && { echo "EFA device found; the stand-in does not test it"; exit 0; }
done
echo "EFA device not detected, skipping test."
"""


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = 0
    tar.addfile(info, io.BytesIO(data))


def efa_installer_archive(b: Any, pkg_cls: Any, dest: Path, version: str) -> Path:
    """``dest/aws-efa-installer-<version>.tar.gz`` with the real layout (see the module docstring)."""
    inst = INSTALLERS[version]
    debs = {
        rel: b.build_deb(pkg, b.work / "efa-debs" / version / Path(rel).parent)
        for rel, pkg in _packages(b, pkg_cls, inst).items()
    }
    top = "aws-efa-installer"
    dest.mkdir(parents=True, exist_ok=True)
    out = dest / f"aws-efa-installer-{version}.tar.gz"
    listing = []
    with tarfile.open(out, "w:gz") as tar:
        _add(tar, f"{top}/efa_installer.sh", INSTALLER_SH.encode(), 0o755)
        _add(tar, f"{top}/common.sh", COMMON_SH.encode(), 0o644)
        _add(tar, f"{top}/efa_test.sh", EFA_TEST_SH.encode(), 0o755)
        _add(tar, f"{top}/env.sh", f"EFA_INSTALLER_VERSION={version}\n".encode(), 0o644)
        _add(tar, f"{top}/README.md", f"# EFA Installer README ({STANDIN})\n".encode(), 0o644)
        for distro in DISTRO_DIRS:
            for rel, deb in sorted(debs.items()):
                path = f"DEBS/{distro}/x86_64/{Path(rel).parent / deb.name}".replace("/./", "/")
                listing.append(path)
                _add(tar, f"{top}/{path}", deb.read_bytes(), 0o644)
        _add(tar, f"{top}/package_list.txt", ("\n".join(listing) + "\n").encode(), 0o644)
    return out


def ofi_nccl_source_archive(b: Any, dest: Path, version: str) -> Path:
    """``dest/aws-ofi-nccl-<tag>.tar.gz``: configure/make/make install of the release's libraries."""
    tag = f"{version}-aws" if _vt(version) < (1, 14, 0) else version
    top = f"aws-ofi-nccl-{tag}"
    libs, links = ofi_files(version)
    configure = _sh(
        f"""
        # {STANDIN} for aws-ofi-nccl {version}'s configure: the same options; checks libfabric is there.
        prefix=/usr/local; libdir=; libfabric=; cuda=
        for a in "$@"; do
          case "$a" in
            --prefix=*) prefix=${{a#*=}} ;;
            --libdir=*) libdir=${{a#*=}} ;;
            --with-libfabric=*) libfabric=${{a#*=}} ;;
            --with-cuda=*) cuda=${{a#*=}} ;;
            --enable-platform-aws|--disable-tests|--enable-cudart-dynamic|--without-*|--disable-*) ;;
            *) echo "configure: error: unrecognized option: $a" >&2; exit 1 ;;
          esac
        done
        [ -n "$libdir" ] || libdir=$prefix/lib
        if [ ! -e "$libfabric/lib/libfabric.so.1" ] && [ ! -e "$libfabric/lib64/libfabric.so.1" ]; then
          echo "configure: error: libfabric not found in '$libfabric'" >&2; exit 1
        fi
        printf 'PREFIX=%s\\nLIBDIR=%s\\nCONFIGURED_WITH=%s\\n' "$prefix" "$libdir" "$*" > config.mk
        echo "configured aws-ofi-nccl {version} ($STANDIN) for $libdir"
        """
    ).replace("$STANDIN", STANDIN)
    install_lines = [f"\tinstall -m 0644 standin/{n} $(DESTDIR)$(LIBDIR)/{n}" for n in libs]
    install_lines += [f"\tln -sf {t} $(DESTDIR)$(LIBDIR)/{n}" for n, t in links.items()]
    makefile = (
        f"# {STANDIN} for aws-ofi-nccl {version}: `make` and `make install` as the real autotools build.\n"
        "include config.mk\n"
        "all: build.stamp\n"
        "build.stamp: config.mk\n"
        f"\t@echo 'CXX libnccl-net-ofi ({STANDIN})'\n"
        "\ttouch build.stamp\n"
        "install: build.stamp\n"
        "\tmkdir -p $(DESTDIR)$(LIBDIR)\n" + "\n".join(install_lines) + "\n"
    )
    dest.mkdir(parents=True, exist_ok=True)
    out = dest / f"aws-ofi-nccl-{tag}.tar.gz"
    with tarfile.open(out, "w:gz") as tar:
        _add(tar, f"{top}/configure", configure.encode(), 0o755)
        _add(tar, f"{top}/Makefile", makefile.encode(), 0o644)
        _add(tar, f"{top}/README.standin", f"{STANDIN}\n".encode(), 0o644)
        for n in libs:
            _add(tar, f"{top}/standin/{n}", b.shared_lib(n, f"aws-ofi-nccl {version}"), 0o644)
    return out


# GDRCopy's packages/build-deb-packages.sh: the same four packages ParallelCluster installs, named
# <name>_<version>-1_<arch>.<Distro><Ver>[+cuda<x.y>].deb as the real script names them, built on the
# node with dpkg-deb from harmless contents (gdrdrv.service runs /bin/true; no kernel module).
GDRCOPY_BUILD_SH = r"""#!/bin/bash
# clusterctl test stand-in for GDRCopy {version}'s packages/build-deb-packages.sh.
set -euo pipefail
[ -n "${{CUDA:-}}" ] || {{ echo "CUDA is not set" >&2; exit 1; }}
. /etc/os-release
platform="${{ID^}}${{VERSION_ID//./_}}"
arch=$(dpkg --print-architecture)
build() {{  # name suffix [path content]...
    local name=$1 suffix=$2 dir
    shift 2
    dir=$(mktemp -d)
    chmod 0755 "$dir"
    mkdir -p "$dir/DEBIAN"
    printf 'Package: %s\nVersion: {version}-1\nArchitecture: %s\n' "$name" "$arch" > "$dir/DEBIAN/control"
    printf 'Maintainer: stand-in\nDescription: clusterctl test stand-in\n' >> "$dir/DEBIAN/control"
    while [ $# -gt 0 ]; do
        mkdir -p "$dir/$(dirname "$1")"
        printf '%s\n' "$2" > "$dir/$1"
        shift 2
    done
    dpkg-deb --root-owner-group --build "$dir" "${{name}}_{version}-1_${{arch}}.${{platform}}${{suffix}}.deb" >/dev/null
    rm -rf "$dir"
}}
unit=$(printf '[Unit]\nDescription=GDRCopy gdrdrv (stand-in)\n[Service]\nType=oneshot\nRemainAfterExit=yes\n')
unit+=$(printf '\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target')
build gdrdrv-dkms "" lib/systemd/system/gdrdrv.service "$unit" usr/src/gdrdrv-{version}/dkms.conf PACKAGE_NAME=gdrdrv
build libgdrapi "" usr/lib/x86_64-linux-gnu/libgdrapi.so.{version} stand-in
build gdrcopy-tests "+cuda12.8" usr/bin/copybw '#!/bin/sh'
build gdrcopy "" usr/share/doc/gdrcopy/README stand-in
"""


def gdrcopy_source_archive(dest: Path, version: str = "2.4") -> Path:
    """``dest/gdrcopy-<version>.tar.gz`` as GitHub's tag archive: gdrcopy-<version>/packages/build-deb-packages.sh."""
    dest.mkdir(parents=True, exist_ok=True)
    out = dest / f"gdrcopy-{version}.tar.gz"
    with tarfile.open(out, "w:gz") as tar:
        top = f"gdrcopy-{version}"
        _add(tar, f"{top}/packages/build-deb-packages.sh", GDRCOPY_BUILD_SH.format(version=version).encode(), 0o755)
        _add(tar, f"{top}/README.standin", f"{STANDIN}\n".encode(), 0o644)
    return out


def build_all(b: Any, pkg_cls: Any, stage: Path) -> None:
    """Every stand-in installer, plugin source tarball and the GDRCopy archive into ``stage/efa``."""
    for version in INSTALLERS:
        efa_installer_archive(b, pkg_cls, stage / "efa", version)
    for version in OFI_NCCL_SOURCES:
        ofi_nccl_source_archive(b, stage / "efa", version)
    gdrcopy_source_archive(stage / "efa")
