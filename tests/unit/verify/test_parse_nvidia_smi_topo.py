"""parse_nvidia_smi_topo on the real topo -m matrices (standalone and inside a capture)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from clusterctl.verify.parsers.nvidia_smi_topo import nics_near_gpus, nics_without_gpu, parse_nvidia_smi_topo
from clusterctl.verify.result import ParseError

H100 = "nvsmi_topo_m_8xH100_8nic_sglang30401.txt"
A100 = "nvsmi_topo_m_8xA100_10nic_epyc_nps4.txt"
CAPTURE = "nvsmi_capture_h100_80gb_hbm3_590_nvidia_gpu_exporter.txt"


def _read(fixtures_dir: Path, name: str) -> str:
    return (fixtures_dir / "nvidia-smi" / name).read_text()


def test_every_topo_fixture_is_covered(fixtures_dir: Path) -> None:
    names = {p.name for p in (fixtures_dir / "nvidia-smi").glob("nvsmi_topo_m_*.txt")}
    names |= {p.name for p in (fixtures_dir / "nvidia-smi").glob("nvsmi_capture_*.txt")}
    assert names == {H100, A100, CAPTURE}


def test_8xh100_one_nic_per_gpu_at_pix(fixtures_dir: Path) -> None:
    topo = parse_nvidia_smi_topo(_read(fixtures_dir, H100))

    assert topo.gpus == tuple(f"GPU{i}" for i in range(8))
    assert topo.nics == tuple(f"NIC{i}" for i in range(8))
    assert topo.nic_names == {f"NIC{i}": f"mlx5_{i}" for i in range(8)}
    for i in range(8):
        assert topo.link(f"GPU{i}", f"NIC{i}") == "PIX"
        assert topo.link(f"GPU{i}", f"GPU{(i + 1) % 8}") == "NV18"
    assert topo.link("GPU0", "NIC1") == "NODE"
    assert topo.link("GPU0", "NIC4") == "SYS"
    assert topo.link("NIC7", "NIC7") == "X"
    assert nics_near_gpus(topo) == {f"GPU{i}": [f"mlx5_{i}"] for i in range(8)}
    assert nics_without_gpu(topo) == []
    assert topo.cpu_affinity["GPU0"] == "0-47,96-143"
    assert topo.cpu_affinity["GPU4"] == "48-95,144-191"
    assert [topo.numa_affinity[g] for g in topo.gpus] == ["0"] * 4 + ["1"] * 4
    assert set(topo.gpu_numa_id.values()) == {"N/A"}
    assert "NIC0" not in topo.cpu_affinity


def test_8xa100_pairs_at_pxb_and_storage_nics(fixtures_dir: Path) -> None:
    topo = parse_nvidia_smi_topo(_read(fixtures_dir, A100))

    assert len(topo.gpus) == 8
    assert len(topo.nics) == 10
    assert topo.link("GPU0", "GPU1") == "NV12"
    near = nics_near_gpus(topo)
    for pair in range(4):
        nics = [f"mlx5_{2 * pair}", f"mlx5_{2 * pair + 1}"]
        for gpu in (f"GPU{2 * pair}", f"GPU{2 * pair + 1}"):
            assert near[gpu] == nics
            assert {topo.link(gpu, topo.nic_column(n) or "") for n in nics} == {"PXB"}
    assert nics_without_gpu(topo) == ["mlx5_8", "mlx5_9"]
    assert topo.link("NIC8", "NIC9") == "PIX"
    assert {topo.link(g, "NIC8") for g in topo.gpus} == {"SYS"}
    assert topo.gpu_numa_id == {}  # older format without the GPU NUMA ID column
    assert topo.numa_affinity["GPU0"] == "3"
    assert topo.cpu_affinity["GPU6"] == "80-95,208-223"


def test_single_gpu_matrix_inside_a_capture_with_ansi_underline(fixtures_dir: Path) -> None:
    text = _read(fixtures_dir, CAPTURE)
    assert "\x1b[4mGPU0" in text

    topo = parse_nvidia_smi_topo(text)

    assert topo.devices == ("GPU0",)
    assert topo.link("GPU0", "GPU0") == "X"
    assert (topo.cpu_affinity["GPU0"], topo.numa_affinity["GPU0"], topo.gpu_numa_id["GPU0"]) == ("0-19", "0", "N/A")
    assert topo.nic_names == {}


@pytest.mark.parametrize(
    "transform",
    [
        lambda text: text.expandtabs(8),
        lambda text: "\n".join(" 0: " + line for line in text.splitlines()),
        lambda text: text.replace("\n", "\r\n"),
    ],
    ids=["spaces", "srun-prefix", "crlf"],
)
def test_layout_variants_give_the_same_matrix(fixtures_dir: Path, transform: Callable[[str], str]) -> None:
    text = _read(fixtures_dir, A100)

    assert parse_nvidia_smi_topo(transform(text)) == parse_nvidia_smi_topo(text)


def test_old_driver_names_nics_in_the_header() -> None:
    text = (
        "\tGPU0\tGPU1\tmlx5_0\tmlx5_1\tCPU Affinity\nGPU0\t X \tNV4\tPIX\tSYS\t0-11\nGPU1\tNV4\t X \tSYS\tPHB\t12-23\n"
    )
    text += "mlx5_0\tPIX\tSYS\t X \tSYS\t\nmlx5_1\tSYS\tPHB\tSYS\t X \t\n"

    topo = parse_nvidia_smi_topo(text)

    assert topo.nics == ("mlx5_0", "mlx5_1")
    assert topo.nic_column("mlx5_1") == "mlx5_1"
    assert nics_near_gpus(topo) == {"GPU0": ["mlx5_0"], "GPU1": []}
    assert topo.cpu_affinity == {"GPU0": "0-11", "GPU1": "12-23"}


def test_broadcom_nic_names_in_the_header() -> None:
    text = "\tGPU0\tbnxt_re0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tPXB\t0-31\t0\nbnxt_re0\tPXB\t X \t\t\n"

    topo = parse_nvidia_smi_topo(text)

    assert nics_near_gpus(topo) == {"GPU0": ["bnxt_re0"]}


def test_unknown_connection_reports_its_line(fixtures_dir: Path) -> None:
    lines = _read(fixtures_dir, A100).splitlines()
    lines[3] = lines[3].replace("PXB", "PXQ", 1)

    with pytest.raises(ParseError) as caught:
        parse_nvidia_smi_topo("\n".join(lines))

    assert caught.value.line_no == 4
    assert caught.value.line.startswith("GPU2")
    assert "'PXQ'" in caught.value.message


def test_missing_row_is_reported(fixtures_dir: Path) -> None:
    lines = _read(fixtures_dir, H100).splitlines()
    del lines[8]  # the GPU7 row

    with pytest.raises(ParseError) as caught:
        parse_nvidia_smi_topo("\n".join(lines))

    assert "no row for GPU7" in caught.value.message


def test_text_without_a_matrix(fixtures_dir: Path) -> None:
    text = _read(fixtures_dir, "nvsmi_table_8xH100_560_nccltests264.txt")

    with pytest.raises(ParseError) as caught:
        parse_nvidia_smi_topo(text)

    assert caught.value.line_no == len(text.splitlines())
