"""AWS EFA: what each installer ships, the plugin's files and environment per release, the rules,
and what the render hands roles/efa."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from clusterctl.catalog import efa
from clusterctl.pipeline import load_and_validate
from clusterctl.render.inventory import group_vars
from clusterctl.rules import run_rules
from clusterctl.spec.findings import Level
from clusterctl.spec.loader import load_spec
from tests.conftest import EXAMPLES
from tests.specs import example_data, write_spec

MULTIARCH = "/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu"
CHECKSUM = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("installer", "known", "ships"),
    [
        ("1.24.1", True, None),  # the installer's ChangeLog: no plugin up to here
        ("1.12.3", True, None),
        ("1.34.0", False, None),  # between: the role reads the tarball
        ("1.40.0", True, "1.14.2"),
        ("1.41.0", True, "1.14.2"),
        ("1.43.2", True, "1.16.3"),
        ("1.50.0", True, "1.21.1"),
    ],
)
def test_which_installer_ships_which_plugin(installer: str, known: bool, ships: str | None) -> None:
    shipped = efa.installer_ships(installer)
    assert (shipped.known, shipped.version) == (known, ships)


@pytest.mark.parametrize(
    ("plugin", "names", "libdir", "net", "tuner"),
    [
        ("1.7.3", ["libnccl-net.so"], MULTIARCH, None, None),
        ("1.14.2", ["libnccl-net.so", "libnccl-ofi-tuner.so"], MULTIARCH, None, f"{MULTIARCH}/libnccl-ofi-tuner.so"),
        (
            "1.15.0",
            ["libnccl-net-ofi.so", "libnccl-net.so", "libnccl-ofi-tuner.so"],
            MULTIARCH,
            "ofi",
            f"{MULTIARCH}/libnccl-ofi-tuner.so",
        ),
        (
            "1.16.3",
            ["libnccl-net-ofi.so", "libnccl-net.so", "libnccl-ofi-tuner.so", "libnccl-tuner-ofi.so"],
            MULTIARCH,
            "ofi",
            None,
        ),
        (
            "1.21.1",
            ["libnccl-net-ofi.so", "libnccl-net.so", "libnccl-ofi-tuner.so", "libnccl-tuner-ofi.so"],
            "/opt/amazon/ofi-nccl/lib",
            "ofi",
            None,
        ),
    ],
)
def test_plugin_files_and_environment_per_release(
    plugin: str, names: list[str], libdir: str, net: str | None, tuner: str | None
) -> None:
    assert list(efa.ofi_nccl_files(plugin).names) == sorted(names)
    assert efa.ofi_nccl_libdir(plugin) == libdir
    assert efa.ofi_nccl_net_plugin(plugin) == net
    assert efa.ofi_nccl_tuner(plugin) == tuner


def test_plugin_tags_before_1_14_end_in_aws() -> None:
    assert efa.ofi_nccl_url("1.13.2").endswith("/v1.13.2-aws/aws-ofi-nccl-1.13.2-aws.tar.gz")
    assert efa.ofi_nccl_url("1.16.3").endswith("/v1.16.3/aws-ofi-nccl-1.16.3.tar.gz")


def _aws(tmp_path: Path, **provider: Any) -> Path:
    data = copy.deepcopy(example_data("aws-p5.yaml"))
    data["provider"].update(provider)
    return write_spec(tmp_path, data)


def _findings(spec: Path, code: str) -> list[Any]:
    findings, _ = run_rules(load_spec(spec))
    return [f for f in findings if f.code == code]


def test_the_example_pairs_an_installer_with_the_plugin_it_ships() -> None:
    plan = load_and_validate(EXAMPLES / "aws-p5.yaml").plan
    (profile,) = plan.nccl
    stack = profile.efa
    assert stack is not None
    assert (stack.installer, stack.aws_ofi_nccl, stack.ofi_nccl_from_installer) == ("1.41.0", "1.14.2", True)
    assert stack.installer_checksum == efa.INSTALLER_CHECKSUMS["1.41.0"]
    assert profile.job_env_ld_path == ["/opt/amazon/efa/lib", "/opt/amazon/openmpi/lib", MULTIARCH]


def test_a_plugin_the_installer_does_not_ship_is_an_error(tmp_path: Path) -> None:
    (finding,) = _findings(_aws(tmp_path, efa_installer="1.43.2", efa_installer_checksum=CHECKSUM), "CLD090")
    assert finding.level is Level.ERROR
    assert "installs aws-ofi-nccl 1.16.3" in finding.message
    assert 'aws_ofi_nccl: "1.16.3"' in finding.hint


def test_an_installer_without_a_known_checksum_needs_one(tmp_path: Path) -> None:
    findings = _findings(_aws(tmp_path, efa_installer="1.43.2", aws_ofi_nccl="1.16.3"), "CLD091")
    assert [f.level for f in findings] == [Level.ERROR]
    assert "efa_installer_checksum" in findings[0].hint
    assert not _findings(
        _aws(tmp_path, efa_installer="1.43.2", aws_ofi_nccl="1.16.3", efa_installer_checksum=CHECKSUM), "CLD091"
    )


def test_a_source_build_needs_the_plugins_checksum(tmp_path: Path) -> None:
    spec = _aws(tmp_path, efa_installer="1.24.1", aws_ofi_nccl="1.13.2", efa_installer_checksum=CHECKSUM)
    (finding,) = _findings(spec, "CLD091")
    assert finding.level is Level.ERROR
    assert "builds 1.13.2 from https://github.com/aws/aws-ofi-nccl/releases/download/v1.13.2-aws/" in finding.message
    plan = load_and_validate(
        _aws(tmp_path, efa_installer="1.24.1", aws_ofi_nccl="1.12.1", efa_installer_checksum=CHECKSUM)
    ).plan
    stack = plan.nccl[0].efa
    assert stack is not None
    assert stack.ofi_nccl_from_installer is False
    assert stack.ofi_nccl_checksum == efa.OFI_NCCL_CHECKSUMS["1.12.1"]


def test_the_inventory_hands_the_role_its_releases_and_checksums() -> None:
    plan = load_and_validate(EXAMPLES / "aws-p5.yaml").plan
    gv = group_vars(plan)
    assert (gv["clusterctl_versions"]["efa_installer"], gv["clusterctl_versions"]["aws_ofi_nccl"]) == (
        "1.41.0",
        "1.14.2",
    )
    assert gv["clusterctl_efa"] == {
        "installer_checksum": efa.INSTALLER_CHECKSUMS["1.41.0"],
        "ofi_nccl_from_installer": True,
        "ofi_nccl_checksum": "",
        "ofi_nccl_libdir": MULTIARCH,
        "ofi_nccl_files": ["libnccl-net.so", "libnccl-ofi-tuner.so"],
        "gdrcopy_checksum": efa.GDRCOPY_CHECKSUM,
    }
    assert gv["clusterctl_nccl_fabrics"] == {"p5": "efa"}


def test_other_clouds_get_no_efa_inputs() -> None:
    gv = group_vars(load_and_validate(EXAMPLES / "azure-ndv5.yaml").plan)
    assert "clusterctl_efa" not in gv
    assert "efa_installer" not in gv["clusterctl_versions"]


def _burst(tmp_path: Path, **provider: str) -> Path:
    data = example_data("aws-burst.yaml")
    burst = next(g for g in data["nodes"] if g.get("burst"))
    burst["burst"]["provider"].update(provider)
    return write_spec(tmp_path, data)


@pytest.mark.parametrize(
    ("code", "provider", "field", "fragment"),
    [
        ("CLD091", {"efa_installer": "1.43.2", "aws_ofi_nccl": "1.16.3"}, "efa_installer", "knows no checksum"),
        ("CLD090", {"efa_installer": "1.43.2", "efa_installer_checksum": CHECKSUM}, "aws_ofi_nccl", "installs"),
        ("CLD014", {"aws_ofi_nccl": "1.7.1", "efa_installer": "1.24.1"}, "aws_ofi_nccl", "needs aws-ofi-nccl"),
    ],
)
def test_a_burst_groups_efa_pins_get_the_top_levels_checks(
    tmp_path: Path, code: str, provider: dict[str, str], field: str, fragment: str
) -> None:
    """A burst group on AWS installs the same EFA software: its pins are refused where the top level's would be."""
    (finding,) = [f for f in _findings(_burst(tmp_path, **provider), code) if f.level is Level.ERROR]
    assert finding.dotted_path == f"nodes[3].burst.provider.{field}"
    assert fragment in finding.message
    assert "burst group `gpu-b`" in finding.message


def test_the_burst_examples_efa_pins_pass() -> None:
    findings, _ = run_rules(load_spec(EXAMPLES / "aws-burst.yaml"))
    assert not [f for f in findings if f.code.startswith("CLD") and f.level >= Level.WARNING]


def test_a_burst_groups_gpudirect_plugin_gets_the_top_levels_check(tmp_path: Path) -> None:
    """CLD015 on a GCP burst group: an unknown GPUDirect-TCPXO plugin release is refused at the group's provider."""
    data = example_data("aws-burst.yaml")
    data["hardware"]["p5"]["instance_type"] = "a3-megagpu-8g"
    burst = next(g for g in data["nodes"] if g.get("burst"))
    gcp = {
        "kind": "gcp",
        "project": "my-gpu-project",
        "region": "us-central1",
        "zone": "us-central1-a",
        "gpudirect_plugin": "9.9.9",
    }
    burst["burst"]["provider"] = gcp
    (finding,) = _findings(write_spec(tmp_path, data), "CLD015")
    assert finding.level is Level.ERROR
    assert finding.dotted_path == "nodes[3].burst.provider.gpudirect_plugin"
