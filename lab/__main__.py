"""``python -m lab up|down|status SPEC``: build the bare-metal lab of SPEC and bring its cluster up, or remove it.

up:     the BMC CA (the spec's ``bmc.ca_bundle``), ``clusterctl image build`` (the archive), the
        render ``up`` makes from the lock, the boot programs, libvirt, the bridge, the machines
        (powered off), the BMC emulator, the PXE server; then ``clusterctl up`` (the lab's engine).
down:   ``clusterctl down --force`` (the BMCs power the machines off), then every domain, disk,
        process and the bridge the lab made. The consoles stay in ``<build>/lab/``.
status: each machine's domain state and its console file.

Options: ``--out BUILD_DIR`` (default build/<cluster>), ``--state-dir`` (default ``.clusterctl/``
beside SPEC, as clusterctl's), ``--lock`` (default SPEC with .lock for .yaml), ``--no-cluster``
(up: the lab only, no ``clusterctl up``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

from clusterctl.commands.common import default_state_root
from clusterctl.environ import Env
from clusterctl.image.baremetal import IMAGES, with_archives
from clusterctl.image.lock import read_lock
from clusterctl.pipeline import render
from clusterctl.render.tree import render_files
from clusterctl.spec.findings import SpecError
from clusterctl.spec.loader import load_spec
from clusterctl.spec.machines import read_machines
from clusterctl.spec.providers import BaremetalProvider
from lab import domains, host
from lab.config import BMC_USER, Lab, LabError, ca_bundle_path, load_lab

REQUIRED_TOOLS = ("qemu-system-x86_64", "qemu-img", "virsh", "/usr/sbin/libvirtd", "/usr/sbin/dnsmasq", "openssl")
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "clusterctl-lab"


def log(message: str) -> None:
    """One line of the lab's progress."""
    print(f"{time.strftime('%H:%M:%S')} [lab] {message}", flush=True)  # noqa: T201


def check_host() -> None:
    """The host tools and the libvirt binding the lab needs (scripts/host-tools.sh installs them)."""
    missing = [tool for tool in REQUIRED_TOOLS if shutil.which(tool) is None]
    if missing:
        raise LabError(f"missing on this machine: {', '.join(missing)}; run `bash scripts/host-tools.sh` (as root)")
    try:
        import libvirt  # noqa: F401
    except ImportError:
        raise LabError("the venv lacks the libvirt binding: `make lab` installs it (libvirt-python)") from None


def prepare_tls(spec: Path, state_root: Path) -> None:
    """The BMC CA beside the spec (its ``bmc.ca_bundle``) and the emulator's certificate, before validation."""
    loaded = load_spec(spec).spec
    provider = loaded.provider
    if not isinstance(provider, BaremetalProvider):
        raise LabError(f"{spec} is not a bare-metal spec")
    bundle = ca_bundle_path(spec)
    if bundle is None:
        raise LabError(f"{spec}: the lab's BMCs have certificates of the lab's CA; set provider.bmc.ca_bundle")
    machines = read_machines(spec.parent, provider.machines)
    address = urlsplit(machines[0].bmc).hostname or ""
    host.ensure_tls(state_root / f"{loaded.name}.lab", bundle, address)


def render_locked(lab: Lab) -> None:
    """The build directory as ``up`` renders it from the lock (dnsmasq reads its file at start)."""
    lock = read_lock(lab.lock)
    if lock is None:
        raise LabError(f"no lock at {lab.lock}: the image build did not write one")
    plan = with_archives(lab.plan, lock.images)
    render(replace(lab.validated, plan=plan, files=render_files(plan)), lab.build_dir)


def clusterctl(lab: Lab, *args: str, timeout: float = 7200) -> int:
    """``python -m lab.clusterctl ARGS`` with the lab's BMC credentials; output streamed; the exit code."""
    env = {**os.environ, Env.BMC_USER: BMC_USER, Env.BMC_PASSWORD: host.bmc_password(lab)}
    argv = [sys.executable, "-m", "lab.clusterctl", *args]
    return subprocess.run(argv, env=env, timeout=timeout, check=False).returncode


