"""Sending one streamed request: connections, transport retries, and what a failure was.

Why requests to llama.cpp's server failed as ``connect`` errors (issue 8), measured with
xllamacpp 2026.10.11549 and aiohttp 3.14 on 127.0.0.1:

* llama.cpp's server closes the TCP connection about 1 ms after every *streamed* response
  (EOF 1.2 ms after the last chunk), although the response head says ``Keep-Alive:
  timeout=5, max=100`` and has no ``Connection: close``; a non-streamed response is kept
  alive for the advertised 5 s (EOF at 5,005 ms). Its HTTP layer (cpp-httplib) treats the
  stream's content provider returning false at the end as a failed write and drops the
  connection.
* aiohttp puts the connection back in its pool when the last chunk is read. A request
  dispatched in the millisecond before the server's FIN is processed takes that dead
  connection: the body write finds the transport closing (``ClientOSError: Can not write
  request body``, caused by ``ClientConnectionResetError: Cannot write to closing
  transport``: 9 of 10 failures) or the request goes out and the FIN comes back
  (``ServerDisconnectedError``: 1 of 10). At 20 req/s, 1,500 requests: 5 and 10 failures
  in two runs; every failed request had taken a connection idle for 0.13–0.41 ms, none
  one idle near 5 s. With aiohttp's keep-alive cut from 15 s to 4 s the failures stayed
  (10); on fresh connections (``Connection: close``) there were none. vLLM's ``bench
  serve`` (aiohttp, keep-alive) fails the same way against it ("Can not write request body").
  Which of the two a race gives depends on timing: on Python 3.11 aiohttp writes the body
  in a task of its own, one loop turn after taking the connection, time enough for the FIN
  to be seen; from 3.12 it writes at once, and the race shows as a disconnect after a
  complete request, which is not provably safe to send again. So avoiding the race (next
  paragraph) is the fix, and the retry only the safety net.

What this module does about it:

* **Avoid the race.** Against a server that closes streamed connections (llama.cpp, known
  from the probe's engine name or from the ``Server`` header of its first response) every
  request goes on a fresh connection with ``Connection: close`` — what that server does
  anyway, so nothing is lost. Elsewhere connections are kept alive, but idle ones only for
  :data:`KEEPALIVE_TIMEOUT_S` (4 s), below the 5 s idle timeout of uvicorn (vLLM, SGLang),
  cpp-httplib and Node, so the client never reuses a connection the server is about to
  time out (aiohttp's default of 15 s invites exactly that race).
* **Retry only what provably never reached the server**, once, on a fresh connection, with
  its latency still counted from the scheduled time (``transport_retries`` counts it): a
  connection that could not be made (refused, reset during the handshake), or a request
  whose body was not completely handed to the connection before it broke (the server can
  not have parsed an incomplete request). This is urllib3's rule for connect errors and
  Go net/http's ``nothingWrittenError`` widened to "request incomplete". A request that was
  written completely stays an error even if no response byte came back: for a POST the
  server may have read it (RFC 9110 §9.2.2; Go and urllib3 do not replay it either).
* **Keep what a failure was**: kind, exception class, message (scrubbed, 300 characters),
  HTTP status and the head of an error body (scrubbed, 512 characters).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from tokenwatt.collect.load.stream import read_stream
from tokenwatt.collect.load.stream_reads import StreamError
from tokenwatt.netpath import NetworkPath
from tokenwatt.records import RequestResult
from tokenwatt.redact import scrub_capped

KEEPALIVE_TIMEOUT_S = 4.0
"""Longest a pooled connection is reused after it went idle (s); below the 5 s idle timeout
of uvicorn, cpp-httplib and Node (aiohttp's default is 15 s)."""
MAX_TRANSPORT_RETRIES = 1
"""Fresh-connection retries of a request that never reached the server; a second failure in
a row is not a race with a closing connection, and stays an error."""
ERROR_MESSAGE_LIMIT = 300
"""Characters of an exception message kept in ``RequestResult.error_message``."""
ERROR_BODY_LIMIT = 512
"""Characters of an error response's body kept in ``RequestResult.error_body``."""
_ERROR_BODY_READ = 4096  # bytes read from an error body (scrubbed before it is capped)
# Servers whose streamed responses end with a closed connection (``Server`` header prefix,
# or the probe's engine name): see the module docstring.
_CLOSE_AFTER_STREAM = ("llama.cpp",)


def keeps_streams_alive(engine_name: str | None) -> bool:
    """False for engines whose server closes the connection after every streamed response
    (llama.cpp's), so that the load generator sends each request on a fresh connection."""
    return engine_name is None or not engine_name.lower().startswith(_CLOSE_AFTER_STREAM)


def open_session(max_concurrency: int, *, keep_alive: bool = True) -> aiohttp.ClientSession:
    """An aiohttp session for up to ``max_concurrency`` connections.

    With ``keep_alive`` idle connections are pooled for :data:`KEEPALIVE_TIMEOUT_S`;
    without, every request goes on a new connection and says ``Connection: close``.
    """
    if keep_alive:
        connector = aiohttp.TCPConnector(
            limit=max_concurrency, limit_per_host=0, keepalive_timeout=KEEPALIVE_TIMEOUT_S
        )
    else:
        connector = aiohttp.TCPConnector(limit=max_concurrency, limit_per_host=0, force_close=True)
    return aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=None), auto_decompress=False
    )


