"""Worker processes sharing one schedule: real processes, the simulated engine and real
HTTP servers on 127.0.0.1, real SIGKILL.

One pool of two workers is started for the module (a spawned worker takes a second or more
to import), and every test leaves it ready for the next window.
"""

from __future__ import annotations

import itertools
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from loadgen_helpers import INSTANT_SERVER, serve_script

from tokenwatt.analysis.window.arrival_fit import BUNCHED_PREFIX, KS_ALPHA
from tokenwatt.analysis.window.latency import e2e_ms, tpot_ms, ttft_ms
from tokenwatt.collect.load.arrivals import window_schedule
from tokenwatt.collect.load.loadgen import LoadConfig, WindowResult, run_window
from tokenwatt.collect.load.pool.pool_window import WORKER_DIED
from tokenwatt.collect.load.pool.workers import WorkerPool
from tokenwatt.collect.load.window_plan import WindowHooks, WindowPlan
from tokenwatt.collect.workload.workload import RequestSpec, chat_mix_v1
from tokenwatt.records.run.request import RequestResult
from tokenwatt.records.run.window import WindowSummary
from tokenwatt.records.spec.spec import SloSpec
from tokenwatt.records.spec.spec_load import LengthDist

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "sim"))
from sim_process import SimProcess, start_sim

SLO = SloSpec(ttft_p99_ms=5000, tpot_p99_ms=5000)
WAIT_S = 60.0
"""Upper bound on any wait (s): about the machine, not the tool."""

STALLING_SERVER = """
import asyncio, sys
from aiohttp import web
async def handle(request):
    await request.read()
    await asyncio.sleep(60)
    return web.Response(body=b"data: [DONE]\\n\\n", content_type="text/event-stream")
app = web.Application()
app.router.add_post("/v1/completions", handle)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
"""


@pytest.fixture(scope="module")
def pool() -> Iterator[WorkerPool]:
    with WorkerPool(2) as workers:
        yield workers


@pytest.fixture(scope="module")
def sim() -> Iterator[SimProcess]:
    proc = start_sim("--time-scale", "0.2")
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def stalling() -> Iterator[str]:
    proc, endpoint = serve_script(STALLING_SERVER)
    try:
        yield endpoint
    finally:
        proc.kill()  # its handlers sleep for a minute: a graceful stop would wait for them
        proc.wait(timeout=10)


def config(endpoint: str, **kw: object) -> LoadConfig:
    settings: dict[str, object] = {"max_concurrency": 64, "request_timeout_s": 20.0}
    settings.update(kw)
    return LoadConfig(endpoint=endpoint, model="tokenwatt-sim", slo=SLO, **settings)  # type: ignore[arg-type]


def prompts(seed: int = 9) -> Iterator[RequestSpec]:
    """Short chat-mix requests: every one a different prompt and length."""
    return chat_mix_v1(seed, 1000, LengthDist(median=12, p90=40), LengthDist(median=6, p90=16))


class Recorded(Iterator[RequestSpec]):
    """The requests a window drew, in order."""

    def __init__(self, source: Iterator[RequestSpec]) -> None:
        self.source = source
        self.drawn: list[RequestSpec] = []

    def __next__(self) -> RequestSpec:
        spec = next(self.source)
        self.drawn.append(spec)
        return spec


def offsets(result: WindowResult, warmup_s: float) -> np.ndarray:
    t0 = result.window_start_s - warmup_s
    return np.array([r.scheduled_s - t0 for r in result.requests])


def test_merged_window_equals_one_process_on_the_same_schedule(
    pool: WorkerPool, sim: SimProcess
) -> None:
    import asyncio

    rate, warmup, duration, seed = 40.0, 0.3, 2.0, 5
    plan = WindowPlan(
        rate_rps=rate, duration_s=duration, warmup_s=warmup, seed=seed, keep_load=False
    )
    one_drawn, two_drawn = Recorded(prompts()), Recorded(prompts())
    one = asyncio.run(run_window(config(sim.endpoint), plan, one_drawn))
    two = pool.run_window(config(sim.endpoint), plan, two_drawn)
    schedule = window_schedule(rate, warmup_s=warmup, duration_s=duration, tail_s=0.0, seed=seed)
    # The same requests at the same scheduled offsets, in the same order.
    assert len(one.requests) == len(two.requests) == len(schedule) > 60
    np.testing.assert_allclose(offsets(one, warmup), schedule, atol=1e-6)
    np.testing.assert_allclose(offsets(two, warmup), schedule, atol=1e-6)
    assert [s.prompt for s in one_drawn.drawn] == [s.prompt for s in two_drawn.drawn]
    asked = [(r.prompt_ids_sent, r.max_tokens, r.in_window) for r in two.requests]
    assert asked == [(r.prompt_ids_sent, r.max_tokens, r.in_window) for r in one.requests]
    assert [r.prompt_ids_sent for r in two.requests] == [len(s.prompt) for s in two_drawn.drawn]
    s1, s2 = one.summary, two.summary
    in_window = int(np.count_nonzero(schedule >= warmup))
    assert s1.requests == s2.requests == in_window
    assert (s1.workers, s2.workers, s1.worker_lag) == (1, 2, [])
    assert s2.errors == 0 and s2.completed == in_window and s2.valid
    assert s2.input_tokens == s1.input_tokens and s2.output_tokens == s1.output_tokens
    # Round-robin: arrival i went to worker i mod 2.
    window_index = [i for i, o in enumerate(schedule) if o >= warmup]
    assert [w.requests for w in s2.worker_lag] == [
        sum(1 for i in window_index if i % 2 == k) for k in (0, 1)
    ]
    _percentiles_are_of_the_union(s2, [r for r in two.requests if r.in_window])


