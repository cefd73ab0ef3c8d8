"""Arrival schedules: rate, exponential gaps, determinism, prefix property, exact counts."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from tokenwatt.collect.load.arrivals import (
    arrival_count,
    conditioned_schedule,
    poisson_schedule,
    window_request_count,
    window_schedule,
)


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
    expected = int(np.sum((offsets >= 2) & (offsets < 12)))
    assert window_request_count(40, 2, 10, 3, "poisson") == expected


@pytest.mark.parametrize(
    ("rate", "duration"), [(0, 1), (-1, 1), (float("nan"), 1), (1, -1), (1, float("inf"))]
)
def test_bad_arguments(rate: float, duration: float) -> None:
    with pytest.raises(ValueError):
        poisson_schedule(rate, duration, 0)


def test_zero_duration_is_empty() -> None:
    assert len(poisson_schedule(10, 0, 0)) == 0


# --- count-conditioned windows (measurement.arrivals: conditioned, the default) ---


def in_window(offsets: np.ndarray, warmup: float, duration: float) -> int:
    return int(np.count_nonzero((offsets >= warmup) & (offsets < warmup + duration)))


@pytest.mark.parametrize(
    ("rate", "duration", "expected"),
    [
        (6.0, 60.0, 360),
        (2.5, 1.0, 3),  # a half rounds up, not to even (round(2.5) would give 2)
        (0.25, 10.0, 3),
        (0.125, 4.0, 1),
        (0.7, 10.0, 7),
        (0.04, 10.0, 0),  # 0.4 arrivals: none
        (123.456, 7.89, 974),  # 974.06784
        (1 / 3, 30.0, 10),
        (1000.0, 0.0015, 2),  # 1.5
    ],
)
def test_arrival_count_is_rate_times_duration_rounded_half_up(
    rate: float, duration: float, expected: int
) -> None:
    assert arrival_count(rate, duration) == expected


@pytest.mark.parametrize("seed", [0, 1, 7, 12345])
@pytest.mark.parametrize(
    ("rate", "warmup", "duration"),
    [(6.0, 5.0, 60.0), (0.7, 0.0, 10.0), (2.5, 1.5, 1.0), (123.456, 2.0, 7.89), (40.0, 0.3, 0.1)],
)
def test_the_window_gets_exactly_the_rounded_count(
    rate: float, warmup: float, duration: float, seed: int
) -> None:
    offsets = window_schedule(rate, warmup_s=warmup, duration_s=duration, tail_s=5.0, seed=seed)
    count = arrival_count(rate, duration)
    assert in_window(offsets, warmup, duration) == count
    assert window_request_count(rate, warmup, duration, seed) == count
    # The warm-up holds its own exact count; the tail starts at the window's end.
    assert int(np.count_nonzero(offsets < warmup)) == arrival_count(rate, warmup)
    assert offsets.dtype == np.float64 and np.all(np.diff(offsets) >= 0)


def test_a_seed_gives_one_schedule_and_another_seed_another() -> None:
    kw = {"warmup_s": 2.0, "duration_s": 30.0, "tail_s": 10.0}
    a = conditioned_schedule(6.0, seed=3, **kw)
    assert np.array_equal(a, conditioned_schedule(6.0, seed=3, **kw))
    b = conditioned_schedule(6.0, seed=4, **kw)
    assert in_window(a, 2.0, 30.0) == in_window(b, 2.0, 30.0) == 180
    assert not np.array_equal(a[12:30], b[12:30])


def test_a_longer_tail_keeps_the_schedule_and_adds_to_it() -> None:
    short = conditioned_schedule(50.0, warmup_s=1.0, duration_s=4.0, tail_s=2.0, seed=5)
    long = conditioned_schedule(50.0, warmup_s=1.0, duration_s=4.0, tail_s=20.0, seed=5)
    assert np.array_equal(long[: len(short)], short)
    assert len(long) > len(short) and long[-1] < 25.0


def test_window_gaps_pass_a_ks_test_against_the_exponential() -> None:
    rate, warmup, duration = 200.0, 1.0, 50.0
    offsets = window_schedule(rate, warmup_s=warmup, duration_s=duration, tail_s=0, seed=0)
    window = offsets[offsets >= warmup]
    assert len(window) == 10_000
    gaps = np.diff(np.concatenate([[warmup], window]))
    assert stats.kstest(gaps, "expon", args=(0, 1 / rate)).pvalue > 0.01
    assert abs(np.corrcoef(gaps[:-1], gaps[1:])[0, 1]) < 0.05


def test_the_achieved_rate_is_within_half_a_percent_in_every_window() -> None:
    seen = 0
    for rate in (0.5, 1.0, 3.3, 6.0, 17.0, 99.9):
        for duration in (20.0, 45.5, 60.0, 120.0, 600.0):
            if rate * duration < 200:
                continue
            for seed in range(5):
                offsets = window_schedule(
                    rate, warmup_s=3.0, duration_s=duration, tail_s=1.0, seed=seed
                )
                achieved = in_window(offsets, 3.0, duration) / duration
                assert abs(achieved / rate - 1) <= 0.005, (rate, duration, seed)
                seen += 1
    assert seen == 90  # 18 (rate, duration) pairs with rate × T >= 200, 5 seeds each


def test_with_few_arrivals_rounding_alone_exceeds_half_a_percent() -> None:
    # 6.5 arrivals become 7: 7.7% above the target rate; the bound is 0.5 / (rate × T).
    offsets = window_schedule(0.65, warmup_s=0.0, duration_s=10.0, tail_s=0.0, seed=1)
    assert len(offsets) == 7
    assert abs(len(offsets) / 10.0 / 0.65 - 1) == pytest.approx(0.5 / 6.5)


def test_the_unconditioned_option_is_the_old_schedule_offset_for_offset() -> None:
    offsets = window_schedule(
        6.0, warmup_s=5.0, duration_s=60.0, tail_s=5.0, seed=42, arrivals="poisson"
    )
    assert np.array_equal(offsets, poisson_schedule(6.0, 70.0, 42))
    # Values of the schedule before the conditioned process existed (same seed).
    assert len(offsets) == 422
    assert offsets[:3].tolist() == [0.40070143399433245, 0.7900663766317413, 1.1875265432774504]
    assert offsets[-1] == 69.92668518162859
    assert window_request_count(6.0, 5.0, 60.0, 42, "poisson") == 362


def test_the_unconditioned_count_varies_and_the_conditioned_one_does_not() -> None:
    def counts(arrivals: str) -> set[int]:
        return {
            in_window(
                window_schedule(
                    6.0, warmup_s=2.0, duration_s=60.0, tail_s=0.0, seed=s,
                    arrivals=arrivals,  # type: ignore[arg-type]
                ),
                2.0,
                60.0,
            )
            for s in range(20)
        }  # fmt: skip

    assert counts("conditioned") == {360}
    assert len(counts("poisson")) > 5


@pytest.mark.parametrize(
    "kw",
    [
        {"warmup_s": -1.0, "duration_s": 1.0, "tail_s": 0.0},
        {"warmup_s": 0.0, "duration_s": float("nan"), "tail_s": 0.0},
        {"warmup_s": 0.0, "duration_s": 1.0, "tail_s": float("inf")},
    ],
)
def test_conditioned_bad_arguments(kw: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        conditioned_schedule(1.0, seed=0, **kw)
    with pytest.raises(ValueError):
        conditioned_schedule(0.0, warmup_s=0.0, duration_s=1.0, tail_s=0.0, seed=0)


def test_an_unknown_process_is_refused() -> None:
    with pytest.raises(ValueError, match="conditioned"):
        window_schedule(1.0, warmup_s=0, duration_s=1, tail_s=0, seed=0, arrivals="uniform")  # type: ignore[arg-type]
