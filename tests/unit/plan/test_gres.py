"""gres.conf Cores=: each GPU bound to the logical cores of its NUMA node (plan/gres.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from clusterctl.pipeline import load_and_validate, render
from clusterctl.plan.gres import gres_gpu_lines, numa_core_ranges
from clusterctl.spec import SpecError
from clusterctl.spec.models import HardwareProfile
from clusterctl.verify.parsers.nvidia_smi_topo import parse_nvidia_smi_topo
from tests.conftest import EXAMPLES
from tests.specs import mutated


def _profile(**gpus: Any) -> HardwareProfile:
    cpus = gpus.pop("cpus", {"sockets": 2, "cores_per_socket": 56, "threads_per_core": 2})
    itype = gpus.pop("instance_type", None)
    return HardwareProfile.model_validate(
        {
            "gpus": {"model": "H100-SXM-80GB", "count": 8, **gpus},
            "cpus": cpus,
            "memory_gib": 2048,
            **({"instance_type": itype} if itype else {}),
        }
    )


def test_core_ranges_per_numa_node() -> None:
    assert numa_core_ranges(2, 56) == ["0-55", "56-111"]
    assert numa_core_ranges(1, 1) == ["0"]
    assert numa_core_ranges(2, 64, 8) == [f"{16 * n}-{16 * n + 15}" for n in range(8)]
    with pytest.raises(ValueError, match="3 NUMA nodes do not split 2 sockets"):
        numa_core_ranges(2, 56, 3)


def _first_range(cpu_affinity: str) -> str:
    return cpu_affinity.split(",")[0]


@pytest.mark.parametrize(
    ("fixture", "sockets", "cores", "numa_nodes"),
    [
        # 8x H100, 2 x 48 cores, SMT siblings numbered after all cores (sglang#30401).
        ("nvsmi_topo_m_8xH100_8nic_sglang30401.txt", 2, 48, None),
        # 8x A100 on 2 x 64-core EPYC in NPS4: 8 NUMA nodes, GPUs on nodes 3,3,1,1,7,7,5,5.
        ("nvsmi_topo_m_8xA100_10nic_epyc_nps4.txt", 2, 64, 8),
    ],
)
def test_cores_match_real_topologies(
    fixtures_dir: Path, fixture: str, sockets: int, cores: int, numa_nodes: int | None
) -> None:
    # On these machines Linux numbers every physical core before the SMT siblings, so the
    # first range of nvidia-smi's CPU Affinity is also the logical core range of the GPU's node.
    topo = parse_nvidia_smi_topo((fixtures_dir / "nvidia-smi" / fixture).read_text())
    numa = [int(topo.numa_affinity[gpu]) for gpu in topo.gpus]
    cpus = {"sockets": sockets, "cores_per_socket": cores, "threads_per_core": 2, "numa_nodes": numa_nodes}

    lines = gres_gpu_lines("gpu[001-002]", "hgx", _profile(numa=numa, cpus=cpus), cloud=False)

    assert [line.cores for line in lines] == [_first_range(topo.cpu_affinity[gpu]) for gpu in topo.gpus]
    assert [line.file for line in lines] == [f"/dev/nvidia{i}" for i in range(8)]


def test_the_catalog_gives_cloud_types_their_map_and_the_spec_wins() -> None:
    p5 = gres_gpu_lines(
        "gpu[001-016]",
        "p5",
        _profile(instance_type="p5.48xlarge", cpus={"sockets": 2, "cores_per_socket": 48}),
        cloud=False,
    )
    mine = gres_gpu_lines(
        "gpu[001-016]",
        "p5",
        _profile(instance_type="p5.48xlarge", numa=[1] * 8, cpus={"sockets": 2, "cores_per_socket": 48}),
        cloud=False,
    )

    assert [line.cores for line in p5] == ["0-47"] * 4 + ["48-95"] * 4
    assert p5[0].note == (
        "gpu[001-016] (p5): GPU NUMA nodes 0,0,0,0,1,1,1,1 from clusterctl's catalog for p5.48xlarge; "
        "Cores= are logical core indexes of 2 x 48 cores"
    )
    assert {line.cores for line in mine} == {"48-95"}


def test_without_a_map_there_is_no_cores_and_the_comment_says_so() -> None:
    lines = gres_gpu_lines("gpu[001-002]", "hgx", _profile(), cloud=True)

    assert {line.cores for line in lines} == {None}
    assert {line.autodetect for line in lines} == {"off"}
    assert lines[0].note == "gpu[001-002] (hgx): no GPU-NUMA map (set gpus.numa in the hardware profile), so no Cores="


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"numa": [0, 1]}, "numa lists 2 NUMA nodes for 8 GPUs; give one per GPU"),
        ({"numa": [0, 0, 0, 0, 1, 1, 1, 2]}, "gpus.numa names NUMA node 2, but the CPUs have 2 (0-1)"),
        ({"numa_nodes": 3}, "3 NUMA nodes do not divide 2 sockets of 56 cores evenly"),
    ],
)
def test_bad_numa_maps_are_located_errors(tmp_path: Path, change: dict[str, Any], fragment: str) -> None:
    def mutation(data: dict[str, Any]) -> None:
        profile = data["hardware"]["dgx-h100"]
        if "numa_nodes" in change:
            profile["cpus"]["numa_nodes"] = change["numa_nodes"]
        else:
            profile["gpus"]["numa"] = change["numa"]

    with pytest.raises(SpecError) as err:
        load_and_validate(mutated(tmp_path, mutation))

    messages = [f.message for f in err.value.findings]
    assert any(fragment in m for m in messages), messages
    assert all(f.line is not None for f in err.value.findings)


def test_rendered_gres_conf_binds_each_gpu_to_its_socket(tmp_path: Path) -> None:
    validated = load_and_validate(EXAMPLES / "onprem-h100-256.yaml")
    build, _ = render(validated, tmp_path / "build")
    gres = (build / "slurm" / "gres.conf").read_text()

    lines = [line for line in gres.splitlines() if line.startswith("NodeName=")]
    assert lines == [
        f"NodeName=gpu[001-032] Name=gpu Type=h100 File=/dev/nvidia{i} Cores={'0-55' if i < 4 else '56-111'}"
        for i in range(8)
    ]
    assert re.search(r"^# gpu\[001-032\] \(dgx-h100\): GPU NUMA nodes 0,0,0,0,1,1,1,1 from the hardware", gres, re.M)
    assert re.search(r"^AutoDetect=off$", gres, re.M)
    # slurm.conf still offers all eight GPUs of the type on those nodes.
    conf = (build / "slurm" / "slurm.conf").read_text()
    node_line = next(line for line in conf.splitlines() if line.startswith("NodeName=gpu[001-032]"))
    assert "Gres=gpu:h100:8" in node_line
