"""Each window starts on an idle engine, proven: the client's count and the engine's gauges.

The policy and the proof are checked as functions; the waits against the scripted engine
(real HTTP on 127.0.0.1, ``scripted_engine.py``) whose ``/metrics`` is busy, hangs while
"overloaded", or is absent; the retries through :class:`Measurement` with a scripted
runner, so the bookkeeping of three tries is checked without three real windows.
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tokenwatt.collect.measure.idle import (
    IDLE_RETRIES,
    NOT_IDLE_TAG,
    IdleGate,
    IdlePolicy,
    client_open,
    overloaded,
    proof,
)
from tokenwatt.collect.measure.instruments import Instruments
from tokenwatt.collect.measure.measurement import Measurement, SearchSetup
from tokenwatt.collect.measure.progress import NullReporter
from tokenwatt.collect.measure.stopping import GracefulStop
from tokenwatt.collect.measure.window import WindowOutcome, WindowPlan, mark_cut
from tokenwatt.records import (
    IdleStart,
    RequestResult,
    RunRecord,
    WorkerLag,
    fingerprint,
    retried,
)
from tokenwatt.records.run.environment import ToolInfo

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from runs_factory import seed_spec, window
from scripted_engine import EngineProcess, start_engine
from test_instruments import PLAN, make_spec, runner_for

DEADLINE_S = 0.3
"""A short scrape deadline, so a hung ``/metrics`` costs tenths of a second per read."""


@pytest.fixture
def engine(request: pytest.FixtureRequest) -> Iterator[EngineProcess]:
    proc = start_engine(request.param)
    try:
        yield proc
    finally:
        proc.stop()


# -- the policy and the proof, as functions ---------------------------------------------
def test_the_bound_doubles_after_an_overloaded_window_and_per_try_up_to_its_cap() -> None:
    policy = IdlePolicy.for_timeout(60.0)
    assert policy.base_s == 30.0  # min(request timeout, 30 s)
    assert IdlePolicy.for_timeout(5.0).base_s == 5.0
    assert policy.bound_s(overloaded=False, not_proven_in_a_row=0) == 30.0
    assert policy.bound_s(overloaded=True, not_proven_in_a_row=0) == 60.0
    assert policy.bound_s(overloaded=True, not_proven_in_a_row=1) == 120.0
    assert policy.bound_s(overloaded=True, not_proven_in_a_row=2) == 120.0  # the cap
    small = IdlePolicy.for_timeout(5.0)
    assert [small.bound_s(overloaded=True, not_proven_in_a_row=k) for k in range(3)] == [
        10.0,
        20.0,
        40.0,
    ]


def test_a_window_that_missed_stopped_early_or_cancelled_counts_as_overloaded() -> None:
    clean = window(5.0, 100.0, ttft_p99=200.0, tpot_p99=20.0, slo_pass=True)
    assert not overloaded(clean)
    assert overloaded(clean.model_copy(update={"slo_pass": False}))
    assert overloaded(clean.model_copy(update={"stopped_early": True}))
    assert overloaded(clean.model_copy(update={"cancelled_by_client": 3}))
    assert overloaded(clean.model_copy(update={"error_kinds": {"timeout": 1}}))
    assert not overloaded(clean.model_copy(update={"error_kinds": {"http_400": 1}}))


def test_the_client_counts_the_requests_it_has_not_ended() -> None:
    ended = RequestResult(scheduled_s=0.0, finished_s=1.0)
    failed = RequestResult(scheduled_s=0.0, finished_s=1.0, error="timeout")
    open_ = RequestResult(scheduled_s=0.0)
    assert client_open([ended, failed]) == 0
    assert client_open([ended, open_, open_]) == 2


def test_the_gate_carries_the_clients_count_and_a_dead_workers_requests_are_closed() -> None:
    gate = IdleGate(IdlePolicy(base_s=5.0))
    clean = window(5.0, 100.0, ttft_p99=200.0, tpot_p99=20.0, slo_pass=True)
    gate.after(clean, [RequestResult(scheduled_s=0.0)] * 2, None)
    assert gate.last_client_open == 2 and gate.bound_s() == 5.0
    died = WorkerLag(worker=1, requests=2, send_lag_p99_ms=0.0, client_bound=False, died=True)
    cut = clean.model_copy(update={"worker_lag": [died], "slo_pass": False})
    gate.after(cut, [RequestResult(scheduled_s=0.0)] * 2, None)
    assert gate.last_client_open == 0  # its process, and its connections, are gone
    assert gate.bound_s() == 10.0  # and the window missed: the bound doubles


@pytest.mark.parametrize(
    ("idle", "note", "open_", "seen", "expected"),
    [
        (True, None, 0, True, "client+metrics"),
        (None, "/metrics did not answer (x)", 0, False, "client only: /metrics did not answer (x)"),
        (None, "/metrics did not answer (x)", 0, True, "not proven: /metrics did not answer (x)"),
        (False, "2 running", 0, True, "not proven: 2 running"),
        (True, None, 3, True, "not proven: the client had 3 requests not yet ended"),
    ],
)
def test_what_proved_idleness_is_said(
    idle: bool | None, note: str | None, open_: int, seen: bool, expected: str
) -> None:
    read = IdleStart(waited_s=0.0, idle=idle, note=note)
    assert proof(read, open_, gauges_seen=seen) == expected


# -- the waits, against a real HTTP engine ------------------------------------------------
@pytest.mark.parametrize("engine", ["busy:3"], indirect=True)
def test_a_busy_engine_is_waited_for_then_proven_by_client_and_metrics(
    engine: EngineProcess,
) -> None:
    with Instruments(engine.endpoint) as instruments:
        idle = IdleGate(IdlePolicy(base_s=10.0)).check(instruments)
    assert idle.proven_by == "client+metrics" and idle.client_open == 0
    assert idle.max_wait_s == 10.0 and idle.running == 0
    assert engine.stats()["metrics_scrapes"] == 4  # three busy reads, then the idle one


@pytest.mark.parametrize("engine", ["hang-after:1:3"], indirect=True)
def test_a_metrics_that_hangs_under_overload_is_waited_for_not_skipped(
    engine: EngineProcess,
) -> None:
    gate = IdleGate(IdlePolicy(base_s=10.0))
    with Instruments(engine.endpoint, scrape_deadline_s=DEADLINE_S) as instruments:
        first = gate.check(instruments)
        gate.last_overloaded = True  # as after an overloaded window
        second = gate.check(instruments)
    assert first.proven_by == "client+metrics"
    # Three reads got no answer; the check went on polling and the fourth proved it.
    assert second.proven_by == "client+metrics" and second.idle is True
    assert second.max_wait_s == 20.0
    assert second.waited_s >= 3 * DEADLINE_S
    assert engine.stats()["metrics_scrapes"] == 5


@pytest.mark.parametrize("engine", ["hang-after:1"], indirect=True)
def test_a_window_whose_metrics_never_answers_again_is_invalid_not_a_verdict(
    engine: EngineProcess,
) -> None:
    spec = make_spec(engine.endpoint, timeout_s=1.0)  # a 1 s base bound
    with Instruments(engine.endpoint, scrape_deadline_s=DEADLINE_S) as instruments:
        runner = runner_for(spec, instruments)
        runner.idle.check(instruments)  # /metrics answers once: its gauges exist
        outcome = runner.run(PLAN)
        bound_after = runner.idle.bound_s()
    idle = outcome.metrics.idle_start if outcome.metrics is not None else None
    assert idle is not None and idle.idle is None and idle.max_wait_s == 1.0
    assert (idle.proven_by or "").startswith("not proven: /metrics did not answer in ")
    s = outcome.summary
    assert s.completed > 0  # the window ran; its numbers are kept, its verdict is not
    assert not s.valid and not s.slo_pass and s.failure_reason == NOT_IDLE_TAG
    assert (s.invalid_reason or "").startswith("not proven idle: /metrics did not answer in ")
    assert bound_after == 2.0  # the next try waits twice as long


@pytest.mark.parametrize("engine", ["none"], indirect=True)
def test_without_metrics_the_client_alone_proves_it_and_the_record_says_so(
    engine: EngineProcess,
) -> None:
    spec = make_spec(engine.endpoint)
    with Instruments(engine.endpoint) as instruments:
        outcome = runner_for(spec, instruments).run(PLAN)
    idle = outcome.metrics.idle_start if outcome.metrics is not None else None
    assert idle is not None
    assert idle.proven_by == "client only: /metrics did not answer (ValueError: HTTP 404)"
    assert idle.client_open == 0
    assert outcome.summary.valid and outcome.summary.slo_pass
    assert engine.stats()["metrics_scrapes"] >= 1


# -- the retries, through Measurement --------------------------------------------------
class ScriptedRunner:
    """Stands in for a WindowRunner: each run's window is proven idle or not, as scripted."""

    def __init__(self, proven: list[bool]) -> None:
        self.proven = proven
        self.progress = NullReporter()
        self.stop = GracefulStop()
        self.runs = 0

    def run(self, plan: WindowPlan) -> WindowOutcome:
        ok = self.proven[self.runs]
        self.runs += 1
        summary = window(plan.rate_rps, 100.0, ttft_p99=200.0, tpot_p99=20.0, slo_pass=True)
        if not ok:
            mark_cut(summary, "not proven idle: 3 running", tag=NOT_IDLE_TAG)
        return WindowOutcome(summary=summary, metrics=None, power=None)


