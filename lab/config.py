"""What the lab is made of, read from a bare-metal spec: its bridge, BMC emulator, PXE server and machines.

The spec is the site's description and the lab follows it: the management network's bridge is
``provider.pxe_interface`` with ``provider.pxe_server``'s address, the BMC emulator listens where
machines.csv's ``bmc`` column points (one emulator for every machine, each machine's system named
in the URL: ``https://<host>:<port>/redfish/v1/Systems/<libvirt domain>``), each machine is a
libvirt domain with machines.csv's MAC and firmware (``boot_mode``), and as much memory as its
hardware profile says (plus what the kernel keeps, so slurmd finds RealMemory).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from clusterctl.commands.common import default_state_root
from clusterctl.image.lock import lock_path
from clusterctl.pipeline import Validated, load_and_validate
from clusterctl.plan.models import BaremetalPlan, Plan
from clusterctl.spec.loader import load_spec
from clusterctl.spec.providers import BaremetalProvider

SYSTEMS = "/redfish/v1/Systems/"
# What the kernel keeps of a VM's memory: the domain gets it on top of the profile's memory_gib,
# so the node's MemTotal stays above slurm.conf's RealMemory.
KERNEL_RESERVE_MIB = 256
# The virtual disk of a machine that installs the image (sparse qcow2; the image unpacks to < 1 GiB).
DISK_GIB = 6
BMC_USER = "lab-admin"
SEABIOS = "/usr/share/seabios/bios-256k.bin"
ACCEL_ENV = "CLUSTERCTL_LAB_ACCEL"


class LabError(Exception):
    """The lab cannot be built or used as asked; the message says what to do."""


@dataclass(frozen=True)
class LabMachine:
    """One machine of machines.csv as a libvirt domain."""

    hostname: str
    domain: str
    mac: str
    address: str
    firmware: str  # "UEFI" or "Legacy"
    stateless: bool
    memory_mib: int


@dataclass(frozen=True)
class Lab:
    """The lab of one bare-metal spec, and where its files go.

    Attributes:
        spec: the spec file.
        validated: the spec, validated and planned.
        build_dir: the cluster's build directory (``up --out``); consoles go to its ``lab/``.
        state_root: clusterctl's state root (``--state-dir``); the lab's BMC secrets go beside the
            cluster's state, in ``<cluster>.lab/`` (0700), never into the build directory.
        lock: the cluster's lock (``image build --lock``).
    """

    spec: Path
    validated: Validated
    build_dir: Path
    state_root: Path
    lock: Path
    machines: list[LabMachine] = field(default_factory=list)

    @property
    def plan(self) -> Plan:
        """The cluster's plan."""
        return self.validated.plan

    @property
    def bm(self) -> BaremetalPlan:
        """The plan's bare-metal section."""
        assert self.plan.baremetal is not None
        return self.plan.baremetal

    @property
    def name(self) -> str:
        """The cluster's name."""
        return self.plan.cluster.name

    @property
    def work(self) -> Path:
        """``<build>/lab``: consoles, the emulator's configuration, disks, pid files, logs."""
        return self.build_dir / "lab"

    @property
    def secrets(self) -> Path:
        """``<state root>/<cluster>.lab``: the emulated BMCs' TLS key and password."""
        return self.state_root / f"{self.name}.lab"

    @property
    def bridge(self) -> str:
        """The management network's bridge (``provider.pxe_interface``)."""
        return self.bm.pxe_interface

    @property
    def address(self) -> str:
        """The PXE server's address, on the bridge (``provider.pxe_server``)."""
        return self.bm.pxe_server

    @property
    def prefix(self) -> int:
        """The management network's prefix length."""
        return self.bm.prefix_length

    @property
    def bmc_endpoint(self) -> tuple[str, int]:
        """Where the BMC emulator listens (every machine's ``bmc`` names the same host and port)."""
        ends = {urlsplit(m.bmc)[1] for m in self.bm.machines}
        if len(ends) != 1:
            raise LabError(f"the lab has one BMC emulator; machines.csv names {len(ends)}: {', '.join(sorted(ends))}")
        parts = urlsplit(self.bm.machines[0].bmc)
        return parts.hostname or "", parts.port or 443

    def console(self, hostname: str) -> Path:
        """The serial console log of a machine (``<build>/lab/<machine>.console.log``)."""
        return self.work / f"{hostname}.console.log"

    def machine(self, hostname: str) -> LabMachine:
        """The machine called ``hostname``."""
        for machine in self.machines:
            if machine.hostname == hostname:
                return machine
        raise LabError(f"{hostname} is not a machine of {self.spec}")


def _domain_of(bmc: str) -> str:
    parts = urlsplit(bmc)
    if parts.scheme != "https" or not parts.path.startswith(SYSTEMS):
        raise LabError(f"the lab's BMC addresses name their system: https://<host>:<port>{SYSTEMS}<domain>, not {bmc}")
    return parts.path.removeprefix(SYSTEMS).strip("/")


def ca_bundle_path(spec: Path) -> Path | None:
    """The spec's ``provider.bmc.ca_bundle`` file (the lab writes its CA there), read before validation."""
    provider = load_spec(spec).spec.provider
    if not isinstance(provider, BaremetalProvider):
        raise LabError(f"{spec} is not a bare-metal spec (provider.kind: baremetal)")
    bundle = provider.bmc.ca_bundle
    return spec.parent / bundle if bundle else None


def load_lab(
    spec: Path, *, build_dir: Path | None = None, state_root: Path | None = None, lock: Path | None = None
) -> Lab:
    """The lab of ``spec`` (validated; its BMC CA bundle must exist: :func:`lab.host.ensure_tls` writes it).

    Raises:
        LabError: the spec is not one the lab can build.
        SpecError: the spec is not valid.
    """
    validated = load_and_validate(spec)
    plan = validated.plan
    bm = plan.baremetal
    if bm is None:
        raise LabError(f"{spec} is not a bare-metal spec (provider.kind: baremetal)")
    hardware = validated.loaded.spec.hardware
    profile = {n.hostname: n.hardware for n in plan.nodes}
    machines = [
        LabMachine(
            hostname=m.hostname,
            domain=_domain_of(m.bmc),
            mac=m.mac,
            address=m.address,
            firmware=m.boot_mode,
            stateless=bm.image_boot.get(m.group) == "stateless",
            memory_mib=hardware[profile[m.hostname]].memory_gib * 1024 + KERNEL_RESERVE_MIB,
        )
        for m in bm.machines
    ]
    root = state_root or Path(os.environ.get("CLUSTERCTL_STATE_DIR") or default_state_root(str(spec)))
    return Lab(
        spec=spec,
        validated=validated,
        build_dir=build_dir or Path("build") / plan.cluster.name,
        state_root=root,
        lock=lock or lock_path(spec),
        machines=machines,
    )
