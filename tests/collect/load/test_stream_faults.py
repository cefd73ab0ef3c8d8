"""Faults of streamed responses that peer benchmarks have miscounted, over real HTTP on
127.0.0.1: a request sent by the load generator's Sender to a scripted server.

- an error before the first token, in each form servers send it (``data: {"error": ...}``
  from vLLM and SGLang, ``event: error``, llama.cpp's ``error:`` line), the stream then held
  open: the request fails with the server's message, not at the request timeout;
- a 200 answer that is no event stream (an error object, a non-streamed completion, a
  proxy's HTML page): failed with the body kept, the error object's message shown;
- ``[DONE]`` twice (Ray Serve LLM, API gateways) or followed by other events;
- compression: the request asks for none, and a stream compressed anyway is refused.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from streaming_server import DONE, ScriptedServer, chunk, stream, usage

from tokenwatt.collect.load.http import Sender, open_session
from tokenwatt.collect.load.loadconfig import LoadConfig
from tokenwatt.records import RequestResult
from tokenwatt.records.spec.spec import SloSpec

TIMEOUT_S = 20.0  # far above the test's runtime: a request that waits for it is "timeout"
BODY = json.dumps({"model": "m", "prompt": [1, 2], "max_tokens": 4, "stream": True}).encode()


@pytest.fixture
async def sender(server: ScriptedServer) -> AsyncIterator[Sender]:
    cfg = LoadConfig(
        endpoint=server.base, model="m", slo=SloSpec(ttft_p99_ms=1000, tpot_p99_ms=100)
    )
    session = open_session(4)
    sender = Sender(session, cfg.url, cfg.headers(), TIMEOUT_S)
    try:
        yield sender
    finally:
        await sender.close()
        await session.close()


async def send(sender: Sender) -> RequestResult:
    res = RequestResult(scheduled_s=0.0, max_tokens=4)
    await asyncio.wait_for(sender.send(res, BODY), TIMEOUT_S / 2)
    return res


def held_open(server: ScriptedServer, pieces: list[bytes]) -> None:
    """Send ``pieces``, then keep the response open (until the server shuts down)."""

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for piece in pieces:
            await resp.write(piece)
        await asyncio.Event().wait()
        return resp

    server.handler = handler


ROLE = b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
ERRORS = {
    "data error object": (
        b'data: {"error": {"message": "EngineCore died", "code": 500}}\n\n',
        "the stream carried an error: {'message': 'EngineCore died', 'code': 500}",
    ),
    "event: error": (
        b'event: error\ndata: {"message": "EngineCore died"}\n\n',
        'the stream carried an error: {"message": "EngineCore died"}',
    ),
    "llama.cpp error line": (
        b'error: {"code":500,"message":"EngineCore died","type":"server_error"}\n\n',
        'the stream carried an error: {"code":500,"message":"EngineCore died",'
        '"type":"server_error"}',
    ),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
async def test_an_error_before_the_first_token_fails_at_once_with_its_message(
    server: ScriptedServer, sender: Sender, name: str
) -> None:
    error, message = ERRORS[name]
    held_open(server, [ROLE, error])
    res = await send(sender)
    assert (res.error, res.status, res.error_message) == ("stream_error", 200, message)
    assert res.chunk_s == [] and res.first_token_s is None


async def test_an_error_after_text_in_the_same_read_keeps_the_text(
    server: ScriptedServer, sender: Sender
) -> None:
    error, message = ERRORS["event: error"]
    held_open(server, [chunk(" a") + chunk(" b") + error])
    res = await send(sender)
    assert (res.error, res.error_message) == ("stream_error", message)
    assert len(res.chunk_s) == 2 and res.first_token_s == res.last_token_s == res.chunk_s[0]


def answer(server: ScriptedServer, body: bytes, content_type: str) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(body=body, content_type=content_type)

    server.handler = handler


NOT_STREAMS = {
    "openai error object": (
        b'{"error": {"message": "model not found", "code": 404}}',
        "application/json",
        "stream_error",
        "the server answered with an error, not an event stream (Content-Type"
        " application/json): {'message': 'model not found', 'code': 404}",
    ),
    "vllm error response": (
        b'{"object": "error", "message": "model not found", "code": 404}',
        "application/json",
        "stream_error",
        "the server answered with an error, not an event stream (Content-Type"
        " application/json): model not found",
    ),
    "non-streamed completion": (
        b'{"choices": [{"text": "hi there"}], "usage": {"completion_tokens": 2}}',
        "application/json",
        "protocol",
        "the response is not an event stream (Content-Type application/json): no data: line in it",
    ),
    "html page": (
        b"<html><body>Sign in</body></html>",
        "text/html",
        "protocol",
        "the response is not an event stream (Content-Type text/html): no data: line in it",
    ),
}


@pytest.mark.parametrize("name", sorted(NOT_STREAMS))
async def test_a_200_that_is_no_event_stream_fails_with_its_body(
    server: ScriptedServer, sender: Sender, name: str
) -> None:
    body, content_type, kind, message = NOT_STREAMS[name]
    answer(server, body, content_type)
    res = await send(sender)
    assert (res.error, res.status, res.error_message) == (kind, 200, message)
    assert res.error_body == body.decode()
    assert res.chunk_s == [] and res.output_tokens == 0


@pytest.mark.parametrize(
    "ending",
    [DONE + DONE, DONE + chunk(" late") + DONE, DONE + b": bye\n\n"],
    ids=["two [DONE]", "text after [DONE]", "comment after [DONE]"],
)
async def test_the_stream_ends_at_its_first_done(
    server: ScriptedServer, sender: Sender, ending: bytes
) -> None:
    pieces = [chunk(" a"), chunk(" b"), chunk(usage=usage(3, 2)) + ending]

    async def handler(request: web.Request) -> web.StreamResponse:
        return await stream(request, pieces)

    server.handler = handler
    res = await send(sender)
    assert res.error is None and res.error_message is None
    assert (len(res.chunk_s), res.output_tokens, res.prompt_tokens) == (2, 2, 3)
    assert res.finished_s is None  # the body ended: the load generator times the end


async def test_a_body_held_open_after_done_ends_at_the_done(
    server: ScriptedServer, sender: Sender
) -> None:
    # Without the grace the request would wait for its 20 s timeout (send() gives up at 10).
    held_open(server, [chunk(" a") + chunk(" b"), chunk(usage=usage(3, 2)) + DONE])
    res = await send(sender)
    assert res.error is None and res.error_message is None
    assert (len(res.chunk_s), res.output_tokens, res.prompt_tokens) == (2, 2, 3)
    assert res.finished_s is not None and res.last_token_s is not None
    assert res.finished_s >= res.last_token_s  # the [DONE] read's time, not the grace's end


async def test_the_request_asks_for_no_compression_and_refuses_a_compressed_stream(
    server: ScriptedServer, sender: Sender
) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        resp.enable_compression(force=web.ContentCoding.gzip)  # whatever was asked
        await resp.prepare(request)
        for piece in (chunk(" a"), chunk(usage=usage(3, 1)), DONE):
            await resp.write(piece)
        await resp.write_eof()
        return resp

    server.handler = handler
    res = await send(sender)
    assert server.headers[0]["Accept-Encoding"] == "identity"
    assert (res.error, res.status) == ("protocol", 200)
    assert res.error_message == (
        "the stream came compressed (Content-Encoding gzip) although the request asked for"
        " none: its events can not be timed as they come"
    )
