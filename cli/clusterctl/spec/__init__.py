"""The cluster spec: pydantic models, the YAML loader that keeps positions, and findings.

Owns everything about reading ``spec.yaml``; imports nothing else of clusterctl's
except the catalog of hardware facts. Downstream code receives a validated ``Spec``.
"""

from clusterctl.spec.findings import Finding, Level, SpecError
from clusterctl.spec.loader import LoadedSpec, load_spec
from clusterctl.spec.models import Spec

__all__ = ["Finding", "Level", "LoadedSpec", "Spec", "SpecError", "load_spec"]
