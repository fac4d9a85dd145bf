"""The cluster spec: pydantic models, the YAML loader that keeps positions, and findings.

Owns everything about reading ``spec.yaml``; imports nothing else of clusterctl's
except the catalog of hardware facts. Downstream code receives a validated ``Spec``.

The loader and models are imported on first use: ``clusterctl.spec.findings`` (the one
`Finding` type every stage reports with) stays importable without pydantic, which the pure
verify judges rely on (tests/gpu/single_node_checks.py runs on a bare ``python3``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from clusterctl.spec.findings import Finding, Level, SpecError

if TYPE_CHECKING:
    from clusterctl.spec.loader import LoadedSpec, load_spec
    from clusterctl.spec.models import Spec

__all__ = ["Finding", "Level", "LoadedSpec", "Spec", "SpecError", "load_spec"]

_LAZY = {
    "LoadedSpec": "clusterctl.spec.loader",
    "load_spec": "clusterctl.spec.loader",
    "Spec": "clusterctl.spec.models",
}


def __getattr__(name: str) -> Any:
    """The loader's and models' names, imported when first asked for."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
