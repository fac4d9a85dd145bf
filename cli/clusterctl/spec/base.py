"""The base class of every spec model."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """Base of every spec model: unknown keys rejected, values validated, immutable."""

    model_config = ConfigDict(extra="forbid", validate_default=True, frozen=True)
