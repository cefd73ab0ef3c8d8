"""The load generator against a scripted streaming server over real HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import itertools
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import numpy as np
import pytest
from aiohttp import web
from scipy import stats
from streaming_server import DONE, ScriptedServer, chunk, stream, tokens_stream, usage

from tokenwatt.analysis.latency import missed_beyond_doubt
from tokenwatt.collect.load.arrivals import poisson_schedule, window_request_count
from tokenwatt.collect.load.loadgen import LoadConfig, WindowProgress, WindowResult, run_window
from tokenwatt.collect.load.window_plan import WindowHooks, WindowPlan
from tokenwatt.collect.workload.workload import RequestSpec
from tokenwatt.errors import InputError
from tokenwatt.records.spec import SloSpec

SLO = SloSpec(ttft_p99_ms=2000, tpot_p99_ms=1000)


def config(base: str, **kw: object) -> LoadConfig:
    settings: dict[str, object] = {"max_concurrency": 16, "request_timeout_s": 5.0}
    settings.update(kw)
    return LoadConfig(endpoint=base, model="tiny", slo=SLO, **settings)  # type: ignore[arg-type]


def same(prompt: list[int] | str = [11, 12, 13], max_tokens: int = 4) -> Iterator[RequestSpec]:  # noqa: B006
    return itertools.repeat(RequestSpec(prompt=prompt, max_tokens=max_tokens))


async def one_window(
    cfg: LoadConfig, *, rate: float = 40.0, duration: float = 0.25
) -> WindowResult:
    return await run_window(
        cfg, WindowPlan(rate_rps=rate, duration_s=duration, warmup_s=0.0, seed=3), same()
    )


def script(server: ScriptedServer, pieces: list[bytes]) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return await stream(request, pieces)

    server.handler = handler


async def test_streams_usage_tokens_and_timings(server: ScriptedServer) -> None:
    script(server, tokens_stream(4))
    started = time.perf_counter()
    result = await one_window(config(server.base, request_timeout_s=30.0))
    # The drain ends when the last in-window request does (0.3 s on a quiet machine), not at
    # the 30 s request timeout; 10 s leaves room for a busy machine.
    assert time.perf_counter() - started < 10
    window = [r for r in result.requests if r.in_window]
    assert window and all(r.ok for r in window)
    r = window[0]
    assert (r.output_tokens, r.prompt_tokens, r.usage_missing, r.status) == (4, 3, False, 200)
    assert len(r.chunk_s) == 4
    assert r.scheduled_s <= r.dispatched_s <= r.sent_s <= r.first_token_s <= r.last_token_s  # type: ignore[operator]
    s = result.summary
    assert s.requests == s.completed == len(window) and s.errors == 0
    assert s.output_tokens == 4 * len(window)
    assert s.goodput_tok_s == pytest.approx(4 * len(window) / 0.25)
    assert s.slo_pass and s.failure_reason is None


async def test_request_body_follows_the_openai_contract(server: ScriptedServer) -> None:
    script(server, tokens_stream(2))
    cfg = config(server.base, api_key="sk-test", extra_body={"temperature": 0})
    await one_window(cfg)
    body = server.bodies[0]
    assert body == {
        "model": "tiny",
        "prompt": [11, 12, 13],
        "max_tokens": 4,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": True,
        "temperature": 0,
    }
    assert server.headers[0]["Authorization"] == "Bearer sk-test"
    assert server.paths[0] == "/v1/completions"
    assert "sk-test" not in repr(cfg)


async def test_chat_api_streams_deltas(server: ScriptedServer) -> None:
    script(server, tokens_stream(3, chat=True))
    cfg = config(server.base, api="chat", ignore_eos=False)
    result = await run_window(
        cfg, WindowPlan(rate_rps=40, duration_s=0.2, warmup_s=0, seed=1), same("hello there")
    )
    assert server.paths[0] == "/v1/chat/completions"
    assert server.bodies[0]["messages"] == [{"role": "user", "content": "hello there"}]
    assert "ignore_eos" not in server.bodies[0]
    assert all(r.ok and r.output_tokens == 3 for r in result.requests)


async def test_chat_api_refuses_token_ids(server: ScriptedServer) -> None:
    with pytest.raises(InputError, match="text prompts"):
        await one_window(config(server.base, api="chat"))


FRAMINGS = {
    "no space after data:": [b'data:{"choices":[{"text":"a"}]}\n\n'] * 2,
    "crlf": [b'data: {"choices":[{"text":"a"}]}\r\n\r\n'] * 2,
    "cr only": [b'data: {"choices":[{"text":"a"}]}\r\r'] * 2,
    "split mid-line and mid-crlf": [
        b"da",
        b'ta: {"choices":[{"te',
        b'xt":"a"}]}\r',
        b"\n\r",
        b'\ndata: {"choices":[{"text":"a"}]}\r\n\r\n',
    ],
    "several events in one write": [
        b'data: {"choices":[{"text":"a"}]}\n\ndata: {"choices":[{"text":"b"}]}\n\n'
    ],
    "comments and named fields": [
        b': keep-alive\n\nid: 7\ndata: {"choices":[{"text":"a"}]}\n\n: ping\n',
        b'\ndata: {"choices":[{"text":"a"}]}\n\n',
    ],
    "multi-line data": [
        b'data: {"choices":\ndata: [{"text":"a"}]}\n\n',
        b'data: {"choices":[{"text":"a"}]}\n\n',
    ],
    "utf-8 split mid-character": [
        b'data: {"choices":[{"text":"\xc3',
        b'\xa9"}]}\n\n',
        b'data: {"choices":[{"text":"\xe2\x82',
        b'\xac"}]}\n\n',
    ],
}


@pytest.mark.parametrize("name", sorted(FRAMINGS))
async def test_sse_framing_over_http(server: ScriptedServer, name: str) -> None:
    pieces = [*FRAMINGS[name], chunk(usage=usage(3, 2)), DONE]
    script(server, pieces)
    result = await one_window(config(server.base), rate=20, duration=0.2)
    assert result.requests
    for r in result.requests:
        assert r.error is None, name
        assert len(r.chunk_s) == 2 and r.output_tokens == 2


async def test_a_one_megabyte_event_arrives_whole(server: ScriptedServer) -> None:
    big = "x" * 1_000_000
    event = b'data: {"choices":[{"text":"' + big.encode() + b'"}]}\n\n'
    script(
        server,
        [event[i : i + 65536] for i in range(0, len(event), 65536)]
        + [chunk(usage=usage(3, 1)), DONE],
    )
    result = await run_window(
        config(server.base), WindowPlan(rate_rps=5, duration_s=0.4, warmup_s=0, seed=2), same()
    )
    assert result.requests and all(r.ok and len(r.chunk_s) == 1 for r in result.requests)


async def test_http_503_is_an_error_kind(server: ScriptedServer) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(status=503, text="overloaded")

    server.handler = handler
    result = await one_window(config(server.base))
    s = result.summary
    assert s.requests > 0 and s.errors == s.requests and s.error_kinds == {"http_503": s.requests}
    assert all(r.status == 503 for r in result.requests)
    assert s.ttft_ms.p99 == "inf" and not s.slo_pass and s.failure_reason == "ttft,tpot,errors"


async def test_connection_refused_is_connect() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = await one_window(config(f"http://127.0.0.1:{port}/v1"))
    assert result.requests and {r.error for r in result.requests} == {"connect"}
    assert all(r.status is None for r in result.requests)


async def test_a_stalled_stream_times_out(server: ScriptedServer) -> None:
    never = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(chunk(" first"))
        await never.wait()
        return resp

    server.handler = handler
    started = time.perf_counter()
    # 1 s: the first chunk must come before the timeout even on a busy machine (0.3 s did
    # not); the stream then stalls forever, so only the timeout can end the window.
    result = await run_window(
        config(server.base, request_timeout_s=1.0),
        WindowPlan(rate_rps=20, duration_s=0.3, warmup_s=0, seed=4),
        same(),
    )
    assert window_request_count(20, 0, 0.3, 4) > 0
    assert time.perf_counter() - started < 8
    window = [r for r in result.requests if r.in_window]
    assert window and {r.error for r in window} == {"timeout"}
    assert all(len(r.chunk_s) == 1 and r.first_token_s for r in window)  # the first token came
    assert result.summary.tpot_ms.p99 == "inf" and result.summary.ttft_ms.p99 == "inf"
    # A timed-out request's E2E is the time until the client gave up: its 1 s timeout.
    e2e = result.summary.e2e_ms.p50
    assert isinstance(e2e, float) and 1000 <= e2e < 8000


async def test_the_timeout_bounds_a_request_queued_for_a_slot(server: ScriptedServer) -> None:
    # The overloaded server of the bug: every slot held by a stream that never ends.
    never = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await never.wait()
        return resp

    server.handler = handler
    started = time.perf_counter()
    result = await run_window(
        config(server.base, request_timeout_s=1.0, max_concurrency=1),
        WindowPlan(rate_rps=20, duration_s=0.5, warmup_s=0, seed=4),
        same(),
    )
    elapsed = time.perf_counter() - started
    window = [r for r in result.requests if r.in_window]
    assert len(window) == window_request_count(20, 0, 0.5, 4) >= 3
    assert {r.error for r in window} == {"timeout"}
    assert server.max_in_flight == 1
    # Each one ends at its own 1 s timeout from its scheduled time, although all but the
    # first waited for the one slot (before the fix: the wait plus a whole second more).
    for r in window:
        assert r.finished_s is not None
        assert r.finished_s - r.scheduled_s == pytest.approx(1.0, abs=0.1)
    # The drain ends within the timeout of the window's end: 0.05 + 0.5 + 1 s, plus slack.
    assert elapsed < 4.0


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
async def test_the_endpoint_works_with_or_without_v1(server: ScriptedServer, suffix: str) -> None:
    script(server, tokens_stream(2))
    root = f"http://127.0.0.1:{server.port}"
    cfg = config(root + suffix)
    assert cfg.url == root + "/v1/completions"
    assert config(root + suffix, api="chat").url == root + "/v1/chat/completions"
    result = await one_window(cfg)
    assert result.requests and {r.error for r in result.requests} == {None}
    assert set(server.paths) == {"/v1/completions"}


async def test_done_without_tokens_is_empty(server: ScriptedServer) -> None:
    script(server, [chunk(usage=usage(3, 0)), DONE])
    result = await one_window(config(server.base))
    assert result.requests and {r.error for r in result.requests} == {"empty"}
    assert result.summary.ttft_ms.p50 == "inf"


async def test_stream_without_done_or_finish_reason_is_protocol(server: ScriptedServer) -> None:
    script(server, [chunk(" a"), chunk(" b")])
    result = await one_window(config(server.base))
    assert {r.error for r in result.requests} == {"protocol"}
    assert result.summary.completed == 0 and result.summary.without_done == 0


async def test_a_finished_stream_whose_body_ends_without_done_is_complete(
    server: ScriptedServer,
) -> None:
    """The last chunk carries finish_reason and usage, then the body ends cleanly with no
    ``data: [DONE]`` (some gateways and servers): complete, as vLLM's bench serve counts it,
    and the window counts it apart."""
    script(server, [chunk(" a"), chunk(" b", finish="length"), chunk(usage=usage(3, 2))])
    result = await one_window(config(server.base))
    assert result.requests and {r.error for r in result.requests} == {None}
    assert {r.output_tokens for r in result.requests} == {2}
    s = result.summary
    assert s.completed == s.without_done == len(result.requests) and s.usage_missing == 0


async def test_error_object_in_stream(server: ScriptedServer) -> None:
    script(server, [chunk(" a"), b'data: {"error": {"message": "boom", "code": 500}}\n\n', DONE])
    result = await one_window(config(server.base))
    assert {r.error for r in result.requests} == {"stream_error"}


async def test_one_token_outputs_have_no_tpot(server: ScriptedServer) -> None:
    script(server, tokens_stream(1))
    result = await run_window(
        config(server.base),
        WindowPlan(rate_rps=40, duration_s=0.25, warmup_s=0, seed=3),
        same(max_tokens=1),
    )
    s = result.summary
    assert s.completed == s.requests == s.one_token_outputs > 0
    assert s.tpot_one_token == "excluded"
    assert s.tpot_ms.p50 is None and s.tpot_ms.p99 is None
    assert s.ttft_ms.p99 is not None and s.slo_pass


async def test_missing_usage_counts_chunks_and_flags_it(server: ScriptedServer) -> None:
    script(server, tokens_stream(5, with_usage=False))
    result = await one_window(config(server.base))
    assert all(r.ok and r.usage_missing and r.output_tokens == 5 for r in result.requests)
    assert result.summary.usage_missing == result.summary.completed > 0


async def test_concurrency_cap_holds_and_waiting_counts_from_schedule(
    server: ScriptedServer,
) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(0.05)
        return await stream(request, tokens_stream(2))

    server.handler = handler
    result = await one_window(config(server.base, max_concurrency=2), rate=200, duration=0.2)
    assert server.max_in_flight == 2
    done = [r for r in result.requests if r.in_window]
    assert done and all(r.ok for r in done)
    waited = [r for r in done if r.sent_s - r.dispatched_s > 0.01]  # type: ignore[operator]
    assert waited, "some requests must have waited for a slot"
    # TTFT counts from the schedule, so it includes the wait for a slot.
    for r in waited:
        assert r.first_token_s - r.scheduled_s > r.first_token_s - r.sent_s  # type: ignore[operator]


async def test_warmup_is_excluded_and_in_window_matches_schedule(server: ScriptedServer) -> None:
    script(server, tokens_stream(2))
    result = await run_window(
        config(server.base, arrivals="poisson"),
        WindowPlan(rate_rps=50, duration_s=0.3, warmup_s=0.2, seed=9, keep_load=False),
        same(),
    )
    offsets = poisson_schedule(50, 0.5, 9)
    assert len(result.requests) == len(offsets)
    t0 = result.window_start_s - 0.2
    for r, offset in zip(result.requests, offsets, strict=True):
        assert r.scheduled_s == pytest.approx(t0 + offset)
        assert r.in_window == (offset >= 0.2)
    assert result.summary.requests == window_request_count(50, 0.2, 0.3, 9, "poisson")
    assert result.summary.arrivals == "poisson"


@pytest.mark.parametrize(
    ("rate", "expected", "warm_expected"), [(37.0, 19, 11), (50.0, 25, 15), (41.0, 21, 12)]
)
async def test_a_conditioned_window_sends_exactly_rate_times_duration(
    server: ScriptedServer, rate: float, expected: int, warm_expected: int
) -> None:
    # 0.5 s windows: 18.5 rounds up to 19, 20.5 to 21; the warm-up holds its own 0.3 × rate
    # rounded, and the keep-load tail goes on past the window while it drains.
    script(server, tokens_stream(2))
    result = await run_window(
        config(server.base), WindowPlan(rate_rps=rate, duration_s=0.5, warmup_s=0.3, seed=9), same()
    )
    s = result.summary
    assert s.arrivals == "conditioned"
    assert s.requests == sum(r.in_window for r in result.requests) == expected
    assert s.requests == window_request_count(rate, 0.3, 0.5, 9)
    assert s.completed == expected and s.achieved_rps == pytest.approx(expected / 0.5)
    warm = [r for r in result.requests if r.scheduled_s < result.window_start_s]
    assert len(warm) == warm_expected


async def test_progress_snapshots(server: ScriptedServer) -> None:
    script(server, tokens_stream(2))
    seen: list[WindowProgress] = []
    await run_window(
        config(server.base),
        WindowPlan(rate_rps=50, duration_s=0.5, warmup_s=0.1, seed=1),
        same(),
        WindowHooks(progress=seen.append, progress_interval_s=0.1, check_interval_s=0.1),
    )
    assert seen and seen[-1].sent > 0 and seen[-1].rate_rps == 50
    assert {p.phase for p in seen} >= {"window"}
    assert all(p.errors == 0 for p in seen)


async def test_stop_early_ends_a_hopeless_probe(server: ScriptedServer) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(status=503)

    server.handler = handler
    expected = window_request_count(100, 0.0, 20.0, 5)

    def hopeless(requests: object, elapsed_s: float) -> bool:
        return missed_beyond_doubt(requests, expected, SLO)  # type: ignore[arg-type]

    started = time.perf_counter()
    result = await run_window(
        config(server.base),
        WindowPlan(rate_rps=100, duration_s=20.0, warmup_s=0.0, seed=5),
        same(),
        WindowHooks(stop_early=hopeless, check_interval_s=0.05),
    )
    # Well under a second on a quiet machine; 10 s (half the window) on a busy one.
    assert time.perf_counter() - started < 10
    s = result.summary
    assert s.stopped_early and not s.slo_pass and "stopped_early" in (s.failure_reason or "")
    assert 0 < s.requests < expected


async def test_no_drift_in_sent_times(server: ScriptedServer) -> None:
    """The client sends on the fixed schedule: sent times follow scheduled ones, rate held.

    600 requests at 100 req/s (6 s) by default: the client and the scripted server share
    this process, and at 200 req/s a busy 2-core machine starved them into a real 7% lag.
    TOKENWATT_FULL_ARRIVALS=1 runs the issue's 10,000 at 200 req/s (50 s). The schedule's
    own 10,000-request rate check is in test_arrivals.
    """
    full = bool(os.environ.get("TOKENWATT_FULL_ARRIVALS"))
    rate, seconds = (200.0, 50.0) if full else (100.0, 6.0)
    script(server, tokens_stream(1))
    result = await run_window(
        config(server.base, max_concurrency=64, request_timeout_s=30.0, arrivals="poisson"),
        WindowPlan(rate_rps=rate, duration_s=seconds, warmup_s=0.0, seed=11, keep_load=False),
        same(),
    )
    sent = np.array([r.sent_s for r in result.requests])
    scheduled = np.array([r.scheduled_s for r in result.requests])
    assert len(sent) == len(poisson_schedule(rate, seconds, 11)) > 500
    # Drift is the slope of sent against scheduled (1 = on time); Theil-Sen, so that a few
    # sends delayed by a busy machine do not tilt it.
    slope = stats.theilslopes(sent - scheduled[0], scheduled - scheduled[0]).slope
    assert slope == pytest.approx(1.0, abs=0.01)
    if full:
        # The check: over 10,000 requests the achieved rate is within 1% of 200 req/s
        # (1% is 0.5 s here; over 6 s one send delayed by a busy machine could exceed it).
        achieved = (len(sent) - 1) / (sent.max() - sent.min())
        assert achieved == pytest.approx(rate, rel=0.01)
    assert result.summary.errors == 0


async def test_cancelling_the_window_leaves_nothing_running(server: ScriptedServer) -> None:
    never, three = asyncio.Event(), asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        if server.in_flight >= 3:
            three.set()
        await never.wait()
        return web.Response()

    server.handler = handler
    task = asyncio.create_task(
        run_window(
            config(server.base), WindowPlan(rate_rps=100, duration_s=5, warmup_s=0, seed=1), same()
        )
    )
    await asyncio.wait_for(three.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    ours = {"WindowState.request", "WindowState.dispatch", "OpenWindow._monitor"}
    assert not [t for t in others if t.get_coro().__qualname__ in ours]  # type: ignore[union-attr]


async def test_a_failing_callback_stops_the_window_and_is_raised(server: ScriptedServer) -> None:
    script(server, tokens_stream(2))

    def broken(requests: object, elapsed_s: float) -> bool:
        raise RuntimeError("search bug")

    started = time.perf_counter()
    with pytest.raises(RuntimeError, match="search bug"):
        await run_window(
            config(server.base),
            WindowPlan(rate_rps=50, duration_s=20, warmup_s=0, seed=1),
            same(),
            WindowHooks(stop_early=broken, check_interval_s=0.05),
        )
    assert time.perf_counter() - started < 10  # not the 20 s window (busy-machine margin)


INSTANT_SERVER = """
import sys
from aiohttp import web
BODY = (b'data: {"choices":[{"text":" a"}]}\\n\\n'
        b'data: {"choices":[],"usage":{"prompt_tokens":2,"completion_tokens":1}}\\n\\n'
        b"data: [DONE]\\n\\n")
