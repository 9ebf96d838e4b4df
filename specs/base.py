"""The one base class of argus's data: frozen, strict pydantic models."""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    """Immutable values with a closed shape.

    extra="forbid": a misspelt key is an error, never a silently ignored setting.
    frozen=True: specs, observations and plans are compared and passed around, never mutated.
    allow_inf_nan=False: `.inf` CPUs is a typo, not a request.
    No use_attribute_docstrings: pydantic would parse each model's module source again for every class,
    ~0.15 s of every command's start-up, for descriptions only the JSON Schema shows; specs/schema/schema.py
    reads the spec models' field docstrings when it makes one.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class TextEnum(str, Enum):
    """An enum whose members are their text everywhere (str(), f-strings, JSON): enum.StrEnum's
    behaviour, which exists only from Python 3.11 on, and argus supports 3.10."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)
