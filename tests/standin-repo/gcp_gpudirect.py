"""Stand-ins for Google's GPUDirect apt repositories (gce-ai-infra on Artifact Registry).

Imported by build.py beside this file. Google's repositories are unreachable from the test
machines; these carry Google's REAL package names, versions, file layout and repository layout
(an Artifact Registry apt repository: ``dists/<suite>/main/binary-*/Packages``) with harmless
contents. Every package says "clusterctl test stand-in" in its Description.

Layout written under OUT/gce-ai-infra/ (the roles' ``gpudirect_apt_base_url``)::

    dists/gpudirect-tcpxo-apt/   dmabuf-import-helper 1.1 and 1.2 (Architecture: all, DKMS source)
    dists/gpudirect-gib-apt/     nccl-gib 1.1.0 and 1.1.1
    pool/main/...                the .deb files

What the real packages hold, and where it is written down:

- dmabuf-import-helper: a DKMS source package; the Cluster Toolkit's a3mega blueprint
  (GoogleCloudPlatform/cluster-toolkit:examples/machine-learning/a3-megagpu-8g/
  a3mega-slurm-blueprint.yaml@1047080, install_dmabuf.yml) downloads it, moves
  ``usr/src/dmabuf-import-helper-<ver>`` to /usr/src, patches ``MODULE_IMPORT_NS(DMA_BUF)`` in
  ``import-helper.c`` and runs ``dkms add/build/install -m dmabuf-import-helper -v <ver>``;
  Google's Slurm prolog loads the module as ``import-helper`` and the receive-datapath-manager
  opens ``/dev/dmabuf_import_helper`` (GoogleCloudPlatform/slurm-gcp:tools/prologs-epilogs/
  receive-data-path-manager-mega@13fd92b). The stand-in source is a kernel module with that
  name and that line, and a dkms.conf; nothing is built from it in the tests (no kernel headers).
- nccl-gib: the a3ultra blueprint (cluster-toolkit:examples/machine-learning/a3-ultragpu-8g/
  a3ultra-slurm-blueprint.yaml@1047080) installs ``nccl-gib=1.1.0`` and sources
  ``/usr/local/gib/scripts/set_nccl_env.sh`` and ``/usr/local/gib/lib64`` from
  /etc/profile.d/nccl-gib.sh; the NeMo Dockerfile of the same commit names
  ``/usr/local/gib/configs/tuner_config_a3u.txtpb`` and lists what set_nccl_env.sh sets. The
  stand-in's set_nccl_env.sh sets exactly that list. The library name ``libnccl-net.so`` (what
  NCCL loads when NCCL_NET_PLUGIN is unset) is an assumption: the files read do not name it.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import subprocess
import textwrap
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

STANDIN = "clusterctl test stand-in"
REPO = "gce-ai-infra"
TCPXO_SUITE = "gpudirect-tcpxo-apt"
GIB_SUITE = "gpudirect-gib-apt"
# The pinned releases (what the example specs pin) and a newer one each: only an exact pin picks
# the older.
DMABUF_VERSIONS = ("1.1", "1.2")
NCCL_GIB_VERSIONS = ("1.1.0", "1.1.1")
LIBDIR = "/usr/lib/x86_64-linux-gnu"


def _google(pkg_cls: Any) -> dict[str, str]:
    """Pkg(vendor=...) where build.py's Pkg names whose package it stands in for (its Description)."""
    return {"vendor": "Google"} if "vendor" in getattr(pkg_cls, "__dataclass_fields__", {}) else {}


def dmabuf_import_helper(pkg_cls: Any, version: str) -> Any:
    """The DKMS source package, laid out as the toolkit's install_dmabuf.yml expects it."""
    src = f"/usr/src/dmabuf-import-helper-{version}"
    module = textwrap.dedent(
        f"""\
        // {STANDIN} for Google's dmabuf import helper {version} (GPUDirect-TCPXO): registers no device.
        #include <linux/module.h>
        #include <linux/dma-buf.h>

        MODULE_LICENSE("GPL");
        MODULE_DESCRIPTION("dmabuf import helper ({STANDIN})");
        MODULE_VERSION("{version}");
        MODULE_IMPORT_NS(DMA_BUF);

        static int __init import_helper_init(void) {{ return 0; }}
        static void __exit import_helper_exit(void) {{ }}
        module_init(import_helper_init);
        module_exit(import_helper_exit);
        """
    )
    dkms = textwrap.dedent(
        f"""\
        # {STANDIN}: the DKMS module Google's prolog loads with `modprobe import-helper`.
        PACKAGE_NAME="dmabuf-import-helper"
        PACKAGE_VERSION="{version}"
        BUILT_MODULE_NAME[0]="import-helper"
        DEST_MODULE_LOCATION[0]="/updates/dkms"
        MAKE[0]="make -C ${{kernel_source_dir}} M=${{dkms_tree}}/${{PACKAGE_NAME}}/${{PACKAGE_VERSION}}/build modules"
        CLEAN="make -C ${{kernel_source_dir}} M=${{dkms_tree}}/${{PACKAGE_NAME}}/${{PACKAGE_VERSION}}/build clean"
        AUTOINSTALL="yes"
        """
    )
    return pkg_cls(
        "dmabuf-import-helper",
        version,
        "dmabuf import helper kernel module (DKMS source) for GPUDirect-TCPXO",
        depends=["dkms"],
        arch="all",
        **_google(pkg_cls),
        files={
            f"{src}/dkms.conf": (0o644, dkms),
            f"{src}/Makefile": (0o644, f"# {STANDIN}\nobj-m += import-helper.o\n"),
            f"{src}/import-helper.c": (0o644, module),
            f"{src}/dmabuf_import_helper.h": (0o644, f"/* {STANDIN}: the ioctl interface of the helper */\n"),
        },
    )


