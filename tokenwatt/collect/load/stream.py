"""Reading an OpenAI-style streamed completion (``/v1/completions`` or chat) into timings.

The hot path, run for every network read, only takes the read's arrival time and keeps
its bytes. Everything else — SSE framing, JSON decoding, which chunks carry text, content
vs reasoning, usage — is done once, when the response has ended, over all its reads
together: one msgspec decode of every event of the response, parsed into just the fields
used here (text, delta, usage, error). Each chunk still gets the arrival time of the read
it came in, so the timings are exactly those of decoding read by read.

Two things are known during the stream, because the load generator acts on them while a
window runs: the first text chunk's arrival (``first_token_s``; an early stop counts a
request still without one past the TTFT limit as a miss), found by decoding the first
reads event by event until a text chunk turns up; and an error in the stream, whose read
(one containing ``error``) is decoded at once, before the first token or after it, so that
the request fails there, with the server's message, not at the request timeout.
``benchmarks/loadgen.py`` measures the client's CPU per chunk.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import msgspec

from tokenwatt.collect.load.sse import SseDecoder, SseLineTooLongError
from tokenwatt.records import RequestResult


# gc=False: decoded JSON holds no reference cycles, and a response's hundreds of chunks
# would otherwise each be tracked (and scanned) by the garbage collector.
class _Delta(msgspec.Struct, gc=False):
    content: str | None = None
    reasoning_content: str | None = None  # reasoning models' thinking (vLLM)
    reasoning: str | None = None


class _Choice(msgspec.Struct, gc=False):
    text: str | None = None  # completions
    delta: _Delta | None = None  # chat
    finish_reason: str | None = None  # set on the choice's last chunk ("stop", "length")


class _Usage(msgspec.Struct, gc=False):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class _Chunk(msgspec.Struct, gc=False):
    """The fields of a streamed chunk that matter here; others are skipped unparsed."""

    choices: list[_Choice] | None = None
    usage: _Usage | None = None
    error: Any = None


# One typed decode for many events (joined into a JSON array): msgspec skips the fields
# we do not read, several times faster than json.loads chunk by chunk.
_CHUNKS = msgspec.json.Decoder(list[_Chunk])
_ONE_CHUNK = msgspec.json.Decoder(_Chunk)
_DONE = b"[DONE]"
# In every form of a stream's error: an "error" key, `event: error`, llama.cpp's `error:`
# line. Model text containing the word only makes its read decoded early, not wrongly.
_ERROR_MARK = b"error"
_HEAD_BYTES = 4096  # bytes of a response kept to show what it was when it is no event stream


MAX_USAGE_TOKENS = 100_000_000
"""Largest token count taken from a server's ``usage`` (no context is 10^8 tokens long); a
count outside ``[0, MAX_USAGE_TOKENS]`` makes the response a protocol error."""


MAX_SSE_LINE = 16 << 20
"""Longest line of an event stream (bytes) before the response is a protocol error: a
chunk carrying even a whole 128k-token answer, JSON-escaped, is a few MiB."""

RESPONSE_BASE_BYTES = 1 << 20
RESPONSE_BYTES_PER_TOKEN = 4096
"""A response may hold ``RESPONSE_BASE_BYTES + RESPONSE_BYTES_PER_TOKEN * max_tokens``
bytes before it is a protocol error. A streamed chunk carrying one token is about 200-400
bytes (id, model name, choice, ``data:`` framing), so this leaves more than ten times that
per token, plus room for usage, role and keep-alive events."""

UNKNOWN_MAX_TOKENS = 16_384
"""The ``max_tokens`` assumed for the response bound when a request did not say."""


def response_byte_limit(max_tokens: int | None) -> int:
    """The most bytes (of body) one streamed response may hold, for a request that asked
    for ``max_tokens`` tokens (None: :data:`UNKNOWN_MAX_TOKENS`); see
    :data:`RESPONSE_BYTES_PER_TOKEN`."""
    tokens = UNKNOWN_MAX_TOKENS if max_tokens is None else max(max_tokens, 1)
    return RESPONSE_BASE_BYTES + RESPONSE_BYTES_PER_TOKEN * tokens


class StreamError(Exception):
    """A stream that broke the protocol; ``kind`` is the request's error kind, the message
    (if any) says what was wrong and ``body`` holds the head of a response that was no event
    stream (kept as the request's ``error_body``)."""

    def __init__(self, kind: str, message: str | None = None, body: bytes | None = None) -> None:
        super().__init__(message or kind)
        self.kind = kind
        self.body = body


def _bad_event(exc: msgspec.DecodeError, joined: bytes) -> str:
    """What was wrong with a read's events: the decoder's words and the bytes around the
    fault (the position msgspec names, as ``(byte N)``)."""
    found = re.search(r"byte (\d+)", str(exc))
    at = int(found.group(1)) if found else 0
    shown = joined[max(at - 40, 0) : at + 40].decode("utf-8", errors="replace")
    return f"an event is not a completion chunk ({exc}): …{shown}…"


def _usage_count(value: int | None, name: str) -> int | None:
    if value is None or 0 <= value <= MAX_USAGE_TOKENS:
        return value
    raise StreamError("protocol", f"usage.{name} {value} is not a token count")


def _delta_text(delta: _Delta | None) -> tuple[str, bool]:
    """A chat delta's generated text and whether it is content (False: reasoning only)."""
    if delta is None:
        return "", False
    if delta.content:
        return delta.content, True
    return delta.reasoning_content or delta.reasoning or "", False


def _is_text(data: bytes) -> bool:
    """Whether one event's data is a chunk carrying generated text (False when not JSON)."""
    if data == _DONE:
        return False
    try:
        chunk = _ONE_CHUNK.decode(data)
    except msgspec.DecodeError:
        return False
    if not chunk.choices:
        return False
    choice = chunk.choices[0]
    return bool(choice.text or _delta_text(choice.delta)[0])


class _Stream:
    """One response being read: its reads so far (arrival time, SSE data) and what the
    ones already decoded said (internal)."""

    __slots__ = (
        "content_type",
        "decoder",
        "done",
        "finished",
        "head",
        "pending",
        "pieces",
        "res",
        "seen",
        "usage",
    )

    def __init__(self, res: RequestResult) -> None:
        self.res = res
        self.decoder = SseDecoder(MAX_SSE_LINE)
        # Reads not decoded yet: (arrival time, raw bytes, or the read's SSE data when the
        # framing was already split, [DONE] removed).
        self.pending: list[tuple[float, bytes | list[bytes]]] = []
        # References to strings msgspec already decoded: cheap, and dropped when usage arrives.
        self.pieces: list[str] = []
        self.usage: _Usage | None = None
        self.done = False
        self.seen = False  # any SSE data at all, [DONE] included
        self.finished = False  # a chunk carried finish_reason: the generation ended
        self.head = b""  # the response's first bytes, up to _HEAD_BYTES
        self.content_type = ""

    def datas(self, piece: bytes) -> list[bytes]:
        """The SSE data of one read up to ``[DONE]`` (``done`` set); nothing after it.

        ``[DONE]`` ends the stream wherever it is: a second one (Ray Serve LLM and API
        gateways have sent two) or any event after it is not part of the response.
        """
        if self.done:
            return []
        try:
            datas = self.decoder.feed_data(piece)
        except SseLineTooLongError as exc:
            raise StreamError("protocol", str(exc)) from exc
        if datas:
            self.seen = True
            if datas[-1] == _DONE:
                self.done = True
                datas.pop()
            if _DONE in datas:
                self.done = True
                del datas[datas.index(_DONE) :]
        return datas

    def preview(self, now: float, piece: bytes) -> None:
        """Keep a read that came before the first text chunk, and set ``first_token_s``
        if it holds one (decoding its events one by one until then). A read that may
        carry an error is decoded at once (see the module docstring)."""
        if len(self.head) < _HEAD_BYTES:
            self.head += piece[: _HEAD_BYTES - len(self.head)]
        datas = self.datas(piece)
        self.pending.append((now, datas))
        if any(_is_text(data) for data in datas):
            self.res.first_token_s = now
        if _ERROR_MARK in piece:
            self.decode_pending()

    def decode_pending(self) -> None:
        """Decode every pending read, in order: one decode for all of them; read by read
        (exactly as the reads came) when that finds a fault to report.

        Raises:
            StreamError: ``protocol`` (an event not JSON), ``stream_error`` (an error
                object in the stream).
        """
        if not self.pending:
            return
        reads = [(now, self.datas(p) if isinstance(p, bytes) else p) for now, p in self.pending]
        self.pending.clear()  # the same list object: read_stream appends to it
        if not self.res.chunk_s:
            self.res.first_token_s = None  # the preview's; set again below, or not at all
        events = [data for _, datas in reads for data in datas]
        if not events:
            return
        try:
            chunks = _CHUNKS.decode(b"[" + b",".join(events) + b"]")
        except msgspec.DecodeError:
            chunks = None
        if chunks is None or any(c.error is not None and not c.choices for c in chunks):
            for now, datas in reads:  # the fault's read, message and state as they came
                if datas:
                    self.take(self.decode_read(datas), 0, len(datas), now)
            return
        start = 0
        for now, datas in reads:
            if datas:
                self.take(chunks, start, start + len(datas), now)
                start += len(datas)

    @staticmethod
    def decode_read(datas: list[bytes]) -> list[_Chunk]:
        """The ``data:`` payloads of one read decoded in one msgspec call (a JSON array of
        them: one pass instead of one per event).

        Raises:
            StreamError: ``protocol``, naming the bad event, when one is not a chunk.
        """
        joined = b"[" + b",".join(datas) + b"]"
        try:
            chunks: list[_Chunk] = _CHUNKS.decode(joined)
        except msgspec.DecodeError as exc:
            raise StreamError("protocol", _bad_event(exc, joined)) from exc
        return chunks

    def take(self, chunks: list[_Chunk], start: int, stop: int, now: float) -> None:
        """Apply the chunks ``chunks[start:stop]`` of one read that arrived at ``now``."""
        res = self.res
        texts = 0
        for i in range(start, stop):
            chunk = chunks[i]
            choices = chunk.choices
            if choices:
                choice = choices[0]
                if choice.finish_reason:
                    self.finished = True
                text = choice.text
                if text:
                    content = True
                else:
                    text, content = _delta_text(choice.delta)
                if text:
                    texts += 1
                    self.pieces.append(text)
                    if content:
                        if res.first_content_s is None:
                            res.first_content_s = now
                    else:
                        res.reasoning = True
            elif chunk.error is not None:
                self.stamp(texts, now)  # the text before the error in this read came
                raise StreamError("stream_error", f"the stream carried an error: {chunk.error}")
            if chunk.usage is not None:
                self.usage = chunk.usage
        self.stamp(texts, now)

    def stamp(self, texts: int, now: float) -> None:
        """Record ``texts`` text chunks that arrived at ``now`` (none: nothing to do)."""
        if texts:
            res = self.res
            chunk_s = res.chunk_s
            if not chunk_s:
                res.first_token_s = now
            chunk_s.extend([now] * texts)
            res.last_token_s = now

    def end(self) -> None:
        """The response has ended: decode what is pending and check it was complete."""
        self.decode_pending()
        res = self.res
        if not self.seen:
            raise _not_a_stream(self.head, self.content_type)
        if not self.done:
            if not self.finished:
                raise StreamError(
                    "protocol", "the stream ended without data: [DONE] and without a finish_reason"
                )
            # The generation said it ended (finish_reason) and the body then closed
            # cleanly: complete, as vLLM's bench serve and the OpenAI SDK read it.
            res.without_done = True
        usage = self.usage
        completion = _usage_count(usage.completion_tokens, "completion_tokens") if usage else None
        prompt = _usage_count(usage.prompt_tokens, "prompt_tokens") if usage else None
        if completion is not None:
            res.output_tokens = completion
            if prompt is not None:
                res.prompt_tokens = prompt
        else:
            res.output_tokens = len(res.chunk_s)
            res.usage_missing = True
            res.output_text = self.pieces
        if not res.chunk_s:
            raise StreamError("empty", "[DONE] came with no generated text")


async def read_stream(resp: aiohttp.ClientResponse, res: RequestResult) -> None:
    """Read one streamed completion into ``res``: chunk times, first/last token, usage.

    Every chunk of one network read gets that read's arrival time. A chunk counts when it
    carries generated text of any kind: ``first_token_s`` is the first such chunk,
    reasoning or content; ``first_content_s`` the first carrying content (the answer of a
    reasoning model). Output tokens come from ``usage`` (``stream_options.include_usage``);
    without it they are the number of text chunks (an estimate, ``usage_missing`` set)
    and the text's pieces are kept in ``output_text`` so that a tokenizer can count them
    afterwards (:func:`tokenwatt.analysis.window.latency.summarise_window`).

    While the response streams only ``first_token_s`` is set (see the module docstring);
    the rest is filled in when it ends. A request that stops early (timeout, cancellation,
    a broken connection) keeps what its reads held: they are decoded as it stops.

    The stream ends at ``[DONE]``: events after it are not read. An error in the stream
    fails the request at its read, before the first token too.

    Memory is bounded: a response longer than :func:`response_byte_limit` of the request's
    ``max_tokens``, or with a line longer than :data:`MAX_SSE_LINE`, fails at that read.

    Raises:
        StreamError: ``protocol`` (not JSON, no ``[DONE]``, a response or line too long
            to be a completion, a response that is no event stream), ``stream_error`` (an
            error in the stream, or a 200 answer that is an error object), ``empty``
            (``[DONE]`` with no text chunk).
        aiohttp.ClientError: the connection broke.
    """
    stream = _Stream(res)
    stream.content_type = resp.headers.get("Content-Type", "")
    pending = stream.pending
    clock = time.perf_counter
    ended = False
    room = limit = response_byte_limit(res.max_tokens)
    reads = resp.content.iter_any().__aiter__()
    try:
        async for piece in reads:
            now = clock()
            room -= len(piece)
            if room < 0:
                raise StreamError("protocol", _too_long(limit, res.max_tokens))
            if res.first_token_s is None:
                stream.preview(now, piece)
            else:
                pending.append((now, piece))
                if _ERROR_MARK in piece or _DONE in piece:  # fail, or end, at this read
                    stream.decode_pending()
            if stream.done:
                if not resp.content.at_eof():  # the body goes on past [DONE]
                    await _after_done(reads, res, now)
                break
        ended = True
        stream.end()
    finally:
        if not ended:
            _keep_partial(stream)


DONE_GRACE_S = 0.1
"""How long the body may go on after ``[DONE]`` (s) before the client stops reading it. The
stream's end is its ``[DONE]`` (as the OpenAI SDK reads it); servers end the HTTP body at
once after it (uvicorn's terminating chunk follows in microseconds), but one that holds the
body open would otherwise turn every request into a timeout."""


async def _after_done(reads: AsyncIterator[bytes], res: RequestResult, done_s: float) -> None:
    """Read what follows ``[DONE]`` (nothing, normally) until the body ends, for at most
    :data:`DONE_GRACE_S`; a body still open then ends the request at ``done_s`` (its
    ``finished_s``), and the connection is closed rather than reused."""
    try:
        async with asyncio.timeout(DONE_GRACE_S):
            async for _ in reads:
                pass
    except TimeoutError:
        res.finished_s = done_s


def _too_long(limit: int, max_tokens: int | None) -> str:
    asked = "no max_tokens" if max_tokens is None else f"max_tokens {max_tokens:,}"
    return (
        f"the response is longer than {limit:,} bytes, more than {asked} can explain;"
        " the rest was not read"
    )


def _not_a_stream(head: bytes, content_type: str) -> StreamError:
    """What a response without a single SSE data line was, from its first bytes: an error
    object (``stream_error``: a server or proxy that answers 200 with ``{"error": ...}`` or
    vLLM's ``{"object": "error", ...}``), else a ``protocol`` error (a non-streamed
    completion, an HTML page, a compressed stream). ``head`` goes with it as the body."""
    shown = f"Content-Type {content_type}" if content_type else "no Content-Type"
    if not head:
        return StreamError("protocol", f"the response was empty ({shown}): no event stream")
    try:
        obj = msgspec.json.decode(head)
    except msgspec.DecodeError:
        obj = None
    if isinstance(obj, dict) and (obj.get("error") is not None or obj.get("object") == "error"):
        error = obj.get("error") or obj.get("message")
        message = f"the server answered with an error, not an event stream ({shown}): {error}"
        return StreamError("stream_error", message, head)
    return StreamError(
        "protocol", f"the response is not an event stream ({shown}): no data: line in it", head
    )


def _keep_partial(stream: _Stream) -> None:
    """A stream cut short (timeout, cancellation, broken connection, a fault): decode what
    came, as reading read by read would have, ignoring a fault (the request already failed)."""
    with contextlib.suppress(StreamError):
        stream.decode_pending()
