"""The base class of every spec model."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """Base of every spec model: unknown keys rejected, values validated, immutable, numbers finite."""

    # allow_inf_nan=False: YAML's .inf and .nan would pass gt=0 checks and overflow the plan's arithmetic.
    model_config = ConfigDict(extra="forbid", validate_default=True, frozen=True, allow_inf_nan=False)
