"""The wait for the send time comes last, right before a request's first byte: aiohttp takes or
opens the connection in the request's lead, and no byte reaches the server before its time.

Real sockets on 127.0.0.1 (a bare asyncio server that notes when each request's first byte
arrives, on the client's own clock: one process) and aiohttp's real client.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp
import pytest
import test_transport
from loadgen_helpers import BOTH_LOOPS
from streaming_server import tokens_stream
from test_transport import Conn, RawServer, config, reset, sse_response, window

from tokenwatt.collect.load.http import MAX_TRANSPORT_RETRIES, Sender, open_session
from tokenwatt.collect.load.sends import SendWait
from tokenwatt.collect.load.timers import SendOrder
from tokenwatt.collect.load.window_state import WindowState
from tokenwatt.records import RequestResult

raw = test_transport.raw  # the fixture of scripted raw servers, used here too


@dataclass
class FirstBytes:
    """A :class:`RawServer` that answers every request with a two-token stream, and when each
    connection was accepted and each request's first byte reached it (``time.perf_counter``,
    in arrival order); its complete request bodies are ``server.requests``."""

    server: RawServer | None = None
    accepted_s: list[float] = field(default_factory=list)
    first_byte_s: list[float] = field(default_factory=list)

    @property
    def port(self) -> int:
        assert self.server is not None
        return self.server.port

    @property
    def bodies(self) -> list[bytes]:
        assert self.server is not None
        return self.server.requests


async def answer(
    server: RawServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """Read the rest of one request and answer it with a two-token stream."""
    await server.read_request(reader)
    writer.write(sse_response(tokens_stream(2)))
    await writer.drain()


@pytest.fixture
async def first_bytes(raw: Callable[[Conn], Awaitable[RawServer]]) -> FirstBytes:
    seen = FirstBytes()

    async def conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, index: int) -> None:
        seen.accepted_s.append(time.perf_counter())
        while await reader.read(1):  # keep-alive: one request after another
            seen.first_byte_s.append(time.perf_counter())
            assert seen.server is not None
            await answer(seen.server, reader, writer)

    seen.server = await raw(conn)
    return seen


@pytest.fixture
def order_log(monkeypatch: pytest.MonkeyPatch) -> dict[float, list[float]]:
    """When each send joined its loop's :class:`SendOrder` and left it (s), by its target."""
    log: dict[float, list[float]] = {}
    targets: dict[tuple[int, int], float] = {}
    enter, leave = SendOrder.enter, SendOrder.leave

    def entered(self: SendOrder, target: float) -> int:
        token = enter(self, target)
        targets[id(self), token] = target
        log[target] = [time.perf_counter()]
        return token

    def left(self: SendOrder, token: int) -> None:
        leave(self, token)
        log[targets[id(self), token]].append(time.perf_counter())

    monkeypatch.setattr(SendOrder, "enter", entered)
    monkeypatch.setattr(SendOrder, "leave", left)
    return log