AtSend = Callable[[], Awaitable[None]]
"""What a request awaits just before its first byte goes out (the wait for its send time,
:meth:`Sender.send`)."""


class _AtSend:
    """An :data:`AtSend` that ends at most once across a request's attempts: a retry on a
    fresh connection goes out at once, its send time reached. A wait cut off (the connection
    broke while it waited, and aiohttp cancelled its body writer) is waited again by the
    retry."""

    def __init__(self, at_send: AtSend | None) -> None:
        self._at_send = at_send
        self.done = at_send is None

    async def __call__(self) -> None:
        if self._at_send is not None and not self.done:
            await self._at_send()
            self.done = True


class _Body(aiohttp.BytesPayload):
    """A request body that waits for its send time before its first byte (``at_send``) and
    knows whether the kernel took all of it (``written``).

    aiohttp holds the request head back and sends it with the body's first chunk, so the wait
    here comes after aiohttp's own work for the request (the connection taken from the pool
    or opened, the head built): the send time is when the request's bytes go out.

    Handing bytes to the asyncio transport is not enough: a large body waits in the
    transport's buffer, and a connection that breaks then never sent it. So the transport's
    write-buffer limits are set to zero, which makes ``drain`` wait until the buffer is
    empty, i.e. every byte is in the kernel; only then is the body ``written``.
    """

    written = False
    at_send: _AtSend = _AtSend(None)

    async def _flushed(self, writer: Any) -> None:
        await writer.drain()
        transport = getattr(writer, "transport", None)
        self.written = transport is not None and transport.get_write_buffer_size() == 0

    async def write(self, writer: Any) -> None:
        await self.at_send()
        _no_write_buffer(writer)
        await super().write(writer)
        await self._flushed(writer)

    async def write_with_length(self, writer: Any, content_length: int | None) -> None:
        await self.at_send()
        _no_write_buffer(writer)
        await super().write_with_length(writer, content_length)
        await self._flushed(writer)


def _no_write_buffer(writer: Any) -> None:
    transport = getattr(writer, "transport", None)
    if transport is not None and not transport.is_closing():
        transport.set_write_buffer_limits(high=0)


_NOT_CONNECTED = (
    aiohttp.ClientConnectorCertificateError,
    aiohttp.ClientConnectorSSLError,
    aiohttp.ClientProxyConnectionError,
)


def never_reached_server(exc: BaseException, body_written: bool) -> bool:
    """True when a request that failed with ``exc`` before any response head cannot have
    been received by the server: no connection was made, or its body was not completely
    written. TLS and proxy failures are left out: a new connection fails the same way."""
    if isinstance(exc, aiohttp.ClientConnectorError):
        return not isinstance(exc, _NOT_CONNECTED)
    return isinstance(exc, (aiohttp.ClientConnectionError, OSError)) and not body_written


def fail(
    res: RequestResult,
    kind: str,
    exc: BaseException | None,
    *,
    message: str | None = None,
    body: bytes | None = None,
    secrets: tuple[str, ...] = (),
) -> None:
    """Mark ``res`` failed: kind, exception class, scrubbed and capped message and body."""
    res.error = kind
    res.error_class = type(exc).__name__ if exc is not None else None
    text = message if message is not None else (str(exc) if exc is not None else "")
    res.error_message = scrub_capped(text, ERROR_MESSAGE_LIMIT, secrets) if text else None
    if body:
        res.error_body = scrub_capped(
            body.decode("utf-8", errors="replace"), ERROR_BODY_LIMIT, secrets
        )


