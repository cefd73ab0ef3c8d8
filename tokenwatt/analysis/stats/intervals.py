"""Confidence intervals for the numbers the pages headline (pure: numbers in, numbers out).

**A window's p99 latency**: a distribution-free interval from two order statistics. If B
counts the window's n values at or below the true q-th percentile, B ~ Binomial(n, q/100)
whatever the latency distribution, and the l-th and u-th smallest values cover that
percentile with probability P(l ≤ B < u) (Hahn & Meeker, *Statistical Intervals*, 1991,
§5.2; Conover, *Practical Nonparametric Statistics*, 3rd ed., 1999, §3.2). The ranks here
take at most (1 − confidence)/2 from each tail: l − 1 is the largest k with
P(B ≤ k) ≤ α/2, u − 1 the smallest k with P(B ≤ k) ≥ 1 − α/2 (``scipy.stats.binom``).
When u would exceed n the sample is too small for a two-sided interval and the upper end is
**beyond the sample** (unbounded): for the p99 at 95% that is every window of fewer than
368 values, since 0.99ⁿ > 0.025 below that. The values are the same ones the p99 is taken
from (:func:`tokenwatt.analysis.window.latency.percentile`, Hyndman & Fan type 7), failed
requests counted as infinite; the lower rank is lowered, where needed, to the type-7
estimate's lower neighbour, so that the interval always holds the estimate (only n = 2).

**Means over repeats**: Student's t-interval for one configuration's mean goodput and
Welch's t-interval (Welch–Satterthwaite degrees of freedom; Welch 1947, Biometrika 34) for
the difference of two configurations' means. A bootstrap is not used here: a run has two to
five repeats, and the percentile bootstrap's coverage collapses at such n (with two values
the resampled means take three values, and the 95% percentile interval is the range, which
covers the mean half the time; Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993,
ch. 13 and 14). The t-interval assumes roughly normal repeat values, which a window's
goodput is (a sum over hundreds of requests). One repeat gives no interval (no spread to
estimate): the functions return None.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

CONFIDENCE = 0.95
"""Coverage of every interval the report shows."""

LimitSide = Literal["below", "above", "straddles"]
"""Where an interval lies against a limit: wholly at or below it, wholly above it, or on
both sides (the verdict is then not beyond doubt)."""


@dataclass(frozen=True)
class QuantileInterval:
    """An order-statistic interval for a percentile.

    Attributes:
        n: values it was taken from.
        low_rank: 1-based rank of the lower end.
        high_rank: 1-based rank of the upper end; None when beyond the sample.
        low: the lower end (``math.inf`` when that value is a failed request).
        high: the upper end; None when beyond the sample (unbounded).
        confidence: coverage.
    """

    n: int
    low_rank: int
    high_rank: int | None
    low: float
    high: float | None
    confidence: float


@dataclass(frozen=True)
class Interval:
    """A t-interval (low, high) in the unit of the quantity, with how it was made."""

    low: float
    high: float
    method: Literal["student-t", "welch-t"]
    repeats: int
    baseline_repeats: int | None = None
    confidence: float = CONFIDENCE

    def includes_zero(self) -> bool:
        """True when the interval holds 0 (a delta not beyond doubt)."""
        return self.low <= 0.0 <= self.high

    def scaled(self, factor: float) -> Interval:
        """The same interval with both ends multiplied by a positive ``factor``."""
        return Interval(
            self.low * factor,
            self.high * factor,
            self.method,
            self.repeats,
            self.baseline_repeats,
            self.confidence,
        )


def _check(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def quantile_ranks(n: int, q: int = 99, confidence: float = CONFIDENCE) -> tuple[int, int | None]:
    """1-based ranks (l, u) of the order-statistic interval for the q-th percentile of n
    values; u is None when the sample is too small for an upper end (see the module text).

    Raises:
        ValueError: n < 1, q outside 1..99, or confidence outside (0, 1).
    """
    from scipy.stats import binom  # heavy: imported only when an interval is wanted

    if n < 1:
        raise ValueError(f"need at least one value, got n = {n}")
    if not 0 < q < 100:
        raise ValueError(f"percentile must be in 1..99, got {q}")
    _check(confidence)
    tail = (1.0 - confidence) / 2.0
    cdf = binom.cdf(np.arange(n + 1), n, q / 100)
    lows = np.nonzero(cdf <= tail)[0]
    low = int(lows[-1]) + 1 if lows.size else 1
    # Keep the type-7 estimate inside: its lower neighbour's rank is floor(q(n-1)/100)+1.
    low = max(1, min(low, q * (n - 1) // 100 + 1))
    high = int(np.nonzero(cdf >= 1.0 - tail)[0][0]) + 1
    return low, (high if high <= n else None)


def quantile_interval(
    values: Sequence[float], q: int = 99, confidence: float = CONFIDENCE
) -> QuantileInterval | None:
    """The order-statistic interval for the q-th percentile of ``values`` (inf allowed, as
    failed requests); None for no values.

    Raises:
        ValueError: q or confidence out of range (see :func:`quantile_ranks`).
    """
    if len(values) == 0:
        return None
    ordered = np.sort(np.asarray(values, dtype=np.float64))
    low_rank, high_rank = quantile_ranks(len(ordered), q, confidence)
    high = None if high_rank is None else float(ordered[high_rank - 1])
    return QuantileInterval(
        n=len(ordered),
        low_rank=low_rank,
        high_rank=high_rank,
        low=float(ordered[low_rank - 1]),
        high=high,
        confidence=confidence,
    )


def limit_side(low: float, high: float | None, limit: float) -> LimitSide:
    """Where the interval [low, high] lies against ``limit`` (``high`` None: unbounded).

    ``below`` when high ≤ limit (meets it beyond doubt), ``above`` when low > limit (misses
    it beyond doubt), else ``straddles``. The comparisons are those of the SLO verdict (a
    p99 equal to the limit meets it).
    """
    if high is not None and high <= limit:
        return "below"
    if low > limit:
        return "above"
    return "straddles"


def t_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> Interval | None:
    """Student's t-interval for the mean of ``values``: mean ± t(1−α/2, n−1) · s/√n.

    Returns None for fewer than two values (one repeat has no spread to estimate).

    Raises:
        ValueError: confidence outside (0, 1), or a value that is not finite.
    """
    from scipy.stats import t as student_t

    _check(confidence)
    data = _finite(values)
    n = data.size
    if n < 2:
        return None
    mean = float(data.mean())
    half = float(student_t.ppf(0.5 + confidence / 2, n - 1)) * float(data.std(ddof=1)) / n**0.5
    return Interval(mean - half, mean + half, "student-t", n, None, confidence)


def welch_interval(
    tuned: Sequence[float], baseline: Sequence[float], confidence: float = CONFIDENCE
) -> Interval | None:
    """Welch's t-interval for mean(tuned) − mean(baseline), repeats not paired.

    Half-width t(1−α/2, ν) · √(s₁²/n₁ + s₂²/n₂) with the Welch–Satterthwaite ν; both
    spreads zero gives the zero-width interval at the difference. Returns None when either
    side has fewer than two values.

    Raises:
        ValueError: confidence outside (0, 1), or a value that is not finite.
    """
    from scipy.stats import t as student_t

    _check(confidence)
    a, b = _finite(tuned), _finite(baseline)
    if a.size < 2 or b.size < 2:
        return None
    diff = float(a.mean() - b.mean())
    va, vb = float(a.var(ddof=1)) / a.size, float(b.var(ddof=1)) / b.size
    se = math.sqrt(va + vb)
    if se == 0.0:
        return Interval(diff, diff, "welch-t", a.size, b.size, confidence)
    df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    half = float(student_t.ppf(0.5 + confidence / 2, df)) * se
    return Interval(diff - half, diff + half, "welch-t", a.size, b.size, confidence)


def _finite(values: Sequence[float]) -> np.ndarray:
    data = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(data)):
        raise ValueError("every value must be finite")
    return data
