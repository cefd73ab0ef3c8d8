"""What a run's mode (``--mode smoke|quick|full``) changed in its spec."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import Field

from tokenwatt.records.base import NonEmptyStr, StrictModel

RunMode = Literal["smoke", "quick", "full"]
"""The mode presets of ``tokenwatt collect --mode``."""


class ModeOverride(StrictModel):
    """One spec value the run's mode replaced: the spec file said one thing, the run
    measured with another (the run record's ``spec`` holds the value measured with)."""

    field: NonEmptyStr = Field(
        description="Dotted path of the spec field, e.g. 'measurement.window_s'."
    )
    spec_value: int | float | None = Field(
        description="The value in the spec as read, before the mode (seconds, repeats, "
        "items or seeds as the field defines them); null: not set there, so the mode's "
        "default applied."
    )
    effective_value: int | float | None = Field(
        description="The value the run measured with, after the mode (same unit); null: "
        "none (e.g. every item of the accuracy suite)."
    )


def value_text(value: float | None) -> str:
    """A mode field's value as text: ``not set`` for None, else the shortest number."""
    return "not set" if value is None else f"{value:g}"


def overrides_text(overrides: Sequence[ModeOverride]) -> str:
    """``field spec → effective`` for each override, joined with ``; `` ("" for none)."""
    return "; ".join(
        f"{o.field} {value_text(o.spec_value)} → {value_text(o.effective_value)}" for o in overrides
    )
