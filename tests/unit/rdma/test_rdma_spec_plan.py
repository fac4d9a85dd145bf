"""Rails by PCI address or device name, opensm placement and IPoIB per rail: spec, rules, plan, inventory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import TypeAdapter, ValidationError

from clusterctl.pipeline import load_and_validate
from clusterctl.render import render_files
from clusterctl.rules import validate
from clusterctl.spec import Level, load_spec
from clusterctl.spec.types import RailDevice
from tests.specs import mutated

RAILS = TypeAdapter(RailDevice)
# DGX H100 User Guide, "Network Modules": GPU i's ConnectX-7 (tests/fixtures/sysfs/README.md).
PCI_RAILS = [
    "0000:18:00.0",
    "0000:40:00.0",
    "0000:4f:00.0",
    "0000:5e:00.0",
    "0000:9a:00.0",
    "0000:c0:00.0",
    "0000:ce:00.0",
    "0000:dc:00.0",
]


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("0000:18:00.0", "0000:18:00.0"),
        ("0000:4F:00.0", "0000:4f:00.0"),
        ("mlx5_0", "mlx5_0"),
        ("ibp24s0", "ibp24s0"),
        ("rocep41s0f1", "rocep41s0f1"),
        ("mlx5_ib0", "mlx5_ib0"),
    ],
)
def test_rail_device_accepts_pci_addresses_and_device_names(given: str, stored: str) -> None:
    assert RAILS.validate_python(given) == stored


@pytest.mark.parametrize(
    ("given", "fragment"),
    [
        ("18:00.0", "0000: domain"),
        ("mlx5 0", "neither a PCI address"),
        ("mlx5_0,mlx5_1", "neither a PCI address"),
        ("=mlx5_0", "neither a PCI address"),
        (7, "must be text"),
    ],
)
def test_rail_device_refuses_anything_else(given: object, fragment: str) -> None:
    with pytest.raises(ValidationError, match=fragment):
        RAILS.validate_python(given)


def _spec(tmp_path: Path, **fabric: Any) -> Path:
    def change(data: dict[str, Any]) -> None:
        data["hardware"]["dgx-h100"]["rails"] = list(PCI_RAILS)
        data["fabric"].update(fabric)

    return mutated(tmp_path, change)


def _inventory(spec: Path) -> dict[str, Any]:
    plan = load_and_validate(spec).plan
    assert plan is not None
    text = next(f.text for f in render_files(plan) if f.path == "ansible/inventory/hosts.yml")
    return yaml.safe_load(text.replace("!unsafe ", ""))["all"]


def test_opensm_runs_only_on_the_named_hosts_with_their_priorities(tmp_path: Path) -> None:
    spec = _spec(
        tmp_path,
        subnet_manager="opensm",
        opensm_hosts=[{"host": "gpu001"}, {"host": "gpu002"}, {"host": "gpu003", "priority": 3, "port": "mlx5_3"}],
    )

    inventory = _inventory(spec)

    assert sorted(inventory["children"]["opensm"]["hosts"]) == ["gpu001", "gpu002", "gpu003"]
    host = inventory["hosts"]
    assert (host["gpu001"]["clusterctl_opensm_priority"], host["gpu001"]["clusterctl_opensm_port"]) == (
        15,
        "0000:18:00.0",
    )
    assert host["gpu002"]["clusterctl_opensm_priority"] == 14
    assert (host["gpu003"]["clusterctl_opensm_priority"], host["gpu003"]["clusterctl_opensm_port"]) == (3, "mlx5_3")
    assert "clusterctl_opensm_priority" not in host["gpu004"]


def test_no_opensm_group_members_without_opensm(tmp_path: Path) -> None:
    inventory = _inventory(_spec(tmp_path))

    assert inventory["children"]["opensm"] == {"hosts": {}}
    assert all("clusterctl_opensm_priority" not in h for h in inventory["hosts"].values())


def test_ipoib_per_rail_at_the_management_offset(tmp_path: Path) -> None:
    spec = _spec(tmp_path, ipoib={"networks": ["10.40.0.0/16", "10.41.0.0/16"], "mode": "connected"})

    inventory = _inventory(spec)

    gpu001 = inventory["hosts"]["gpu001"]
    offset = gpu001["clusterctl_address"].split(".", 2)[2]
    assert gpu001["clusterctl_ipoib_interfaces"] == [
        {"rail": 0, "address": f"10.40.{offset}/16", "mode": "connected"},
        {"rail": 1, "address": f"10.41.{offset}/16", "mode": "connected"},
    ]
    assert "clusterctl_ipoib_interfaces" not in inventory["hosts"]["ctl001"]  # no rails, no IPoIB


def test_storage_nics_reach_the_inventory(tmp_path: Path) -> None:
    inventory = _inventory(_spec(tmp_path))

    assert inventory["hosts"]["gpu001"]["clusterctl_storage_nics"] == ["mlx5_1", "mlx5_2"]


def _findings(spec: Path, code: str) -> list[tuple[Level, str, str]]:
    findings, _ = validate(load_spec(spec))
    return [(f.level, f.dotted_path, f.message) for f in findings if f.code == code]


@pytest.mark.parametrize(
    ("fabric", "level", "path", "fragment"),
    [
        (
            {"subnet_manager": "switch", "opensm_hosts": [{"host": "gpu001"}]},
            Level.ERROR,
            "fabric.opensm_hosts",
            "nothing would run",
        ),
        (
            {"kind": "roce", "subnet_manager": "opensm", "opensm_hosts": [{"host": "gpu001"}]},
            Level.ERROR,
            "fabric.subnet_manager",
            "roce fabric",
        ),
        (
            {
                "subnet_manager": "opensm",
                "opensm_hosts": [{"host": "gpu001", "priority": 9}, {"host": "gpu002", "priority": 9}],
            },
            Level.ERROR,
            "fabric.opensm_hosts[1].priority",
            "2 opensm hosts have priority 9",
        ),
        (
            {"subnet_manager": "opensm", "opensm_hosts": [{"host": "gpu001"}, {"host": "gpu001"}]},
            Level.ERROR,
            "fabric.opensm_hosts[0].host",
            "listed 2 times",
        ),
        (
            {"subnet_manager": "opensm", "opensm_hosts": [{"host": "gpu001"}]},
            Level.WARNING,
            "fabric.opensm_hosts",
            "no standby",
        ),
    ],
)
def test_subnet_manager_placement(tmp_path: Path, fabric: dict, level: Level, path: str, fragment: str) -> None:
    hits = _findings(_spec(tmp_path, **fabric), "FAB006")

    assert any(h[0] is level and h[1] == path and fragment in h[2] for h in hits), hits


def test_opensm_host_must_exist(tmp_path: Path) -> None:
    spec = _spec(tmp_path, subnet_manager="opensm", opensm_hosts=[{"host": "gpu099"}, {"host": "gpu001"}])

    hits = _findings(spec, "FAB007")

    assert hits == [(Level.ERROR, "fabric.opensm_hosts[0].host", "opensm host `gpu099` is not a node of this cluster.")]


def test_opensm_on_a_controller_with_a_port_is_fine(tmp_path: Path) -> None:
    spec = _spec(
        tmp_path,
        subnet_manager="opensm",
        opensm_hosts=[{"host": "ctl001", "port": "0000:17:00.0"}, {"host": "ctl002", "port": "0000:17:00.0"}],
    )

    assert _findings(spec, "FAB006") == []
    assert _findings(spec, "FAB007") == []
    assert sorted(_inventory(spec)["children"]["opensm"]["hosts"]) == ["ctl001", "ctl002"]


@pytest.mark.parametrize(
    ("ipoib", "path", "fragment"),
    [
        ({"networks": [f"10.{40 + i}.0.0/16" for i in range(9)]}, "fabric.ipoib.networks", "9 IPoIB networks"),
        ({"networks": ["10.40.0.0/27"]}, "fabric.ipoib.networks[0]", "too small"),
        (
            {"networks": ["10.40.0.0/16", "10.40.128.0/17"]},
            "fabric.ipoib.networks[1]",
            "overlaps 10.40.0.0/16 (rail 0)",
        ),
    ],
)
def test_ipoib_networks(tmp_path: Path, ipoib: dict, path: str, fragment: str) -> None:
    hits = _findings(_spec(tmp_path, ipoib=ipoib), "FAB008")

    assert any(h[1] == path and fragment in h[2] for h in hits), hits


def test_ipoib_needs_infiniband(tmp_path: Path) -> None:
    hits = _findings(_spec(tmp_path, kind="roce", ipoib={"networks": ["10.40.0.0/16"]}), "FAB008")

    assert hits == [(Level.ERROR, "fabric.ipoib", "IPoIB needs an InfiniBand fabric; this one is roce.")]