@pytest.mark.parametrize("keep_alive", [True, False])
@BOTH_LOOPS
async def test_no_request_reaches_the_server_before_its_time_and_all_in_order(
    first_bytes: FirstBytes, keep_alive: bool, order_log: dict[float, list[float]]
) -> None:
    base = f"http://127.0.0.1:{first_bytes.port}/v1"
    result = await window(config(base, keep_alive=keep_alive), rate=300, duration=0.5)
    reqs = sorted(result.requests, key=lambda r: r.scheduled_s)
    assert len(reqs) > 60 and all(r.error is None for r in reqs)
    assert len(first_bytes.first_byte_s) == len(reqs)  # each reached the server once
    # Every request's head left only at its time: the connection came first (fresh ones were
    # opened in the lead), the bytes after. The server read them in the schedule's order.
    assert all(r.scheduled_s <= r.sent_s for r in reqs)
    assert all(r.dispatched_s == r.sent_s for r in reqs)  # a slot was free before the time
    arrivals = sorted(first_bytes.first_byte_s)
    assert all(a >= r.scheduled_s for a, r in zip(arrivals, reqs, strict=True))
    # No bytes before their send: with both sorted, the k-th arrival comes after the k-th
    # send exactly when no request's bytes came before its own send.
    sent = sorted(r.sent_s for r in reqs)
    assert all(a >= t for a, t in zip(arrivals, sent, strict=True))
    # The schedule's order among the sends waiting for their time: a later send went out
    # first only when the earlier one joined the order after it had gone (it started
    # waiting late: a loaded machine held its task or its connection past its lead).
    assert {r.scheduled_s for r in reqs} <= order_log.keys()
    for i, early in enumerate(reqs):
        for later in reqs[i + 1 :]:
            if later.sent_s < early.sent_s:
                joined, (_, gone) = order_log[early.scheduled_s][0], order_log[later.scheduled_s]
                assert joined > gone, (early.scheduled_s, later.scheduled_s)
    if not keep_alive:
        # A fresh connection per request, opened in its lead: most were open before the
        # request's time (a median, as a busy machine may make one connect slow).
        before = [a < r.scheduled_s for a, r in zip(first_bytes.accepted_s, reqs, strict=True)]
        assert sum(before) > len(reqs) / 2, f"{sum(before)} of {len(reqs)}"


@BOTH_LOOPS
async def test_sends_due_microseconds_apart_keep_their_order_on_the_wire(
    first_bytes: FirstBytes,
) -> None:
    """Ten requests due 10 us apart, on ten pooled connections made beforehand: the server
    sees them in that order, none before its time."""
    url = f"http://127.0.0.1:{first_bytes.port}/v1/chat/completions"
    session = open_session(16)
    sender = Sender(session, url, {}, timeout_s=5.0)
    try:
        warm = [RequestResult(scheduled_s=0.0) for _ in range(10)]
        await asyncio.gather(*(sender.send(r, b'{"n": -1}') for r in warm))
        first_bytes.first_byte_s.clear()
        first_bytes.bodies.clear()
        sends = SendWait("timerfd")
        t0 = time.perf_counter() + 0.01
        reqs = [RequestResult(scheduled_s=t0 + i * 10e-6) for i in range(10)]

        async def one(i: int, res: RequestResult) -> None:
            async def at_send() -> None:
                await sends.until(res.scheduled_s)
                res.sent_s = time.perf_counter()

            await sender.send(res, b'{"n": %d}' % i, at_send=at_send)

        await asyncio.gather(*(one(i, r) for i, r in enumerate(reqs)))
    finally:
        await sender.close()
        await session.close()
    assert [r.error for r in reqs] == [None] * 10
    assert first_bytes.bodies == [b'{"n": %d}' % i for i in range(10)]
    assert [r.sent_s for r in reqs] == sorted(r.sent_s for r in reqs)
    assert all(a >= r.scheduled_s for a, r in zip(first_bytes.first_byte_s, reqs, strict=True))


def _refused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_a_connection_refused_before_its_time_ends_at_its_time_waited_once() -> None:
    """Both attempts fail before any byte (the refused connect takes microseconds, far
    inside the lead): the request still waits for its time, once, and ends after it."""
    url = f"http://127.0.0.1:{_refused_port()}/v1/chat/completions"
    session = open_session(4)
    sender = Sender(session, url, {}, timeout_s=5.0)
    res = RequestResult(scheduled_s=time.perf_counter() + 0.05)
    waits: list[float] = []

    async def at_send() -> None:
        await asyncio.sleep(max(0.0, res.scheduled_s - time.perf_counter()))
        waits.append(time.perf_counter())

    try:
        await sender.send(res, b"{}", at_send=at_send)
    finally:
        await sender.close()
        await session.close()
    assert (res.error, res.transport_retries) == ("connect", MAX_TRANSPORT_RETRIES)
    assert len(waits) == 1 and waits[0] >= res.scheduled_s


