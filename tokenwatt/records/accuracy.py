"""Accuracy suite results, as stored in run records."""

from __future__ import annotations

from pydantic import Field

from tokenwatt.records.base import NonEmptyStr, NonNegFloat, Percent, StrictModel


class ItemResult(StrictModel):
    """One suite item's outcome. An errored or timed-out item is wrong and says why."""

    id: NonEmptyStr
    correct: bool
    answer: str | None = None
    gold: str
    error: str | None = None


class SeedResult(StrictModel):
    """One full pass over the suite with one sampling seed."""

    seed: int
    score_pct: Percent
    items: list[ItemResult]


class AccuracyResult(StrictModel):
    """All seeds of the accuracy suite: mean score (%) and spread (max - min, points)."""

    suite: NonEmptyStr
    name: NonEmptyStr
    seeds: list[SeedResult] = Field(min_length=1)
    score_pct: Percent
    spread_pts: NonNegFloat
