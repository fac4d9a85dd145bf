"""NCCL settings per cloud fabric, checked against the vendors' own files (fixtures)."""

from __future__ import annotations

import copy
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from clusterctl.pipeline import load_and_validate
from clusterctl.plan.models import NcclProfile
from clusterctl.spec.findings import SpecError
from tests.conftest import EXAMPLES
from tests.specs import example_data, write_spec

P4DE = {
    "instance_type": "p4de.24xlarge",
    "gpus": {"model": "A100-SXM-80GB", "count": 8},
    "cpus": {"sockets": 2, "cores_per_socket": 24, "threads_per_core": 2},
    "memory_gib": 1152,
}


def _profile(tmp_path: Path, base: str, hardware: dict[str, Any] | None = None, **provider: Any) -> NcclProfile:
    data = copy.deepcopy(example_data(base))
    data["provider"].update(provider)
    if hardware:
        data["hardware"]["p5"] = hardware
    plan = load_and_validate(write_spec(tmp_path, data)).plan
    (profile,) = plan.nccl
    return profile


def _names(settings: list) -> dict[str, str]:
    return {s.name: s.value for s in settings}


@pytest.mark.parametrize(
    ("hardware", "plugin", "installer", "expected"),
    [
        # aws-ofi-nccl <= 1.5.0 on p4: FI_PROVIDER, NCCL_PROTO and device RDMA per job (p5 needs >= 1.7.2).
        (P4DE, "1.5.0", "1.34.0", {"FI_PROVIDER": "efa", "NCCL_PROTO": "simple", "FI_EFA_USE_DEVICE_RDMA": "1"}),
        # 1.6.x: only device RDMA.
        (P4DE, "1.6.0", "1.34.0", {"FI_EFA_USE_DEVICE_RDMA": "1"}),
        # 1.7.0 and later set the FI_* variables themselves; 1.15.0+ is libnccl-net-ofi.so, named by `ofi`.
        (None, "1.16.3", "1.34.0", {"NCCL_NET_PLUGIN": "ofi"}),
        # Old EFA installer with NCCL >= 2.19: the sync-memops workaround.
        (None, "1.16.3", "1.28.0", {"NCCL_NET_PLUGIN": "ofi", "FI_EFA_SET_CUDA_SYNC_MEMOPS": "0"}),
    ],
)
def test_aws_efa_is_version_aware(
    tmp_path: Path, hardware: dict[str, Any] | None, plugin: str, installer: str, expected: dict[str, str]
) -> None:
    checksum = "sha256:" + "0" * 64  # installers clusterctl knows no checksum of need one in the spec
    profile = _profile(
        tmp_path,
        "aws-p5.yaml",
        hardware,
        aws_ofi_nccl=plugin,
        efa_installer=installer,
        efa_installer_checksum=checksum,
        aws_ofi_nccl_checksum=checksum,
    )
    assert _names(profile.job_env) == expected
    assert _names(profile.settings) == {"NCCL_SOCKET_IFNAME": "en"}
    # Tuning the plugin sets itself (buffer size, chunk sizes; the tuner from 1.16.0) is never emitted.
    emitted = set(_names(profile.job_env)) | set(_names(profile.settings))
    assert not emitted & {"NCCL_BUFFSIZE", "NCCL_P2P_NET_CHUNKSIZE", "NCCL_TUNER_PLUGIN", "FI_EFA_FORK_SAFE"}
    assert not profile.job_env_multinode_only


def test_gcp_tcpxo_uses_the_plugin_profile_and_the_vendor_nics(tmp_path: Path, fixtures_dir: Path) -> None:
    profile = _profile(tmp_path, "gcp-a3mega.yaml")
    vendor = {}
    for line in (fixtures_dir / "nccl" / "nccl_env_gcp_a3mega_tcpxo_excerpt.env").read_text().splitlines():
        if line.startswith("export "):
            name, value = line.removeprefix("export ").split("=", 1)
            vendor[name] = value
    assert _names(profile.job_env) == vendor
    assert profile.job_env_profile == "/var/lib/tcpxo/lib64/nccl-env-profile.sh"
    assert profile.job_env_multinode_only
    # Per-job tuning (ALGO/PROTO) never lands in /etc/nccl.conf.
    assert set(_names(profile.settings)) == {"NCCL_SOCKET_IFNAME"}
    daemon = profile.job_daemon
    assert daemon is not None
    assert daemon.image.endswith("tcpgpudmarxd-dev:v1.0.23")
    # The flags of Google's prolog (slurm-gcp receive-data-path-manager-mega@13fd92b line 73).
    assert daemon.args == ["--num_hops=2", "--num_nics=8", "--uid=", "--alsologtostderr"]