def _percentiles_are_of_the_union(summary: WindowSummary, union: list[RequestResult]) -> None:
    """The merged p50/p90/p99 are numpy's linear percentiles of every worker's requests."""
    for field, values in (
        ("ttft_ms", [ttft_ms(r) for r in union]),
        ("e2e_ms", [e2e_ms(r) for r in union]),
        ("tpot_ms", [t for t in (tpot_ms(r) for r in union) if t is not None]),
    ):
        got = getattr(summary, field)
        for q in (50, 90, 99):
            expected = round(float(np.percentile(values, q)), 4)
            assert getattr(got, f"p{q}") == pytest.approx(expected, abs=1e-4), (field, q)
    lags = [max(0.0, ((r.dispatched_s or r.sent_s) - r.scheduled_s) * 1e3) for r in union]
    assert summary.send_lag_p99_ms == pytest.approx(round(float(np.percentile(lags, 99)), 4))


def killed_mid_window(
    pool: Any, endpoint: str, kill: Callable[[], None]
) -> tuple[WindowSummary, WindowResult]:
    """Run a 3 s window at 40 req/s with ``kill`` called 1 s in (it kills worker 1), check
    the window is a valid record flagged ``worker_died`` whose lost requests are cancelled,
    not errors, then run a second window; returns (the first's summary, the second)."""
    timer = threading.Timer(1.0, kill)
    timer.start()
    started = time.monotonic()
    try:
        result = pool.run_window(
            config(endpoint),
            WindowPlan(rate_rps=40.0, duration_s=3.0, warmup_s=0.0, seed=2),
            prompts(),
        )
    finally:
        timer.cancel()
    assert time.monotonic() - started < WAIT_S
    s = WindowSummary.model_validate_json(result.summary.model_dump_json())  # a valid record
    assert not s.valid and not s.slo_pass
    assert s.failure_reason is not None and WORKER_DIED in s.failure_reason.split(",")
    assert s.invalid_reason is not None and "worker 1 died mid-window" in s.invalid_reason
    assert [w.died for w in s.worker_lag] == [False, True]
    # Half the sends are missing from the gaps after the death: their K-S test fails, and
    # its "more workers" advice, which says nothing here, is left out.
    assert s.send_gaps_ks_p is not None and s.send_gaps_ks_p < KS_ALPHA
    assert not any(w.startswith(BUNCHED_PREFIX) for w in s.warnings), s.warnings
    # Worker 0's requests all finished; worker 1's unreported ones are lost, not errors.
    assert s.errors == 0 and s.cancelled_by_client > 0
    lost = [r for r in result.requests if r.error_class == "WorkerDied"]
    assert lost and all(r.error == "cancelled" for r in lost)
    # The next window gets a fresh worker 1 and is whole again.
    again = pool.run_window(
        config(endpoint),
        WindowPlan(rate_rps=40.0, duration_s=1.0, warmup_s=0.0, seed=4),
        prompts(3),
    )
    assert again.summary.valid and again.summary.errors == 0
    assert not any(w.died for w in again.summary.worker_lag)
    return s, again


def test_a_worker_killed_mid_window_leaves_a_valid_flagged_window(
    pool: WorkerPool, sim: SimProcess
) -> None:
    victim = pool.pids()[1]
    killed_mid_window(pool, sim.endpoint, lambda: os.kill(victim, signal.SIGKILL))
    assert victim not in pool.pids() and len(pool.pids()) == 2


def test_early_stop_ends_every_worker_promptly(pool: WorkerPool, stalling: str) -> None:
    """Requests stall at the server; the rule stops the window after 1 s of its 30 s."""
    started = time.monotonic()
    result = pool.run_window(
        config(stalling),
        WindowPlan(rate_rps=30.0, duration_s=30.0, warmup_s=0.0, seed=6),
        prompts(),
        WindowHooks(stop_early=lambda _reqs, elapsed: elapsed > 1.0, check_interval_s=0.1),
    )
    took = time.monotonic() - started
    assert took < 15.0, took  # not the 30 s window (a busy machine's margin)
    s = result.summary
    assert s.stopped_early and s.failure_reason == "stopped_early"
    assert 1.0 <= s.duration_s < 10.0
    # Every request was in flight at the stop: cancelled by the client in both workers.
    assert s.cancelled_by_client == s.requests > 20  # about 30 arrived in the first second
    assert all(r.error == "cancelled" for r in result.requests)
    assert all(w.requests == 0 and not w.died for w in s.worker_lag)


