"""Managed services and vendor network plugins the cloud stacks use, as data with sources.

- Managed Lustre throughput tiers and capacity steps (the plan sizes a managed tier from the
  spec's ``read_bw``/``write_bw`` with these):
  - FSx for Lustre: throughput = PerUnitStorageThroughput (MB/s/TiB) x capacity; PERSISTENT_2
    tiers 125/250/500/1000, PERSISTENT_1 50/100/200, SCRATCH_2 a fixed 200; capacity 1200 GiB
    or a multiple of 2400 GiB (FSx for Lustre user guide, "Managing throughput capacity" and the
    UpdateFileSystem ``StorageCapacity`` reference).
  - Google Cloud Managed Lustre: tiers 125/250/500/1000 MB/s per TiB; minimum capacity and step
    72000/36000/18000/9000 GiB up to 12240000/6120000/3060000/1530000 GiB, where the step grows
    (https://cloud.google.com/managed-lustre/docs/create-instance, "Performance tiers").
  - Azure Managed Lustre: SKUs AMLFS-Durable-Premium-40/125/250/500 (MB/s per TiB); capacity in
    steps (and minimum) of 48/16/8/4 TiB (Azure/az-hop ``bicep/amlfs.bicep``, azurerm provider
    validation, Azure docs "file system type and size options").
- GPUDirect-TCPX/TCPXO NCCL plugin releases with their receive-datapath-manager (RxDM) image and
  the NCCL version Google qualified (GoogleCloudPlatform/container-engine-accelerators
  ``gpudirect-tcpx/README.md`` and ``gpudirect-tcpxo/README.md`` release notes). Since
  tcpgpudmarxd v1.0.20 RxDM needs only ``--num_hops=2``; ``--uid=``, ``--alsologtostderr`` and
  ``--num_nics=`` are retired and accepted (they only print "Accessing retired flag")
  (google/nccl-plugin-gpudirect-tcpxo:README.md@04815d1, "Notes for Existing Users"), while
  Google's own Slurm prolog still passes all four to v1.0.23 and pairs it with plugin v1.0.17
  (GoogleCloudPlatform/slurm-gcp:tools/prologs-epilogs/receive-data-path-manager-mega@13fd92b,
  lines 31-32 and 73). clusterctl runs what the prolog runs: that pair and those flags.
- The other GCP GPUDirect pieces the Cluster Toolkit's Slurm blueprints install
  (GoogleCloudPlatform/cluster-toolkit@1047080):
  ``examples/machine-learning/a3-megagpu-8g/a3mega-slurm-blueprint.yaml`` builds the
  dmabuf-import-helper DKMS module 1.1 from the ``gpudirect-tcpxo-apt`` repository;
  ``examples/machine-learning/a3-ultragpu-8g/a3ultra-slurm-blueprint.yaml`` installs the gIB
  plugin ``nccl-gib=1.1.0`` from ``gpudirect-gib-apt`` with ``libnccl2=2.27.5-1+cuda12.9``.
"""

from __future__ import annotations

from dataclasses import dataclass

MB = 1_000_000  # the providers' MB/s are decimal megabytes per second
# FSx publishes no capacity ceiling in the pages read; clusterctl does not check one.
FSX_NO_MAX = 10**9


