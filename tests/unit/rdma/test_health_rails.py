"""The rendered health check finds each rail's RDMA device in sysfs, on both naming schemes.

Runs clusterctl-healthcheck (rendered from examples/onprem-h100-256.yaml, as is and with rails by
PCI address) with bash against the fixture sysfs trees of tests/fixtures/sysfs, stub scontrol and
nvidia-smi, and reads what it asked scontrol to do.
"""

from __future__ import annotations

import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from clusterctl.pipeline import load_and_validate
from clusterctl.render import render_files
from tests.conftest import EXAMPLES
from tests.shipped_slurm import slurm_tool
from tests.specs import mutated

SYSFS = Path(__file__).resolve().parents[2] / "fixtures" / "sysfs"
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
MOUNTS = ("/lustre/datasets", "/mnt/ckpt", "/home")


def _health_files(spec: Path) -> dict[str, str]:
    plan = load_and_validate(spec).plan
    assert plan is not None
    return {f.path: f.text for f in render_files(plan) if f.path.startswith("health/")}


@pytest.fixture(scope="module")
def by_name() -> dict[str, str]:
    return _health_files(EXAMPLES / "onprem-h100-256.yaml")


@pytest.fixture(scope="module")
def by_pci(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    def rails(data: dict) -> None:
        data["hardware"]["dgx-h100"]["rails"] = list(RAILS_PCI)

    return _health_files(mutated(tmp_path_factory.mktemp("spec"), rails))


def _run(files: dict[str, str], tmp_path: Path, sysfs: Path, rails_file: str | None = None) -> tuple[int, list[str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in {
        "scontrol": f'[ "$1" = show ] && exit 0\necho "$*" >> {tmp_path}/scontrol.log\n',
        "nvidia-smi": "".join(f"echo {i}\n" for i in range(8)),
        "logger": "exit 0\n",
    }.items():
        (bin_dir / name).write_text("#!/bin/bash\n" + body)
        (bin_dir / name).chmod(0o755 | stat.S_IXUSR)
    (tmp_path / "health.conf").write_text(files["health/health.conf"])
    (tmp_path / "script.sh").write_text(files["health/clusterctl-healthcheck"])
    (tmp_path / "driver").write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.133.20\n")
    (tmp_path / "mounts").write_text("".join(f"src {m} nfs4 rw 0 0\n" for m in MOUNTS))
    (tmp_path / "rails.conf").write_text(rails_file or "")
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "CLUSTERCTL_HEALTH_CONF": str(tmp_path / "health.conf"),
        "CLUSTERCTL_HEALTH_HOST": "gpu001",
        "CLUSTERCTL_HEALTH_SYSFS_IB": str(sysfs / "class" / "infiniband"),
        "CLUSTERCTL_HEALTH_SYSFS_PCI": str(sysfs / "bus" / "pci" / "devices"),
        "CLUSTERCTL_HEALTH_RAILS": str(tmp_path / "rails.conf"),
        "CLUSTERCTL_HEALTH_MOUNTS": str(tmp_path / "mounts"),
        "CLUSTERCTL_HEALTH_DRIVER": str(tmp_path / "driver"),
        # clusterctl's Slurm module as shipped, driving the scontrol stub.
        "CLUSTERCTL_SLURM_TOOL": str(slurm_tool(tmp_path)),
    }
    result = subprocess.run(
        ["bash", str(tmp_path / "script.sh")], capture_output=True, text=True, env=env, timeout=30, check=False
    )
    log = tmp_path / "scontrol.log"
    return result.returncode, log.read_text().splitlines() if log.exists() else []


def test_health_conf_keeps_the_rails_as_the_spec_names_them(by_pci: dict[str, str]) -> None:
    assert f"node gpu001 8 nvidia-smi {','.join(RAILS_PCI)} /lustre/datasets,/mnt/ckpt,/home" in (
        by_pci["health/health.conf"].splitlines()
    )


@pytest.mark.parametrize("tree", ["dgx-h100-mlx5", "dgx-h100-rdma-core", "dgx-h100-roce-rdma-core"])
def test_rails_by_pci_address_pass_on_every_naming_scheme(by_pci: dict[str, str], tmp_path: Path, tree: str) -> None:
    rc, log = _run(by_pci, tmp_path, SYSFS / tree)

    assert (rc, log) == (0, [])


def test_mlx5_names_pass_where_the_image_keeps_them(by_name: dict[str, str], tmp_path: Path) -> None:
    assert _run(by_name, tmp_path, SYSFS / "dgx-h100-mlx5") == (0, [])


def test_mlx5_names_on_an_rdma_core_image_drain_with_the_missing_name(by_name: dict[str, str], tmp_path: Path) -> None:
    # The failure issue 19 describes: what the spec assumed is not what the image named the devices.
    rc, log = _run(by_name, tmp_path, SYSFS / "dgx-h100-rdma-core")

    assert rc == 1
    assert log == ["update nodename=gpu001 state=drain reason=clusterctl-health: ib: mlx5_0 missing (+7 more)"]


def test_a_rail_renamed_since_converge_drains_until_converge_again(by_pci: dict[str, str], tmp_path: Path) -> None:
    # Converged on a DOCA image (mlx5 names in nccl.conf); the node now runs inbox rdma-core.
    recorded = "".join(
        f"rail {i} {pci} {dev} - InfiniBand 0\n"
        for i, (pci, dev) in enumerate(
            zip(
                RAILS_PCI,
                ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"],
                strict=True,
            )
        )
    )

    rc, log = _run(by_pci, tmp_path, SYSFS / "dgx-h100-rdma-core", recorded)

    assert rc == 1
    assert log == [
        "update nodename=gpu001 state=drain reason=clusterctl-health: ib: 0000:18:00.0 is ibp24s0 now but "
        "NCCL_IB_HCA names mlx5_0: converge again (+7 more)"
    ]


def test_rails_recorded_at_converge_that_still_match_pass(by_pci: dict[str, str], tmp_path: Path) -> None:
    recorded = "rail 0 0000:18:00.0 ibp24s0 ibp24s0 InfiniBand 0\nrail 1 0000:40:00.0 ibp64s0 ibp64s0 InfiniBand 0\n"

    assert _run(by_pci, tmp_path, SYSFS / "dgx-h100-rdma-core", recorded) == (0, [])


def test_a_port_down_drains_naming_the_device(by_pci: dict[str, str], tmp_path: Path) -> None:
    tree = tmp_path / "sys"
    shutil.copytree(SYSFS / "dgx-h100-rdma-core", tree, symlinks=True)
    (tree / "class" / "infiniband" / "ibp64s0" / "ports" / "1" / "state").write_text("1: DOWN\n")

    rc, log = _run(by_pci, tmp_path, tree)

    assert rc == 1
    assert log == ["update nodename=gpu001 state=drain reason=clusterctl-health: ib: ibp64s0 port 1 is 1: DOWN"]


def test_a_pci_function_without_rdma_device_drains(by_pci: dict[str, str], tmp_path: Path) -> None:
    tree = tmp_path / "sys"
    shutil.copytree(SYSFS / "dgx-h100-mlx5", tree, symlinks=True)
    shutil.rmtree(tree / "bus" / "pci" / "devices" / "0000:dc:00.0" / "infiniband")

    rc, log = _run(by_pci, tmp_path, tree)

    assert rc == 1
    assert log == ["update nodename=gpu001 state=drain reason=clusterctl-health: ib: 0000:dc:00.0 has no RDMA device"]
