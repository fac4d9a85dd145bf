"""On-prem RoCE (the same DGX H100 on an Ethernet fabric, inbox rdma-core) against the vendors' files.

examples/onprem-h100-256.yaml with `fabric.kind: roce` and the rails by PCI address. One test per
piece, each naming the file it checks against (copies in vendor/ here and ../onprem-ib/vendor/):
rdma-core's names for RoCE devices (roce*), NCCL_IB_HCA's exact-name syntax, NCCL's GID selection
(no NCCL_IB_GID_INDEX from 2.21), no subnet manager or IPoIB on Ethernet, and the GPUDirect RDMA
choice. The node's side runs against the RoCE fixture sysfs tree (tests/fixtures/sysfs).
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from tests.conftest import RDMA_RAILS_MODULE, REPO_ROOT
from tests.shipped_slurm import slurm_tool
from tests.specs import Mutation, mutated

from clusterctl.pipeline import load_and_validate
from clusterctl.render import render_files
from clusterctl.rules import validate
from clusterctl.spec import Level, load_spec

HERE = Path(__file__).resolve().parent
VENDOR = HERE / "vendor"
IB_VENDOR = HERE.parent / "onprem-ib" / "vendor"
SYSFS = REPO_ROOT / "tests" / "fixtures" / "sysfs"
TREE = SYSFS / "dgx-h100-roce-rdma-core"
MODULE = RDMA_RAILS_MODULE
HW = "dgx-h100"
# DGX H100/H200 User Guide, "Network Modules" (tests/fixtures/sysfs/README.md).
RAILS_PCI = [
    "0000:18:00.0",
    "0000:40:00.0",
    "0000:4f:00.0",
    "0000:5e:00.0",
    "0000:9a:00.0",
    "0000:c0:00.0",
    "0000:ce:00.0",
    "0000:dc:00.0",
]
ROCE_DEVICES = [
    "rocep24s0",
    "rocep64s0",
    "rocep79s0",
    "rocep94s0",
    "rocep154s0",
    "rocep192s0",
    "rocep206s0",
    "rocep220s0",
]


def _roce(**fabric: Any) -> Mutation:
    def apply(data: dict[str, Any]) -> None:
        data["hardware"][HW]["rails"] = list(RAILS_PCI)
        data["hardware"][HW]["storage_nics"] = ["0000:29:00.0", "0000:aa:00.0"]
        data["fabric"].update({"kind": "roce", "subnet_manager": "switch", **fabric})

    return apply


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return mutated(tmp_path_factory.mktemp("roce"), _roce())


@pytest.fixture(scope="module")
def files(spec: Path) -> dict[str, str]:
    plan = load_and_validate(spec).plan
    assert plan is not None
    return {f.path: f.text for f in render_files(plan)}


def _rdma_rails() -> ModuleType:
    assert MODULE.is_file(), "the collection has no sysfs lookup (clusterctl.node.rdma_rails)"
    module_spec = importlib.util.spec_from_file_location("rdma_rails", MODULE)
    assert module_spec
    assert module_spec.loader
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def test_nccl_conf_leaves_the_roce_device_names_to_the_node(files: dict[str, str]) -> None:
    # linux-rdma/rdma-core kernel-boot/rdma-persistent-naming.rules@691953d: "RoCE - roce*" under
    # NAME_FALLBACK (rocep24s0), mlx5_N under DOCA/MOFED: the render cannot name them.
    assert "# RoCE - roce*" in (IB_VENDOR / "rdma-persistent-naming.rules").read_text()
    conf = files[f"nccl/{HW}.conf"]
    assert not re.search(r"^NCCL_IB_HCA=", conf, re.M), conf
    assert "#NCCL_IB_HCA=<per node>" in conf.splitlines()
    assert "of the rails 0000:18:00.0, 0000:40:00.0" in conf


def test_node_value_names_the_roce_devices_exactly_with_port_1() -> None:
    # NVIDIA/nccl docs/userguide/source/env.rst@5067397 NCCL_IB_HCA: "=" exact names, <hca>:<port>.
    assert "``=mlx5_0:1,mlx5_1:1``" in (IB_VENDOR / "nccl-env-NCCL_IB_HCA.rst").read_text()
    fact = _rdma_rails().rails_fact(RAILS_PCI, [], "", str(TREE))
    assert fact["nccl_ib_hca"] == "=" + ",".join(f"{d}:1" for d in ROCE_DEVICES)
    assert {r["link_layer"] for r in fact["rails"]} == {"Ethernet"}
    # RoCE ports name their netdev in ports/1/gid_attrs/ndevs (kernel sysfs ABI): mlx5's enp<bus>s0np0.
    assert [r["netdev"] for r in fact["rails"]][:2] == ["enp24s0np0", "enp64s0np0"]


def test_no_gid_index_with_nccl_2_21_or_later(files: dict[str, str]) -> None:
    # NVIDIA/nccl troubleshooting/networking_troubleshooting.rst@5067397: "With NCCL 2.21 and later
    # releases, this environment variable should *not* be set." The example pins NCCL 2.26.2.
    doc = " ".join((VENDOR / "nccl-networking_troubleshooting-roce.rst").read_text().split())
    assert "With NCCL 2.21 and later releases, this environment variable should *not* be set." in doc
    assert "NCCL_IB_GID_INDEX" not in files[f"nccl/{HW}.conf"]


def test_no_subnet_manager_on_ethernet(files: dict[str, str], tmp_path: Path) -> None:
    # linux-rdma/opensm man/opensm.8.in@fa74b98: opensm binds an InfiniBand port GUID (-g); a RoCE
    # fabric has none, so no host gets opensm and asking for it is an error at validate time.
    assert "local port GUID" in (IB_VENDOR / "opensm.8.in-guid-priority").read_text()
    inventory = yaml.safe_load(files["ansible/inventory/hosts.yml"].replace("!unsafe ", ""))["all"]
    assert inventory["children"]["opensm"] == {"hosts": {}}
    asked = mutated(tmp_path, _roce(subnet_manager="opensm", opensm_hosts=[{"host": "gpu001"}, {"host": "gpu002"}]))
    findings, _ = validate(load_spec(asked))
    assert [(f.code, f.level) for f in findings if f.code == "FAB006"] == [("FAB006", Level.ERROR)]


def test_no_ipoib_on_ethernet(tmp_path: Path) -> None:
    # IPoIB is IP over an InfiniBand link layer; the RoCE rails are Ethernet netdevs already.
    asked = mutated(tmp_path, _roce(ipoib={"networks": ["10.40.0.0/16"]}))
    findings, _ = validate(load_spec(asked))
    assert [f.message for f in findings if f.code == "FAB008"] == [
        "IPoIB needs an InfiniBand fabric; this one is roce."
    ]


def test_health_check_finds_the_roce_rails(files: dict[str, str], tmp_path: Path) -> None:
    # Kernel sysfs ABI (tests/fixtures/sysfs/README.md): the RoCE rails' devices under their PCI functions.
    (tmp_path / "bin").mkdir()
    stubs = {
        "scontrol": f'[ "$1" = show ] && exit 0\necho "$*" >> {tmp_path}/scontrol.log',
        "logger": "exit 0",
        "nvidia-smi": "seq 0 7",
    }
    for name, body in stubs.items():
        (tmp_path / "bin" / name).write_text(f"#!/bin/bash\n{body}\n")
        (tmp_path / "bin" / name).chmod(0o755)
    (tmp_path / "health.conf").write_text(files["health/health.conf"])
    (tmp_path / "check").write_text(files["health/clusterctl-healthcheck"])
    (tmp_path / "driver").write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.133.20\n")
    (tmp_path / "mounts").write_text(
        "a /lustre/datasets lustre rw 0 0\nb /mnt/ckpt wekafs rw 0 0\nc /home nfs4 rw 0 0\n"
    )
    env = {
        "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin",
        "CLUSTERCTL_HEALTH_CONF": str(tmp_path / "health.conf"),
        # clusterctl's Slurm module as shipped, driving the scontrol stub.
        "CLUSTERCTL_SLURM_TOOL": str(slurm_tool(tmp_path)),
        "CLUSTERCTL_HEALTH_HOST": "gpu001",
        "CLUSTERCTL_HEALTH_SYSFS_IB": str(TREE / "class" / "infiniband"),
        "CLUSTERCTL_HEALTH_SYSFS_PCI": str(TREE / "bus" / "pci" / "devices"),
        "CLUSTERCTL_HEALTH_RAILS": str(tmp_path / "none"),
        "CLUSTERCTL_HEALTH_MOUNTS": str(tmp_path / "mounts"),
        "CLUSTERCTL_HEALTH_DRIVER": str(tmp_path / "driver"),
    }
    done = subprocess.run(["bash", str(tmp_path / "check")], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "scontrol.log").exists()


def test_gpudirect_path_is_written_for_roce_too(files: dict[str, str]) -> None:
    # NVIDIA/nccl src/init.cc@5067397 dmaBufSupported() (../onprem-ib/vendor): DMA-BUF works over
    # RoCE as over InfiniBand (same verbs registration); the nvidia_driver role treats roce like infiniband.
    assert "CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED" in (IB_VENDOR / "nccl-init.cc-dmaBufSupported").read_text()
    assert re.search(r"^# GPUDirect RDMA: DMA-BUF expected \(", files[f"nccl/{HW}.conf"], re.M)
    gpudirect_vars = (REPO_ROOT / "roles" / "nvidia_driver" / "vars" / "main.yml").read_text()
    assert (
        "__nvidia_driver_rdma_fabric: \"{{ nvidia_driver_fabric_kind in ['infiniband', 'roce'] }}\"" in gpudirect_vars
    )
