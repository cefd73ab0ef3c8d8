"""Window summaries: percentiles with failures as infinity, TPOT, ITL, goodput, SLO verdict."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.analysis.request_builders import ok
from tokenwatt.analysis.window.latency import (
    missed_beyond_doubt,
    misses_allowed,
    percentile,
    percentiles_ms,
    summarise_window,
    tpot_ms,
)
from tokenwatt.records.run.request import RequestResult
from tokenwatt.records.spec.spec import SloSpec

SLO = SloSpec(ttft_p99_ms=100, tpot_p99_ms=20)


def failed(kind: str = "timeout", at: float = 0.0) -> RequestResult:
    return RequestResult(scheduled_s=at, sent_s=at, dispatched_s=at, error=kind, finished_s=at + 1)


def test_linear_percentile_by_hand() -> None:
    # n = 5: rank q(n-1)/100; p50 -> rank 2 -> 30; p90 -> rank 3.6 -> 40 + 0.6 * 10 = 46.
    values = [10, 20, 30, 40, 50]
    assert percentile(values, 50) == 30
    assert percentile(values, 90) == pytest.approx(46)
    assert percentile(values, 99) == pytest.approx(49.6)
    assert percentile([], 99) is None


def test_linear_percentile_equals_numpy_linear_on_finite_data() -> None:
    rng = np.random.default_rng(0)
    for n in (1, 2, 3, 10, 101, 1000):
        data = rng.exponential(50, n)
        for q in (50, 90, 99):
            assert percentile(data, q) == pytest.approx(
                np.percentile(data, q, method="linear"), rel=1e-12
            )


def test_failures_are_infinite_and_never_dropped() -> None:
    # 101 values, one infinite: rank 0.99 * 100 = 99 exactly -> the 100th value, finite.
    values = [float(i) for i in range(100)] + [math.inf]
    assert percentile(values, 99) == 99.0
    # Two infinite values among 101: rank 99 is now infinite.
    assert percentile([float(i) for i in range(99)] + [math.inf, math.inf], 99) == math.inf
    # 10 values, one infinite: rank 8.91 interpolates towards infinity.
    assert percentile([float(i) for i in range(9)] + [math.inf], 99) == math.inf
    assert percentile([float(i) for i in range(9)] + [math.inf], 50) == pytest.approx(4.5)
    assert percentiles_ms([1.0, math.inf]).p99 == "inf"
    assert percentiles_ms([]).p50 is None


def test_tpot_is_none_for_one_token_and_infinite_for_failures() -> None:
    assert tpot_ms(ok(50, tokens=1)) is None
    assert tpot_ms(ok(50, tokens=5, tpot=12)) == pytest.approx(12)
    assert tpot_ms(failed()) == math.inf


def test_tpot_uses_usage_tokens_not_chunks() -> None:
    r = ok(50, tokens=2, tpot=30)  # two chunks 30 ms apart...
    r.output_tokens = 4  # ...that carried four tokens
    assert tpot_ms(r) == pytest.approx(10)


def test_summary_counts_failures_as_misses() -> None:
    requests = [ok(10 + i / 2, at=i * 0.01) for i in range(98)] + [
        failed("http_503"),
        failed("timeout"),
    ]
    s = summarise_window(requests, rate_rps=100, duration_s=1.0, slo=SLO)
    assert (s.requests, s.completed, s.errors) == (100, 98, 2)
    assert s.error_kinds == {"http_503": 1, "timeout": 1}
    assert s.output_tokens == 98 * 5 and s.goodput_tok_s == pytest.approx(490)
    assert s.achieved_rps == pytest.approx(98)
    # 2 infinite values among 100: p99 rank 98.01 -> between the two infinite values.
    assert s.ttft_ms.p99 == "inf" and s.e2e_ms.p99 == "inf" and s.tpot_ms.p99 == "inf"
    assert s.ttft_ms.p50 == pytest.approx(10 + 49.5 / 2)  # rank 49.5 of 10, 10.5, ...
    assert s.slo_attainment_pct == pytest.approx(98.0)
    assert not s.slo_pass and s.failure_reason == "ttft,tpot,errors"


def test_one_failure_in_101_still_passes() -> None:
    requests = [ok(10) for _ in range(100)] + [failed()]
    s = summarise_window(requests, rate_rps=100, duration_s=1.0, slo=SLO)
    assert s.ttft_ms.p99 == pytest.approx(10) and s.slo_pass and s.failure_reason is None


def test_ttft_from_schedule_versus_from_send_and_send_lag() -> None:
    r = ok(30)
    r.sent_s = r.dispatched_s = 0.020  # the client sent it 20 ms late
    s = summarise_window([r], rate_rps=1, duration_s=1, slo=SLO)
    assert s.ttft_ms.p50 == pytest.approx(30) and s.ttft_from_send_ms.p50 == pytest.approx(10)
    assert s.send_lag_p99_ms == pytest.approx(20) and s.client_bound


def test_waiting_for_a_slot_is_not_send_lag() -> None:
    r = ok(30)
    r.dispatched_s, r.sent_s = 0.001, 0.025
    s = summarise_window([r], rate_rps=1, duration_s=1, slo=SLO)
    assert s.send_lag_p99_ms == pytest.approx(1) and not s.client_bound
    assert s.ttft_ms.p50 == pytest.approx(30)


def test_itl_pools_chunk_gaps() -> None:
    a, b = ok(10, tokens=3, tpot=5), ok(10, tokens=2, tpot=40)
    s = summarise_window([a, b], rate_rps=1, duration_s=1, slo=SLO)
    # gaps 5, 5, 40 -> p50 = 5, p90 rank 1.8 -> 5 + 0.8 * 35 = 33
    assert s.itl_ms.p50 == pytest.approx(5) and s.itl_ms.p90 == pytest.approx(33)


def test_tpot_limit_fails_alone() -> None:
    requests = [ok(10, tpot=15) for _ in range(50)] + [ok(10, tpot=50) for _ in range(5)]
    s = summarise_window(requests, rate_rps=10, duration_s=5, slo=SLO)
    assert s.failure_reason == "tpot" and s.errors == 0
    assert s.slo_attainment_pct == pytest.approx(100 * 50 / 55)


def test_empty_window_and_stopped_early() -> None:
    s = summarise_window([], rate_rps=1, duration_s=1, slo=SLO)
    assert not s.slo_pass and s.failure_reason == "no_requests" and s.ttft_ms.p99 is None
    s = summarise_window([ok(10)], rate_rps=1, duration_s=1, slo=SLO, stopped_early=True)
    assert not s.slo_pass and s.failure_reason == "stopped_early" and s.stopped_early


def test_misses_allowed() -> None:
    assert [misses_allowed(n) for n in (1, 2, 100, 101, 102, 201, 1000)] == [0, 1, 1, 1, 2, 2, 10]


def test_missed_beyond_doubt_counts_each_limit_separately() -> None:
    # 1,000 expected: more than 10 misses of one limit means p99 cannot pass.
    slow_first = [ok(500) for _ in range(6)]
    slow_tokens = [ok(10, tpot=90) for _ in range(6)]
    assert not missed_beyond_doubt(slow_first + slow_tokens, 1000, SLO)
    assert missed_beyond_doubt(slow_first * 2, 1000, SLO)
    assert missed_beyond_doubt([failed() for _ in range(11)], 1000, SLO)
    assert not missed_beyond_doubt([failed() for _ in range(10)], 1000, SLO)


def test_missed_beyond_doubt_counts_unanswered_requests_waiting_too_long() -> None:
    waiting = [RequestResult(scheduled_s=0.0, sent_s=0.0) for _ in range(11)]
    assert not missed_beyond_doubt(waiting, 1000, SLO)
    assert not missed_beyond_doubt(waiting, 1000, SLO, now_s=0.05)
    assert missed_beyond_doubt(waiting, 1000, SLO, now_s=0.2)


def test_beyond_doubt_agrees_with_the_summary() -> None:
    """Once missed_beyond_doubt says so, no finishing of the rest can make the window pass."""
    for n in (50, 100, 101, 250):
        k = misses_allowed(n) + 1
        requests = [ok(10) for _ in range(n - k)] + [ok(10**6) for _ in range(k)]
        assert missed_beyond_doubt(requests[-k:], n, SLO)
        assert not summarise_window(requests, rate_rps=1, duration_s=1, slo=SLO).slo_pass
