"""Each cloud/bare-metal rule: one spec where it fires (with its message and path), and the
examples where it stays quiet."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from clusterctl.rules import validate
from clusterctl.spec import Level, load_spec
from tests.conftest import EXAMPLES
from tests.specs import example_data, group, mutated, write_spec

Mutation = Callable[[dict[str, Any]], None]


def _findings(path: Path):
    findings, _ = validate(load_spec(path))
    return findings


def _set(dotted: str, value: Any) -> Mutation:
    def apply(data: dict[str, Any]) -> None:
        target = data
        *parents, last = dotted.split(".")
        for key in parents:
            target = target[key]
        target[last] = value

    return apply


def _both(*mutations: Mutation) -> Mutation:
    def apply(data: dict[str, Any]) -> None:
        for mutation in mutations:
            mutation(data)

    return apply


def _hw(name: str, **changes: Any) -> Mutation:
    def apply(data: dict[str, Any]) -> None:
        data["hardware"][name].update(changes)
        for key in [k for k, v in changes.items() if v is None]:
            del data["hardware"][name][key]

    return apply


def _storage(index: int, **changes: Any) -> Mutation:
    def apply(data: dict[str, Any]) -> None:
        data["storage"][index].update(changes)
        for key in [k for k, v in changes.items() if v is None]:
            del data["storage"][index][key]

    return apply


def _unset(dotted: str) -> Mutation:
    def apply(data: dict[str, Any]) -> None:
        target = data
        *parents, last = dotted.split(".")
        for key in parents:
            target = target[key]
        del target[last]

    return apply


def _count(name: str, count: int, spares: int = 0) -> Mutation:
    def apply(data: dict[str, Any]) -> None:
        group(data, name).update(count=count, spares=spares)

    return apply


def _both(*mutations: Mutation) -> Mutation:
    def apply(data: dict[str, Any]) -> None:
        for m in mutations:
            m(data)

    return apply


CASES: list[tuple[str, str, Mutation, Level, str, str]] = [
    ("CLD001", "aws-p5.yaml", _hw("p5", instance_type=None), Level.ERROR, "has no `instance_type`", "hardware.p5"),
    (
        "CLD001",
        "aws-p5.yaml",
        _hw("p5", instance_type="p9.huge"),
        Level.ERROR,
        "not in clusterctl's catalog",
        "hardware.p5.instance_type",
    ),
    (
        "CLD001",
        "aws-p5.yaml",
        _hw("p5", instance_type="a3-megagpu-8g"),
        Level.ERROR,
        "is a gcp type",
        "hardware.p5.instance_type",
    ),
    (
        "CLD001",
        "aws-p5.yaml",
        _hw("head", instance_type="m7z.huge"),
        Level.WARNING,
        "cannot be checked",
        "hardware.head.instance_type",
    ),
    (
        "CLD002",
        "aws-p5.yaml",
        _hw("p5", gpus={"model": "H200-SXM-141GB", "count": 8}),
        Level.ERROR,
        "has 8 x H100-SXM-80GB",
        "hardware.p5.gpus",
    ),
    ("CLD002", "aws-p5.yaml", _hw("p5", memory_gib=4096), Level.ERROR, "has 2048 GiB", "hardware.p5.memory_gib"),
    (
        "CLD002",
        "aws-p5.yaml",
        _hw("head", cpus={"sockets": 2, "cores_per_socket": 32, "threads_per_core": 2}),
        Level.ERROR,
        "vCPUs",
        "hardware.head.cpus",
    ),
    (
        "CLD003",
        "aws-p5.yaml",
        _set("fabric", {"kind": "infiniband", "speed_gbps": 400}),
        Level.ERROR,
        "talks efa",
        "fabric.kind",
    ),
    (
        "CLD003",
        "gcp-a3mega.yaml",
        _set("fabric", {"kind": "gpudirect-tcpx", "speed_gbps": 200}),
        Level.ERROR,
        "gpudirect-tcpxo",
        "fabric.kind",
    ),
    (
        "CLD004",
        "aws-p5.yaml",
        _set("network.management_cidr", "10.40.0.0/27"),
        Level.ERROR,
        "cannot hold",
        "network.management_cidr",
    ),
    (
        "CLD004",
        "aws-p5.yaml",
        _set("network.management_cidr", "10.40.0.0/24"),
        Level.ERROR,
        "Managed Lustre needs its own subnet",
        "network.management_cidr",
    ),
    (
        "CLD005",
        "aws-p5.yaml",
        _set("provider.subnet_id", "subnet-1"),
        Level.ERROR,
        "needs both `vpc_id` and `subnet_id`",
        "provider.vpc_id",
    ),
    (
        "CLD005",
        "aws-p5.yaml",
        _both(_set("provider.subnet_id", "subnet-1"), _set("provider.vpc_id", "vpc-1")),
        Level.ERROR,
        "needs a public subnet",
        "provider.public_subnet_id",
    ),
    (
        "CLD005",
        "gcp-a3mega.yaml",
        _set("provider.network", "n"),
        Level.ERROR,
        "needs both `network` and `subnetwork`",
        "provider.subnetwork",
    ),
    (
        "CLD005",
        "azure-ndv5.yaml",
        _set("provider.subnet_id", "/subscriptions/x"),
        Level.ERROR,
        "cannot add the bastion",
        "provider.subnet_id",
    ),
    ("CLD006", "aws-p5.yaml", _set("provider.zone", None), Level.ERROR, "needs `zone`", "provider.zone"),
    ("CLD006", "azure-ndv5.yaml", _set("provider.zone", None), Level.ERROR, "Managed Lustre is zonal", "provider.zone"),
    (
        "CLD007",
        "aws-p5.yaml",
        _set("provider.capacity_block", True),
        Level.ERROR,
        "`capacity_reservation_id` is missing",
        "provider.capacity_block",
    ),
    (
        "CLD007",
        "aws-p5.yaml",
        _set("provider.capacity_reservation_id", "cr-1"),
        Level.WARNING,
        "new cluster placement group",
        "provider.placement_group",
    ),
    (
        "CLD007",
        "aws-p5.yaml",
        _both(
            _set("provider.capacity_reservation_id", "cr-1"),
            _set("provider.capacity_block", True),
            _set("provider.placement_group", "pg"),
        ),
        Level.WARNING,
        "UltraCluster",
        "provider.placement_group",
    ),
    (
        "CLD008",
        "onprem-h100-256.yaml",
        _storage(0, managed=True),
        Level.ERROR,
        "no managed Lustre service",
        "storage[0].managed",
    ),
    ("CLD008", "onprem-h100-256.yaml", _storage(0, mgs=[]), Level.ERROR, "lists no MGS NIDs", "storage[0].mgs"),
    ("CLD008", "aws-p5.yaml", _storage(0, mgs=["10.0.0.1@tcp"]), Level.WARNING, "`mgs` is ignored", "storage[0].mgs"),
    (
        "CLD008",
        "gcp-a3mega.yaml",
        _storage(0, fsname="Data-1"),  # Lustre's 8-character cap is the spec type's; the charset is GCP's
        Level.ERROR,
        "not a Managed Lustre file system name",
        "storage[0].fsname",
    ),
    (
        "CLD009",
        "onprem-h100-256.yaml",
        _both(_set("os", "debian-12"), _set("versions.slurm", "22.05")),
        Level.ERROR,
        "no autoinstall",
        "os",
    ),
    (
        "CLD018",
        "onprem-h100-256.yaml",
        _set("provider.image", {"default": "install", "groups": {"gpus": "stateless"}}),
        Level.ERROR,
        "`gpus` is not a node group",
        "provider.image.groups.gpus",
    ),
    (
        "CLD010",
        "gcp-a3mega.yaml",
        _set("provider.gpu_network_cidr", "10.50.0.0/16"),
        Level.ERROR,
        "overlaps the management network",
        "provider.gpu_network_cidr",
    ),
    (
        "CLD010",
        "gcp-a3mega.yaml",
        _set("provider.gpu_network_cidr", "172.16.0.0/19"),
        Level.ERROR,
        "the GPU NICs need 8",
        "provider.gpu_network_cidr",
    ),
    (
        "CLD011",
        "aws-p5.yaml",
        _set("provider.allowed_ssh_cidrs", ["0.0.0.0/0"]),
        Level.ERROR,
        "whole internet",
        "provider.allowed_ssh_cidrs[0]",
    ),
    (
        "CLD011",
        "gcp-a3mega.yaml",
        _both(_set("provider.allowed_ssh_cidrs", ["0.0.0.0/0"]), _set("provider.allow_world_ssh", True)),
        Level.WARNING,
        "allow_world_ssh is set",
        "provider.allowed_ssh_cidrs[0]",
    ),
    (
        "CLD011",
        "azure-ndv5.yaml",
        _set("provider.allow_world_ssh", True),
        Level.WARNING,
        "changes nothing",
        "provider.allow_world_ssh",
    ),
    (
        "CLD011",
        "aws-p5.yaml",
        _set("provider.allowed_ssh_cidrs", []),
        Level.INFO,
        "No SSH from outside",
        "provider.allowed_ssh_cidrs",
    ),
    (
        "CLD012",
        "aws-p5.yaml",
        _storage(1, write_bw=None),
        Level.WARNING,
        "sized at the service's minimum",
        "storage[1]",
    ),
    ("CLD013", "azure-ndv5.yaml", _count("gpu", 120, 6), Level.ERROR, "at most 100", "nodes[2].count"),
    (
        "CLD014",
        "aws-p5.yaml",
        _set("provider.aws_ofi_nccl", "1.7.1"),
        Level.ERROR,
        "needs aws-ofi-nccl >= 1.7.2",
        "provider.aws_ofi_nccl",
    ),
    (
        "CLD014",
        "aws-p5.yaml",
        _set("provider.aws_ofi_nccl", "1.7.2"),
        Level.WARNING,
        "recommends at least 1.7.3",
        "provider.aws_ofi_nccl",
    ),
    (
        "CLD014",
        "aws-p5.yaml",
        _set("provider.efa_installer", "1.28.0"),
        Level.INFO,
        "FI_EFA_SET_CUDA_SYNC_MEMOPS=0",
        "provider.efa_installer",
    ),
    ("CLD015", "gcp-a3mega.yaml", _set("versions.nccl", "2.26.2"), Level.WARNING, "qualified", "versions.nccl"),
    (
        "CLD015",
        "gcp-a3mega.yaml",
        _set("provider.gpudirect_plugin", "9.9.9"),
        Level.ERROR,
        "not in clusterctl's catalog",
        "provider.gpudirect_plugin",
    ),
    # A3 Ultra: the second host network and the RoCE subnets take /20s from gpu_network_cidr too.
    (
        "CLD010",
        "gcp-a3ultra.yaml",
        _set("provider.gpu_network_cidr", "172.16.0.0/18"),
        Level.ERROR,
        "the second host NIC and the RDMA NICs need 9",
        "provider.gpu_network_cidr",
    ),
    (
        "CLD016",
        "gcp-a3ultra.yaml",
        _set("versions.nccl", "2.26.2"),
        Level.ERROR,
        "nccl-gib 1.1.0 (the gIB plugin on a3ultra) goes with NCCL 2.27.5",
        "versions.nccl",
    ),
    (
        "CLD016",
        "gcp-a3ultra.yaml",
        _set("provider.nccl_gib", "1.2.0"),
        Level.WARNING,
        "nccl-gib 1.2.0 is not in clusterctl's catalog",
        "provider.nccl_gib",
    ),
    ("CLD017", "gcp-a3ultra.yaml", _unset("provider.project"), Level.ERROR, "names by project", "provider.project"),
    # EFA (rules/efa.py): installer 1.43.2 ships aws-ofi-nccl 1.16.3, not the example's 1.14.2, and its
    # checksum is not in the catalog; 1.24.1 ships no plugin, so 1.13.2 is built and needs its checksum.
    (
        "CLD090",
        "aws-p5.yaml",
        _set("provider.efa_installer", "1.43.2"),
        Level.ERROR,
        "installs aws-ofi-nccl 1.16.3",
        "provider.aws_ofi_nccl",
    ),
    (
        "CLD091",
        "aws-p5.yaml",
        _both(_set("provider.efa_installer", "1.43.2"), _set("provider.aws_ofi_nccl", "1.16.3")),
        Level.ERROR,
        "knows no checksum for EFA installer 1.43.2",
        "provider.efa_installer",
    ),
    (
        "CLD091",
        "aws-p5.yaml",
        _both(
            _set("provider.efa_installer", "1.24.1"),
            _set("provider.aws_ofi_nccl", "1.13.2"),
            _set("provider.efa_installer_checksum", "sha256:" + "a" * 64),
        ),
        Level.ERROR,
        "builds 1.13.2",
        "provider.aws_ofi_nccl",
    ),
]


@pytest.mark.parametrize(
    ("code", "base", "mutation", "level", "fragment", "path"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)]
)
def test_rule_fires(
    tmp_path: Path, code: str, base: str, mutation: Mutation, level: Level, fragment: str, path: str
) -> None:
    def apply(data: dict[str, Any]) -> None:
        mutation(data)
        if data["provider"].get("zone", "") is None:
            del data["provider"]["zone"]

    findings = _findings(mutated(tmp_path, apply, base=base))
    hits = [f for f in findings if f.code == code and fragment in f.message]
    assert hits, f"{code} did not fire; findings: {[(f.code, f.message) for f in findings]}"
    assert hits[0].level is level
    assert hits[0].dotted_path == path
    assert hits[0].line > 0, "every finding is located in the spec"


@pytest.mark.parametrize(
    "name",
    ["aws-p5.yaml", "gcp-a3mega.yaml", "gcp-a3ultra.yaml", "azure-ndv5.yaml", "onprem-h100-256.yaml", "local.yaml"],
)
def test_examples_have_no_cloud_warnings(name: str) -> None:
    findings = _findings(EXAMPLES / name)
    noisy = [(f.code, f.message) for f in findings if f.code.startswith("CLD") and f.level >= Level.WARNING]
    assert not noisy


def test_gib_nccl_rule_is_quiet_off_a3_ultra(tmp_path: Path) -> None:
    """CLD016 speaks of A3 Ultra only: an A3 Mega spec with the gIB plugin's NCCL gets nothing from it."""
    findings = _findings(mutated(tmp_path, _set("versions.nccl", "2.27.5"), base="gcp-a3mega.yaml"))
    assert not [f for f in findings if f.code == "CLD016"]