def measurement(runner: ScriptedRunner) -> Measurement:
    spec = seed_spec()
    record = RunRecord(
        tool=ToolInfo(version="0"),
        label="x",
        role="baseline",
        mode="quick",
        spec=spec,
        fingerprint=fingerprint(spec),
        command="",
        started=dt.datetime.now(dt.UTC),
    )
    setup = SearchSetup.for_run(spec, fast=False)
    return Measurement(
        record,
        runner,
        setup,
        checkpoint=lambda: None,
        check_engine=lambda: None,  # type: ignore[arg-type]
    )


def test_a_window_not_proven_idle_is_measured_again_and_the_retry_counts() -> None:
    m = measurement(ScriptedRunner([False, True]))
    outcome = m.probe(5.0, "grow")
    windows = [p.window for p in m.record.probes]
    assert len(windows) == 2 and outcome.passed
    assert retried(windows[0]) and not windows[0].valid
    assert windows[0].failure_reason == "not proven idle, measured again (retry 1)"
    assert not retried(windows[1]) and windows[1].slo_pass
    assert outcome.warmup_s == 2 * m.spec.measurement.warmup_s  # both windows' GPU time


def test_the_tries_are_bounded_and_the_last_stays_invalid_without_a_pass() -> None:
    m = measurement(ScriptedRunner([False] * (IDLE_RETRIES + 2)))
    outcome = m.probe(5.0, "grow")
    windows = [p.window for p in m.record.probes]
    assert len(windows) == IDLE_RETRIES + 1
    assert all(retried(w) for w in windows[:-1])
    last = windows[-1]
    assert not retried(last) and not last.valid and last.failure_reason == NOT_IDLE_TAG
    assert not outcome.passed