def test_gcp_tcpxo_old_rxdm_keeps_retired_flags(tmp_path: Path) -> None:
    data = copy.deepcopy(example_data("gcp-a3mega.yaml"))
    data["provider"]["gpudirect_plugin"] = "1.0.11"
    data["versions"]["nccl"] = "2.25.1"
    profile = load_and_validate(write_spec(tmp_path, data)).plan.nccl[0]
    assert profile.job_daemon is not None
    assert "--uid=" in profile.job_daemon.args


def test_gcp_tcpx_settings(tmp_path: Path) -> None:
    data = copy.deepcopy(example_data("gcp-a3mega.yaml"))
    data["hardware"]["a3mega"]["instance_type"] = "a3-highgpu-8g"
    data["fabric"]["kind"] = "gpudirect-tcpx"
    data["provider"]["gpudirect_plugin"] = "3.1.9"
    data["versions"].update(cuda="12.3", nvidia_driver="545.23.06", nccl="2.19.3")
    profile = load_and_validate(write_spec(tmp_path, data)).plan.nccl[0]
    env = _names(profile.job_env)
    assert env["NCCL_NET"] == "GPUDirectTCPX_v7"
    assert env["NCCL_GPUDIRECTTCPX_SOCKET_IFNAME"] == "enp6s0,enp12s0,enp134s0,enp140s0"
    assert (env["NCCL_ALGO"], env["NCCL_PROTO"]) == ("Ring", "Simple")
    assert env["NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX"] == "/run/tcpx-${SLURM_JOB_ID}"
    assert env["NCCL_GPUDIRECTTCPX_TX_BINDINGS"].startswith("enp6s0:8-21,112-125;")
    assert "NCCL_ALGO" not in _names(profile.settings)


def test_azure_nccl_conf_matches_azures(fixtures_dir: Path) -> None:
    profile = load_and_validate(EXAMPLES / "azure-ndv5.yaml").plan.nccl[0]
    azure = dict(
        line.split("=", 1) for line in (fixtures_dir / "nccl" / "azure_ndv5_etc_nccl.conf").read_text().split()
    )
    # The same three lines as Azure's image, in its order: roles/nccl installs the topology at the
    # image's paths (/opt/microsoft/ndv5-topo.xml, linked as /opt/microsoft/ndv5/topo.xml).
    assert [(s.name, s.value) for s in profile.settings] == list(azure.items())
    assert (profile.topo_file, profile.topo_path) == ("/opt/microsoft/ndv5-topo.xml", "/opt/microsoft/ndv5/topo.xml")


def _pairs(root: ET.Element) -> dict[str, set[tuple[str, str]]]:
    out: dict[str, set[tuple[str, str]]] = {}
    for cpu in root.iter("cpu"):
        pairs = set()
        for switch in cpu.findall("pci"):
            children = {c.get("class"): c.get("busid") for c in switch.findall("pci")}
            pairs.add((children["0x030200"], children["0x020700"]))
        out[cpu.get("numaid", "")] = pairs
    return out


def test_topology_xml_pairs_gpus_and_nics_as_azures_file(tmp_path: Path, fixtures_dir: Path) -> None:
    from clusterctl.pipeline import render

    validated = load_and_validate(EXAMPLES / "azure-ndv5.yaml")
    out, _ = render(validated, tmp_path / "build")
    ours = ET.parse(out / "nccl" / "ndv5-topo.xml").getroot()
    azure = ET.parse(fixtures_dir / "nccl" / "azure_ndv5-topo.xml").getroot()
    assert ours.get("version") == azure.get("version") == "1"
    assert _pairs(ours) == _pairs(azure)
    assert [c.get("affinity") for c in ours.iter("cpu")] == [c.get("affinity") for c in azure.iter("cpu")]


