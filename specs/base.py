"""The one base class of argus's data: frozen, strict pydantic models."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    """Immutable values with a closed shape.

    extra="forbid": a misspelt key is an error, never a silently ignored setting.
    frozen=True: specs, observations and plans are compared and passed around, never mutated.
    allow_inf_nan=False: `.inf` CPUs is a typo, not a request.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, use_attribute_docstrings=True)
