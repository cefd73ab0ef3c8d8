"""Failure-mode classification of probes that missed the SLO (the seed's 16 req/s story)."""

from __future__ import annotations

from typing import Any

import pytest

from tokenwatt.analysis.window.failure import (
    ERRORS,
    PER_TOKEN_LATENCY_BOUND,
    QUEUEING_KV_BOUND,
    classify_failure,
    engine_under_pressure,
)
from tokenwatt.records.run.environment import EngineMetrics
from tokenwatt.records.run.window import Percentiles, WindowSummary
from tokenwatt.records.spec.spec import SloSpec

SLO = SloSpec(ttft_p99_ms=2000, tpot_p99_ms=50)


def window(ttft_p99: Any, tpot_p99: Any, **kw: Any) -> WindowSummary:
    base: dict[str, Any] = {
        "rate_rps": 16.0,
        "duration_s": 60.0,
        "requests": 960,
        "completed": 960,
        "errors": 0,
        "slo_pass": False,
    }
    base.update(kw)
    return WindowSummary(
        ttft_ms=Percentiles(p50=100, p90=500, p99=ttft_p99),
        tpot_ms=Percentiles(p50=20, p90=30, p99=tpot_p99),
        **base,
    )


def metrics(
    waiting_mean: float | None = 0.0, kv: float | None = 60.0, pre: int | None = 0
) -> EngineMetrics:
    return EngineMetrics(
        running_mean=100,
        waiting_mean=waiting_mean,
        waiting_max=waiting_mean,
        kv_usage_max_pct=kv,
        preemptions=pre,
        scrapes=60,
    )


def test_window_that_met_the_slo_has_no_failure_mode() -> None:
    w = window(900, 30, slo_pass=True)
    assert classify_failure(w, metrics(), slo=SLO) is None


def test_bf16_kv_at_16_rps_is_queueing_kv_bound() -> None:
    # BF16 KV ran out of KV space first: a queue formed and p99 TTFT reached ~32 s,
    # while decode steps stayed fast enough.
    w = window(32_000, 41)
    assert classify_failure(w, metrics(waiting_mean=40, kv=99.2), slo=SLO) == QUEUEING_KV_BOUND


def test_fp8_kv_at_16_rps_is_per_token_latency_bound() -> None:
    # Twice the KV capacity admits a bigger batch: no queue, but TPOT exceeds its limit.
    w = window(1500, 63)
    assert classify_failure(w, metrics(waiting_mean=0, kv=71), slo=SLO) == PER_TOKEN_LATENCY_BOUND


def test_both_limits_missed_follow_the_engine_pressure() -> None:
    w = window(9000, 80)
    assert classify_failure(w, metrics(waiting_mean=12), slo=SLO) == QUEUEING_KV_BOUND
    assert classify_failure(w, metrics(waiting_mean=0, kv=97), slo=SLO) == QUEUEING_KV_BOUND
    assert classify_failure(w, metrics(waiting_mean=0, kv=50, pre=3), slo=SLO) == QUEUEING_KV_BOUND
    assert classify_failure(w, metrics(waiting_mean=0, kv=50), slo=SLO) == PER_TOKEN_LATENCY_BOUND


def test_both_missed_without_metrics_follow_the_larger_overshoot() -> None:
    assert classify_failure(window(9000, 60), None, slo=SLO) == QUEUEING_KV_BOUND  # 4.5× vs 1.2×
    assert classify_failure(window(2400, 200), None, slo=SLO) == PER_TOKEN_LATENCY_BOUND


def test_failed_requests_beyond_one_percent_are_errors() -> None:
    w = window("inf", "inf", completed=900, errors=60, error_kinds={"http_503": 60})
    assert classify_failure(w, metrics(waiting_mean=30), slo=SLO) == ERRORS


def test_timeouts_with_a_queue_are_queueing_not_errors() -> None:
    w = window("inf", 40, completed=900, errors=60, error_kinds={"timeout": 60})
    assert classify_failure(w, metrics(waiting_mean=30), slo=SLO) == QUEUEING_KV_BOUND


def test_a_few_errors_below_one_percent_do_not_decide() -> None:
    w = window(1500, 70, completed=955, errors=5, error_kinds={"connect": 5})
    assert classify_failure(w, metrics(), slo=SLO) == PER_TOKEN_LATENCY_BOUND


def test_without_slo_the_failure_reason_text_names_the_limit() -> None:
    w = window(32_000, 41, failure_reason="p99 TTFT 32000 ms > 2000 ms")
    assert classify_failure(w, None) == QUEUEING_KV_BOUND
    w = window(1500, 63, failure_reason="p99 TPOT 63 ms > 50 ms")
    assert classify_failure(w, metrics()) == PER_TOKEN_LATENCY_BOUND


def test_without_slo_or_reason_the_engine_decides() -> None:
    w = window(1500, 63)
    assert classify_failure(w, metrics(waiting_mean=5)) == QUEUEING_KV_BOUND
    assert classify_failure(w, metrics(waiting_mean=0)) == PER_TOKEN_LATENCY_BOUND


@pytest.mark.parametrize(
    ("m", "expected"),
    [
        (None, None),
        (EngineMetrics(scrapes=0), None),
        (EngineMetrics(scrapes=3), None),
        (EngineMetrics(scrapes=3, preemptions=2), True),
        (EngineMetrics(scrapes=3, waiting_mean=0.4, kv_usage_max_pct=94.9), False),
        (EngineMetrics(scrapes=3, waiting_mean=0.5), True),
        (EngineMetrics(scrapes=3, kv_usage_max_pct=95.0), True),
    ],
)
def test_engine_pressure_thresholds(m: EngineMetrics | None, expected: bool | None) -> None:
    assert engine_under_pressure(m) is expected


def _stopped(**kw: Any) -> WindowSummary:
    """An early-stopped 100-request window: p99 TTFT infinite, TPOT under its limit."""
    base: dict[str, Any] = {
        "rate_rps": 60.0,
        "duration_s": 1.0,
        "requests": 100,
        "completed": 80,
        "errors": 20,
        "ttft_ms": Percentiles(p50=100.0, p90=300.0, p99="inf"),
        "tpot_ms": Percentiles(p50=20.0, p90=30.0, p99=40.0),
        "slo_pass": False,
        "stopped_early": True,
    }
    base.update(kw)
    return WindowSummary.model_validate(base)


def test_the_collectors_own_cancellations_are_not_engine_errors() -> None:
    # 20 requests still in flight were cancelled by the collector's early stop.
    stopped = _stopped(error_kinds={"cancelled": 20})
    assert classify_failure(stopped, None, slo=SLO) == QUEUEING_KV_BOUND


def test_engine_errors_beside_cancellations_still_classify_as_errors() -> None:
    broken = _stopped(error_kinds={"http_503": 18, "cancelled": 2})
    assert classify_failure(broken, None, slo=SLO) == ERRORS
