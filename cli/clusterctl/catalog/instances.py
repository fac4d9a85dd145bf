"""Cloud instance and machine types the stacks support: what a cloud node *is*.

Data only. The plan reads it to know a cloud node's GPUs, its high-speed NICs and how the
stacks must attach them; the rules read it to check a hardware profile against the type.

Sources (read mid-2026):

- AWS: EC2 accelerated-computing instance specifications
  (https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html) and "Maximize network
  bandwidth on instances with multiple network cards" (EFA layout: ENA primary on card 0,
  EFA-only on card 0 device 1 and on device 0 of every other card,
  https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html).
  p5.48xlarge exposes 32 EFA devices (awsome-distributed-training ``instance-profiles.conf``:
  "p5 8 GPUs / 32 EFA"; techref §1.7 "vpc.amazonaws.com/efa: 32"); p5en.48xlarge 16
  (EFAv3; torchx ``named_resources_aws.py`` ``EFA_DEVICE: 16``); p4d/p4de 4.
- GCP: A3 machine types (https://cloud.google.com/compute/docs/gpus#a3-series); the GPU NIC
  names are the ones Google's Slurm images use (cluster-toolkit ``a3-highgpu-8g`` and
  ``a3-megagpu-8g`` ``run-nccl-tests.sh``, techref §1.8): control NIC ``enp0s12``, 4 (TCPX)
  or 8 (TCPXO) GPU NICs. a3-ultragpu-8g (H200, RoCE with the gIB plugin): two gVNIC NICs
  ``enp0s19`` and ``enp192s20`` (NCCL_SOCKET_IFNAME of cluster-toolkit
  ``examples/machine-learning/a3-ultragpu-8g/nccl-tests/run-nccl-tests.sh@1047080``) and eight
  RDMA NICs on one ``gpu-rdma-vpc`` network with a ``<zone>-vpc-roce`` network profile
  (``a3ultra-slurm-blueprint.yaml@1047080``, ``a3ultra-slurm-rdma-net``: 8 subnetworks); the
  guest's names of the RDMA devices are not in those files (the gIB plugin finds them itself).
- Azure: ND H100 v5 / ND H200 v5 sizes (https://learn.microsoft.com/azure/virtual-machines/
  sizes/gpu-accelerated/ndh100v5-series); IB device names from Azure/azurehpc-health-checks
  ``conf/nd96isr_h100_v5.conf`` (``mlx5_ib0..7``, 400 Gb/s) and ``nd96isr_h200_v5.conf``
  (adds the ``mlx5_an0`` accelerated-networking port). The GPU/NIC PCI pairing is the one
  Azure/azhpc-images ships as ``topology/ndv5-topo.xml`` (techref §1.9, §2).
- CPU types: the providers' general-purpose/compute-optimized specifications (the head-node
  types ParallelCluster and Cluster Toolkit examples use: m5.8xlarge, c2-standard-8).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

CloudKind = Literal["aws", "gcp", "azure"]
Fabric = Literal["efa", "gpudirect-tcpx", "gpudirect-tcpxo", "gcp-rdma", "infiniband", "ethernet"]


@dataclass(frozen=True)
class PciPair:
    """One GPU and the NIC NCCL should pair it with (a vendor topology file's content)."""

    numa: int
    gpu_busid: str
    nic_busid: str


@dataclass(frozen=True)
class InstanceType:
    """One instance/machine type as the plan, the rules and the stacks need it."""

    name: str
    provider: CloudKind
    vcpus: int
    memory_gib: int
    gpus: int = 0
    gpu_model: str | None = None  # a key of clusterctl.catalog.gpus.GPU_MODELS
    fabric: Fabric = "ethernet"
    # AWS: EFA devices (one EFA-only interface per network card, card 0 also has the ENA primary).
    efa_interfaces: int = 0
    network_cards: int = 1
    # GCP: the host (control) NIC and the GPU NICs, in attach order, as the guest names them.
    host_nic: str | None = None
    gpu_nics: tuple[str, ...] = ()
    # GCP RDMA types (A3 Ultra): every gVNIC NCCL may bootstrap over, and how many RDMA NICs
    # (MRDMA on a RoCE network profile VPC) the type has.
    socket_nics: tuple[str, ...] = ()
    rdma_nics: int = 0
    # GCP: the boot disk type the vendor's reference gives the type (None: the stack's pd-ssd).
    boot_disk_type: str | None = None
    # Azure: InfiniBand devices for NCCL (exact names) and the NICs NCCL must not use.
    ib_devices: tuple[str, ...] = ()
    excluded_nics: tuple[str, ...] = ()
    # NUMA nodes and the vendor's GPU<->NIC PCI pairing (None: let NCCL detect).
    numa_nodes: int = 1
    pci_pairs: tuple[PciPair, ...] = ()
    # NUMA node of GPU 0..N-1 (gres.conf Cores=); empty where no vendor file says it.
    gpu_numa: tuple[int, ...] = ()
    topology_name: str | None = None  # name of the vendor's topology file (e.g. "ndv5")
    # CPU identity as NCCL's topology XML records it (vendor, family, model).
    cpu_vendor: str | None = None
    cpu_family: int | None = None
    cpu_model: int | None = None
    network_gbps: int = 0
    # The boot image the vendor's reference gives the type, per OS, where it is not the plain OS image.
    vendor_images: dict[str, str] = field(default_factory=dict)
    # Whether the vendor's reference places the type's instances under a compact placement policy.
    compact_placement: bool = True
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def is_gpu(self) -> bool:
        """Whether the type has GPUs."""
        return self.gpus > 0


# ND H100 v5 / ND H200 v5: Azure's ndv5-topo.xml pairs GPU i with IB NIC i behind one
# (virtual) PCI switch each, four per NUMA node.
_NDV5_PAIRS = tuple(
    PciPair(numa=0 if i < 4 else 1, gpu_busid=f"{gpu:04x}:00:00.0", nic_busid=f"{0x101 + i:04x}:00:00.0")
    for i, gpu in enumerate((0x1, 0x2, 0x3, 0x8, 0x9, 0xA, 0xB, 0xC))
)
_NDV5_IB = tuple(f"mlx5_ib{i}" for i in range(8))

# GPUs 0-3 on NUMA node 0, 4-7 on node 1 (gres.conf Cores=). Sources:
# - p4d/p4de.24xlarge: aws-ofi-nccl topology/p4d-24xl-topo.xml and p4de-24xl-topo.xml @2daf7d3
#   (GPUs 0-3 under <cpu numaid="0">, 4-7 under numaid="1").
# - p5.48xlarge: awslabs/awsome-distributed-training @7217859
#   1.architectures/7.sagemaker-hyperpod-eks/slinky-slurm/README.md ("ml.p5.48xlarge ... GPUs are
#   split across two NUMA nodes (0-3 on NUMA 0, 4-7 on NUMA 1)").
# - a3-highgpu-8g: GoogleCloudPlatform/container-engine-accelerators @992db812
#   gpudirect-tcpx/nccl-config.yaml NCCL_GPUDIRECTTCPX_TX/RX_BINDINGS (and cluster-toolkit
#   a3-highgpu-8g/nccl-tests/run-nccl-tests.sh): the NICs of GPUs 0-3 (eth1, eth2) are served by
#   cores 8-35 of socket 0, those of GPUs 4-7 (eth3, eth4) by cores 60-87 of socket 1.
# - a3-megagpu-8g: inferred, not from a vendor file: the same 2 x 52-core host as a3-highgpu-8g,
#   and its GPU NICs split the same way by PCI bus (enp6/7/13/14s0 low, enp134/135/141/142s0 high).
# - ND H100/H200 v5: Azure's ndv5-topo.xml (_NDV5_PAIRS above).
_GPU_NUMA_4_4 = (0, 0, 0, 0, 1, 1, 1, 1)


def _aws_efa(
    name: str, gpu_model: str, *, vcpus: int, memory_gib: int, efa: int, gbps: int, gpu_numa: tuple[int, ...] = ()
) -> InstanceType:
    """An AWS EFA type: 8 GPUs on two NUMA nodes, ``efa`` network cards with one EFA interface each."""
    return InstanceType(
        name,
        "aws",
        vcpus=vcpus,
        memory_gib=memory_gib,
        gpus=8,
        gpu_model=gpu_model,
        fabric="efa",
        efa_interfaces=efa,
        network_cards=efa,
        network_gbps=gbps,
        numa_nodes=2,
        gpu_numa=gpu_numa,
    )


_A3_HIGH = InstanceType(
    "a3-highgpu-8g",
    "gcp",
    vcpus=208,
    memory_gib=1872,
    gpus=8,
    gpu_model="H100-SXM-80GB",
    fabric="gpudirect-tcpx",
    host_nic="enp0s12",
    gpu_nics=("enp6s0", "enp12s0", "enp134s0", "enp140s0"),
    network_gbps=1000,
    numa_nodes=2,
    gpu_numa=_GPU_NUMA_4_4,
)
# A3 Mega: the A3 High host with twice the GPU NICs, over GPUDirect-TCPXO.
_A3_MEGA = replace(
    _A3_HIGH,
    name="a3-megagpu-8g",
    fabric="gpudirect-tcpxo",
    gpu_nics=("enp6s0", "enp7s0", "enp13s0", "enp14s0", "enp134s0", "enp135s0", "enp141s0", "enp142s0"),
    network_gbps=1800,
)
_A3_ULTRA = InstanceType(
    "a3-ultragpu-8g",
    "gcp",
    vcpus=224,
    memory_gib=2952,
    gpus=8,
    gpu_model="H200-SXM-141GB",
    fabric="gcp-rdma",
    host_nic="enp0s19",
    socket_nics=("enp0s19", "enp192s20"),
    rdma_nics=8,
    # GoogleCloudPlatform/cluster-toolkit:examples/machine-learning/a3-ultragpu-8g/
    # a3ultra-slurm-blueprint.yaml@1047080 lines 28-30: the nodes' image is built from Ubuntu's
    # accelerator image (the NVIDIA 580 driver and the RDMA NIC setup the RoCE VPC needs), and
    # line 623: the nodeset sets enable_placement: false (dense reservations place it; a compact
    # policy may make instance creation fail).
    vendor_images={
        "ubuntu-24.04": (
            "projects/ubuntu-os-accelerator-images/global/images/ubuntu-accelerator-2404-amd64-with-nvidia-580-v20260522"
        )
    },
    compact_placement=False,
    # cluster-toolkit@1047080 examples/machine-learning/a3-ultragpu-8g/
    # {a3ultra-slurm-blueprint.yaml (a3_ultra_nodeset), a3ultra-vm.yaml}: disk_type hyperdisk-balanced;
    # Vertex AI's DiskSpec reference (docs.cloud.google.com/vertex-ai/docs/reference/rest/v1/DiskSpec):
    # "for A3U machines, the default value is hyperdisk-balanced".
    boot_disk_type="hyperdisk-balanced",
    network_gbps=3200,
    numa_nodes=2,
)
_ND_H100_V5 = InstanceType(
    "Standard_ND96isr_H100_v5",
    "azure",
    vcpus=96,
    memory_gib=1900,
    gpus=8,
    gpu_model="H100-SXM-80GB",
    fabric="infiniband",
    ib_devices=_NDV5_IB,
    numa_nodes=2,
    pci_pairs=_NDV5_PAIRS,
    gpu_numa=tuple(pair.numa for pair in _NDV5_PAIRS),
    topology_name="ndv5",
    network_gbps=3200,
    cpu_vendor="GenuineIntel",
    cpu_family=6,
    cpu_model=143,
)
_ND_H200_V5 = replace(
    _ND_H100_V5,
    name="Standard_ND96isr_H200_v5",
    memory_gib=1850,
    gpu_model="H200-SXM-141GB",
    excluded_nics=("mlx5_an0",),
    notes=("the ndv5 topology file is applied to ND H200 v5 as techref §1.9 groups both sizes",),
)

INSTANCE_TYPES: dict[str, InstanceType] = {
    t.name: t
    for t in (
        # --- GPU types -----------------------------------------------------------------------
        _aws_efa("p5.48xlarge", "H100-SXM-80GB", vcpus=192, memory_gib=2048, efa=32, gbps=3200, gpu_numa=_GPU_NUMA_4_4),
        _aws_efa("p5e.48xlarge", "H200-SXM-141GB", vcpus=192, memory_gib=2048, efa=32, gbps=3200),
        _aws_efa("p5en.48xlarge", "H200-SXM-141GB", vcpus=192, memory_gib=2048, efa=16, gbps=3200),
        _aws_efa("p4d.24xlarge", "A100-SXM-40GB", vcpus=96, memory_gib=1152, efa=4, gbps=400, gpu_numa=_GPU_NUMA_4_4),
        _aws_efa("p4de.24xlarge", "A100-SXM-80GB", vcpus=96, memory_gib=1152, efa=4, gbps=400, gpu_numa=_GPU_NUMA_4_4),
        _A3_HIGH,
        _A3_MEGA,
        _A3_ULTRA,
        _ND_H100_V5,
        _ND_H200_V5,
        # --- CPU types: head and login nodes, bastions ------------------------------------------
        InstanceType("m5.8xlarge", "aws", vcpus=32, memory_gib=128, network_gbps=10),
        InstanceType("m6i.4xlarge", "aws", vcpus=16, memory_gib=64, network_gbps=12),
        InstanceType("m6i.2xlarge", "aws", vcpus=8, memory_gib=32, network_gbps=12),
        InstanceType("t3.micro", "aws", vcpus=2, memory_gib=1, network_gbps=5),
        InstanceType("c2-standard-8", "gcp", vcpus=8, memory_gib=32, network_gbps=16),
        InstanceType("c2-standard-4", "gcp", vcpus=4, memory_gib=16, network_gbps=10),
        InstanceType("n2-standard-8", "gcp", vcpus=8, memory_gib=32, network_gbps=16),
        InstanceType("e2-small", "gcp", vcpus=2, memory_gib=2, network_gbps=1),
        InstanceType("Standard_D16s_v5", "azure", vcpus=16, memory_gib=64, network_gbps=12),
        InstanceType("Standard_D8s_v5", "azure", vcpus=8, memory_gib=32, network_gbps=12),
        InstanceType("Standard_B2s", "azure", vcpus=2, memory_gib=4, network_gbps=1),
    )
}

# A small instance for the SSH jump host (bastion) each cloud stack creates when
# provider.allowed_ssh_cidrs is set: it only forwards SSH.
BASTION_TYPES: dict[CloudKind, str] = {"aws": "t3.micro", "gcp": "e2-small", "azure": "Standard_B2s"}


def instance_type(name: str | None) -> InstanceType | None:
    """The catalog entry for ``name`` (None when unknown or not given)."""
    return INSTANCE_TYPES.get(name) if name else None
