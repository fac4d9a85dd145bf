"""A mirror of NVIDIA's CUDA repository: the roles' repository variables, and NCCL on emulated GPU nodes."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from clusterctl.image.hash import profile_hash
from clusterctl.pipeline import load_and_validate
from clusterctl.plan import Plan
from clusterctl.render.inventory import group_vars, inventory
from clusterctl.spec import SpecError
from tests.specs import example_data, write_spec

KEY_SHA256 = "sha256:" + "5" * 64
MIRROR = {
    "cuda_repo": "http://mirror.example.com/nvidia/cuda/",
    "cuda_repo_key": "http://mirror.example.com/k.asc",
    "cuda_repo_key_sha256": KEY_SHA256,
}


def _plan(tmp_path: Path, data: dict[str, Any], name: str = "spec.yaml") -> Plan:
    return load_and_validate(write_spec(tmp_path, data, name)).plan


def _mirrored(example: str) -> dict[str, Any]:
    data = example_data(example)
    data["mirrors"] = dict(MIRROR)
    return data


def test_the_mirror_becomes_the_repository_the_roles_configure(tmp_path: Path) -> None:
    variables = group_vars(_plan(tmp_path, _mirrored("onprem-h100-256.yaml")))
    assert variables["nvidia_driver_cuda_repo_base_url"] == "http://mirror.example.com/nvidia/cuda"
    assert variables["nvidia_driver_cuda_repo_key_url"] == "http://mirror.example.com/k.asc"
    assert variables["nvidia_driver_cuda_repo_key_checksum"] == KEY_SHA256
    assert "nvidia_driver_cuda_repo_base_url" not in group_vars(_plan(tmp_path, example_data("onprem-h100-256.yaml")))


def test_emulated_gpu_nodes_get_nccl_only_with_a_mirror(tmp_path: Path) -> None:
    def userspace(plan: Plan) -> set[str]:
        return set(inventory(plan)["all"]["children"]["nccl_userspace"]["hosts"])

    assert userspace(_plan(tmp_path, _mirrored("local.yaml"))) == {"gpu001", "gpu002", "gpu003", "gpu004"}
    assert userspace(_plan(tmp_path, example_data("local.yaml"))) == set()
    # Real GPU nodes have the whole GPU stack: the group is for emulated ones only.
    assert userspace(_plan(tmp_path, _mirrored("onprem-h100-256.yaml"))) == set()


def test_with_the_mirror_the_nccl_pin_enters_the_emulated_profiles_image(tmp_path: Path) -> None:
    data = _mirrored("local.yaml")
    bumped = copy.deepcopy(data)
    bumped["versions"]["nccl"] = "2.27.3"
    plan, after = _plan(tmp_path, data), _plan(tmp_path, bumped, "bumped.yaml")
    before = profile_hash(plan, "emu-h100", arch="amd64")
    assert before.inputs["versions"]["nccl"] == "2.26.2"
    assert profile_hash(after, "emu-h100", arch="amd64").hash != before.hash
    # The CPU profile installs no NCCL.
    assert profile_hash(after, "small", arch="amd64").hash == profile_hash(plan, "small", arch="amd64").hash


def test_a_key_without_a_mirror_is_refused(tmp_path: Path) -> None:
    data = example_data("local.yaml")
    data["mirrors"] = {"cuda_repo_key": "https://mirror.example.com/k.asc"}
    with pytest.raises(SpecError, match="set cuda_repo too"):
        load_and_validate(write_spec(tmp_path, data))


@pytest.mark.parametrize("url", ["http://mirror.example.com/$(id)", "ftp://mirror.example.com/cuda", "not a url"])
def test_a_mirror_url_is_a_checked_url(tmp_path: Path, url: str) -> None:
    data = example_data("local.yaml")
    data["mirrors"] = {"cuda_repo": url}
    with pytest.raises(SpecError, match=r"spec\.yaml:\d+:\d+: `cuda_repo`: .* is not a URL"):
        load_and_validate(write_spec(tmp_path, data))
