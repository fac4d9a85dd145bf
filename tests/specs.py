"""Helpers for tests that build specs: load an example as data, mutate it, write it back."""

from __future__ import annotations

import copy
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from tests.conftest import EXAMPLES

Mutation = Callable[[dict[str, Any]], None]


def example_data(name: str = "onprem-h100-256.yaml") -> dict[str, Any]:
    """An example spec as plain data."""
    yaml = YAML(typ="safe")
    with (EXAMPLES / name).open() as handle:
        return yaml.load(handle)


def write_spec(tmp_path: Path, data: dict[str, Any], name: str = "spec.yaml") -> Path:
    """Write ``data`` as YAML next to a copy of examples/machines.csv; return the spec path."""
    yaml = YAML(typ="safe")
    yaml.default_flow_style = False
    path = tmp_path / name
    with path.open("w") as handle:
        yaml.dump(data, handle)
    if not (tmp_path / "machines.csv").exists():
        shutil.copy(EXAMPLES / "machines.csv", tmp_path / "machines.csv")
    return path


def mutated(tmp_path: Path, mutation: Mutation, base: str = "onprem-h100-256.yaml") -> Path:
    """Write the example ``base`` with ``mutation`` applied."""
    data = copy.deepcopy(example_data(base))
    mutation(data)
    return write_spec(tmp_path, data)


def group(data: dict[str, Any], name: str) -> dict[str, Any]:
    """The node group called ``name``."""
    return next(g for g in data["nodes"] if g["group"] == name)
