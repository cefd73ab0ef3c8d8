"""A response's decode in slices: the other tasks of the loop run between slices, a send due
soon goes first, a stream cut short mid-decode keeps every chunk that came, and a fault ends
the decode where it is. Responses come from a fake reader (as in ``test_stream_reads.py``);
the send timer is the loop's real timerfd."""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
import time
from collections.abc import AsyncIterator

import pytest
from loadgen_helpers import BOTH_LOOPS

from tokenwatt.collect.load.sends import SEND_FD_BATCH_S, SEND_FD_EARLY_S, SEND_SPIN_S
from tokenwatt.collect.load.stream import read_stream
from tokenwatt.collect.load.stream_reads import (
    DECODE_SLICE_EVENTS,
    FRAME_SLICE_BYTES,
    StreamError,
    StreamReads,
    slice_end,
)
from tokenwatt.collect.load.timers import MAKE_WAY_S, ReleaseMargin, loop_timer, make_way
from tokenwatt.records import RequestResult

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="timerfd is Linux's")


def text(t: str) -> bytes:
    return b"data: " + json.dumps({"choices": [{"text": t}]}).encode() + b"\n\n"


ERROR = b'data: {"error": {"message": "engine fell over"}}\n\n'
DONE = b"data: [DONE]\n\n"


class _Content:
    def __init__(self, reads: list[bytes], hang: bool) -> None:
        self.reads = reads
        self.hang = hang

    def at_eof(self) -> bool:
        return not self.hang

    async def iter_any(self) -> AsyncIterator[bytes]:
        for piece in self.reads:
            yield piece
        if self.hang:  # the body stays open after its reads (a stalled server's)
            await asyncio.Event().wait()


class _Response:
    def __init__(self, reads: list[bytes], *, hang: bool = False) -> None:
        self.headers = {"Content-Type": "text/event-stream"}
        self.content = _Content(reads, hang)


async def _watch(res: RequestResult, seen: list[tuple[int, float | None]]) -> None:
    """What another task of the loop sees at each of its turns."""
    while True:
        seen.append((len(res.chunk_s), res.first_token_s))
        await asyncio.sleep(0)


async def test_other_tasks_run_between_the_slices_of_a_long_answers_decode() -> None:
    n = 10 * DECODE_SLICE_EVENTS
    res = RequestResult(scheduled_s=0.0)
    seen: list[tuple[int, float | None]] = []
    watcher = asyncio.create_task(_watch(res, seen))
    await asyncio.sleep(0)
    await read_stream(_Response([b"".join(text("t") for _ in range(n)) + DONE]), res)  # type: ignore[arg-type]
    watcher.cancel()
    assert len(res.chunk_s) == n
    counts = [c for c, _ in seen]
    # The watcher saw the decode part-way, one slice at a time.
    assert any(0 < c < n for c in counts), counts
    assert max(b - a for a, b in itertools.pairwise(counts)) <= DECODE_SLICE_EVENTS
    # The preview's first token stood while the rest was decoded: once set, never unset.
    firsts = [first for _, first in seen]
    assert None not in firsts[[f is not None for f in firsts].index(True) :]


async def test_a_stream_cancelled_mid_decode_keeps_every_chunk_that_came() -> None:
    n = 10 * DECODE_SLICE_EVENTS
    res = RequestResult(scheduled_s=0.0)
    body = b"".join(text("t") for _ in range(n)) + DONE
    task = asyncio.create_task(read_stream(_Response([body]), res))  # type: ignore[arg-type]
    for _ in range(100_000):  # cancelled part-way on purpose
        if 0 < len(res.chunk_s) < n:
            break
        await asyncio.sleep(0)
    else:
        pytest.fail("the decode never yielded part-way")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(res.chunk_s) == n


async def test_a_fault_ends_the_decode_there_even_across_slices() -> None:
    before = 3 * DECODE_SLICE_EVENTS + 5
    body = b"".join(text("a") for _ in range(before)) + ERROR
    body += b"".join(text("b") for _ in range(2 * DECODE_SLICE_EVENTS)) + DONE
    res = RequestResult(scheduled_s=0.0)
    with pytest.raises(StreamError) as caught:
        await read_stream(_Response([body]), res)  # type: ignore[arg-type]
    assert caught.value.kind == "stream_error"
    assert len(res.chunk_s) == before  # nothing after the error counts


async def test_an_error_in_a_later_read_of_one_slice_keeps_each_reads_time() -> None:
    # Both reads are decoded in one slice; the text of each keeps its own read's time, and the
    # error stops the decode at the second read, after its text.
    res = RequestResult(scheduled_s=0.0)
    reads = StreamReads(res)
    reads.pending.append((1.0, text("a") + text("b")))
    reads.pending.append((2.0, text("c") + ERROR + text("d")))
    with pytest.raises(StreamError) as caught:
        await reads.decode_slices()
    assert caught.value.kind == "stream_error"
    assert "engine fell over" in str(caught.value)
    assert res.chunk_s == [1.0, 1.0, 2.0] and res.last_token_s == 2.0
    assert reads.pieces == ["a", "b", "c"] and not reads.pending


