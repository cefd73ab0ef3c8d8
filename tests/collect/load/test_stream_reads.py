"""read_stream: chunk times taken per read, everything else decoded when the response ends.

A fake response yields the reads; the stream module's clock is replaced by one that gives
read i the time i + 1, so every expected time below is computed by hand.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tokenwatt.collect.load import stream as stream_module
from tokenwatt.collect.load import stream_reads
from tokenwatt.collect.load.stream import read_stream
from tokenwatt.collect.load.stream_reads import StreamError
from tokenwatt.records import RequestResult


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        self.now += 1.0
        return self.now


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr(stream_module, "time", fake)
    return fake


class _Content:
    def __init__(self, reads: list[bytes], hang: asyncio.Event | None, res: RequestResult):
        self.reads = reads
        self.hang = hang
        self.res = res
        self.seen_live: list[tuple[float | None, int]] = []
        self.given = 0

    def at_eof(self) -> bool:
        """As aiohttp's: every read given and the body ended (a hanging body never ends)."""
        return self.hang is None and self.given == len(self.reads)

    async def iter_any(self) -> AsyncIterator[bytes]:
        for piece in self.reads:
            self.given += 1
            yield piece
            # What the load generator could see between reads.
            self.seen_live.append((self.res.first_token_s, len(self.res.chunk_s)))
        if self.hang is not None:
            await self.hang.wait()


class _Response:
    def __init__(self, reads: list[bytes], res: RequestResult, *, hang: bool = False) -> None:
        self.headers = {"Content-Type": "text/event-stream"}
        self.content = _Content(reads, asyncio.Event() if hang else None, res)


def event(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def delta(**fields: str) -> bytes:
    return event({"choices": [{"delta": fields}]})


def text(t: str) -> bytes:
    return event({"choices": [{"text": t}]})


USAGE = event({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 7}})
DONE = b"data: [DONE]\n\n"


async def read(reads: list[bytes], *, hang: bool = False) -> tuple[RequestResult, _Response]:
    res = RequestResult(scheduled_s=0.0)
    resp = _Response(reads, res, hang=hang)
    if hang:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(read_stream(resp, res), 0.2)  # type: ignore[arg-type]
    else:
        await read_stream(resp, res)  # type: ignore[arg-type]
    return res, resp


async def test_reasoning_then_content_each_chunk_timed_by_its_read() -> None:
    reads = [
        delta(role="assistant"),
        delta(reasoning_content="think") + delta(reasoning=" more"),
        delta(content="Hi") + delta(content=" there"),
        USAGE + DONE,
    ]
    res, resp = await read(reads)
    assert res.first_token_s == 2.0
    assert res.first_content_s == 3.0
    assert res.chunk_s == [2.0, 2.0, 3.0, 3.0]
    assert res.last_token_s == 3.0
    assert res.reasoning is True
    assert (res.output_tokens, res.prompt_tokens, res.usage_missing) == (7, 5, False)
    assert res.output_text is None
    # While streaming: the reads up to the first token's are decoded as they come (its
    # read's two chunks); the rest only at the end (the [DONE] read, where the stream ends:
    # a body already ended is not read again).
    assert resp.content.seen_live == [(None, 0), (2.0, 2), (2.0, 2)]
    assert resp.content.given == len(reads)


@pytest.mark.parametrize("cut", range(1, 120))
async def test_a_read_boundary_anywhere_gives_each_chunk_its_own_reads_time(cut: int) -> None:
    body = text("a") + text("b") + text("c") + USAGE + DONE
    ends = [len(text("a")), 2 * len(text("a")), 3 * len(text("a"))]  # each event's "\n\n" end
    res, _ = await read([body[:cut], body[cut:]])
    assert res.chunk_s == [1.0 if end <= cut else 2.0 for end in ends]
    assert res.first_token_s == res.chunk_s[0]
    assert res.output_tokens == 7


async def test_without_usage_tokens_are_text_chunks_and_the_text_is_kept() -> None:
    res, _ = await read([text("x"), text("y") + text("z"), DONE])
    assert res.chunk_s == [1.0, 2.0, 2.0]
    assert (res.output_tokens, res.usage_missing) == (3, True)
    assert "".join(res.output_text or []) == "xyz"


