"""The key that signs every CUDA, NCCL and DCGM package is never fetched over plain http unchecked.

The finding: `mirrors.cuda_repo_key: http://...` validated silently, and the roles fetched the
key over plain HTTP with no checksum. Now a key fetched over http (the key URL, or the mirror's
own key file when no key URL is given) needs `cuda_repo_key_sha256`, which the nvidia_driver role
checks before apt trusts the key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterctl.pipeline import load_and_validate
from clusterctl.render.inventory import group_vars
from clusterctl.spec import SpecError
from tests.conftest import REPO_ROOT
from tests.specs import example_data, write_spec

SHA = "sha256:" + "a" * 64


def _spec(tmp_path: Path, mirrors: dict[str, Any]) -> Path:
    data = example_data("local.yaml")
    data["mirrors"] = mirrors
    return write_spec(tmp_path, data)


@pytest.mark.parametrize(
    "mirrors",
    [
        {"cuda_repo": "https://mirror.example.com/cuda", "cuda_repo_key": "http://mirror.example.com/k.asc"},
        {"cuda_repo": "http://mirror.example.com/cuda"},
    ],
)
def test_a_key_over_plain_http_without_its_sha256_is_refused_at_its_line(
    tmp_path: Path, mirrors: dict[str, Any]
) -> None:
    path = _spec(tmp_path, mirrors)
    with pytest.raises(SpecError) as info:
        load_and_validate(path)
    (finding,) = [f for f in info.value.findings if "mirrors" in f.dotted_path]
    assert finding.file == str(path)
    assert finding.line > 0
    assert "cuda_repo_key_sha256" in finding.message


def test_with_its_sha256_the_role_checks_the_key(tmp_path: Path) -> None:
    plan = load_and_validate(
        _spec(tmp_path, {"cuda_repo": "http://mirror.example.com/cuda", "cuda_repo_key_sha256": SHA})
    ).plan
    assert group_vars(plan)["nvidia_driver_cuda_repo_key_checksum"] == SHA
    tasks = yaml.safe_load((REPO_ROOT / "roles" / "nvidia_driver" / "tasks" / "repository.yml").read_text())
    block = next(t for t in tasks if "block" in t)["block"]
    download = next(t for t in block if "ansible.builtin.get_url" in t)["ansible.builtin.get_url"]
    assert download["checksum"] == "{{ nvidia_driver_cuda_repo_key_checksum | default(omit, true) }}"


def test_a_key_over_https_needs_no_checksum(tmp_path: Path) -> None:
    plan = load_and_validate(
        _spec(
            tmp_path, {"cuda_repo": "https://mirror.example.com/cuda", "cuda_repo_key": "https://m.example.com/k.asc"}
        )
    ).plan
    assert "nvidia_driver_cuda_repo_key_checksum" not in group_vars(plan)
