"""Confidence intervals: order-statistic ranks for p99, t-intervals over repeats."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from tokenwatt.analysis.stats.intervals import (
    limit_side,
    quantile_interval,
    quantile_ranks,
    t_interval,
    welch_interval,
)
from tokenwatt.analysis.window.latency import percentile


def _binom_cdf(k: int, n: int, p: float = 0.99) -> float:
    """P(B ≤ k) for B ~ Binomial(n, p), summed term by term (no scipy)."""
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))


@pytest.mark.parametrize(
    ("n", "low", "high"),
    [
        # n = 100: P(B ≤ 96) = 0.0184 ≤ 0.025 < P(B ≤ 97) = 0.0794, so l = 97; P(B ≤ 99) =
        # 0.634 < 0.975, so u would be 101 > n: beyond the sample.
        (100, 97, None),
        # n = 200: P(B ≤ 194) = 0.0160, P(B ≤ 195) = 0.0518: l = 195; P(B ≤ 199) = 0.866.
        (200, 195, None),
        # n = 1000: P(B ≤ 982) = 0.0138, P(B ≤ 983) = 0.0264: l = 983; P(B ≤ 995) = 0.9713,
        # P(B ≤ 996) = 0.9899 ≥ 0.975: u = 997.
        (1000, 983, 997),
        # The smallest n with an upper end: 0.99^368 = 0.0248 ≤ 0.025 < 0.99^367.
        (368, 360, 368),
        (367, 359, None),
        (1, 1, None),
    ],
)
def test_p99_ranks_by_hand(n: int, low: int, high: int | None) -> None:
    assert quantile_ranks(n, 99) == (low, high)
    # The hand rule: l − 1 is the last k with P(B ≤ k) ≤ 0.025 ...
    assert _binom_cdf(low - 1, n) <= 0.025 or low == 1
    assert low == n or _binom_cdf(low, n) > 0.025
    # ... and the upper end is beyond the sample exactly when P(B ≤ n − 1) < 0.975.
    assert (high is None) == (_binom_cdf(n - 1, n) < 0.975)
    if high is not None:
        assert _binom_cdf(high - 1, n) - _binom_cdf(low - 1, n) >= 0.95


def test_interval_holds_the_type7_estimate_for_every_n() -> None:
    rng = np.random.default_rng(7)
    for n in range(1, 600):
        values = list(rng.exponential(100.0, n))
        ci = quantile_interval(values, 99)
        assert ci is not None
        estimate = percentile(values, 99)
        assert estimate is not None
        assert ci.low <= estimate
        assert ci.high is None or estimate <= ci.high


def test_interval_ends_are_the_sorted_values_with_failures_infinite() -> None:
    values = [float(v) for v in range(1000, 0, -1)]  # 1..1000 ms, reversed
    values[:5] = [math.inf] * 5  # five failed requests are the five slowest
    ci = quantile_interval(values, 99)
    assert ci is not None
    assert (ci.low_rank, ci.high_rank) == (983, 997)
    assert ci.low == 983.0  # the 983rd smallest of 1..995 and five infinities
    assert ci.high == math.inf  # rank 997 is a failed request
    assert quantile_interval([], 99) is None


def test_p99_interval_covers_the_true_p99_at_least_95_percent() -> None:
    # Exponential(mean 100 ms): true p99 = 100 · ln(100) ms. 400 seeded windows of 1000.
    true_p99 = 100.0 * math.log(100.0)
    rng = np.random.default_rng(2026)
    hits = 0
    for _ in range(400):
        ci = quantile_interval(list(rng.exponential(100.0, 1000)), 99)
        assert ci is not None and ci.high is not None
        hits += ci.low <= true_p99 <= ci.high
    assert hits / 400 >= 0.93  # nominal 0.976 for n = 1000; 0.93 leaves room for chance


@pytest.mark.parametrize(
    ("low", "high", "side"),
    [
        (100.0, 190.0, "below"),
        (100.0, 200.0, "below"),  # a p99 equal to the limit meets it
        (150.0, 250.0, "straddles"),
        (150.0, None, "straddles"),  # beyond the sample reaches past any limit
        (200.5, None, "above"),
        (math.inf, math.inf, "above"),
    ],
)
def test_limit_side(low: float, high: float | None, side: str) -> None:
    assert limit_side(low, high, 200.0) == side


def test_t_interval_by_hand() -> None:
    # mean 11, s = 1, t(0.975, 2) = 4.302653: 11 ± 4.302653 / √3 = 11 ± 2.484138.
    ci = t_interval([10.0, 12.0, 11.0])
    assert ci is not None
    assert (ci.low, ci.high) == pytest.approx((8.515862, 13.484138), abs=1e-6)
    assert ci.method == "student-t" and ci.repeats == 3
    assert not ci.includes_zero()


def test_one_repeat_gives_no_interval() -> None:
    assert t_interval([4572.3]) is None
    assert welch_interval([5056.9], [4572.3, 4600.0]) is None
    assert welch_interval([5056.9, 5000.0], [4572.3]) is None


def test_welch_interval_by_hand_and_as_scipy() -> None:
    # diff 1.75; variances of the means 1/3 and 0.0625; ν = 0.395833² / (0.111111²/2 ...)
    ci = welch_interval([10.0, 12.0, 11.0], [9.0, 9.5])
    assert ci is not None
    va, vb = 1 / 3, 0.0625
    nu = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 1)
    assert nu == pytest.approx(2.635036, abs=1e-6)
    half = stats.t.ppf(0.975, nu) * math.sqrt(va + vb)
    assert (ci.low, ci.high) == pytest.approx((1.75 - half, 1.75 + half))
    scipy_ci = stats.ttest_ind([10, 12, 11], [9, 9.5], equal_var=False).confidence_interval()
    assert (ci.low, ci.high) == pytest.approx((scipy_ci.low, scipy_ci.high))
    assert ci.includes_zero()  # −0.419 to 3.919
    assert (ci.repeats, ci.baseline_repeats) == (3, 2)


def test_t_interval_covers_the_true_mean_in_a_seeded_case() -> None:
    rng = np.random.default_rng(0)
    hits = sum(
        ci.low <= 5000.0 <= ci.high
        for ci in (t_interval(list(rng.normal(5000.0, 50.0, 3))) for _ in range(2000))
        if ci is not None
    )
    assert 0.93 <= hits / 2000 <= 0.97


def test_zero_spread_gives_a_point_and_bad_input_is_refused() -> None:
    ci = welch_interval([2.0, 2.0], [1.0, 1.0])
    assert ci is not None and (ci.low, ci.high) == (1.0, 1.0)
    with pytest.raises(ValueError, match="finite"):
        t_interval([1.0, math.nan])
    with pytest.raises(ValueError, match="confidence"):
        t_interval([1.0, 2.0], confidence=1.0)
    with pytest.raises(ValueError, match="at least one"):
        quantile_ranks(0)