def test_a3_ultra_burst_group_needs_its_providers_project(tmp_path: Path) -> None:
    """CLD017 also reads a GCP burst group's own provider: its base makes the group's RoCE network."""
    data = example_data("aws-burst.yaml")
    data["hardware"]["p5"].update(instance_type="a3-ultragpu-8g", gpus={"model": "H200-SXM-141GB", "count": 8})
    burst = group(data, "gpu-b")["burst"]
    burst["provider"] = {"kind": "gcp", "region": "us-central1", "zone": "us-central1-b"}
    path = write_spec(tmp_path, data)
    shutil.copy(EXAMPLES / "aws-burst-machines.csv", tmp_path / "aws-burst-machines.csv")
    index = next(i for i, g in enumerate(data["nodes"]) if g["group"] == "gpu-b")
    (hit,) = [f for f in _findings(path) if f.code == "CLD017"]
    assert hit.level is Level.ERROR
    assert hit.dotted_path == f"nodes[{index}].burst.provider.project"
    assert hit.line > 0
    burst["provider"]["project"] = "acme-ml"
    assert not [f for f in _findings(write_spec(tmp_path, data)) if f.code == "CLD017"]


def test_debian_bare_metal_is_refused_only_where_ubuntus_installer_would_install_it(tmp_path: Path) -> None:
    """CLD009: Debian machines that boot the baked image (`provider.image`) install no Ubuntu at all."""
    debian = _both(_set("os", "debian-12"), _set("versions.slurm", "22.05"))
    (tmp_path / "installer").mkdir()
    (tmp_path / "baked").mkdir()
    with_installer = _findings(mutated(tmp_path / "installer", debian))
    baked = _findings(mutated(tmp_path / "baked", _both(debian, _set("provider.image", {"default": "stateless"}))))
    assert [f.code for f in with_installer if f.code == "CLD009"] == ["CLD009"]
    assert not [f for f in baked if f.code == "CLD009"]
