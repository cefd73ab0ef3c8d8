"""Accuracy suite results, as stored in run records."""

from __future__ import annotations

from pydantic import Field

from tokenwatt.records.base import NonEmptyStr, NonNegFloat, NonNegInt, Percent, StrictModel


class ItemResult(StrictModel):
    """One suite item's outcome. An errored or timed-out item is wrong and says why.

    ``answer`` is the number the scorer read from the completion, normalised ("1234.5");
    ``completion`` the engine's text as received (kept so a run can be re-scored).
    """

    id: NonEmptyStr
    correct: bool
    answer: str | None = None
    gold: str
    error: str | None = None
    completion: str | None = None


class SeedResult(StrictModel):
    """One full pass over the suite with one sampling seed (``errors``: items that failed)."""

    seed: int
    score_pct: Percent
    items: list[ItemResult]
    errors: NonNegInt = 0


class AccuracyResult(StrictModel):
    """All seeds of the accuracy suite: mean score (%) and spread (max - min, points).

    ``suite_sha256`` is the SHA-256 of the suite file, so two runs can be shown to have
    answered the same items; ``temperature`` the sampling temperature used (0 = greedy).
    """

    suite: NonEmptyStr
    name: NonEmptyStr
    seeds: list[SeedResult] = Field(min_length=1)
    score_pct: Percent
    spread_pts: NonNegFloat
    suite_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    temperature: NonNegFloat | None = None
