"""Accuracy suite results, as stored in run records."""

from __future__ import annotations

from pydantic import Field

from tokenwatt.records.shared.base import NonEmptyStr, NonNegFloat, NonNegInt, Percent, StrictModel


class ItemResult(StrictModel):
    """One suite item's outcome. An errored or timed-out item is wrong and says why.

    ``answer`` is the number the scorer read from the completion, normalised ("1234.5");
    ``completion`` the engine's text as received (kept so a run can be re-scored).
    """

    id: NonEmptyStr
    """The item's id in the suite file (unique within the suite); pairs the same item across runs.
    """
    correct: bool
    """Whether the number read from the completion equals the gold answer; false for an item that
    errored or timed out."""
    answer: str | None = None
    """The final number the scorer read from the completion, normalised (e.g. "1234.5"); null when
    none could be read or the request failed."""
    gold: str
    """The suite's reference answer, normalised the same way as answer."""
    error: str | None = None
    """Why the item has no scored completion (the request's error, credentials scrubbed); null when
    the engine answered."""
    completion: str | None = None
    """The engine's completion text as received, kept so that the run can be re-scored; null when
    the request failed."""


class SeedResult(StrictModel):
    """One full pass over the suite with one sampling seed (``errors``: items that failed)."""

    seed: int
    """The sampling seed sent with every request of this pass over the suite."""
    score_pct: Percent
    """Share of the suite's items answered correctly in this pass (%, 0-100)."""
    items: list[ItemResult]
    """Every item's outcome in this pass, in suite order."""
    errors: NonNegInt = 0
    """Items whose request failed (error or timeout) in this pass; they count as wrong."""


class AccuracyResult(StrictModel):
    """All seeds of the accuracy suite: mean score (%) and spread (max - min, points).

    ``suite_sha256`` is the SHA-256 of the suite file, so two runs can be shown to have
    answered the same items; ``temperature`` the sampling temperature used (0 = greedy).
    """

    suite: NonEmptyStr
    """Path of the suite file (JSON Lines) as the run read it."""
    name: NonEmptyStr
    """The suite's name for readers, from the spec's accuracy.name (e.g. gsm8k-5shot)."""
    seeds: list[SeedResult] = Field(min_length=1)
    """One pass over the suite per sampling seed (accuracy.seeds in the spec)."""
    score_pct: Percent
    """Mean of the passes' scores (%, 0-100): the score the accuracy gate compares."""
    spread_pts: NonNegFloat
    """Highest minus lowest pass score (percentage points): how much the score moves with the seed
    alone."""
    suite_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    """SHA-256 (hex) of the suite file's bytes, so that two runs can be shown to have answered the
    same items; null when not recorded."""
    temperature: NonNegFloat | None = None
    """Sampling temperature of the suite's requests (0 = greedy), from the spec's
    accuracy.temperature; null when not recorded."""
