#!/usr/bin/env python3
"""Build the clusterctl TEST STAND-IN apt repositories for the GPU-role Molecule scenarios.

NVIDIA's repositories are unreachable from the test machines, so this script builds
dpkg-deb packages that carry NVIDIA's REAL package names, version strings and Depends
lines, with harmless stand-in contents (shell scripts that print a version or run a
sleep loop, empty shared libraries, systemd units). Every package says
"clusterctl test stand-in" in its Description; nothing outside tests/ and the roles'
molecule/ folders may point at them.

Why real names and versions: the roles' pinning (apt preferences, holds), the exact
version look-ups (apt-cache madison), upgrades by changing the pin and the
"fabric manager must equal the driver" check are then exercised for real by apt.

Layout written under OUT (see README.md beside this file):

    cuda/<distro>/x86_64/                 flat apt repo, the CUDA repository's layout
    cuda-nofm/<distro>/x86_64/            same driver, but NO fabric manager at 570.133.20
    libnvidia-container/stable/deb/amd64/ flat apt repo, nvidia-container-toolkit
    enroot/releases/download/v<ver>/      enroot and enroot+caps .debs (GitHub release layout)
    pyxis/                                nvslurm-plugin-pyxis .deb (what pyxis' `make deb` builds)
    nccl-tests/                           a source archive with nccl-tests' make interface
    gce-ai-infra/dists/<suite>/           Google's GPUDirect apt suites (gcp_gpudirect.py beside this file)
    efa/                                  AWS EFA installer and aws-ofi-nccl tarballs (efa_standin.py)
    keys/clusterctl-standin.asc           the throwaway signing key (also in every repo dir)

Each repository is signed (InRelease, Release.gpg) by a key generated per build, so the
roles' signed-by keyring handling runs for real. The build is skipped when OUT/.stamp
matches this script and its arguments; a lock makes concurrent scenarios safe.

Usage: build.py --out DIR [--distro debian12] [--slurm-version 22.05] [--force]
"""

from __future__ import annotations

import argparse
import fcntl
import gzip
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import textwrap
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# Sibling modules: AWS EFA installer and aws-ofi-nccl tarballs; Google's GPUDirect apt repositories.
import efa_standin
import gcp_gpudirect

STANDIN = "clusterctl test stand-in"
MAINTAINER = "clusterctl tests <clusterctl-tests@invalid>"
LIBDIR = "/usr/lib/x86_64-linux-gnu"
# The driver releases in the stand-in CUDA repository: the pinned one, a newer one of
# the same branch (the upgrade test bumps the pin to it) and one >= 580 release, where
# the fabric manager and NSCQ packages lost the branch suffix.
DRIVER_PINNED = "570.133.20"
DRIVER_NEWER = "570.148.08"
DRIVER_580 = "580.65.06"
TOOLS = {"dpkg-deb": "dpkg", "dpkg-scanpackages": "dpkg-dev", "gpg": "gnupg", "gcc": "gcc"}


def log(msg: str) -> None:
    sys.stderr.write(f"standin-repo: {msg}\n")


@dataclass
class Pkg:
    """One stand-in binary package."""

    name: str
    version: str
    summary: str
    depends: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    arch: str = "amd64"
    # path inside the package -> (mode, bytes | str); a str starting with "->" is a symlink
    files: dict[str, tuple[int, bytes | str]] = field(default_factory=dict)
    conffiles: list[str] = field(default_factory=list)
    postinst: str | None = None
    # Whose package this stands in for (the Description says so).
    vendor: str = "NVIDIA"


def sh(body: str) -> str:
    return "#!/bin/sh\n" + textwrap.dedent(body).lstrip()


def daemon(real: str, name: str) -> str:
    """A stand-in daemon: records its arguments, then a harmless sleep loop.

    The shell stays the main process, so /proc/<pid>/cmdline keeps the arguments the
    unit passed (the verify steps read them back, e.g. --persistence-mode).
    """
    return sh(
        f"""
        # {STANDIN} for {real}: no GPU is touched. Records its arguments, then sleeps.
        mkdir -p /run/clusterctl-standin
        echo "$0 $*" > /run/clusterctl-standin/{name}.args
        while :; do sleep 3600; done
        """
    )


