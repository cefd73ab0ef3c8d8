"""What a run's mode (``--mode smoke|quick|full``) changed in its spec."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from tokenwatt.records.shared.base import NonEmptyStr, StrictModel

if TYPE_CHECKING:
    from tokenwatt.records.spec.spec import Spec

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


FIXED_UNUSED: tuple[str, ...] = (
    "measurement.search_window_s",
    "measurement.repeats",
    "sweep.start_rps",
    "sweep.growth",
    "sweep.max_rps",
    "sweep.bisect_steps",
    "sweep.backoff",
    "sweep.max_backoffs",
    "sweep.start_concurrency",
)
"""Spec fields a fixed-load run (``sweep.fixed``) does not use: it measures one window of
``measurement.window_s`` at each listed load, with no search, repeats or back-off. ``collect``
prints from the same list (``tokenwatt.collect.plan.modes``), so that the page leaves out
what the terminal said the run did not use."""


def unused_fields(spec: Spec, *, accuracy: bool) -> set[str]:
    """Dotted spec fields (``section.field``; ``accuracy`` for the whole section) that a
    run with ``spec`` does not use: :data:`FIXED_UNUSED` in a fixed-load run, and the
    accuracy section when the suite was not run (``accuracy`` False, or no
    ``accuracy.suite``)."""
    out: set[str] = set(FIXED_UNUSED) if spec.sweep.fixed else set()
    if not accuracy or not spec.accuracy.suite:
        out.add("accuracy")
    return out


def field_used(field: str, unused: Collection[str]) -> bool:
    """Whether the dotted spec ``field`` is used, given :func:`unused_fields`' answer."""
    return field not in unused and field.split(".")[0] not in unused
