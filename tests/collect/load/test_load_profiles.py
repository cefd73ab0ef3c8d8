"""Load profiles over real HTTP: constant rate, the closed loop, the search over clients.

Against the scripted streaming server of ``conftest.py`` on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator, Sequence

import numpy as np
import pytest
from aiohttp import web
from streaming_server import ScriptedServer, stream, tokens_stream

from tokenwatt.collect.load.arrivals import constant_schedule, load_schedule, window_request_count
from tokenwatt.collect.load.closedloop import run_closed_window
from tokenwatt.collect.load.loadgen import LoadConfig, run_window
from tokenwatt.collect.load.window_plan import WindowPlan
from tokenwatt.collect.measure.load_search import concurrency_search, next_concurrency
from tokenwatt.collect.measure.search import ProbeOutcome
from tokenwatt.collect.workload.workload import RequestSpec
from tokenwatt.records.run.request import RequestResult
from tokenwatt.records.spec.spec import SloSpec
from tokenwatt.records.spec.spec_load import SweepSpec

SLO = SloSpec(ttft_p99_ms=2000, tpot_p99_ms=1000)


def config(base: str, **kw: object) -> LoadConfig:
    settings: dict[str, object] = {"max_concurrency": 16, "request_timeout_s": 5.0, "slo": SLO}
    settings.update(kw)
    return LoadConfig(endpoint=base, model="tiny", **settings)  # type: ignore[arg-type]


def same() -> Iterator[RequestSpec]:
    return itertools.repeat(RequestSpec(prompt=[11, 12, 13], max_tokens=2))


def delayed(server: ScriptedServer, seconds: float) -> None:
    """Every response waits ``seconds`` before its first token."""

    async def handler(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(seconds)
        return await stream(request, tokens_stream(2))

    server.handler = handler


def test_constant_schedule_is_k_over_rate() -> None:
    np.testing.assert_array_equal(constant_schedule(4.0, 2.0), np.arange(8) / 4.0)
    # Warm-up 1 s, window 2 s, no tail: offsets 0, 0.25, ..., 2.75; the window holds k = 4..11.
    offsets = load_schedule(
        4.0, warmup_s=1.0, duration_s=2.0, tail_s=0.0, seed=9, profile="constant"
    )
    np.testing.assert_array_equal(offsets, np.arange(12) / 4.0)
    assert window_request_count(4.0, 1.0, 2.0, 9, profile="constant") == 8
    with pytest.raises(ValueError, match="closed loop"):
        load_schedule(4.0, warmup_s=0, duration_s=1, tail_s=0, seed=0, profile="concurrency")


async def test_constant_rate_sends_are_evenly_spaced(server: ScriptedServer) -> None:
    delayed(server, 0.0)
    cfg = config(server.base, profile="constant")
    result = await run_window(
        cfg, WindowPlan(rate_rps=20.0, duration_s=0.5, warmup_s=0.1, seed=3), same()
    )
    first = result.requests[0].scheduled_s
    offsets = np.array([r.scheduled_s - first for r in result.requests])
    # Scheduled offsets are exactly k / R (up to the float addition of t0).
    np.testing.assert_allclose(offsets, np.arange(len(offsets)) / 20.0, rtol=0, atol=1e-9)
    s = result.summary
    assert s.requests == 10  # k/20 in [0.1, 0.6): k = 2..11
    assert s.profile == "constant" and s.arrivals is None and s.concurrency is None


def in_flight_profile(requests: Sequence[RequestResult]) -> list[tuple[float, int]]:
    """(time, requests in flight from then on), from each request's [sent, finished)."""
    events = sorted(
        [(r.sent_s, 1) for r in requests] + [(r.finished_s or r.sent_s, -1) for r in requests],
        key=lambda e: (e[0], e[1]),  # an end before a start at the same instant
    )
    level, out = 0, []
    for t, step in events:
        level += step
        out.append((t, level))
    return out