@dataclass
class Sender:
    """Sends streamed requests for one window and records how each one ended.

    Attributes:
        session: the session of first attempts (pooled connections when ``keep_alive``).
        url: the streaming endpoint.
        headers: headers of every request.
        timeout_s: per request, all attempts together, to the end of the stream (s).
        max_connections: connection limit of the fresh-connection session.
        keep_alive: reuse pooled connections; turned off for good once the server is seen
            to be one that closes streamed connections (``Server`` header).
        secrets: values scrubbed from kept error text (the API key).
        path: direct, or the proxy every request goes through
            (:func:`tokenwatt.netpath.network_path`); a connection error's message names it.
    """

    session: aiohttp.ClientSession
    url: str
    headers: dict[str, str]
    timeout_s: float
    max_connections: int = 256
    keep_alive: bool = True
    secrets: tuple[str, ...] = field(default=(), repr=False)
    path: NetworkPath = field(default_factory=NetworkPath)
    _fresh: aiohttp.ClientSession | None = None

    def fresh_session(self) -> aiohttp.ClientSession:
        """The session of retries and of non-kept-alive requests (a new connection each)."""
        if self._fresh is None:
            self._fresh = open_session(self.max_connections, keep_alive=False)
        return self._fresh

    async def close(self) -> None:
        """Close the fresh-connection session, if one was opened (not ``session``)."""
        if self._fresh is not None:
            await self._fresh.close()

    async def send(
        self,
        res: RequestResult,
        body: bytes,
        *,
        budget_s: float | None = None,
        at_send: AtSend | None = None,
    ) -> None:
        """Send one request and stream its answer into ``res``; never raises but
        ``asyncio.CancelledError``: every failure is recorded in ``res``.

        ``budget_s``: what is left of the request's ``timeout_s`` (s) when part of it went
        before the send (a wait for a concurrency slot, or for the send time); by default all
        of it. ``at_send``: awaited once, right before the request's first byte goes out
        (after aiohttp has a connection for it), by the first attempt that gets that far; a
        request that failed before any attempt did awaits it after the failure, so that its
        end is never before its send time.
        """
        once = _AtSend(at_send)
        try:
            await self._bounded(res, body, budget_s, once)
            await once()  # no-op unless it failed before any byte (a refused connection)
        finally:
            if res.error in ("connect", "disconnect") and self.path.proxy_url is not None:
                res.error_message = (res.error_message or "") + self.path.error_note

    async def _bounded(
        self, res: RequestResult, body: bytes, budget_s: float | None, at_send: _AtSend
    ) -> None:
        try:
            async with asyncio.timeout(self.timeout_s if budget_s is None else max(budget_s, 0.0)):
                await self._attempts(res, body, at_send)
        except TimeoutError as exc:
            message = f"no end of stream within the {self.timeout_s:g} s request timeout"
            fail(res, "timeout", exc, message=message)
        except StreamError as exc:
            fail(res, exc.kind, exc, body=exc.body, secrets=self.secrets)
        except aiohttp.ClientConnectorError as exc:
            fail(res, "connect", exc, secrets=self.secrets)
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError) as exc:
            fail(res, "disconnect", exc, secrets=self.secrets)
        except aiohttp.ClientResponseError as exc:
            fail(res, "protocol", exc, secrets=self.secrets)
        except (aiohttp.ClientError, OSError) as exc:
            kind = "connect" if res.status is None else "disconnect"
            fail(res, kind, exc, secrets=self.secrets)

    async def _attempts(self, res: RequestResult, body: bytes, at_send: _AtSend) -> None:
        while True:
            payload = _Body(body, content_type="application/json")
            payload.at_send = at_send
            fresh = res.transport_retries > 0 or not self.keep_alive
            try:
                await self._attempt(self.fresh_session() if fresh else self.session, res, payload)
                return
            except (aiohttp.ClientError, OSError) as exc:
                if (
                    res.status is not None
                    or res.transport_retries >= MAX_TRANSPORT_RETRIES
                    or not never_reached_server(exc, payload.written)
                ):
                    raise
                res.transport_retries += 1

    async def _attempt(
        self, session: aiohttp.ClientSession, res: RequestResult, payload: _Body
    ) -> None:
        async with session.post(
            self.url, data=payload, headers=self.headers, proxy=self.path.proxy_url
        ) as resp:
            res.status = resp.status
            if self.keep_alive and resp.headers.get("Server", "").startswith(_CLOSE_AFTER_STREAM):
                self.keep_alive = False
            if resp.status != 200:
                head = b""
                with contextlib.suppress(aiohttp.ClientError, asyncio.IncompleteReadError):
                    head = await resp.content.read(_ERROR_BODY_READ)
                message = f"HTTP {resp.status} {resp.reason or ''}".rstrip()
                fail(
                    res,
                    f"http_{resp.status}",
                    None,
                    message=message,
                    body=head,
                    secrets=self.secrets,
                )
                return
            encoding = resp.headers.get("Content-Encoding", "identity")
            if encoding.lower() not in ("", "identity"):
                raise StreamError(
                    "protocol",
                    f"the stream came compressed (Content-Encoding {encoding}) although the"
                    " request asked for none: its events can not be timed as they come",
                )
            await read_stream(resp, res)


__all__ = [
    "ERROR_BODY_LIMIT",
    "ERROR_MESSAGE_LIMIT",
    "KEEPALIVE_TIMEOUT_S",
    "MAX_TRANSPORT_RETRIES",
    "AtSend",
    "Sender",
    "fail",
    "keeps_streams_alive",
    "never_reached_server",
    "open_session",
]
