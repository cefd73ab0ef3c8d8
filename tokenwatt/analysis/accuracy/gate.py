"""The accuracy gate (methods/accuracy-gate.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tokenwatt.analysis.stats.number_text import (
    MAX_DECIMALS,
    comparison,
    signed,
    trimmed,
    value_text,
)


def accuracy_delta_pts(score_pct: float, baseline_score_pct: float) -> float:
    """Accuracy delta in points: tuned score − baseline score (both in %)."""
    return score_pct - baseline_score_pct


def spread_pts(seed_scores_pct: Sequence[float]) -> float:
    """Spread across seeds in points: max − min of the per-seed scores (0 for one seed)."""
    if not seed_scores_pct:
        raise ValueError("no seed scores")
    return max(seed_scores_pct) - min(seed_scores_pct)


@dataclass(frozen=True)
class GateVerdict:
    """The gate's rule verdict for one configuration.

    Attributes:
        delta_pts: score − baseline score (points).
        threshold_pts: the allowed drop (points, ≥ 0).
        passed: ``delta_pts >= -threshold_pts``.
        margin_pts: how far past the threshold a failure is (points, ≥ 0; 0 when passed).
    """

    delta_pts: float
    threshold_pts: float
    passed: bool
    margin_pts: float


# Scores are stored with one decimal; compare deltas at a resolution well below that so a
# drop of exactly the threshold (e.g. 96.0 - 95.0 = 0.9999999) is not a failure.
_EPS_PTS = 1e-9


def gate_delta_text(v: GateVerdict) -> str:
    """The verdict's Δ in points, signed (U+2212), with the decimals it takes to sit on the
    true side of −threshold: ``"−2.04"`` fails a 2-point gate, never ``"−2.0"``
    (:func:`~tokenwatt.analysis.stats.number_text.value_text`)."""
    delta = round(v.delta_pts, 9)  # the gate's own resolution (_EPS_PTS): no float noise
    return value_text(delta, -v.threshold_pts, 1, sign=True) or signed(delta, MAX_DECIMALS)


def gate_drop_text(v: GateVerdict) -> str:
    """How far the score dropped (points, −Δ), with the decimals it takes to sit on the true
    side of the threshold: a 1.04-point drop fails a 1-point gate as ``"1.04"``, never
    ``"1.0"``."""
    drop = round(-v.delta_pts, 9)
    return value_text(drop, v.threshold_pts, 1) or trimmed(drop)


def gate_comparison(v: GateVerdict) -> str:
    """The verdict as a comparison with its operands: ``"−1.96 pts ≥ −2 pts"`` (pass),
    ``"−2.04 pts < −2 pts"`` (fail) (:func:`~tokenwatt.analysis.stats.number_text.comparison`)."""
    delta = round(v.delta_pts, 9)
    return comparison(
        delta, -v.threshold_pts, decimals=1, unit=" pts", sign=True, ops=("≥", "≥", "<")
    )


def gate_verdict(score_pct: float, baseline_score_pct: float, threshold_pts: float) -> GateVerdict:
    """Apply the gate: fail when delta < −threshold (methods/accuracy-gate.md).

    Raises:
        ValueError: negative threshold.
    """
    if threshold_pts < 0:
        raise ValueError(f"threshold must be ≥ 0 points, got {threshold_pts}")
    delta = accuracy_delta_pts(score_pct, baseline_score_pct)
    passed = delta >= -threshold_pts - _EPS_PTS
    margin = 0.0 if passed else -threshold_pts - delta
    return GateVerdict(delta, threshold_pts, passed, margin)
