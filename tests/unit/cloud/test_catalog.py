"""The instance catalog and the managed-service tables: facts the stacks and the plan rely on."""

from __future__ import annotations

import pytest

from clusterctl.catalog.cloud_services import (
    AMLFS_TIERS,
    DEFAULT_GPUDIRECT_PLUGIN,
    FSX_TIERS,
    GCP_LUSTRE_TIERS,
    GPUDIRECT_RELEASES,
    gpudirect_release,
)
from clusterctl.catalog.gpus import GPU_MODELS
from clusterctl.catalog.instances import BASTION_TYPES, INSTANCE_TYPES, instance_type


@pytest.mark.parametrize(
    ("name", "gpus", "model", "efa"),
    [
        ("p5.48xlarge", 8, "H100-SXM-80GB", 32),
        ("p5e.48xlarge", 8, "H200-SXM-141GB", 32),
        ("p5en.48xlarge", 8, "H200-SXM-141GB", 16),
        ("p4d.24xlarge", 8, "A100-SXM-40GB", 4),
        ("p4de.24xlarge", 8, "A100-SXM-80GB", 4),
    ],
)
def test_aws_gpu_types(name: str, gpus: int, model: str, efa: int) -> None:
    itype = INSTANCE_TYPES[name]
    assert (itype.gpus, itype.gpu_model, itype.efa_interfaces, itype.fabric) == (gpus, model, efa, "efa")
    assert itype.network_cards >= itype.efa_interfaces


def test_gcp_a3_nics() -> None:
    high, mega = INSTANCE_TYPES["a3-highgpu-8g"], INSTANCE_TYPES["a3-megagpu-8g"]
    assert (high.fabric, len(high.gpu_nics)) == ("gpudirect-tcpx", 4)
    assert (mega.fabric, len(mega.gpu_nics)) == ("gpudirect-tcpxo", 8)
    assert high.host_nic == mega.host_nic == "enp0s12"


def test_gcp_nic_names_match_googles_slurm_script(fixtures_dir) -> None:
    text = (fixtures_dir / "nccl" / "nccl_env_gcp_a3mega_tcpxo_excerpt.env").read_text()
    line = next(line for line in text.splitlines() if "NCCL_FASTRAK_IFNAME=" in line)
    assert line.split("=", 1)[1].split(",") == list(INSTANCE_TYPES["a3-megagpu-8g"].gpu_nics)


def test_azure_ib_devices_match_health_check_config(fixtures_dir) -> None:
    text = (fixtures_dir / "cloud" / "azure_nhc_nd96isr_h100_v5.conf").read_text()
    devices = [line.split()[-1].split(":")[0] for line in text.splitlines() if "check_hw_ib 400" in line]
    assert devices == list(INSTANCE_TYPES["Standard_ND96isr_H100_v5"].ib_devices)
    assert "mlx5_an0" in INSTANCE_TYPES["Standard_ND96isr_H200_v5"].excluded_nics


def test_every_gpu_model_is_known() -> None:
    for itype in INSTANCE_TYPES.values():
        assert (itype.gpu_model in GPU_MODELS) if itype.gpus else itype.gpu_model is None
    for provider, name in BASTION_TYPES.items():
        assert INSTANCE_TYPES[name].provider == provider
    assert instance_type(None) is None
    assert instance_type("nope") is None


def test_lustre_tier_math() -> None:
    p2 = {t.mbps_per_tib: t for t in FSX_TIERS["PERSISTENT_2"]}
    assert sorted(p2) == [125, 250, 500, 1000]
    assert p2[1000].capacity_for(100) == 1200
    assert p2[1000].capacity_for(1201) == 2400
    assert p2[1000].capacity_for(40960) == 43200
    assert p2[1000].throughput_mbps(2400) == pytest.approx(2343.75)
    gcp = {t.mbps_per_tib: t for t in GCP_LUSTRE_TIERS}
    assert gcp[1000].capacity_for(1) == 9000
    assert gcp[125].capacity_for(1) == 72000
    assert gcp[500].capacity_for(18001) == 36000
    amlfs = {t.name: t for t in AMLFS_TIERS}
    assert amlfs["AMLFS-Durable-Premium-500"].capacity_for(1) == 4 * 1024
    assert amlfs["AMLFS-Durable-Premium-40"].capacity_for(49 * 1024) == 96 * 1024


def test_gpudirect_releases() -> None:
    for fabric, version in DEFAULT_GPUDIRECT_PLUGIN.items():
        assert gpudirect_release(fabric, version) is not None
        assert gpudirect_release(fabric, "v" + version) is not None
    tcpxo = GPUDIRECT_RELEASES[("gpudirect-tcpxo", "1.0.17")]
    assert tcpxo.rxdm_image.endswith("gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.23")
