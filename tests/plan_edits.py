"""Changed copies of a frozen plan, for tests that hand the render or a stack a plan it should refuse.

Plans are frozen (plan/models.py); a test that wants one field different builds a copy with
:func:`replaced`, rebuilt along the field's path, and the original stays as it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


def _replace(value: Any, parts: list[str], new: Any) -> Any:
    if not parts:
        return new
    head, rest = parts[0], parts[1:]
    if isinstance(value, BaseModel):
        return value.model_copy(update={head: _replace(getattr(value, head), rest, new)})
    if isinstance(value, list):
        items = list(value)
        items[int(head)] = _replace(items[int(head)], rest, new)
        return items
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    raise TypeError(f"{head!r}: cannot go into a {type(value).__name__}")


def replaced(model: M, changes: Mapping[str, Any]) -> M:
    """A copy of ``model`` with each dotted path (list indexes and dict keys as parts) set to its value.

    ``replaced(plan, {"cloud.bastion.allowed_cidrs": ["0.0.0.0/0"], "cloud.gpu_networks.0.cidr": None})``.
    Like an assignment, nothing is validated: the tests hand over plans the plan's own code would not build.
    """
    out: M = model
    for path, value in changes.items():
        out = _replace(out, path.split("."), value)
    return out
