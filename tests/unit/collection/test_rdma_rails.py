"""clusterctl.node.rdma_rails: the sysfs lookup shared by the rdma role and storage_clients."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import RDMA_RAILS_MODULE

ROOT = Path(__file__).resolve().parents[3]
MODULE = RDMA_RAILS_MODULE
SYSFS = ROOT / "tests" / "fixtures" / "sysfs"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("clusterctl_rdma_rails_module", MODULE)
    assert spec
    assert spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("tree", "ibdevs"),
    [("dgx-h100-mlx5", ["mlx5_1", "mlx5_7"]), ("dgx-h100-rdma-core", ["ibp41s0f0", "ibp170s0f0"])],
)
def test_storage_hcas_resolve_under_both_naming_schemes(tree: str, ibdevs: list[str]) -> None:
    fact = _load().rails_fact([], ["0000:29:00.0", "0000:aa:00.0"], "", str(SYSFS / tree))
    assert [e["ibdev"] for e in fact["storage_nics"]] == ibdevs
    assert [e["netdev"] for e in fact["storage_nics"]] == ["ibp41s0f0", "ibp170s0f0"]
    assert fact["missing"] == []
