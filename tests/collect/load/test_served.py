"""What was served vs what was asked, token counts without usage, sustained windows, and the
definitions that hang on the stream (E2E to the stream's end, first content token), against
scripted servers over real HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator

from aiohttp import web
from streaming_server import DONE, Handler, ScriptedServer, chunk, stream, usage

from tokenwatt.analysis.window.latency import percentile, summarise_window
from tokenwatt.collect.load.loadgen import LoadConfig, WindowResult, run_window
from tokenwatt.collect.load.window_plan import WindowPlan
from tokenwatt.collect.workload.workload import RequestSpec
from tokenwatt.records.run.request import RequestResult
from tokenwatt.records.spec.spec import SloSpec

SLO = SloSpec(ttft_p99_ms=2000, tpot_p99_ms=1000)
LENIENT = SloSpec(ttft_p99_ms=600_000, tpot_p99_ms=10_000)
PROMPT = [11, 12, 13]


def config(base: str, slo: SloSpec = SLO, **kw: object) -> LoadConfig:
    settings: dict[str, object] = {"max_concurrency": 16, "request_timeout_s": 30.0}
    settings.update(kw)
    return LoadConfig(endpoint=base, model="tiny", slo=slo, **settings)  # type: ignore[arg-type]


def same(max_tokens: int = 4) -> Iterator[RequestSpec]:
    return itertools.repeat(RequestSpec(prompt=PROMPT, max_tokens=max_tokens))


async def window(
    cfg: LoadConfig, *, rate: float = 40.0, duration: float = 0.5, max_tokens: int = 4
) -> WindowResult:
    # No warm-up and no load kept on after the window: every request the server sees is
    # an in-window one, so what the server did can be counted exactly on its side.
    return await run_window(
        cfg,
        WindowPlan(rate_rps=rate, duration_s=duration, warmup_s=0.0, seed=5, keep_load=False),
        same(max_tokens),
    )


def in_window(result: WindowResult) -> list[RequestResult]:
    return [r for r in result.requests if r.in_window]


async def test_two_tokens_per_chunk_without_usage(server: ScriptedServer) -> None:
    # Three chunks of two "tokens" (words) each, and no usage: 6 tokens, 3 chunks.
    pieces = [chunk(" a b"), chunk(" c d"), chunk(" e f"), DONE]

    async def handler(request: web.Request) -> web.StreamResponse:
        return await stream(request, pieces)

    server.handler = handler
    result = await window(config(server.base), max_tokens=6)
    requests = in_window(result)
    assert requests and all(r.ok and r.usage_missing for r in requests)
    assert all(r.output_text == [" a b", " c d", " e f"] for r in requests)

    estimate = result.summary  # no tokenizer: one token per chunk, flagged as an estimate
    assert estimate.output_tokens == 3 * len(requests)
    assert estimate.token_count_source == "chunks-estimate"
    assert any(w.startswith("estimate:") for w in estimate.warnings)

    def words(text: str) -> int:
        return len(text.split())

    exact = summarise_window(requests, rate_rps=40, duration_s=0.5, slo=SLO, count_tokens=words)
    assert exact.output_tokens == 6 * len(requests)
    assert exact.token_count_source == "tokenizer"
    assert not any(w.startswith("estimate:") for w in exact.warnings)
    tpots = [(r.last_token_s - r.first_token_s) / 5 * 1e3 for r in requests]  # type: ignore[operator]
    assert exact.tpot_ms.p50 == round(percentile(tpots, 50) or 0.0, 4)
    assert exact.tokens_per_chunk.p50 == exact.tokens_per_chunk.mean == 2.0
    assert estimate.tokens_per_chunk.p50 == 1.0
    # The recount made copies: the requests themselves still hold the chunk count.
    assert all(r.output_tokens == 3 for r in requests)


async def test_served_other_than_asked_is_counted_and_invalidates(
    server: ScriptedServer,
) -> None:
    # Request i (in the server's order): 0 mod 4 stops early although ignore_eos was asked,
    # 1 mod 4 sends more than max_tokens, 2 mod 4 reports a truncated prompt, 3 mod 4 is
    # served as asked.
    seen = {"short": 0, "long": 0, "truncated": 0, "ok": 0}
    counter = itertools.count()

    async def handler(request: web.Request) -> web.StreamResponse:
        i = next(counter) % 4
        served, prompt, label = [
            (2, 3, "short"),
            (6, 3, "long"),
            (4, 2, "truncated"),
            (4, 3, "ok"),
        ][i]
        seen[label] += 1
        pieces = [chunk(f" t{j}") for j in range(served)]
        return await stream(request, [*pieces, chunk(usage=usage(prompt, served)), DONE])

    server.handler = handler
    result = await window(config(server.base), rate=60, duration=0.5, max_tokens=4)
    s = result.summary
    assert s.requests == s.completed == sum(seen.values()) > 4
    assert (s.short_outputs, s.long_outputs, s.prompt_mismatches) == (
        seen["short"],
        seen["long"],
        seen["truncated"],
    )
    assert not s.valid and not s.slo_pass
    assert "served_mismatch" in (s.failure_reason or "")
    assert (s.invalid_reason or "").startswith("served other than asked")
    assert any("ignore_eos" in w for w in s.warnings)
    assert any("ignores max_tokens" in w for w in s.warnings)
    assert any("truncated" in w for w in s.warnings)


async def test_served_as_asked_is_valid(server: ScriptedServer) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        pieces = [chunk(f" t{j}") for j in range(4)]
        return await stream(request, [*pieces, chunk(usage=usage(3, 4)), DONE])

    server.handler = handler
    s = (await window(config(server.base))).summary
    assert (s.short_outputs, s.long_outputs, s.prompt_mismatches) == (0, 0, 0)
    assert s.valid and s.slo_pass and s.token_count_source == "usage"


def slow_handler(service_s: float) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(service_s)
        return await stream(request, [chunk(" a"), chunk(" b"), chunk(usage=usage(3, 2)), DONE])

    return handler


async def test_a_backlog_behind_the_concurrency_cap_is_not_sustained(
    server: ScriptedServer,
) -> None:
    # One slot and 50 ms a request: the pair serves about 20 req/s; 80 arrive each second.
    # The queue grows all the way through; with a TTFT limit of ten minutes the latency
    # limits alone would pass the window and report about 4x the rate actually served.
    server.handler = slow_handler(0.05)
    cfg = config(server.base, LENIENT, max_concurrency=1)
    result = await window(cfg, rate=80, duration=1.0, max_tokens=2)
    s = result.summary
    assert server.max_in_flight == 1 and s.completed == s.requests >= 20
    assert s.sustained is False and s.completion_ratio is not None and s.completion_ratio < 0.5
    assert not s.valid and not s.slo_pass
    assert s.failure_reason == "not_sustained"
    assert (s.invalid_reason or "").startswith("not sustained")
    assert s.concurrency_capped and s.slot_wait_p99_ms > 100
    assert s.drain_s is not None and s.drain_s > 1.0


async def test_the_same_server_without_the_cap_keeps_up(server: ScriptedServer) -> None:
    server.handler = slow_handler(0.05)
    result = await window(
        config(server.base, LENIENT, max_concurrency=64), rate=40, duration=1.0, max_tokens=2
    )
    s = result.summary
    assert s.completed == s.requests >= 20
    assert s.sustained is True and s.valid and s.slo_pass
    assert not s.concurrency_capped


async def test_e2e_ends_when_the_stream_ends(server: ScriptedServer) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for piece in (chunk(" a"), chunk(" b"), chunk(usage=usage(3, 2))):
            await resp.write(piece)
        await asyncio.sleep(0.2)  # the response goes on after the last token
        await resp.write(DONE)
        await resp.write_eof()
        return resp

    server.handler = handler
    result = await window(config(server.base), rate=20, duration=0.3, max_tokens=2)
    requests = in_window(result)
    assert requests and all(r.ok for r in requests)
    assert all(r.finished_s - r.last_token_s >= 0.19 for r in requests)  # type: ignore[operator]
    e2e = [(r.finished_s - r.scheduled_s) * 1e3 for r in requests]  # type: ignore[operator]
    assert result.summary.e2e_ms.p50 == round(percentile(e2e, 50) or 0.0, 4)


def _delta(**delta: str) -> bytes:
    obj = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


async def test_reasoning_output_has_a_later_first_content_token(server: ScriptedServer) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(_delta(role="assistant", content=""))  # no text: not a token
        await resp.write(_delta(reasoning_content="think"))
        await resp.write(_delta(reasoning_content=" more"))
        await asyncio.sleep(0.1)
        await resp.write(_delta(content="answer"))
        await resp.write(chunk(usage=usage(3, 3), chat=True) + DONE)
        await resp.write_eof()
        return resp

    server.handler = handler
    result = await run_window(
        config(server.base, api="chat"),
        WindowPlan(rate_rps=20, duration_s=0.3, warmup_s=0.0, seed=5, keep_load=False),
        itertools.repeat(RequestSpec(prompt="hi", max_tokens=3)),
    )
    requests = in_window(result)
    assert requests and all(r.ok and r.reasoning for r in requests)
    for r in requests:
        assert len(r.chunk_s) == 3
        assert r.first_content_s - r.first_token_s >= 0.09  # type: ignore[operator]
    s = result.summary
    assert s.reasoning_requests == s.completed
    assert isinstance(s.ttfc_ms.p50, float) and isinstance(s.ttft_ms.p50, float)
    assert s.ttfc_ms.p50 - s.ttft_ms.p50 >= 90
    # A text prompt sends no token ids: its prompt length is not judged.
    assert s.prompt_mismatches == 0 and s.valid


async def test_usage_counts_that_are_no_token_counts_are_protocol_errors(
    server: ScriptedServer,
) -> None:
    """A server reporting -1 or 10^12 tokens broke the protocol: those requests fail with
    the reason, and the window is summarised (it used to crash on the record's bounds)."""
    bad = iter([(-1, 4), (3, 10**12), (3, 4)] * 1000)

    async def handler(request: web.Request) -> web.StreamResponse:
        prompt, completion = next(bad)
        raw = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": 0}
        return await stream(request, [chunk(" a"), chunk(usage=raw), DONE])

    server.handler = handler
    result = await window(config(server.base), rate=30, duration=1.0)
    requests = in_window(result)
    failed = [r for r in requests if r.error is not None]
    assert failed and {r.error for r in failed} == {"protocol"}
    assert {r.error_message for r in failed} <= {
        "usage.prompt_tokens -1 is not a token count",
        f"usage.completion_tokens {10**12} is not a token count",
    }
    ok = [r for r in requests if r.error is None]
    assert ok and all(r.output_tokens == 4 for r in ok)
    assert result.summary.errors == len(failed)
