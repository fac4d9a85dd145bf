"""nccl-tests and the NVIDIA container toolkit pinned in the spec's versions, down to the roles."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from clusterctl.catalog.tools import NCCL_TESTS_CHECKSUMS
from clusterctl.pipeline import load_and_validate
from clusterctl.render.inventory import group_vars
from clusterctl.spec import SpecError
from tests.conftest import REPO_ROOT
from tests.specs import mutated

MIRROR = "https://mirror.example.com/nccl-tests/v2.14.1.tar.gz"
DIGEST = "sha256:" + "0123456789abcdef" * 4


def _versions(**changes: Any):  # type: ignore[no-untyped-def]
    def mutation(data: dict[str, Any]) -> None:
        data["versions"].update(changes)

    return mutation


def test_defaults_reach_the_inventory(tmp_path: Path) -> None:
    plan = load_and_validate(mutated(tmp_path, _versions())).plan
    gv = group_vars(plan)

    assert plan.cluster.versions["nccl_tests"] == "2.13.6"
    assert plan.cluster.versions["nvidia_container_toolkit"] == "1.17.8"
    assert gv["clusterctl_versions"]["nvidia_container_toolkit"] == "1.17.8"
    assert gv["clusterctl_nccl_tests_source_url"] == "https://github.com/NVIDIA/nccl-tests/archive/v2.13.6.tar.gz"
    assert gv["clusterctl_nccl_tests_source_checksum"] == NCCL_TESTS_CHECKSUMS["2.13.6"]
    # Not versions: the archive and its checksum stay out of clusterctl_versions.
    assert not {"nccl_tests_url", "nccl_tests_checksum"} & set(gv["clusterctl_versions"])


def test_a_mirror_with_its_checksum(tmp_path: Path) -> None:
    spec = mutated(tmp_path, _versions(nccl_tests="2.14.1", nccl_tests_url=MIRROR, nccl_tests_checksum=DIGEST))
    gv = group_vars(load_and_validate(spec).plan)

    assert gv["clusterctl_versions"]["nccl_tests"] == "2.14.1"
    assert (gv["clusterctl_nccl_tests_source_url"], gv["clusterctl_nccl_tests_source_checksum"]) == (MIRROR, DIGEST)


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"nccl_tests": "2.14.1"}, "clusterctl knows no checksum for nccl-tests 2.14.1"),
        ({"nccl_tests_url": MIRROR}, "clusterctl knows no checksum for the archive at nccl_tests_url"),
        ({"nccl_tests_checksum": "md5:abc"}, "is not a sha256 checksum"),
        ({"nvidia_container_toolkit": 1.17}, "version"),
    ],
)
def test_unchecked_archives_and_untyped_pins_are_refused(
    tmp_path: Path, changes: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(SpecError) as err:
        load_and_validate(mutated(tmp_path, _versions(**changes)))

    messages = " ".join(f.message for f in err.value.findings)
    assert fragment in messages, messages


def test_the_roles_read_the_pins() -> None:
    yaml = YAML(typ="safe")
    runtime = yaml.load((REPO_ROOT / "roles" / "container_runtime" / "defaults" / "main.yml").read_text())
    nccl = yaml.load((REPO_ROOT / "roles" / "nccl" / "defaults" / "main.yml").read_text())

    assert "clusterctl_versions.nvidia_container_toolkit" in runtime["container_runtime_nvidia_ctk_version"]
    assert "clusterctl_nccl_tests_source_url" in nccl["nccl_tests_source_url"]
    assert "clusterctl_nccl_tests_source_checksum" in nccl["nccl_tests_source_checksum"]
