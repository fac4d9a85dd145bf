"""clusterctl.node.rdma_rails: the sysfs lookup shared by the rdma role and storage_clients."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import RDMA_RAILS_MODULE
from tests.unit.collection.modules import load

ROOT = Path(__file__).resolve().parents[3]
MODULE = RDMA_RAILS_MODULE
SYSFS = ROOT / "tests" / "fixtures" / "sysfs"


def _load() -> ModuleType:
    return load("clusterctl_rdma_rails_module", MODULE)


@pytest.mark.parametrize(
    ("tree", "ibdevs"),
    [("dgx-h100-mlx5", ["mlx5_1", "mlx5_7"]), ("dgx-h100-rdma-core", ["ibp41s0f0", "ibp170s0f0"])],
)
def test_storage_hcas_resolve_under_both_naming_schemes(tree: str, ibdevs: list[str]) -> None:
    fact = _load().rails_fact([], ["0000:29:00.0", "0000:aa:00.0"], "", str(SYSFS / tree))
    assert [e["ibdev"] for e in fact["storage_nics"]] == ibdevs
    assert [e["netdev"] for e in fact["storage_nics"]] == ["ibp41s0f0", "ibp170s0f0"]
    assert fact["missing"] == []
