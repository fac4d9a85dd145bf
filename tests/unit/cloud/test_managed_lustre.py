"""A cloud's managed Lustre: the render names the tier, roles/storage_clients puts in the stack's address."""

from __future__ import annotations

import importlib.util
from types import ModuleType

from clusterctl.pipeline import load_and_validate
from clusterctl.render.inventory import group_vars
from clusterctl.render.tree import render_files
from tests.conftest import EXAMPLES, REPO_ROOT

FSX = "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh"


def _filters() -> ModuleType:
    path = REPO_ROOT / "roles" / "storage_clients" / "filter_plugins" / "managed_lustre.py"
    spec = importlib.util.spec_from_file_location("managed_lustre", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _units(example: str) -> dict[str, str]:
    plan = load_and_validate(EXAMPLES / example).plan
    return {f.path: f.text for f in render_files(plan)}


def test_fsx_units_name_their_tier_and_mount_as_parallelcluster_does() -> None:
    files = _units("aws-p5.yaml")
    unit = files["storage/units/p5/fsx-ckpt.mount"]
    assert "\nWhat=clusterctl-managed-lustre:ckpt\n" in unit
    assert "\nOptions=_netdev,flock,user_xattr,noatime\n" in unit
    # The FSx client needs no LNet configuration: no lnet.service, no lnet.conf for these nodes.
    assert "lnet" not in unit.split("[Mount]")[0]
    assert not [p for p in files if p.startswith("storage/lnet/")]


def test_azure_managed_lustre_mounts_with_azures_options() -> None:
    unit = _units("azure-ndv5.yaml")["storage/units/ndv5/lustre.mount"]
    assert "\nWhat=clusterctl-managed-lustre:datasets\n" in unit
    assert "\nOptions=_netdev,flock,noatime\n" in unit


def test_the_inventory_marks_managed_tiers() -> None:
    storage = group_vars(load_and_validate(EXAMPLES / "aws-p5.yaml").plan)["clusterctl_storage"]
    assert {s["name"]: s["managed"] for s in storage} == {"datasets": True, "ckpt": True, "home": False}


def test_the_role_filter_puts_in_the_stacks_address_and_leaves_unknown_tiers() -> None:
    filters = _filters()
    files = _units("aws-p5.yaml")
    units = {n: files[f"storage/units/p5/{n}"] for n in ("fsx-ckpt.mount", "fsx-datasets.mount", "home.mount")}
    assert filters.managed_lustre_tiers(units) == {"fsx-ckpt.mount": "ckpt", "fsx-datasets.mount": "datasets"}
    final = filters.managed_lustre_units(units, {"datasets": FSX})
    assert f"\nWhat={FSX}\n" in final["fsx-datasets.mount"]
    assert "\nWhat=clusterctl-managed-lustre:ckpt\n" in final["fsx-ckpt.mount"]  # validate.yml stops on it
    assert final["home.mount"] == units["home.mount"]
