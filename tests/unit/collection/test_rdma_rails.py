"""clusterctl.node.rdma_rails: the sysfs lookup shared by the rdma role and storage_clients.

The rdma role still carries its own copy (roles/rdma/library/rdma_rails.py) until it calls the
collection's; while both exist their lookup functions must be the same code.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]
MODULE = ROOT / "collections" / "ansible_collections" / "clusterctl" / "node" / "plugins" / "modules" / "rdma_rails.py"
ROLE_COPY = ROOT / "roles" / "rdma" / "library" / "rdma_rails.py"
SYSFS = ROOT / "tests" / "fixtures" / "sysfs"
SHARED = ("_read", "_guid", "_pci_of", "_netdev", "scan", "naming", "_known", "resolve", "rails_fact")


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("clusterctl_rdma_rails_module", MODULE)
    assert spec
    assert spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _functions(path: Path) -> dict[str, str]:
    tree = ast.parse(path.read_text())
    return {node.name: ast.dump(node) for node in tree.body if isinstance(node, ast.FunctionDef)}


@pytest.mark.skipif(not ROLE_COPY.exists(), reason="the rdma role calls the collection's module")
def test_the_rdma_roles_copy_has_the_same_lookup() -> None:
    ours, theirs = _functions(MODULE), _functions(ROLE_COPY)
    for name in SHARED:
        assert ours[name] == theirs[name], f"{name} differs between the collection and roles/rdma/library"


@pytest.mark.parametrize(
    ("tree", "ibdevs"),
    [("dgx-h100-mlx5", ["mlx5_1", "mlx5_7"]), ("dgx-h100-rdma-core", ["ibp41s0f0", "ibp170s0f0"])],
)
def test_storage_hcas_resolve_under_both_naming_schemes(tree: str, ibdevs: list[str]) -> None:
    fact = _load().rails_fact([], ["0000:29:00.0", "0000:aa:00.0"], "", str(SYSFS / tree))
    assert [e["ibdev"] for e in fact["storage_nics"]] == ibdevs
    assert [e["netdev"] for e in fact["storage_nics"]] == ["ibp41s0f0", "ibp170s0f0"]
    assert fact["missing"] == []
