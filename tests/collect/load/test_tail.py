"""The window's tail: bounded by the cap, open requests cancelled and judged at it.

Real HTTP on 127.0.0.1 against a scripted server that stalls: some requests get their first
token and then nothing more (still streaming at the cap: censored), the others get nothing
(no first token at the cap: a TTFT miss, ``timeout``).
"""

from __future__ import annotations

import asyncio
import itertools

import pytest
from aiohttp import web
from streaming_server import ScriptedServer, chunk

from tokenwatt.analysis import classify_failure
from tokenwatt.collect.load.closedloop import run_closed_window
from tokenwatt.collect.load.loadgen import CENSORED, LoadConfig, run_window, window_tail_cap
from tokenwatt.collect.load.window_plan import TAIL_GRACE_S, WindowPlan, tail_cap_s
from tokenwatt.collect.workload.workload import RequestSpec
from tokenwatt.records import RequestResult
from tokenwatt.records.spec.spec import SloSpec

SLO = SloSpec(ttft_p99_ms=200, tpot_p99_ms=100)
MARGIN_S = 1.5
"""How far past the cap a busy machine may record the tail's end (s): the cap is a deadline
of the event loop's wait, so only the loop's own lateness adds to it."""


def test_the_cap_is_the_latest_a_request_can_still_meet_its_limits() -> None:
    # 200 ms to the first token, then 99 tokens at 100 ms each: 10.1 s, plus the grace.
    assert tail_cap_s(600.0, SLO, 100) == pytest.approx(0.2 + 0.1 * 99 + TAIL_GRACE_S)
    # One output token: only the TTFT limit applies.
    assert tail_cap_s(600.0, SLO, 1) == pytest.approx(0.2 + TAIL_GRACE_S)
    # Never past the request timeout: every request has ended by itself by then.
    assert tail_cap_s(5.0, SLO, 100) == pytest.approx(5.0 + TAIL_GRACE_S)
    assert tail_cap_s(5.0, SLO, 100, grace_s=0.0) == 5.0


def test_without_a_tpot_limit_or_a_known_length_only_the_timeout_bounds_the_tail() -> None:
    assert tail_cap_s(30.0, None, 100) == pytest.approx(30.0 + TAIL_GRACE_S)
    assert tail_cap_s(30.0, SLO, None) == pytest.approx(30.0 + TAIL_GRACE_S)
    with pytest.raises(ValueError, match="request_timeout_s"):
        tail_cap_s(0.0, SLO, 4)


def test_the_window_cap_takes_the_longest_request_asked_for() -> None:
    cfg = LoadConfig(endpoint="http://127.0.0.1:1/v1", model="m", slo=SLO, request_timeout_s=60)
    asked = [RequestResult(scheduled_s=0.0, max_tokens=n) for n in (4, 31, 2)]
    assert window_tail_cap(cfg, asked) == pytest.approx(0.2 + 0.1 * 30 + TAIL_GRACE_S)
    unknown = [*asked, RequestResult(scheduled_s=0.0, max_tokens=None)]
    assert window_tail_cap(cfg, unknown) == pytest.approx(60 + TAIL_GRACE_S)


def stall_half(server: ScriptedServer) -> list[bool]:
    """Every other request gets one text chunk, then nothing; the rest get nothing at all.
    The list records, per request, whether the server saw its connection closed."""
    closed: list[bool] = []
    count = itertools.count()

    async def handler(request: web.Request) -> web.StreamResponse:
        index = next(count)
        closed.append(False)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        if index % 2 == 0:
            await resp.write(chunk(" a"))
        # No text until the client goes away: SSE comments (which carry no token) every
        # 20 ms, until writing one fails or aiohttp cancels the handler, both because the
        # client closed the connection.
        try:
            while True:
                await asyncio.sleep(0.02)
                await resp.write(b": still here\n\n")
        except (ConnectionError, RuntimeError):
            pass
        finally:
            closed[index] = True
        return resp

    server.handler = handler
    return closed


async def all_closed(closed: list[bool]) -> bool:
    """True once the server has seen every connection close (bounded wait: 10 s)."""
    for _ in range(500):
        if closed and all(closed):
            return True
        await asyncio.sleep(0.02)
    return False


def config(base: str) -> LoadConfig:
    # A 30 s timeout that would keep the tail going for 30 s; the cap is 0.2 + 0.1 × 3 + 1.
    return LoadConfig(
        endpoint=base, model="tiny", slo=SLO, max_concurrency=64, request_timeout_s=30.0
    )


def same() -> itertools.repeat[RequestSpec]:
    return itertools.repeat(RequestSpec(prompt=[1, 2, 3], max_tokens=4))


def check_cut_at_the_cap(requests: list[RequestResult], summary: object) -> None:
    from tokenwatt.records import WindowSummary

    assert isinstance(summary, WindowSummary)
    window = [r for r in requests if r.in_window]
    assert window and summary.requests == len(window)
    assert summary.tail_cap_s == pytest.approx(0.2 + 0.1 * 3 + TAIL_GRACE_S)
    assert summary.tail_s is not None and summary.tail_s <= summary.tail_cap_s + MARGIN_S
    # Nothing finished, so the tail ran to its cap (a lower bound: the wait cannot end early).
    assert summary.tail_s >= summary.tail_cap_s - 0.05
    streaming = [r for r in window if r.first_token_s is not None]
    silent = [r for r in window if r.first_token_s is None]
    assert {r.error for r in streaming} <= {CENSORED} and {r.error for r in silent} <= {"timeout"}
    assert summary.cancelled_at_cap == len(window)
    assert summary.censored == len(streaming) == summary.error_kinds.get(CENSORED, 0)
    assert summary.error_kinds.get("timeout", 0) == len(silent)
    assert summary.cancelled_by_client == 0  # judged, not left as our own cancellations
    assert summary.ttft_ms.p99 == "inf" and not summary.slo_pass
    # Too slow, not broken: the failure mode is a latency one, not "errors".
    assert classify_failure(summary, None, slo=SLO) != "errors"


async def test_an_open_loop_window_stops_at_the_cap_and_judges_what_is_open(
    server: ScriptedServer,
) -> None:
    closed = stall_half(server)
    plan = WindowPlan(rate_rps=20.0, duration_s=0.3, warmup_s=0.0, seed=4)
    result = await run_window(config(server.base), plan, same())
    s = result.summary
    check_cut_at_the_cap(result.requests, s)
    assert any(r.first_token_s is not None for r in result.requests if r.in_window)
    # The load went on in the tail and stopped at the cap: its requests were sent, then
    # cancelled and not counted.
    tail = [r for r in result.requests if not r.in_window and r.scheduled_s >= result.window_end_s]
    assert s.tail_arrivals == len(tail) > 0
    assert {r.error for r in tail} == {"cancelled"}
    assert max(r.scheduled_s for r in tail) <= result.window_end_s + s.tail_cap_s  # type: ignore[operator]
    # Every connection was closed: the server saw each request aborted.
    assert await all_closed(closed), (sum(closed), len(closed), len(result.requests))
    assert len(closed) == len(result.requests)


async def test_a_closed_loop_window_stops_at_the_cap(server: ScriptedServer) -> None:
    closed = stall_half(server)
    plan = WindowPlan(rate_rps=1.0, concurrency=4, duration_s=0.3, warmup_s=0.0, seed=0)
    result = await run_closed_window(config(server.base), plan, same())
    check_cut_at_the_cap(result.requests, result.summary)
    assert result.summary.requests == 4  # each client's one request never ended
    assert await all_closed(closed)