def mean_level(profile: list[tuple[float, int]], start: float, end: float) -> float:
    """Time-weighted mean of the in-flight count over [start, end)."""
    total = 0.0
    for (t, level), (t_next, _) in itertools.pairwise(profile):
        lo, hi = max(t, start), min(t_next, end)
        if hi > lo:
            total += level * (hi - lo)
    return total / (end - start)


async def test_closed_loop_holds_exactly_c_in_flight(server: ScriptedServer) -> None:
    delayed(server, 0.04)
    cfg = config(server.base, profile="concurrency")
    result = await run_closed_window(
        cfg, WindowPlan(rate_rps=1.0, concurrency=3, duration_s=0.8, warmup_s=0.2, seed=0), same()
    )
    profile = in_flight_profile(result.requests)
    assert max(level for _, level in profile) == 3
    assert server.max_in_flight == 3
    # Kept at C throughout the window, short of the microseconds between a response's end
    # and the next send (bounded loosely: the machine is shared).
    mean = mean_level(profile, result.window_start_s, result.window_end_s)
    assert 2.9 <= mean <= 3.0
    s = result.summary
    assert s.profile == "concurrency" and s.concurrency == 3
    assert s.send_lag_p99_ms is None and s.client_bound is False and s.arrivals is None
    in_window = [r for r in result.requests if r.in_window]
    assert s.requests == len(in_window) > 0
    assert s.rate_rps == pytest.approx(len(in_window) / 0.8)
    # Every in-window request was sent inside the window; none is lost in the drain.
    assert all(result.window_start_s <= r.sent_s < result.window_end_s for r in in_window)
    assert s.completed == s.requests and s.errors == 0


def test_concurrency_search_grows_then_bisects_whole_numbers() -> None:
    tried: list[float] = []

    def probe(clients: float, _phase: str) -> ProbeOutcome:
        tried.append(clients)
        return ProbeOutcome(passed=clients <= 5)

    sweep = SweepSpec(
        start_rps=1, growth=2, max_rps=10, bisect_steps=4, backoff=0.8, max_backoffs=1
    )
    trace = concurrency_search(probe, sweep, ceiling=64)
    # Grow 1, 2, 4, 8 (miss); bisect (4, 8) -> 6 (miss), (4, 6) -> 5 (pass); 5 and 6 adjacent.
    assert tried == [1.0, 2.0, 4.0, 8.0, 6.0, 5.0]
    assert (trace.last_pass_rps, trace.first_miss_rps) == (5.0, 6.0)
    assert [s.phase for s in trace.steps] == ["grow"] * 4 + ["bisect"] * 2
    assert next_concurrency(1, 1.1, 64) == 2 and next_concurrency(40, 2, 64) == 64


async def test_search_over_clients_finds_the_scripted_boundary(server: ScriptedServer) -> None:
    """The server delays each first token by 40 ms per request it holds (itself included):
    C closed-loop clients see TTFT ≈ 40 ms × C, so with a 220 ms limit 5 clients (200 ms)
    meet it and 6 (240 ms) miss it."""

    async def handler(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(0.04 * server.in_flight)
        return await stream(request, tokens_stream(2))

    server.handler = handler
    cfg = config(server.base, profile="concurrency", slo=SloSpec(ttft_p99_ms=220, tpot_p99_ms=1000))
    loop = asyncio.get_running_loop()

    def probe(clients: float, _phase: str) -> ProbeOutcome:
        window = asyncio.run_coroutine_threadsafe(
            run_closed_window(
                cfg,
                WindowPlan(
                    rate_rps=1.0, concurrency=int(clients), duration_s=1.0, warmup_s=0.3, seed=0
                ),
                same(),
            ),
            loop,
        ).result()
        return ProbeOutcome(passed=window.summary.slo_pass)

    sweep = SweepSpec(
        start_rps=1, growth=2, max_rps=10, bisect_steps=4, backoff=0.8, max_backoffs=1
    )
    trace = await asyncio.to_thread(concurrency_search, probe, sweep, 16)
    assert (trace.last_pass_rps, trace.first_miss_rps) == (5.0, 6.0)
    assert [s.rate_rps for s in trace.steps] == [1.0, 2.0, 4.0, 8.0, 6.0, 5.0]