async def test_read_by_read_or_in_slices_the_same_chunks_and_times() -> None:
    events = [text(str(i)) for i in range(400)]
    reads = [b"".join(events[:5]), b"".join(events[5:200]), b"".join(events[200:]) + DONE]
    sliced = RequestResult(scheduled_s=0.0)
    await read_stream(_Response(reads), sliced)  # type: ignore[arg-type]
    at_once = RequestResult(scheduled_s=0.0)
    stream = StreamReads(at_once)
    for i, piece in enumerate(reads):
        stream.pending.append((float(i), piece))
    stream.decode_pending()
    assert len(sliced.chunk_s) == len(at_once.chunk_s) == len(events)
    # One time per read, in order, the same grouping both ways.
    groups = [sliced.chunk_s.count(t) for t in dict.fromkeys(sliced.chunk_s)]
    assert groups == [at_once.chunk_s.count(float(i)) for i in range(3)] == [5, 195, 200]


def test_a_read_is_cut_between_whole_events() -> None:
    event = text("x" * 90)  # 110 bytes or so
    piece = event * (3 * FRAME_SLICE_BYTES // len(event))
    cut = slice_end(piece)
    assert cut <= FRAME_SLICE_BYTES and piece[:cut].endswith(b"\n\n")
    assert cut > FRAME_SLICE_BYTES - len(event)  # as much as fits
    assert slice_end(piece[:100]) == 100  # short: whole
    one_big = b"data: " + b"y" * (2 * FRAME_SLICE_BYTES) + b"\n\n" + event
    assert slice_end(one_big) == len(one_big) - len(event)  # after the first separator past it
    assert slice_end(b"z" * (2 * FRAME_SLICE_BYTES)) == 2 * FRAME_SLICE_BYTES  # none: whole


@linux_only
async def test_work_makes_way_for_a_send_due_soon_and_not_for_one_due_later() -> None:
    timer = loop_timer(SEND_FD_BATCH_S, lambda: ReleaseMargin(SEND_FD_EARLY_S, SEND_SPIN_S, 1.0))
    due = time.perf_counter() + MAKE_WAY_S / 2
    token = timer.order.enter(due)
    try:
        await make_way(yield_anyway=False)
        assert time.perf_counter() >= due  # waited for the send's time
    finally:
        timer.order.leave(token)
    later = time.perf_counter() + 0.05
    token = timer.order.enter(later)
    try:
        await make_way(yield_anyway=False)
        assert time.perf_counter() < later  # far off: no wait
    finally:
        timer.order.leave(token)


@linux_only
@BOTH_LOOPS
async def test_a_decode_waits_while_a_send_is_due_and_the_send_goes_first() -> None:
    timer = loop_timer(SEND_FD_BATCH_S, lambda: ReleaseMargin(SEND_FD_EARLY_S, SEND_SPIN_S, 1.0))
    res = RequestResult(scheduled_s=0.0)
    res.first_token_s = 1.0  # as the preview of the first read found it
    stream = StreamReads(res)
    stream.pending.append((1.0, b"".join(text("t") for _ in range(2 * DECODE_SLICE_EVENTS))))
    due = time.perf_counter() + MAKE_WAY_S / 2
    token = timer.order.enter(due)
    decoded_at_send: list[int] = []

    async def send() -> None:
        await timer.wait_until(due - SEND_FD_EARLY_S)
        while time.perf_counter() < due:
            pass
        decoded_at_send.append(len(res.chunk_s))
        first_at_send.append(res.first_token_s)
        timer.order.leave(token)

    first_at_send: list[float | None] = []
    await asyncio.gather(send(), stream.decode_slices())
    assert decoded_at_send == [0]  # the send went out before the decode began
    assert first_at_send == [1.0]  # and an early stop looking then saw the first token
    assert len(res.chunk_s) == 2 * DECODE_SLICE_EVENTS


def role() -> bytes:
    return (
        b"data: " + json.dumps({"choices": [{"delta": {"role": "assistant"}}]}).encode() + b"\n\n"
    )


async def test_an_error_past_the_first_tokens_slice_fails_at_its_read() -> None:
    # The first slice holds the first token; the error, events later in the same read, is
    # found then, not at the request's timeout (the body never ends).
    piece = text("a") + b"".join(role() for _ in range(DECODE_SLICE_EVENTS + 6)) + ERROR
    res = RequestResult(scheduled_s=0.0)
    with pytest.raises(StreamError) as caught:
        await asyncio.wait_for(read_stream(_Response([piece], hang=True), res), 5.0)  # type: ignore[arg-type]
    assert caught.value.kind == "stream_error"
    assert len(res.chunk_s) == 1


async def test_a_stream_cancelled_in_the_preview_keeps_the_rest_of_its_read() -> None:
    # Role-only events fill the first slices, the text comes after them in the same read:
    # cancelled at the preview's first yield, the events not decoded yet are kept and
    # decoded as it stops.
    piece = b"".join(role() for _ in range(2 * DECODE_SLICE_EVENTS)) + text("a") + text("b")
    res = RequestResult(scheduled_s=0.0)
    task = asyncio.create_task(read_stream(_Response([piece], hang=True), res))  # type: ignore[arg-type]
    await asyncio.sleep(0)  # the task reads and decodes its first slice, then yields
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(res.chunk_s) == 2 and res.first_token_s is not None


async def test_a_long_read_without_events_yields_between_its_slices() -> None:
    # Comments only (no data lines): every slice of the read is split with the loop free
    # in between, as for events.
    res = RequestResult(scheduled_s=0.0)
    turns = 0

    async def count() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    counter = asyncio.create_task(count())
    await asyncio.sleep(0)
    piece = b": ping\n\n" * (10 * FRAME_SLICE_BYTES // 8) + text("a") + DONE
    await read_stream(_Response([piece]), res)  # type: ignore[arg-type]
    counter.cancel()
    assert len(res.chunk_s) == 1
    assert turns >= 9  # a turn of the loop for each of the ten slices, about