@dataclass(frozen=True)
class LustreTier:
    """One throughput tier of a managed Lustre service."""

    service: str  # "fsx" | "gcp-managed-lustre" | "amlfs"
    name: str  # deployment type / SKU / tier label as the API takes it
    mbps_per_tib: int
    min_gib: int
    step_gib: int
    max_gib: int
    first_step_gib: int | None = None  # FSx: 1200 GiB is allowed below the 2400 GiB steps

    def capacity_for(self, needed_gib: float) -> int:
        """The smallest valid capacity (GiB) of at least ``needed_gib``."""
        if self.first_step_gib is not None and needed_gib <= self.first_step_gib:
            return self.first_step_gib
        needed = max(float(self.min_gib), needed_gib)
        steps = -(-needed // self.step_gib)  # ceiling division on floats
        return int(steps * self.step_gib)

    def throughput_mbps(self, capacity_gib: int) -> float:
        """Aggregate throughput in MB/s of ``capacity_gib`` at this tier."""
        return self.mbps_per_tib * capacity_gib / 1024


FSX_TIERS: dict[str, list[LustreTier]] = {
    "PERSISTENT_2": [
        LustreTier("fsx", "PERSISTENT_2", t, 1200, 2400, FSX_NO_MAX, first_step_gib=1200) for t in (125, 250, 500, 1000)
    ],
    "PERSISTENT_1": [
        LustreTier("fsx", "PERSISTENT_1", t, 1200, 2400, FSX_NO_MAX, first_step_gib=1200) for t in (50, 100, 200)
    ],
    "SCRATCH_2": [LustreTier("fsx", "SCRATCH_2", 200, 1200, 2400, FSX_NO_MAX, first_step_gib=1200)],
}

GCP_LUSTRE_TIERS: list[LustreTier] = [
    LustreTier("gcp-managed-lustre", "125", 125, 72000, 72000, 12240000),
    LustreTier("gcp-managed-lustre", "250", 250, 36000, 36000, 6120000),
    LustreTier("gcp-managed-lustre", "500", 500, 18000, 18000, 3060000),
    LustreTier("gcp-managed-lustre", "1000", 1000, 9000, 9000, 1530000),
]

AMLFS_TIERS: list[LustreTier] = [
    LustreTier("amlfs", f"AMLFS-Durable-Premium-{t}", t, step * 1024, step * 1024, 12 * 1024 * 1024)
    for t, step in ((40, 48), (125, 16), (250, 8), (500, 4))
]


@dataclass(frozen=True)
class GpuDirectRelease:
    """A GPUDirect-TCPX(O) NCCL plugin release and what goes with it."""

    fabric: str  # "gpudirect-tcpx" | "gpudirect-tcpxo"
    plugin: str  # plugin installer image tag without the leading "v"
    rxdm: str  # tcpgpudmarxd image tag without the leading "v"
    nccl: str  # NCCL version Google qualified with it
    released: str

    @property
    def plugin_image(self) -> str:
        """The NCCL plugin installer image."""
        repo = "gpudirect-tcpxo" if self.fabric == "gpudirect-tcpxo" else "gpudirect-tcpx"
        return f"us-docker.pkg.dev/gce-ai-infra/{repo}/nccl-plugin-gpudirecttcpx-dev:v{self.plugin}"

    @property
    def rxdm_image(self) -> str:
        """The receive-datapath-manager image."""
        repo = "gpudirect-tcpxo" if self.fabric == "gpudirect-tcpxo" else "gpudirect-tcpx"
        return f"us-docker.pkg.dev/gce-ai-infra/{repo}/tcpgpudmarxd-dev:v{self.rxdm}"


GPUDIRECT_RELEASES: dict[tuple[str, str], GpuDirectRelease] = {
    (r.fabric, r.plugin): r
    for r in (
        GpuDirectRelease("gpudirect-tcpx", "3.1.9", "2.0.12", "2.19.3", "2024-02-15"),
        GpuDirectRelease("gpudirect-tcpx", "3.1.12", "2.0.15", "2.19.4", "2026-06-22"),
        GpuDirectRelease("gpudirect-tcpxo", "1.0.11", "1.0.17", "2.23.4", "2025-06-27"),
        GpuDirectRelease("gpudirect-tcpxo", "1.0.12", "1.0.18", "2.26.5", "2025-08-21"),
        GpuDirectRelease("gpudirect-tcpxo", "1.0.14", "1.0.20", "2.28.7", "2025-11-19"),
        GpuDirectRelease("gpudirect-tcpxo", "1.0.15", "1.0.21", "2.28.7", "2026-01-09"),
        GpuDirectRelease("gpudirect-tcpxo", "1.0.17", "1.0.23", "2.28.7", "2026-06-26"),
    )
}

# The release a spec gets when it names none: the newest in the table per fabric.
# TCPXO: 1.0.17 with tcpgpudmarxd 1.0.23, the pair Google's own Slurm prolog runs
# (GoogleCloudPlatform/slurm-gcp:tools/prologs-epilogs/receive-data-path-manager-mega@13fd92b lines 31-32).
DEFAULT_GPUDIRECT_PLUGIN: dict[str, str] = {"gpudirect-tcpx": "3.1.12", "gpudirect-tcpxo": "1.0.17"}

# dmabuf-import-helper (DKMS source package; A3 Mega) and nccl-gib (A3 Ultra) a spec gets when it
# names none: the versions of the Cluster Toolkit blueprints read (see the module docstring), and
# the NCCL build the gIB plugin release goes with.
DEFAULT_DMABUF_IMPORT_HELPER = "1.1"
DEFAULT_NCCL_GIB = "1.1.0"
NCCL_GIB_NCCL: dict[str, str] = {"1.1.0": "2.27.5"}

# The EFA installer and aws-ofi-nccl a spec gets when it names none: the newest installer whose
# tarball checksum clusterctl knows (ParallelCluster pins 1.41.0, PR #2953) and the aws-ofi-nccl
# release that installer ships (libnccl-ofi 1.14.2, EFA release notes) -- catalog/efa.py.
DEFAULT_AWS_OFI_NCCL = "1.14.2"
DEFAULT_EFA_INSTALLER = "1.41.0"


def gpudirect_release(fabric: str, plugin: str) -> GpuDirectRelease | None:
    """The release entry for ``plugin`` (a version with or without a leading "v")."""
    return GPUDIRECT_RELEASES.get((fabric, plugin.removeprefix("v")))