def test_gcp_tcpxo_vendor_slurm_and_pins(tmp_path: Path) -> None:
    plan = load_and_validate(EXAMPLES / "gcp-a3mega.yaml").plan
    (profile,) = plan.nccl
    assert profile.slurm is not None
    assert profile.slurm.oversubscribe == "EXCLUSIVE"
    assert profile.job_env_ld_path == ["/var/lib/tcpxo/lib64"]
    assert profile.job_daemon is not None
    assert profile.job_daemon.ready_line == "Buffer manager initialization complete"
    assert profile.job_daemon.modules == ["import-helper"]
    # Every partition holding A3 Mega nodes gets the vendor's settings; the timeouts are global.
    assert {(p.name, p.oversubscribe, p.resume_timeout_s, p.suspend_timeout_s) for p in plan.slurm.partitions} == {
        ("a3mega", "EXCLUSIVE", 900, 600),
        ("debug", "EXCLUSIVE", 900, 600),
    }
    assert (plan.slurm.message_timeout_s, plan.slurm.batch_start_timeout_s, plan.slurm.prolog_epilog_timeout_s) == (
        600,
        600,
        600,
    )
    versions = plan.cluster.versions
    assert versions["dmabuf_import_helper"] == "1.1"
    assert (versions["gpudirect_tcpxo_plugin"], versions["gpudirect_tcpxo_rxdm"]) == ("1.0.17", "1.0.23")
    assert "nccl_gib" not in versions


def test_gcp_tcpxo_partition_without_a3mega_nodes_is_untouched(tmp_path: Path) -> None:
    data = copy.deepcopy(example_data("gcp-a3mega.yaml"))
    data["nodes"].append({"group": "cpu", "role": "compute", "hardware": "head", "count": 2})
    data["slurm"]["partitions"].append({"name": "cpu", "groups": ["cpu"], "max_time": "01:00:00"})
    plan = load_and_validate(write_spec(tmp_path, data)).plan
    cpu = next(p for p in plan.slurm.partitions if p.name == "cpu")
    assert (cpu.oversubscribe, cpu.resume_timeout_s, cpu.vendor_sources) == (None, None, [])


def test_gcp_rdma_a3_ultra_profile(tmp_path: Path) -> None:
    data = copy.deepcopy(example_data("gcp-a3mega.yaml"))
    data["hardware"]["a3mega"] = {
        "instance_type": "a3-ultragpu-8g",
        "gpus": {"model": "H200-SXM-141GB", "count": 8},
        "cpus": {"sockets": 2, "cores_per_socket": 56, "threads_per_core": 2},
        "memory_gib": 2952,
    }
    data["fabric"] = {"kind": "roce", "speed_gbps": 400, "layout": "rack-leaf", "nodes_per_rack": 4}
    data["provider"].pop("gpudirect_plugin")
    data["versions"].update(nvidia_driver="580.65.06", cuda="12.9", nccl="2.27.5")
    plan = load_and_validate(write_spec(tmp_path, data)).plan
    (profile,) = plan.nccl
    env = _names(profile.job_env)
    assert (profile.fabric, env["NCCL_NET"], env["NCCL_SOCKET_IFNAME"]) == ("gcp-rdma", "gIB", "enp0s19,enp192s20")
    assert profile.job_env_profile == "/usr/local/gib/scripts/set_nccl_env.sh"
    assert profile.job_daemon is None
    assert not profile.job_env_multinode_only
    assert plan.slurm.prolog is None
    assert plan.slurm.prolog_epilog_timeout_s is None
    assert {(p.oversubscribe, p.resume_timeout_s, p.suspend_timeout_s) for p in plan.slurm.partitions} == {
        ("EXCLUSIVE", 1200, 1200)
    }
    assert plan.cluster.versions["nccl_gib"] == "1.1.0"
    assert "dmabuf_import_helper" not in plan.cluster.versions


def test_gcp_rdma_needs_the_roce_fabric(tmp_path: Path) -> None:
    data = copy.deepcopy(example_data("gcp-a3mega.yaml"))
    data["hardware"]["a3mega"]["instance_type"] = "a3-ultragpu-8g"
    data["hardware"]["a3mega"]["gpus"]["model"] = "H200-SXM-141GB"
    with pytest.raises(SpecError, match="fabric"):
        load_and_validate(write_spec(tmp_path, data))
