"""How requests fail and which are sent again: scripted servers that misbehave at the TCP level.

A raw asyncio server (not aiohttp.web) decides per connection what the wire does: close
while the request body is still being written, reset after the response head, close after
a complete request with no answer, or close every streamed connection as llama.cpp's
server does. Every case asserts how often the server saw each request.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import pytest
from aiohttp import web
from streaming_server import ScriptedServer, tokens_stream

from tokenwatt.collect.load.http import ERROR_BODY_LIMIT, MAX_TRANSPORT_RETRIES
from tokenwatt.collect.load.loadgen import LoadConfig, WindowResult, run_window
from tokenwatt.collect.load.window_plan import WindowHooks, WindowPlan
from tokenwatt.collect.workload.workload import RequestSpec
from tokenwatt.records.spec.spec import SloSpec
from tokenwatt.redact import REDACTED

SLO = SloSpec(ttft_p99_ms=2000, tpot_p99_ms=1000)
Conn = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[None]]


def config(base: str, **kw: object) -> LoadConfig:
    settings: dict[str, object] = {"max_concurrency": 16, "request_timeout_s": 5.0}
    settings.update(kw)
    return LoadConfig(endpoint=base, model="tiny", slo=SLO, **settings)  # type: ignore[arg-type]


async def window(
    cfg: LoadConfig, *, rate: float = 40.0, duration: float = 0.25, hooks: WindowHooks | None = None
) -> WindowResult:
    spec = RequestSpec(prompt=[11, 12, 13], max_tokens=2)
    plan = WindowPlan(rate_rps=rate, duration_s=duration, warmup_s=0.0, seed=3, keep_load=False)
    return await run_window(cfg, plan, itertools.repeat(spec), hooks)


@dataclass
class RawServer:
    """A TCP server on 127.0.0.1 whose ``conn`` coroutine scripts each connection."""

    conn: Conn
    port: int = 0
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)  # complete requests read

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        index = self.connections
        self.connections += 1
        try:
            await self.conn(reader, writer, index)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def read_request(self, reader: asyncio.StreamReader) -> bytes:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        body = await reader.readexactly(length)
        self.requests.append(body)
        return body


def reset(writer: asyncio.StreamWriter) -> None:
    """Close with RST (SO_LINGER 0), as a server that drops a connection does."""
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def sse_response(pieces: list[bytes], *, server: str = "scripted") -> bytes:
    head = (
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
        f"Server: {server}\r\nKeep-Alive: timeout=5, max=100\r\n\r\n"
    ).encode()
    body = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces)
    return head + body + b"0\r\n\r\n"


@pytest.fixture
async def raw() -> AsyncIterator[Callable[[Conn], Awaitable[RawServer]]]:
    servers: list[asyncio.Server] = []

    async def start(conn: Conn) -> RawServer:
        # A bare asyncio server, not an HTTP test server: these scripts misbehave below HTTP
        # (connections reset or closed mid-response, no headers, a tiny receive buffer),
        # which no HTTP framework's handler can do.
        scripted = RawServer(conn)
        srv = await asyncio.start_server(scripted.serve, "127.0.0.1", 0)
        # A small receive buffer, so a large body cannot all sit in the kernel unread.
        for sock in srv.sockets:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        scripted.port = srv.sockets[0].getsockname()[1]
        servers.append(srv)
        return scripted

    yield start
    for srv in servers:
        srv.close()


@pytest.mark.filterwarnings("ignore:Sending a large body:ResourceWarning")  # aiohttp, > 1 MiB
async def test_closed_while_the_body_is_written_is_sent_again(
    raw: Callable[[Conn], Awaitable[RawServer]],
) -> None:
    async def conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, index: int) -> None:
        if index % 2 == 0:  # every first attempt: read the head, then drop the connection
            await reader.readuntil(b"\r\n\r\n")
            reset(writer)
            return
        await server.read_request(reader)
        writer.write(sse_response(tokens_stream(2)))
        await writer.drain()

    server = await raw(conn)
    # 8 MB of prompt: more than the kernel's buffers take (4 MiB send buffer at most here,
    # the server's receive buffer 4 KiB and nothing read), so the first attempt is still
    # writing its body when the server drops it.
    big = {"padding": "x" * 8_000_000}
    result = await window(
        config(server.base, max_concurrency=1, extra_body=big), rate=10, duration=0.3
    )
    assert result.requests
    for r in result.requests:
        assert (r.error, r.transport_retries, r.status, r.output_tokens) == (None, 1, 200, 2), (
            r.error_class,
            r.error_message,
        )
    # Each request reached the server exactly once, complete: the dropped attempts never did.
    assert len(server.requests) == len(result.requests) and server.connections == 2 * len(
        result.requests
    )
    assert result.summary.errors == 0


async def test_reset_after_the_response_head_stays_an_error(
    raw: Callable[[Conn], Awaitable[RawServer]],
) -> None:
    async def conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, index: int) -> None:
        await server.read_request(reader)
        response = sse_response(tokens_stream(2))
        writer.write(response[: response.index(b"\r\n\r\n") + 4])
        await writer.drain()
        await asyncio.sleep(0.01)
        reset(writer)

    server = await raw(conn)
    result = await window(config(server.base))
    assert result.requests
    for r in result.requests:
        assert (r.error, r.status, r.transport_retries) == ("disconnect", 200, 0)
        assert r.error_class is not None and r.error_message
    assert len(server.requests) == len(result.requests)  # no request was sent twice


async def test_a_complete_request_closed_unanswered_is_not_sent_again(
    raw: Callable[[Conn], Awaitable[RawServer]],
) -> None:
    async def conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, index: int) -> None:
        await server.read_request(reader)  # read it whole, then hang up without a byte

    server = await raw(conn)
    result = await window(config(server.base))
    assert result.requests
    for r in result.requests:
        assert (r.error, r.status, r.transport_retries) == ("disconnect", None, 0)
        assert r.error_class == "ServerDisconnectedError"
    assert len(server.requests) == len(result.requests)  # it may have been acted on: once only


async def test_a_server_that_closes_streamed_connections_costs_no_request(
    raw: Callable[[Conn], Awaitable[RawServer]],
) -> None:
    """llama.cpp's behaviour: keep-alive advertised, connection closed after the stream."""

    async def conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, index: int) -> None:
        await server.read_request(reader)
        writer.write(sse_response(tokens_stream(2), server="llama.cpp"))
        await writer.drain()
        await asyncio.sleep(0.001)  # llama.cpp's server: EOF about 1 ms after the last chunk

    server = await raw(conn)
    result = await window(config(server.base, max_concurrency=64), rate=400, duration=1.0)
    assert len(result.requests) > 300
    assert {(r.error, r.transport_retries) for r in result.requests} == {(None, 0)}
    assert server.connections == len(server.requests) == len(result.requests)