async def handle(request):
    await request.read()
    return web.Response(body=BODY, content_type="text/event-stream")
app = web.Application()
app.router.add_post("/v1/completions", handle)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
"""


@pytest.fixture
def instant_server() -> Iterator[str]:
    """An instant streaming server in a process of its own, so that serving does not share
    the client's event loop (and, on two cores, its core).

    The same script as ``SERVER`` in benchmarks/wire_arrivals.py; left as two copies while
    the worker-process work reshapes that benchmark (merge them after it lands).
    """
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    proc = subprocess.Popen([sys.executable, "-c", INSTANT_SERVER, str(port)])
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        else:
            raise RuntimeError("the instant server did not start")
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.stress
async def test_wire_arrivals_are_exponential_at_200_per_second(instant_server: str) -> None:
    """The actual sends, not only the schedule, pass a K-S test against the exponential.

    1,000 requests at 200 req/s (5 s) against an instant server in its own process. With a
    plain asyncio.sleep the sends bunch on millisecond ticks and this fails
    (benchmarks/wire_arrivals.py). Marked ``stress`` (run with ``-m stress``): it passed
    on a quiet 2-core machine (p 0.21–0.27), but one event loop that also reads the
    responses still delays about 1% of sends by up to 1 ms, and under the load of the rest
    of the suite that is enough for the K-S test to see it.
    """
    rate, seconds = 200.0, 5.0
    result = await run_window(
        config(instant_server, max_concurrency=64, request_timeout_s=30.0, arrivals="poisson"),
        WindowPlan(rate_rps=rate, duration_s=seconds, warmup_s=0.0, seed=21, keep_load=False),
        same(),
    )
    scheduled = np.array([r.scheduled_s for r in result.requests])
    sent = np.array([r.sent_s for r in result.requests])
    assert len(sent) == len(poisson_schedule(rate, seconds, 21)) > 900
    exponential = stats.expon(scale=1 / rate).cdf
    assert stats.kstest(np.diff(scheduled), exponential).pvalue > 0.01  # the control
    lag_p99_ms = float(np.percentile(sent - scheduled, 99)) * 1e3
    if lag_p99_ms > 2.0:
        # Precise sends are within 0.2 ms; a 2 ms p99 means other processes held the CPU
        # (seen at load 4 on 2 cores), and then no client can send on time. The verdict
        # is then about the machine, not the sender; the benchmark prints the figures.
        pytest.skip(f"client starved of CPU: send lag p99 {lag_p99_ms:.1f} ms")
    p_sent = stats.kstest(np.diff(sent), exponential).pvalue
    assert p_sent > 0.01
    # The record carries the same test of the same sends, and no bunched-sends warning.
    assert result.summary.send_gaps_ks_p == pytest.approx(p_sent, rel=1e-3)
    assert not any(w.startswith("sends not Poisson") for w in result.summary.warnings)
    assert result.summary.errors == 0