def unit(description: str, exec_start: str, after: str = "network.target") -> str:
    return textwrap.dedent(
        f"""\
        # {STANDIN}: same unit name and ExecStart path as the real package.
        [Unit]
        Description={description} ({STANDIN})
        After={after}

        [Service]
        Type=simple
        ExecStart={exec_start}
        Restart=on-failure

        [Install]
        WantedBy=multi-user.target
        """
    )


def doc(pkg: str) -> dict[str, tuple[int, bytes | str]]:
    return {f"/usr/share/doc/{pkg}/README.standin": (0o644, f"{pkg}: {STANDIN}; contents are placeholders.\n")}


class Builder:
    def __init__(self, work: Path) -> None:
        self.work = work
        self.cc_cache: dict[tuple[str, str], bytes] = {}

    # -- compiled pieces -----------------------------------------------------------
    def shared_lib(self, soname: str, tag: str) -> bytes:
        """A real (empty) ELF shared library with SONAME, so ldconfig -p can find it."""
        key = (soname, tag)
        if key not in self.cc_cache:
            src = self.work / f"{soname}.c"
            out = self.work / f"{soname}.so"
            src.write_text(f'const char clusterctl_standin[] = "{tag} ({STANDIN})";\n')
            subprocess.run(
                ["gcc", "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", str(out), str(src)],
                check=True,
            )
            self.cc_cache[key] = out.read_bytes()
        return self.cc_cache[key]

    def spank_plugin(self, slurm_version: str) -> bytes:
        """A SPANK plugin that loads in slurmd of `slurm_version` and does nothing.

        Slurm refuses plugins whose plugin_version major.minor differs from its own
        ("Incompatible Slurm plugin version"): the reason pyxis must be built for the
        installed Slurm. This stand-in carries the symbols SPANK_PLUGIN() defines.
        """
        major, minor = (int(x) for x in slurm_version.split(".")[:2])
        src = self.work / "spank_pyxis.c"
        out = self.work / "spank_pyxis.so"
        src.write_text(
            textwrap.dedent(
                f"""\
                /* {STANDIN} for pyxis: what SPANK_PLUGIN(pyxis, 1) defines, built for Slurm {slurm_version}. */
                const char plugin_name[] = "pyxis";
                const char plugin_type[] = "spank";
                const unsigned int plugin_version = ({major}u << 16) | ({minor}u << 8);
                const unsigned int spank_plugin_version = 1;
                int slurm_spank_init(void *sp, int ac, char **av) {{ (void)sp; (void)ac; (void)av; return 0; }}
                """
            )
        )
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(src)], check=True)
        return out.read_bytes()

    # -- packaging -----------------------------------------------------------------
    def build_deb(self, pkg: Pkg, dest: Path) -> Path:
        root = self.work / f"{pkg.name}_{pkg.version.replace(':', '%3a')}"
        if root.exists():
            shutil.rmtree(root)
        files = {**doc(pkg.name), **pkg.files}
        for path, (mode, content) in files.items():
            target = root / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, str) and content.startswith("->"):
                target.symlink_to(content[2:])
                continue
            data = content.encode() if isinstance(content, str) else content
            target.write_bytes(data)
            target.chmod(mode)
        debian = root / "DEBIAN"
        debian.mkdir(parents=True)
        control = [
            f"Package: {pkg.name}",
            f"Version: {pkg.version}",
            f"Architecture: {pkg.arch}",
            f"Maintainer: {MAINTAINER}",
            "Section: non-free/libs",
            "Priority: optional",
        ]
        if pkg.depends:
            control.append("Depends: " + ", ".join(pkg.depends))
        if pkg.conflicts:
            control.append("Conflicts: " + ", ".join(pkg.conflicts))
        control.append(f"Description: {pkg.summary} ({STANDIN})")
        control.append(f" {STANDIN}: {pkg.vendor}'s package name and version, placeholder contents.")
        control.append(" Built by clusterctl tests/standin-repo/build.py; never install outside tests.")
        (debian / "control").write_text("\n".join(control) + "\n")
        if pkg.conffiles:
            (debian / "conffiles").write_text("".join(f"{c}\n" for c in pkg.conffiles))
        if pkg.postinst:
            (debian / "postinst").write_text(pkg.postinst)
            (debian / "postinst").chmod(0o755)
        dest.mkdir(parents=True, exist_ok=True)
        deb = dest / f"{pkg.name}_{pkg.version.split(':')[-1]}_{pkg.arch}.deb"
        subprocess.run(
            ["dpkg-deb", "--root-owner-group", "-Zgzip", "-z1", "--build", str(root), str(deb)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        shutil.rmtree(root)
        return deb


# -- package sets ----------------------------------------------------------------------
def driver_family(b: Builder, version: str, with_fm: bool = True) -> list[Pkg]:
    """The R5xx driver packages of one release, named as in NVIDIA's CUDA repository."""
    branch = version.split(".")[0]
    rev = f"{version}-1"
    exact = f"(= {rev})"
    common = [
        f"nvidia-utils-{branch} {exact}",
        f"nvidia-compute-utils-{branch} {exact}",
        f"libnvidia-compute-{branch} {exact}",
    ]
    nvsmi = sh(
        f"""
        # {STANDIN} for nvidia-smi {version}: no GPU is queried.
        case "$*" in
          *driver_version*) echo "{version}" ;;
          *) echo "NVIDIA-SMI {version}    Driver Version: {version}    ({STANDIN}, no GPUs)" ;;
        esac
        """
    )
    pkgs = [
        Pkg(
            f"libnvidia-compute-{branch}",
            rev,
            "NVIDIA libcompute package",
            files={
                f"{LIBDIR}/libcuda.so.{version}": (0o644, b.shared_lib("libcuda.so.1", f"libcuda {version}")),
                f"{LIBDIR}/libcuda.so.1": (0o777, f"->libcuda.so.{version}"),
            },
        ),
        Pkg(
            f"nvidia-utils-{branch}",
            rev,
            "NVIDIA driver support binaries",
            files={"/usr/bin/nvidia-smi": (0o755, nvsmi)},
        ),
        Pkg(
            f"nvidia-compute-utils-{branch}",
            rev,
            "NVIDIA compute utilities",
            files={
                "/usr/bin/nvidia-persistenced": (0o755, daemon("nvidia-persistenced", "nvidia-persistenced")),
                # Ubuntu's unit starts the daemon WITHOUT persistence mode; the role overrides it.
                "/lib/systemd/system/nvidia-persistenced.service": (
                    0o644,
                    unit(
                        "NVIDIA Persistence Daemon",
                        "/usr/bin/nvidia-persistenced --user nvidia-persistenced --no-persistence-mode --verbose",
                    ),
                ),
            },
        ),
        Pkg(
            f"nvidia-dkms-{branch}-open",
            rev,
            "NVIDIA DKMS package (open kernel modules)",
            conflicts=[f"nvidia-dkms-{branch}"],
        ),
        Pkg(
            f"nvidia-dkms-{branch}",
            rev,
            "NVIDIA DKMS package (proprietary kernel modules)",
            conflicts=[f"nvidia-dkms-{branch}-open"],
        ),
        Pkg(
            f"nvidia-driver-{branch}-open",
            rev,
            "NVIDIA driver metapackage (open kernel modules)",
            depends=[f"nvidia-dkms-{branch}-open {exact}", *common],
            conflicts=[f"nvidia-driver-{branch}"],
        ),
        Pkg(
            f"nvidia-driver-{branch}",
            rev,
            "NVIDIA driver metapackage (proprietary kernel modules)",
            depends=[f"nvidia-dkms-{branch} {exact}", *common],
            conflicts=[f"nvidia-driver-{branch}-open"],
        ),
        Pkg(
            f"nvidia-open-{branch}",
            rev,
            f"NVIDIA open kernel module driver, branch {branch}",
            depends=[f"nvidia-driver-{branch}-open {exact}"],
        ),
        Pkg(
            f"cuda-drivers-{branch}",
            rev,
            f"CUDA driver metapackage, branch {branch}",
            depends=[f"nvidia-driver-{branch} {exact}"],
        ),
    ]
    if with_fm:
        pkgs += fabric_manager(version)
    return pkgs


def fabric_manager(version: str) -> list[Pkg]:
    branch = version.split(".")[0]
    rev = f"{version}-1"
    # From R580 the packages dropped the branch suffix (techref §5.3).
    suffix = "" if int(branch) >= 580 else f"-{branch}"
    fm_bin = daemon("nv-fabricmanager", "nv-fabricmanager")
    return [
        Pkg(f"libnvidia-nscq{suffix}", rev, "NVSwitch Configuration and Query library"),
        Pkg(
            f"nvidia-fabricmanager{suffix}",
            rev,
            "Fabric Manager for NVSwitch based systems",
            # Fabric manager only works with the exact same driver version.
            depends=[f"nvidia-driver-{branch}-open (= {rev}) | nvidia-driver-{branch} (= {rev})"],
            files={
                "/usr/bin/nv-fabricmanager": (0o755, fm_bin),
                "/usr/share/nvidia/nvswitch/fabricmanager.cfg": (0o644, f"# {STANDIN}\nLOG_LEVEL=4\n"),
                "/lib/systemd/system/nvidia-fabricmanager.service": (
                    0o644,
                    unit(
                        "NVIDIA fabric manager service",
                        "/usr/bin/nv-fabricmanager -c /usr/share/nvidia/nvswitch/fabricmanager.cfg",
                    ),
                ),
            },
            conffiles=["/usr/share/nvidia/nvswitch/fabricmanager.cfg"],
        ),
    ]


def cuda_toolkit(b: Builder) -> list[Pkg]:
    nvcc = sh(
        f"""
        # {STANDIN} for nvcc 12.8: "compiles" by writing a shell script that prints its origin.
        out=""; src=""
        while [ $# -gt 0 ]; do
          case "$1" in
            --version) echo "Cuda compilation tools, release 12.8, V12.8.93 ({STANDIN})"; exit 0 ;;
            -o) out="$2"; shift ;;
            *.cu) src="$1" ;;
          esac
          shift
        done
        [ -n "$out" ] || {{ echo "nvcc stand-in: no -o given" >&2; exit 1; }}
        printf '#!/bin/sh\\necho "# %s built from %s by the nvcc stand-in"\\n' "$(basename "$out")" "$src" > "$out"
        echo 'echo "# Avg bus bandwidth    : 0.000 (no GPU)"' >> "$out"
        chmod 755 "$out"
        """
    )
    tgt = "/usr/local/cuda-12.8/targets/x86_64-linux"
    return [
        Pkg("cuda-nvcc-12-8", "12.8.93-1", "CUDA nvcc", files={"/usr/local/cuda-12.8/bin/nvcc": (0o755, nvcc)}),
        Pkg(
            "cuda-cudart-12-8",
            "12.8.90-1",
            "CUDA Runtime native Libraries",
            files={
                f"{tgt}/lib/libcudart.so.12.8.90": (0o644, b.shared_lib("libcudart.so.12", "cudart 12.8.90")),
                f"{tgt}/lib/libcudart.so.12": (0o777, "->libcudart.so.12.8.90"),
                "/usr/local/cuda-12.8/lib64": (0o777, "->targets/x86_64-linux/lib"),
            },
        ),
        Pkg(
            "cuda-cudart-dev-12-8",
            "12.8.90-1",
            "CUDA Runtime native dev links, headers",
            depends=["cuda-cudart-12-8 (>= 12.8.90)"],
            files={
                f"{tgt}/include/cuda_runtime.h": (0o644, f"/* {STANDIN} */\n"),
                f"{tgt}/lib/libcudart.so": (0o777, "->libcudart.so.12"),
            },
        ),
        Pkg(
            "cuda-toolkit-12-8",
            "12.8.1-1",
            "CUDA Toolkit 12.8 meta-package",
            depends=["cuda-nvcc-12-8 (>= 12.8.93)", "cuda-cudart-dev-12-8 (>= 12.8.90)"],
        ),
    ]


def nccl(b: Builder) -> list[Pkg]:
    pkgs = []
    # The pinned build, the same NCCL built for another CUDA (sorts higher!) and a newer
    # NCCL: only an exact pin picks the first.
    for upstream, cuda in (("2.26.2", "12.8"), ("2.26.2", "12.9"), ("2.27.3", "12.8"), ("2.27.3", "12.9")):
        ver = f"{upstream}-1+cuda{cuda}"
        lib = b.shared_lib("libnccl.so.2", f"nccl {ver}")
        pkgs.append(
            Pkg(
                "libnccl2",
                ver,
                "NVIDIA Collective Communication Library (NCCL) Runtime",
                files={
                    f"{LIBDIR}/libnccl.so.{upstream}": (0o644, lib),
                    f"{LIBDIR}/libnccl.so.2": (0o777, f"->libnccl.so.{upstream}"),
                },
            )
        )
        pkgs.append(
            Pkg(
                "libnccl-dev",
                ver,
                "NVIDIA Collective Communication Library (NCCL) Development Files",
                depends=[f"libnccl2 (= {ver})"],
                files={
                    "/usr/include/nccl.h": (0o644, f"/* {STANDIN}: NCCL {ver} */\n"),
                    f"{LIBDIR}/libnccl.so": (0o777, "->libnccl.so.2"),
                },
            )
        )
    return pkgs


def dcgm() -> list[Pkg]:
    pkgs = []
    for ver in ("1:3.3.8", "1:3.3.9"):
        plain = ver.split(":")[1]
        dcgmi = sh(f"""
            # {STANDIN} for dcgmi {plain}
            echo "dcgmi  version: {plain} ({STANDIN})"
            """)
        pkgs.append(
            Pkg(
                "datacenter-gpu-manager",
                ver,
                "NVIDIA Data Center GPU Manager (DCGM)",
                files={
                    "/usr/bin/nv-hostengine": (0o755, daemon("nv-hostengine", "nv-hostengine")),
                    "/usr/bin/dcgmi": (0o755, dcgmi),
                    "/lib/systemd/system/nvidia-dcgm.service": (
                        0o644,
                        unit("NVIDIA DCGM service", "/usr/bin/nv-hostengine -n --service-account nvidia-dcgm"),
                    ),
                },
            )
        )
    exporter = textwrap.dedent(
        f'''\
        #!/usr/bin/env python3
        """{STANDIN} for dcgm-exporter: serves /metrics naming the configured counters, value 0."""
        import argparse, http.server, os
        p = argparse.ArgumentParser()
        p.add_argument("-a", "--address", default=os.environ.get("DCGM_EXPORTER_LISTEN", ":9400"))
        p.add_argument("-f", "--collectors",
                       default=os.environ.get("DCGM_EXPORTER_COLLECTORS", "/etc/dcgm-exporter/default-counters.csv"))
        p.add_argument("-c", "--collect-interval", default="30000")
        a, _ = p.parse_known_args()
        host, _, port = a.address.rpartition(":")
        def body():
            out = ["# {STANDIN}: no GPU, every value is 0"]
            with open(a.collectors) as f:
                for line in f:
                    line = line.strip()
                    if not line or line.startswith("#"):
                        continue
                    name, kind, helptext = (x.strip() for x in line.split(",", 2))
                    out += [f"# HELP {{name}} {{helptext}}", f"# TYPE {{name}} {{kind}}", f'{{name}}{{{{gpu="0"}}}} 0']
            return ("\\n".join(out) + "\\n").encode()
        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path != "/metrics":
                    self.send_error(404)
                    return
                data = body()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            def log_message(self, *args):
                pass
        http.server.ThreadingHTTPServer((host or "0.0.0.0", int(port)), H).serve_forever()
        '''
    )
    pkgs.append(
        Pkg(
            "datacenter-gpu-manager-exporter",
            "3.3.9-3.6.1-1",
            "NVIDIA DCGM exporter for Prometheus",
            depends=["datacenter-gpu-manager (>= 1:3.3.9)", "python3"],
            files={
                "/usr/bin/dcgm-exporter": (0o755, exporter),
                "/etc/dcgm-exporter/default-counters.csv": (0o644, "DCGM_FI_DEV_SM_CLOCK, gauge, SM clock.\n"),
                "/lib/systemd/system/dcgm-exporter.service": (
                    0o644,
                    unit("NVIDIA DCGM exporter", "/usr/bin/dcgm-exporter", after="nvidia-dcgm.service"),
                ),
            },
            conffiles=["/etc/dcgm-exporter/default-counters.csv"],
        )
    )
    return pkgs


def container_toolkit() -> list[Pkg]:
    pkgs = []
    for v in ("1.17.5", "1.17.8"):
        rev = f"{v}-1"
        script = sh(f"""
            # {STANDIN} for NVIDIA container toolkit {v}: does nothing.
            echo "NVIDIA Container Runtime version {v} ({STANDIN})"
            """)
        pkgs += [
            Pkg("libnvidia-container1", rev, "NVIDIA container runtime library"),
            Pkg(
                "libnvidia-container-tools",
                rev,
                "NVIDIA container runtime library (command-line tools)",
                depends=[f"libnvidia-container1 (>= {rev})"],
                files={"/usr/bin/nvidia-container-cli": (0o755, script)},
            ),
            Pkg(
                "nvidia-container-toolkit-base",
                rev,
                "NVIDIA Container Toolkit Base",
                files={"/usr/bin/nvidia-ctk": (0o755, script), "/usr/bin/nvidia-container-runtime": (0o755, script)},
            ),
            Pkg(
                "nvidia-container-toolkit",
                rev,
                "NVIDIA Container toolkit",
                depends=[
                    f"nvidia-container-toolkit-base (= {rev})",
                    f"libnvidia-container-tools (>= {rev})",
                    "libnvidia-container-tools (<< 2.0.0)",
                ],
                files={"/usr/bin/nvidia-container-runtime-hook": (0o755, script)},
            ),
        ]
    return pkgs


def enroot(version: str) -> list[Pkg]:
    rev = f"{version}-1"

    def hook(n: str) -> tuple[int, bytes | str]:
        return (
            0o755,
            sh(f"""
            # {STANDIN} for enroot's {n} hook: does nothing.
            exit 0
            """),
        )

    files: dict[str, tuple[int, bytes | str]] = {
        "/usr/bin/enroot": (
            0o755,
            sh(f"""
            # {STANDIN} for enroot {version}
            case "$1" in
              version) echo "{version}" ;;
              *) echo "enroot stand-in ({STANDIN}): '$1' is not implemented" >&2; exit 1 ;;
            esac
            """),
        ),
        "/etc/enroot/enroot.conf": (0o644, f"# {STANDIN}: enroot's default configuration file\n"),
        "/etc/enroot/mounts.d/10-system.fstab": (0o644, f"# {STANDIN}\n"),
        "/etc/enroot/mounts.d/20-config.fstab": (0o644, f"# {STANDIN}\n"),
    }
    for n in (
        "10-cgroups.sh",
        "10-devices.sh",
        "10-home.sh",
        "10-localtime.sh",
        "10-shadow.sh",
        "20-autorc.sh",
        "20-mounts.sh",
        "98-nvidia.sh",
        "99-mellanox.sh",
    ):
        files[f"/etc/enroot/hooks.d/{n}"] = hook(n)
    # The extra hooks enroot ships but does not enable (conf/hooks/extra).
    for n in ("50-slurm-pmi.sh", "50-slurm-pytorch.sh", "50-sharp.sh", "50-mig-config.sh"):
        files[f"/usr/share/enroot/hooks.d/{n}"] = hook(n)
    caps_files = {
        f"/usr/bin/{n}": (
            0o755,
            sh(f"""
                     # {STANDIN} for {n}
                     exit 0
                     """),
        )
        for n in ("enroot-mksquashovlfs", "enroot-aufs2ovlfs")
    }
    return [
        # enroot's real Depends also list parallel; left out to keep the tests' installs small.
        Pkg(
            "enroot",
            rev,
            "Unprivileged container sandboxing utility",
            depends=["bash (>= 4.2)", "curl", "gawk", "jq (>= 1.5)", "squashfs-tools"],
            files=files,
            conffiles=[
                "/etc/enroot/enroot.conf",
                "/etc/enroot/mounts.d/10-system.fstab",
                "/etc/enroot/mounts.d/20-config.fstab",
            ],
        ),
        Pkg(
            "enroot+caps",
            rev,
            "Unprivileged container sandboxing utility (extra capabilities)",
            depends=[f"enroot (= {rev})", "libcap2-bin"],
            files=caps_files,
            postinst=sh("""
                set -e
                setcap cap_sys_admin,cap_mknod+pe /usr/bin/enroot-mksquashovlfs
                setcap cap_sys_admin+pe /usr/bin/enroot-aufs2ovlfs
                """),
        ),
    ]


def pyxis(b: Builder, version: str, slurm_version: str) -> Pkg:
    so = f"{LIBDIR}/slurm-wlm/spank_pyxis.so"
    return Pkg(
        "nvslurm-plugin-pyxis",
        f"{version}-1",
        f"Pyxis SPANK plugin for Slurm (built for Slurm {slurm_version})",
        files={so: (0o644, b.spank_plugin(slurm_version)), "/usr/share/pyxis/pyxis.conf": (0o644, f"required {so}\n")},
    )


def nccl_tests_archive(dest: Path, version: str = "2.14.1") -> Path:
    top = f"nccl-tests-{version}"
    makefile = textwrap.dedent(
        f"""\
        # {STANDIN} for NVIDIA/nccl-tests {version}: the same make interface
        # (CUDA_HOME, NCCL_HOME, MPI, MPI_HOME, BUILDDIR); nvcc is the stand-in compiler.
        CUDA_HOME ?= /usr/local/cuda
        NCCL_HOME ?= /usr
        MPI ?= 0
        BUILDDIR ?= build
        NVCC = $(CUDA_HOME)/bin/nvcc
        TESTS = all_reduce all_gather broadcast reduce_scatter alltoall sendrecv
        all: $(TESTS:%=$(BUILDDIR)/%_perf)
        $(BUILDDIR)/%_perf: src/%.cu
        \t@mkdir -p $(BUILDDIR)
        \t$(NVCC) -o $@ $< -L$(NCCL_HOME)/lib -lnccl
        clean:
        \trm -rf $(BUILDDIR)
        """
    )
    members = {f"{top}/Makefile": makefile, f"{top}/README.standin": f"{STANDIN}\n"}
    for t in ("all_reduce", "all_gather", "broadcast", "reduce_scatter", "alltoall", "sendrecv"):
        members[f"{top}/src/{t}.cu"] = f"/* {STANDIN}: {t} */\n"
    dest.mkdir(parents=True, exist_ok=True)
    out = dest / f"nccl-tests-standin-{version}.tar.gz"
    with tarfile.open(out, "w:gz") as tar:
        for name, text in sorted(members.items()):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    return out


# -- repository indexes and signing -----------------------------------------------------
def index_repo(repo: Path, gnupghome: Path, key_asc: str, label: str) -> None:
    packages = subprocess.run(
        ["dpkg-scanpackages", "--multiversion", "."], cwd=repo, check=True, capture_output=True, text=True
    ).stdout
    (repo / "Packages").write_text(packages)
    with gzip.open(repo / "Packages.gz", "wt") as f:
        f.write(packages)
    lines = [
        f"Origin: {STANDIN}",
        f"Label: {label} ({STANDIN}, NOT NVIDIA)",
        "Architectures: amd64 all",
        f"Date: {datetime.now(UTC).strftime('%a, %d %b %Y %H:%M:%S UTC')}",
        f"Description: {STANDIN}: NVIDIA package names and versions, placeholder contents",
    ]
    for algo, name in (("md5", "MD5Sum"), ("sha256", "SHA256")):
        lines.append(f"{name}:")
        for fname in ("Packages", "Packages.gz"):
            data = (repo / fname).read_bytes()
            lines.append(f" {hashlib.new(algo, data).hexdigest()} {len(data)} {fname}")
    (repo / "Release").write_text("\n".join(lines) + "\n")
    env = {**os.environ, "GNUPGHOME": str(gnupghome)}
    for args in (["--clearsign", "-o", "InRelease"], ["--detach-sign", "--armor", "-o", "Release.gpg"]):
        subprocess.run(["gpg", "--batch", "--yes", *args, "Release"], cwd=repo, env=env, check=True)
    (repo / "clusterctl-standin.pub").write_text(key_asc)


def make_key(gnupghome: Path) -> str:
    env = {**os.environ, "GNUPGHOME": str(gnupghome)}
    subprocess.run(
        [
            "gpg",
            "--batch",
            "--quiet",
            "--passphrase",
            "",
            "--quick-gen-key",
            f"clusterctl test stand-in repository (NOT NVIDIA) <{MAINTAINER.split('<')[1]}",
            "rsa2048",
            "sign",
            "never",
        ],
        env=env,
        check=True,
        capture_output=True,
    )
    return subprocess.run(
        ["gpg", "--batch", "--armor", "--export"], env=env, check=True, capture_output=True, text=True
    ).stdout


def ensure_tools() -> None:
    missing = sorted({pkg for tool, pkg in TOOLS.items() if shutil.which(tool) is None})
    if not missing:
        return
    if os.geteuid() != 0:
        sys.exit(f"standin-repo: missing {', '.join(missing)}; run: sudo apt-get install -y {' '.join(missing)}")
    log(f"installing {' '.join(missing)} from Debian's archive")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", *missing], check=True, env=env, stdout=subprocess.DEVNULL)


def build(out: Path, distro: str, slurm_version: str) -> None:
    with tempfile.TemporaryDirectory(prefix="standin-") as tmp:
        work = Path(tmp)
        gnupghome = work / "gnupg"
        gnupghome.mkdir(mode=0o700)
        key = make_key(gnupghome)
        b = Builder(work)
        stage = work / "out"
        cuda = stage / "cuda" / distro / "x86_64"
        nofm = stage / "cuda-nofm" / distro / "x86_64"
        ctk = stage / "libnvidia-container" / "stable" / "deb" / "amd64"
        full = [
            *driver_family(b, DRIVER_PINNED),
            *driver_family(b, DRIVER_NEWER),
            *driver_family(b, DRIVER_580),
            *cuda_toolkit(b),
            *nccl(b),
            *dcgm(),
        ]
        for p in full:
            b.build_deb(p, cuda)
        # The failure case: the pinned driver is there, its fabric manager is not (only the newer one).
        for p in [*driver_family(b, DRIVER_PINNED, with_fm=False), *driver_family(b, DRIVER_NEWER)]:
            b.build_deb(p, nofm)
        for p in container_toolkit():
            b.build_deb(p, ctk)
        for repo, label in (
            (cuda, "CUDA repository"),
            (nofm, "CUDA repository without fabric manager 570.133.20"),
            (ctk, "libnvidia-container repository"),
        ):
            index_repo(repo, gnupghome, key, label)
        for p in enroot("3.5.0"):
            b.build_deb(p, stage / "enroot" / "releases" / "download" / "v3.5.0")
        b.build_deb(pyxis(b, "0.20.0", slurm_version), stage / "pyxis")
        nccl_tests_archive(stage / "nccl-tests")
        gcp_gpudirect.build_gcp(b, Pkg, stage, gnupghome, key)
        efa_standin.build_all(b, Pkg, stage)
        (stage / "keys").mkdir()
        (stage / "keys" / "clusterctl-standin.asc").write_text(key)
        (stage / "README.txt").write_text(
            f"{STANDIN} repositories built by tests/standin-repo/build.py (distro {distro}, "
            f"pyxis for Slurm {slurm_version}). NOT NVIDIA software; for Molecule tests only.\n"
        )
        for child in out.iterdir():
            if child.name not in (".lock", ".stamp"):
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
        for child in stage.iterdir():
            shutil.move(str(child), out / child.name)
        for path in out.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path, help="directory to (re)build the repositories in")
    ap.add_argument("--distro", default="debian12", help="CUDA repository distro path (debian12, ubuntu2404, ...)")
    ap.add_argument("--slurm-version", default="22.05", help="Slurm major.minor the pyxis stand-in is built for")
    ap.add_argument("--force", action="store_true", help="rebuild even when the stamp matches")
    args = ap.parse_args()
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    out.chmod(0o755)
    sources = Path(__file__).read_bytes() + Path(gcp_gpudirect.__file__).read_bytes()
    sources += Path(efa_standin.__file__).read_bytes()
    stamp = hashlib.sha256(sources + f"{args.distro} {args.slurm_version}".encode()).hexdigest()
    with (out / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stamp_file = out / ".stamp"
        if not args.force and stamp_file.exists() and stamp_file.read_text().strip() == stamp:
            log(f"{out} is up to date")
            return 0
        ensure_tools()
        build(out, args.distro, args.slurm_version)
        stamp_file.write_text(stamp + "\n")
        log(f"built {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