async def test_connection_refused_is_tried_once_more_then_connect() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = await window(config(f"http://127.0.0.1:{port}/v1"))
    assert result.requests
    for r in result.requests:
        assert (r.error, r.status, r.transport_retries) == ("connect", None, MAX_TRANSPORT_RETRIES)
        assert r.error_class == "ClientConnectorError" and "127.0.0.1" in (r.error_message or "")


async def test_error_status_keeps_its_body_capped_and_scrubbed(server: ScriptedServer) -> None:
    leaked = "Authorization: Bearer sk-live-0123456789abcdef; "
    text = '{"error": "overloaded", "api_key": "k-123456", "detail": "' + "y" * 2000 + '"}'

    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(status=503, text=leaked + text)

    server.handler = handler
    result = await window(config(server.base, api_key="my-own-key-0042"))
    assert result.requests
    for r in result.requests:
        assert (r.error, r.status, r.error_class, r.transport_retries) == ("http_503", 503, None, 0)
        assert r.error_message == "HTTP 503 Service Unavailable"
        assert r.error_body is not None and len(r.error_body) == ERROR_BODY_LIMIT
        assert r.error_body.startswith(f'Authorization: Bearer {REDACTED}; {{"error": "overloaded"')
        assert f'"api_key": "{REDACTED}"' in r.error_body and r.error_body.endswith("…")
        assert "sk-live" not in r.error_body and "k-123456" not in r.error_body


async def test_the_run_s_own_key_is_scrubbed_from_error_text(server: ScriptedServer) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(status=401, text=f"unknown key {request.headers['Authorization'][7:]}")

    server.handler = handler
    result = await window(config(server.base, api_key="my-own-key-0042"))
    assert {r.error_body for r in result.requests} == {f"unknown key {REDACTED}"}


async def test_client_cancellations_are_cancelled_and_drain_run_outs_are_timeouts(
    server: ScriptedServer,
) -> None:
    never = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        await never.wait()
        return web.Response()

    server.handler = handler
    stopped = await window(
        config(server.base), rate=100, duration=5.0,
        hooks=WindowHooks(stop_early=lambda reqs, s: len(reqs) >= 3, check_interval_s=0.05),
    )  # fmt: skip
    assert stopped.summary.stopped_early and stopped.requests
    for r in stopped.requests:
        assert (r.error, r.error_class) == ("cancelled", "CancelledError")
        assert r.error_message is not None and "by the client" in r.error_message

    # One slot and a server that never answers: every request times out on its own, 0.4 s
    # after its scheduled time, the wait for the slot included; none is left to the drain.
    drained = await window(
        config(server.base, max_concurrency=1, request_timeout_s=0.4), rate=40, duration=0.2
    )
    in_window = [r for r in drained.requests if r.in_window]
    assert len(in_window) >= 2
    assert {r.error for r in in_window} == {"timeout"}
    assert {r.error_class for r in in_window} == {"TimeoutError"}
    assert in_window[0].error_message == "no end of stream within the 0.4 s request timeout"
    assert {r.error_message for r in in_window} <= {
        "no end of stream within the 0.4 s request timeout",
        "no concurrency slot (measurement.max_concurrency 1) within the 0.4 s request "
        "timeout: never sent",
    }
    for r in in_window:
        assert r.finished_s is not None
        assert r.finished_s - r.scheduled_s == pytest.approx(0.4, abs=0.1)