# What the NeMo Dockerfile says set_nccl_env.sh sets (cluster-toolkit
# examples/machine-learning/a3-ultragpu-8g/nemo-framework/Dockerfile@1047080).
GIB_ENV = (
    ("NCCL_NET", "gIB"),
    ("NCCL_CROSS_NIC", "0"),
    ("NCCL_NET_GDR_LEVEL", "PIX"),
    ("NCCL_P2P_NET_CHUNKSIZE", "131072"),
    ("NCCL_NVLS_CHUNKSIZE", "524288"),
    ("NCCL_IB_ADAPTIVE_ROUTING", "1"),
    ("NCCL_IB_QPS_PER_CONNECTION", "4"),
    ("NCCL_IB_TC", "52"),
    ("NCCL_IB_FIFO_TC", "84"),
    ("NCCL_TUNER_CONFIG_PATH", "/usr/local/gib/configs/tuner_config_a3u.txtpb"),
)


def nccl_gib(pkg_cls: Any, shared_lib: Any, version: str) -> Any:
    """nccl-gib: the plugin under /usr/local/gib with its environment script and tuner configs."""
    env = "".join(f"export {name}={value}\n" for name, value in GIB_ENV)
    script = f"#!/bin/bash\n# {STANDIN} for nccl-gib {version}: sets what the NeMo Dockerfile mirrors.\n{env}"
    return pkg_cls(
        "nccl-gib",
        version,
        "NCCL gIB network plugin for A3 Ultra / A4 (RDMA over Converged Ethernet)",
        **_google(pkg_cls),
        files={
            "/usr/local/gib/lib64/libnccl-net.so": (0o644, shared_lib("libnccl-net.so", f"nccl-gib {version}")),
            "/usr/local/gib/scripts/set_nccl_env.sh": (0o755, script),
            "/usr/local/gib/configs/tuner_config_a3u.txtpb": (0o644, f"# {STANDIN}: A3 Ultra tuner config\n"),
            "/usr/local/gib/configs/tuner_config_a4.txtpb": (0o644, f"# {STANDIN}: A4 tuner config\n"),
        },
    )


def _index(root: Path, suite: str, gnupghome: Path, key_asc: str) -> None:
    """Packages for binary-amd64 and binary-all, and a signed Release, the way apt reads a suite."""
    dist = root / "dists" / suite
    hashes: list[tuple[str, bytes]] = []
    for arch in ("amd64", "all"):
        scan = subprocess.run(
            ["dpkg-scanpackages", "--multiversion", "--arch", arch, f"pool/{suite}"],
            cwd=root,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        # dpkg-scanpackages --arch also lists Architecture: all packages; each index keeps its own.
        stanzas = [s for s in scan.split("\n\n") if s.strip() and f"Architecture: {arch}\n" in s + "\n"]
        text = "\n\n".join(s.strip("\n") for s in stanzas) + ("\n" if stanzas else "")
        comp = dist / "main" / f"binary-{arch}"
        comp.mkdir(parents=True, exist_ok=True)
        (comp / "Packages").write_text(text)
        with gzip.open(comp / "Packages.gz", "wt") as f:
            f.write(text)
        for name in ("Packages", "Packages.gz"):
            hashes.append((f"main/binary-{arch}/{name}", (comp / name).read_bytes()))
    lines = [
        f"Origin: {STANDIN}",
        f"Label: {REPO} {suite} ({STANDIN}, NOT GOOGLE)",
        f"Suite: {suite}",
        f"Codename: {suite}",
        "Architectures: amd64 all",
        "Components: main",
        f"Date: {datetime.now(UTC).strftime('%a, %d %b %Y %H:%M:%S UTC')}",
        f"Description: {STANDIN}: Google's package names and versions, placeholder contents",
    ]
    for algo, title in (("md5", "MD5Sum"), ("sha256", "SHA256")):
        lines.append(f"{title}:")
        lines.extend(f" {hashlib.new(algo, data).hexdigest()} {len(data)} {name}" for name, data in hashes)
    (dist / "Release").write_text("\n".join(lines) + "\n")
    env = {**os.environ, "GNUPGHOME": str(gnupghome)}
    for args in (["--clearsign", "-o", "InRelease"], ["--detach-sign", "--armor", "-o", "Release.gpg"]):
        subprocess.run(["gpg", "--batch", "--yes", *args, "Release"], cwd=dist, env=env, check=True)
    (root / "clusterctl-standin.pub").write_text(key_asc)


def build_gcp(builder: Any, pkg_cls: Any, stage: Path, gnupghome: Path, key_asc: str) -> None:
    """Write the gce-ai-infra stand-in under ``stage`` (build.py's Builder and Pkg are passed in)."""
    root = stage / REPO
    for version in DMABUF_VERSIONS:
        builder.build_deb(dmabuf_import_helper(pkg_cls, version), root / "pool" / TCPXO_SUITE)
    for version in NCCL_GIB_VERSIONS:
        builder.build_deb(nccl_gib(pkg_cls, builder.shared_lib, version), root / "pool" / GIB_SUITE)
    for suite in (TCPXO_SUITE, GIB_SUITE):
        _index(root, suite, gnupghome, key_asc)