async def test_a_refused_window_records_every_send_at_or_after_its_time() -> None:
    result = await window(config(f"http://127.0.0.1:{_refused_port()}/v1"))
    assert result.requests
    for r in result.requests:
        assert r.error == "connect"
        assert r.dispatched_s is not None and r.scheduled_s <= r.dispatched_s <= r.sent_s
        assert r.finished_s is not None and r.finished_s >= r.sent_s


async def test_a_retry_after_a_break_in_the_wait_goes_out_once_at_its_time(
    raw: Callable[[Conn], Awaitable[RawServer]],
) -> None:
    """A pooled connection the server drops while the request waits for its time (the
    race of a server closing idle connections): the wait is not cut short by the break, the
    retry goes out on a fresh connection at the time, and the wait ends once."""
    seen: list[tuple[int, float]] = []

    async def conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, index: int) -> None:
        await reader.read(1)
        seen.append((index, time.perf_counter()))
        await answer(server, reader, writer)
        if index == 0:  # the warm-up request, then a drop 20 ms later
            await asyncio.sleep(0.02)
            reset(writer)

    server = await raw(conn)
    url = f"{server.base}/chat/completions"
    session = open_session(1)
    sender = Sender(session, url, {}, timeout_s=5.0)
    try:
        await sender.send(RequestResult(scheduled_s=0.0), b"{}")
        res = RequestResult(scheduled_s=time.perf_counter() + 0.06)
        waits: list[float] = []

        async def at_send() -> None:
            await asyncio.sleep(max(0.0, res.scheduled_s - time.perf_counter()))
            waits.append(time.perf_counter())

        # Taken from the pool now, dropped by the server while it waits for its time.
        await sender.send(res, b"{}", at_send=at_send)
    finally:
        await sender.close()
        await session.close()
    assert (res.error, res.status, res.output_tokens) == (None, 200, 2), res.error_message
    assert len(waits) == 1 and waits[0] >= res.scheduled_s
    assert res.transport_retries == 1 and [i for i, _ in seen] == [0, 1]  # a fresh connection
    assert seen[1][1] >= res.scheduled_s


async def test_sender_without_at_send_sends_at_once(first_bytes: FirstBytes) -> None:
    url = f"http://127.0.0.1:{first_bytes.port}/v1/chat/completions"
    async with aiohttp.ClientSession() as session:
        sender = Sender(session, url, {}, timeout_s=5.0)
        res = RequestResult(scheduled_s=time.perf_counter())
        await sender.send(res, b"{}")
    assert (res.error, res.output_tokens, len(first_bytes.bodies)) == (None, 2, 1)


async def test_lateness_with_a_free_slot_is_send_lag_and_a_full_slots_wait_is_not(
    first_bytes: FirstBytes,
) -> None:
    """A request whose task runs 50 ms past its send time and finds a slot free was held up
    by the client: dispatched when sent, all 50 ms send lag. One that waited 50 ms past its
    time for the only slot was held up by the engine: dispatched at its time."""
    cfg = config(f"http://127.0.0.1:{first_bytes.port}/v1", max_concurrency=1)
    async with open_session(1) as session:
        state = WindowState(cfg, session)
        late = RequestResult(scheduled_s=time.perf_counter() - 0.05)
        await state.request(late, b'{"n": 1}', SendWait("timerfd"))
        assert late.error is None and late.dispatched_s == late.sent_s
        assert late.sent_s - late.scheduled_s >= 0.05  # type: ignore[operator]

        await state.slots.acquire()  # the engine's backlog holds the only slot
        held = RequestResult(scheduled_s=time.perf_counter() + 0.01)
        task = asyncio.ensure_future(state.request(held, b'{"n": 2}', SendWait("timerfd")))
        await asyncio.sleep(0.06)
        state.slots.release()
        await task
    assert held.error is None and held.dispatched_s == pytest.approx(held.scheduled_s, abs=2e-3)
    assert held.sent_s - held.scheduled_s >= 0.049  # type: ignore[operator]
