"""Poisson schedules: rate, exponential gaps, determinism, prefix property."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from tokenwatt.collect.arrivals import poisson_schedule, window_request_count


def test_ten_thousand_arrivals_at_200_rps_hold_the_rate_and_pass_a_ks_test() -> None:
    offsets = poisson_schedule(200.0, 50.0, seed=0)
    assert 9_700 < len(offsets) < 10_300
    achieved = len(offsets) / 50.0
    assert achieved == pytest.approx(200.0, rel=0.01)
    gaps = np.diff(np.concatenate([[0.0], offsets]))
    result = stats.kstest(gaps, "expon", args=(0, 1 / 200.0))
    assert result.pvalue > 0.01
    # A fixed gap (a common mistake: sending every 1/rate s) fails the same test.
    assert stats.kstest(np.full(1000, 1 / 200.0), "expon", args=(0, 1 / 200.0)).pvalue < 1e-6


def test_gaps_are_independent_of_each_other() -> None:
    gaps = np.diff(poisson_schedule(100.0, 100.0, seed=5))
    lag1 = np.corrcoef(gaps[:-1], gaps[1:])[0, 1]
    assert abs(lag1) < 0.05


def test_same_seed_same_schedule_other_seed_another() -> None:
    a = poisson_schedule(50, 10, 1)
    assert np.array_equal(a, poisson_schedule(50, 10, 1))
    assert not np.array_equal(a[:10], poisson_schedule(50, 10, 2)[:10])


def test_a_longer_schedule_starts_with_the_shorter_one() -> None:
    short = poisson_schedule(300, 20, 7)  # more than one block of gaps
    long = poisson_schedule(300, 60, 7)
    assert len(short) > 4096
    assert np.array_equal(long[: len(short)], short)
    assert np.all(np.diff(long) > 0) and long[-1] < 60


def test_window_request_count_is_exact() -> None:
    offsets = poisson_schedule(40, 12, 3)
    assert window_request_count(40, 2, 10, 3) == int(np.sum((offsets >= 2) & (offsets < 12)))


@pytest.mark.parametrize(
    ("rate", "duration"), [(0, 1), (-1, 1), (float("nan"), 1), (1, -1), (1, float("inf"))]
)
def test_bad_arguments(rate: float, duration: float) -> None:
    with pytest.raises(ValueError):
        poisson_schedule(rate, duration, 0)


def test_zero_duration_is_empty() -> None:
    assert len(poisson_schedule(10, 0, 0)) == 0
