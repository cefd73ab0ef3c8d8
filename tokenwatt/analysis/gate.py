"""The accuracy gate (methods/accuracy-gate.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


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
