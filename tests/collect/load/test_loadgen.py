"""The load generator against a scripted streaming server over real HTTP on 127.0.0.1: the
requests' bodies, streams, framings and errors."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest
from aiohttp import web
from loadgen_helpers import config, one_window, same, script
from streaming_server import DONE, ScriptedServer, chunk, tokens_stream, usage

from tokenwatt.collect.load.arrivals import window_request_count
from tokenwatt.collect.load.loadgen import run_window
from tokenwatt.collect.load.window_plan import WindowPlan
from tokenwatt.errors import InputError


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
