"""The K-S test of a window's actual send gaps: Poisson sends pass, tick-bunched sends fail."""

from __future__ import annotations

import numpy as np

from tokenwatt.analysis import bunched_sends_warning, send_gaps_ks_p
from tokenwatt.records import RequestResult

RATE = 500.0


def _conditioned_times(n: int, seconds: float, seed: int) -> np.ndarray:
    """n sorted uniform times on [0, seconds): a Poisson window conditioned on its count."""
    return np.sort(np.random.default_rng(seed).uniform(0.0, seconds, n))


def _sent(times: np.ndarray, lag: np.ndarray | None = None) -> list[RequestResult]:
    lag = np.zeros(len(times)) if lag is None else lag
    return [
        RequestResult(scheduled_s=float(t), sent_s=float(t + d), first_token_s=float(t + d + 0.01))
        for t, d in zip(times, lag, strict=True)
    ]


def test_poisson_sends_pass_and_the_same_sends_on_millisecond_ticks_fail() -> None:
    times = _conditioned_times(3000, 6.0, seed=3)
    p_exact = send_gaps_ks_p(_sent(times), RATE)
    # What a plain asyncio.sleep does: every send waits for the next 1 ms tick.
    ticked = np.ceil(times * 1e3) / 1e3
    p_ticked = send_gaps_ks_p(_sent(times, ticked - times), RATE)
    assert p_exact is not None and p_exact > 0.01
    assert p_ticked is not None and p_ticked < 1e-6
    assert bunched_sends_warning(p_exact, RATE, 0.01) is None
    warning = bunched_sends_warning(p_ticked, RATE, 0.9)
    assert warning is not None
    assert "500 req/s" in warning and "send-lag p99 0.9 ms" in warning


def test_a_wrong_rate_fails_the_same_sends() -> None:
    times = _conditioned_times(2000, 4.0, seed=5)  # 500 req/s
    p_right = send_gaps_ks_p(_sent(times), RATE)
    p_wrong = send_gaps_ks_p(_sent(times), 0.8 * RATE)
    assert p_right is not None and p_right > 0.01
    assert p_wrong is not None and p_wrong < 1e-6


def test_wire_order_unsent_requests_and_small_windows() -> None:
    times = _conditioned_times(400, 0.8, seed=9)
    results = _sent(times)
    p = send_gaps_ks_p(results, RATE)
    # Two workers report in their own order: the test is of the wire's (sorted) order.
    shuffled = [results[i] for i in np.random.default_rng(1).permutation(len(results))]
    assert send_gaps_ks_p(shuffled, RATE) == p
    # A request cancelled before its send keeps sent_s at 0.0, before its schedule: left out.
    unsent = [RequestResult(scheduled_s=5.0 + k, error="cancelled") for k in range(10)]
    assert send_gaps_ks_p(results + unsent, RATE) == p
    assert send_gaps_ks_p(results[:19], RATE) is None
    assert send_gaps_ks_p(results[:20], RATE) is not None
    assert send_gaps_ks_p(results, 0.0) is None
