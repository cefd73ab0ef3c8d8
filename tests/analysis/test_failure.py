"""Failure modes of missed windows (``tokenwatt.analysis.failure``)."""

from __future__ import annotations

from tokenwatt.analysis.failure import ERRORS, QUEUEING_KV_BOUND, classify_failure
from tokenwatt.records.spec import SloSpec
from tokenwatt.records.window import Percentiles, WindowSummary

SLO = SloSpec(ttft_p99_ms=400, tpot_p99_ms=100)


def _window(**kw: object) -> WindowSummary:
    base: dict[str, object] = {
        "rate_rps": 60.0,
        "duration_s": 1.0,
        "requests": 100,
        "completed": 80,
        "errors": 20,
        "ttft_ms": Percentiles(p50=100.0, p90=300.0, p99="inf"),
        "tpot_ms": Percentiles(p50=40.0, p90=60.0, p99=80.0),
        "slo_pass": False,
        "stopped_early": True,
    }
    base.update(kw)
    return WindowSummary.model_validate(base)


def test_the_collectors_own_cancellations_are_not_engine_errors() -> None:
    # An early-stopped probe: 20 requests still in flight were cancelled by the collector.
    stopped = _window(error_kinds={"cancelled": 20})
    assert classify_failure(stopped, None, slo=SLO) == QUEUEING_KV_BOUND


def test_engine_errors_still_classify_as_errors() -> None:
    broken = _window(error_kinds={"http_503": 18, "cancelled": 2})
    assert classify_failure(broken, None, slo=SLO) == ERRORS