def test_an_interrupt_ends_every_worker_promptly(pool: WorkerPool, stalling: str) -> None:
    asked_at = time.monotonic() + 1.0
    result = pool.run_window(
        config(stalling),
        WindowPlan(rate_rps=30.0, duration_s=30.0, warmup_s=5.0, seed=7),
        prompts(),
        WindowHooks(interrupt=lambda: time.monotonic() > asked_at, check_interval_s=0.1),
    )
    assert time.monotonic() - asked_at < 10.0
    assert result.summary.stopped_early and result.summary.requests == 0  # still warming up
    assert result.requests and all(r.error == "cancelled" for r in result.requests)
    assert not any(r.in_window for r in result.requests)


def test_a_failing_callback_ends_the_window_and_is_raised(pool: WorkerPool, stalling: str) -> None:
    def broken(_reqs: object, _elapsed: float) -> bool:
        raise RuntimeError("a bug in the rule")

    started = time.monotonic()
    with pytest.raises(RuntimeError, match="a bug in the rule"):
        pool.run_window(
            config(stalling),
            WindowPlan(rate_rps=30.0, duration_s=30.0, warmup_s=0.0, seed=8),
            prompts(),
            WindowHooks(stop_early=broken, check_interval_s=0.1),
        )
    assert time.monotonic() - started < 15.0
    assert len(pool.pids()) == 2


def test_a_fixed_workload_runs_out_and_the_window_still_ends(
    pool: WorkerPool, sim: SimProcess
) -> None:
    three = itertools.islice(prompts(), 3)
    result = pool.run_window(
        config(sim.endpoint), WindowPlan(rate_rps=40.0, duration_s=1.0, warmup_s=0.0, seed=3), three
    )
    assert len(result.requests) == 3 and result.summary.requests == 3
    assert result.summary.completed == 3


@pytest.mark.stress
def test_wire_arrivals_of_two_workers_are_exponential_at_200_per_second(pool: WorkerPool) -> None:
    """The union of two workers' sends passes a K-S test against the exponential (p > 0.01).

    1,000 requests at 200 req/s against an instant server in its own process. Marked
    ``stress`` like the one-process test in test_window_run.py: on a 2-core machine the server,
    the parent and two workers are four processes on two cores, so whether a send is on
    time depends on what else runs; ``benchmarks/wire_arrivals.py`` prints the figures.
    """
    from scipy import stats

    proc, endpoint = serve_script(INSTANT_SERVER)
    try:
        rate, seconds = 200.0, 5.0
        result = pool.run_window(
            config(endpoint),
            WindowPlan(rate_rps=rate, duration_s=seconds, warmup_s=0.0, seed=21, keep_load=False),
            itertools.repeat(RequestSpec(prompt=[1, 2], max_tokens=1)),
        )
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    sent = np.sort([r.sent_s for r in result.requests])
    assert len(sent) == round(rate * seconds) == 1000  # a count-conditioned window
    lag_p99_ms = result.summary.send_lag_p99_ms
    if lag_p99_ms > 2.0:
        pytest.skip(f"client starved of CPU: send lag p99 {lag_p99_ms:.1f} ms")
    assert stats.kstest(np.diff(sent), stats.expon(scale=1 / rate).cdf).pvalue > 0.01
    assert result.summary.errors == 0


def test_the_workers_stop_at_the_tail_cap_and_the_parent_judges_what_is_open(
    pool: WorkerPool, stalling: str
) -> None:
    """The server never answers: with a 30 s timeout the tail would go on for 30 s; the
    cap (0.2 + 0.1 × 3 + 1 s) ends it, and every in-window request open there is a TTFT
    miss (no first token)."""
    cfg = LoadConfig(
        endpoint=stalling,
        model="tokenwatt-sim",
        slo=SloSpec(ttft_p99_ms=200, tpot_p99_ms=100),
        max_concurrency=64,
        request_timeout_s=30.0,
    )
    plan = WindowPlan(rate_rps=20.0, duration_s=0.5, warmup_s=0.0, seed=5)
    spec = RequestSpec(prompt=[1, 2, 3], max_tokens=4)
    result = pool.run_window(cfg, plan, itertools.repeat(spec))
    s = result.summary
    assert s.tail_cap_s == pytest.approx(1.5)
    assert s.tail_s is not None and s.tail_cap_s - 0.05 <= s.tail_s <= s.tail_cap_s + 1.5
    assert s.requests > 0 and s.cancelled_at_cap == s.requests and s.censored == 0
    assert s.error_kinds == {"timeout": s.requests} and not s.slo_pass
    tail = [r for r in result.requests if not r.in_window and r.scheduled_s >= result.window_end_s]
    assert s.tail_arrivals == len(tail) > 0
    assert {r.error for r in tail} == {"cancelled"}