def image_build(spec: Path, build_dir: Path, state_root: Path, lock: Path) -> None:
    """``clusterctl image build`` (an archive with the same content hash is reused)."""
    argv = [sys.executable, "-m", "clusterctl", "image", "build", str(spec), "--lock", str(lock)]
    argv += ["--out", str(build_dir.parent), "--state-dir", str(state_root)]
    if subprocess.run(argv, check=False, timeout=3600).returncode != 0:
        raise LabError("clusterctl image build failed (above)")


def lab_up(lab: Lab) -> str:
    """Everything but the cluster: returns the accelerator the machines run on."""
    render_locked(lab)
    host.boot_files(lab, CACHE)
    host.libvirt_up(lab)
    host.bridge_up(lab)
    kernels = sorted((lab.build_dir / IMAGES).glob("*/vmlinuz"))
    accel = domains.accelerator(kernels[0]) if kernels else "tcg"
    log(f"machines run under {'KVM' if accel == 'kvm' else 'TCG (qemu emulates the CPU: slow)'}")
    domains.define(lab, accel)
    host.sushy_up(lab)
    host.pxe_link_up(lab)
    host.daemon_up(lab)
    return accel


def lab_down(lab: Lab) -> None:
    """Remove the lab's domains, processes and bridge (the consoles stay)."""
    gone = domains.undefine(lab)
    host.daemon_down(lab)
    host.pxe_link_down(lab)
    host.sushy_down(lab)
    host.bridge_down(lab)
    host.libvirt_down(lab)
    log(f"removed {len(gone)} domain(s), the PXE server, the BMC emulator and the bridge {lab.bridge}")


def main(argv: list[str] | None = None) -> int:
    """Entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m lab", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("up", "down", "status"))
    parser.add_argument("spec", type=Path)
    parser.add_argument("--out", type=Path, help="the cluster's build directory [build/<cluster>]")
    parser.add_argument("--state-dir", type=Path, help="clusterctl's state root [.clusterctl/ beside SPEC]")
    parser.add_argument("--lock", type=Path)
    parser.add_argument("--no-cluster", action="store_true", help="up: build the lab, do not run clusterctl up")
    args = parser.parse_args(argv)
    spec: Path = args.spec
    if args.state_dir is None:
        args.state_dir = Path(os.environ.get(Env.STATE_DIR) or default_state_root(str(spec)))
    name = load_spec(spec).spec.name
    build_dir = args.out or Path("build") / name
    if build_dir.name != name:
        raise LabError(f"the build directory must be named after the cluster ({name}), not {build_dir}")
    lock = args.lock or spec.with_suffix(".lock")
    common = ["--state-dir", str(args.state_dir)]
    if args.command == "up":
        check_host()
        prepare_tls(spec, args.state_dir)
        image_build(spec, build_dir, args.state_dir, lock)
        lab = load_lab(spec, build_dir=build_dir, state_root=args.state_dir, lock=lock)
        lab_up(lab)
        if args.no_cluster:
            return 0
        log(f"clusterctl up {spec} (the BMCs power the machines on; consoles in {lab.work})")
        return clusterctl(lab, "up", str(spec), "--yes", "--lock", str(lock), "--out", str(build_dir), *common)
    prepare_tls(spec, args.state_dir)
    lab = load_lab(spec, build_dir=build_dir, state_root=args.state_dir, lock=lock)
    if args.command == "status":
        for machine, state in domains.states(lab).items():
            print(f"{machine}: {state} (console {lab.console(machine)})")  # noqa: T201
        return 0
    state = args.state_dir / name
    if state.is_dir():
        code = clusterctl(lab, "down", str(spec), "--yes", "--force", "--out", str(build_dir), *common)
        if code != 0:
            log("clusterctl down failed (above); removing the lab anyway")
    lab_down(lab)
    if state.is_dir():
        # Its machines are gone with the lab: a state that still records them would make the next
        # `up` believe they exist.
        shutil.rmtree(state)
        log(f"removed {state}: the machines it recorded are gone")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (LabError, SpecError) as exc:
        print(f"lab: {exc}", file=sys.stderr)  # noqa: T201
        sys.exit(1)
