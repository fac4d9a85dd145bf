"""Random mutations of the example spec never raise a traceback; every rejection is located."""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterctl.pipeline import load_and_validate
from clusterctl.spec import SpecError
from tests.specs import example_data, write_spec

BASE = example_data()

VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-5, max_value=10**6),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(["yes", "no", "12.10", "2024-01-01", "mlx5_1", "0.0.0.0/0", "H100-SXM-80GB", "local"]),
    st.lists(st.integers(0, 3), max_size=3),
    st.dictionaries(st.sampled_from(["kind", "name", "x"]), st.text(max_size=5), max_size=2),
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out += _paths(value, (*prefix, index))
    return out


PATHS = _paths(BASE)


@st.composite
def mutations(draw: st.DrawFn) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(PATHS))
        parent: Any = data
        try:
            for key in path[:-1]:
                parent = parent[key]
            action = draw(st.sampled_from(["set", "delete", "rename"]))
            if action == "set":
                parent[path[-1]] = draw(VALUES)
            elif action == "delete" and isinstance(parent, dict):
                parent.pop(path[-1], None)
            elif action == "rename" and isinstance(parent, dict) and path[-1] in parent:
                parent[f"{path[-1]}x"] = parent.pop(path[-1])
        except (KeyError, IndexError, TypeError):
            continue
    return data


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutations())
def test_mutations_never_traceback_and_rejections_are_located(data: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = write_spec(Path(tmp), data)
        findings = None
        try:
            load_and_validate(path)
        except SpecError as exc:
            findings = exc.findings
        if findings is not None:
            assert findings, "a rejection carries findings"
            for finding in findings:
                assert finding.line > 0, f"finding without a line: {finding}"
                assert finding.message
