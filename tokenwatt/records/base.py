"""Shared pydantic base and helpers for every record model."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class StrictModel(BaseModel):
    """Base of every record: unknown fields are errors, NaN and infinity are rejected."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=False)


NonNegFloat = Annotated[float, Field(ge=0)]
PosFloat = Annotated[float, Field(gt=0)]
NonNegInt = Annotated[int, Field(ge=0)]
PosInt = Annotated[int, Field(ge=1)]
Percent = Annotated[float, Field(ge=0, le=100)]
NonEmptyStr = Annotated[str, Field(min_length=1)]


class FieldValueError(ValueError):
    """A validator's error about one field below the model being validated.

    Raised from ``model_validator``s so that the loader can name the exact field path
    (``configs[1].key``) rather than the model that holds it. ``field`` is relative to that
    model; empty means the model itself.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
