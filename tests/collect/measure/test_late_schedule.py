"""A pass on a schedule the client did not keep is no verdict, and a fixed-load run whose
misses did not come from the load is inconclusive, as a search's is.

The retries go through :class:`Measurement` with a scripted runner (each window's lag and
K-S p as scripted), so the bookkeeping is checked without real windows at a rate the
client cannot hold; the fixed-load status is checked as a function.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tokenwatt.analysis import LATE_SCHEDULE_TAG, late_schedule_reason
from tokenwatt.collect.measure.fixed_loads import fixed_status
from tokenwatt.collect.measure.progress import NullReporter
from tokenwatt.collect.measure.stopping import GracefulStop
from tokenwatt.collect.measure.window import WindowOutcome, WindowPlan
from tokenwatt.records import WindowSummary, retried, untrusted_reason

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from runs_factory import window
from test_idle import measurement

ENDPOINT = "http://127.0.0.1:8000/v1"


def _sent(
    rate: float, *, lag_ms: float, ks_p: float | None, slo_pass: bool = True
) -> WindowSummary:
    w = window(rate, 100.0, ttft_p99=200.0, tpot_p99=20.0, slo_pass=slo_pass)
    w.send_lag_p99_ms, w.client_bound, w.send_gaps_ks_p = lag_ms, lag_ms > 10.0, ks_p
    return w


class LateRunner:
    """Stands in for a WindowRunner: each window's send-lag p99 (ms) and K-S p as scripted."""

    def __init__(self, sends: list[tuple[float, float | None]]) -> None:
        self.sends = sends
        self.progress = NullReporter()
        self.stop = GracefulStop()
        self.runs = 0

    def run(self, plan: WindowPlan) -> WindowOutcome:
        lag_ms, ks_p = self.sends[self.runs]
        self.runs += 1
        summary = _sent(plan.rate_rps, lag_ms=lag_ms, ks_p=ks_p)
        return WindowOutcome(summary=summary, metrics=None, power=None)


@pytest.mark.parametrize(
    ("lag_ms", "ks_p", "late"),
    [
        (92.6, 0.0, True),  # behind and not Poisson: another arrival process
        (92.6, 0.3, False),  # one stall: the gaps still Poisson
        (3.0, 0.0, False),  # on time, gaps closer than one write can go
        (92.6, None, False),  # constant rate or too few sends: nothing to test the gaps on
    ],
)
def test_only_a_pass_both_late_and_not_poisson_is_no_verdict(
    lag_ms: float, ks_p: float | None, late: bool
) -> None:
    reason = late_schedule_reason(_sent(4000.0, lag_ms=lag_ms, ks_p=ks_p))
    assert (reason is not None) is late
    if reason is not None:
        assert "send-lag p99 92.6 ms" in reason and "(p = 0)" in reason and "4000 req/s" in reason
    # A miss is left to the collector's retry for a late client.
    assert late_schedule_reason(_sent(4000.0, lag_ms=lag_ms, ks_p=ks_p, slo_pass=False)) is None


def test_a_late_pass_is_measured_again_and_a_second_leaves_it_untrusted() -> None:
    m = measurement(LateRunner([(92.6, 0.0), (95.0, 0.001)]))  # type: ignore[arg-type]
    outcome = m.probe(4000.0, "grow")
    first, second = (p.window for p in m.record.probes)
    assert retried(first) and not first.valid and not first.slo_pass
    assert "the client did not keep its schedule" in (first.invalid_reason or "")
    assert not retried(second) and not second.valid
    assert second.failure_reason == LATE_SCHEDULE_TAG
    assert outcome.untrusted == untrusted_reason(second)
    assert outcome.untrusted is not None and "send-lag p99 95.0 ms" in outcome.untrusted
    assert not outcome.passed


def test_a_late_pass_whose_retry_keeps_the_schedule_counts_the_retry() -> None:
    m = measurement(LateRunner([(92.6, 0.0), (2.0, 0.4)]))  # type: ignore[arg-type]
    outcome = m.probe(4000.0, "grow")
    first, second = (p.window for p in m.record.probes)
    assert retried(first) and second.valid and second.slo_pass
    assert outcome.passed and outcome.untrusted is None


def test_a_late_but_poisson_pass_keeps_its_verdict() -> None:
    m = measurement(LateRunner([(92.6, 0.3)]))  # type: ignore[arg-type]
    outcome = m.probe(4000.0, "grow")
    (only,) = (p.window for p in m.record.probes)
    assert only.valid and only.slo_pass and outcome.passed
    assert any(x.startswith("client-bound") for x in only.warnings)  # still said


def _failed(rate: float, kind: str | None, *, requests: int = 20) -> WindowSummary:
    w = window(rate, 0.0, ttft_p99="inf", tpot_p99=20.0, slo_pass=False, duration=2.0)
    w.requests = requests
    w.completed = 0 if kind is not None or requests == 0 else requests
    if kind is not None:
        w.errors, w.error_kinds = requests, {kind: requests}
    return w


def test_a_fixed_run_whose_every_request_the_server_refused_is_inconclusive() -> None:
    status, reason = fixed_status(
        [_failed(2.0, "http_500"), _failed(4.0, "http_500")], "req/s", ENDPOINT
    )
    assert status == "inconclusive"
    assert reason is not None and "at every listed load" in reason and "HTTP 500" in reason


def test_a_fixed_run_that_completed_nothing_is_inconclusive_not_none_met() -> None:
    status, reason = fixed_status([_failed(5.0, None, requests=0)], "req/s", ENDPOINT)
    assert (status, reason) == (
        "inconclusive",
        "no listed load completed a request: no load was measured",
    )


def test_a_fixed_run_that_missed_for_the_load_is_none_met() -> None:
    slow = window(8.0, 0.0, ttft_p99=900.0, tpot_p99=20.0, slo_pass=False, duration=2.0)
    status, reason = fixed_status([_failed(2.0, "http_500"), slow], "req/s", ENDPOINT)
    assert status == "none_met"
    assert reason == "no listed load met the SLO, the lowest (2 req/s) included"