async def test_an_error_object_fails_the_request_at_its_read_not_at_the_timeout() -> None:
    res = RequestResult(scheduled_s=0.0)
    resp = _Response([text("a"), event({"error": {"message": "boom"}})], res, hang=True)
    with pytest.raises(StreamError) as caught:
        await asyncio.wait_for(read_stream(resp, res), 5.0)  # type: ignore[arg-type]
    assert caught.value.kind == "stream_error"
    assert "boom" in str(caught.value)
    assert res.chunk_s == [1.0]


async def test_a_bad_event_is_reported_from_its_own_read_with_the_earlier_chunks_kept() -> None:
    reads = [text("a"), text("b"), b"data: {not json\n\n", text("c") + USAGE + DONE]
    with pytest.raises(StreamError) as caught:
        await read(reads)
    assert caught.value.kind == "protocol"
    assert "…[{not json]…" in str(caught.value)


async def test_the_chunks_before_a_bad_event_keep_their_times() -> None:
    res = RequestResult(scheduled_s=0.0)
    reads = [text("a"), text("b"), b"data: {not json\n\n", text("c") + USAGE + DONE]
    with pytest.raises(StreamError):
        await read_stream(_Response(reads, res), res)  # type: ignore[arg-type]
    assert res.chunk_s == [1.0, 2.0]
    assert (res.first_token_s, res.last_token_s) == (1.0, 2.0)


async def test_a_stream_cut_short_keeps_the_chunks_that_came() -> None:
    res, _ = await read([delta(role="assistant"), text("a"), text("b") + text("c")], hang=True)
    assert res.chunk_s == [2.0, 3.0, 3.0]
    assert (res.first_token_s, res.last_token_s) == (2.0, 3.0)
    assert res.output_tokens == 0  # no usage came: the request failed before its end


async def test_done_without_text_is_empty_and_no_done_is_a_protocol_error() -> None:
    with pytest.raises(StreamError) as empty:
        await read([delta(role="assistant") + USAGE + DONE])
    assert empty.value.kind == "empty"
    with pytest.raises(StreamError) as unfinished:
        await read([text("a") + USAGE])
    assert unfinished.value.kind == "protocol"
    assert "[DONE]" in str(unfinished.value)


class _Counted(_Response):
    """A response whose reads are counted as the reader takes them."""

    def __init__(self, reads: list[bytes], res: RequestResult) -> None:
        super().__init__(reads, res)
        self.taken = 0

        async def iter_any() -> AsyncIterator[bytes]:
            for piece in reads:
                self.taken += 1
                yield piece

        self.content.iter_any = iter_any  # type: ignore[method-assign]


async def test_a_response_longer_than_max_tokens_can_explain_fails_at_that_read() -> None:
    # The limit for max_tokens 16: 1 MiB + 16 * 4096 = 1,114,112 bytes. After text("a"),
    # 17 blocks of 65,536 bytes make 1,114,112 + len(text("a")): over at the 18th read.
    res = RequestResult(scheduled_s=0.0, max_tokens=16)
    block = b"data: " + b"A" * (65536 - 6)  # a line that never ends, as a flooding server
    resp = _Counted([text("a")] + [block] * 40, res)
    with pytest.raises(StreamError) as caught:
        await read_stream(resp, res)  # type: ignore[arg-type]
    assert caught.value.kind == "protocol"
    assert str(caught.value) == (
        "the response is longer than 1,114,112 bytes, more than max_tokens 16 can explain;"
        " the rest was not read"
    )
    assert resp.taken == 18
    assert res.chunk_s == [1.0]  # what came before is kept


async def test_a_line_longer_than_the_bound_fails_before_the_first_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(stream_reads, "MAX_SSE_LINE", 100_000)
    res = RequestResult(scheduled_s=0.0)  # no max_tokens: the response bound is 65 MiB
    resp = _Counted([b"data: " + b"A" * 49_994] + [b"A" * 50_000] * 40, res)
    with pytest.raises(StreamError) as caught:
        await read_stream(resp, res)  # type: ignore[arg-type]
    assert caught.value.kind == "protocol"
    assert str(caught.value) == (
        "a line of the event stream is longer than 100,000 bytes (150,000 bytes without a line end)"
    )
    assert resp.taken == 3
