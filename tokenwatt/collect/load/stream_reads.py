"""A streamed completion's reads decoded into chunk times (:class:`StreamReads`): SSE framing,
one msgspec decode per slice of events parsed into just the fields used (text, delta, usage,
error), which chunks carry text, content vs reasoning, usage, and what a response that is no
event stream was. :func:`tokenwatt.collect.load.stream.read_stream` feeds it the reads."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections import deque
from collections.abc import Iterator
from typing import Any

import msgspec

from tokenwatt.collect.load.sse import SseDecoder, SseLineTooLongError
from tokenwatt.collect.load.timers import make_way
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
DONE = b"[DONE]"
# In every form of a stream's error: an "error" key, `event: error`, llama.cpp's `error:`
# line. Model text containing the word only makes its read decoded early, not wrongly.
ERROR_MARK = b"error"
_HEAD_BYTES = 4096  # bytes of a response kept to show what it was when it is no event stream


MAX_USAGE_TOKENS = 100_000_000
"""Largest token count taken from a server's ``usage`` (no context is 10^8 tokens long); a
count outside ``[0, MAX_USAGE_TOKENS]`` makes the response a protocol error."""


MAX_SSE_LINE = 16 << 20
"""Longest line of an event stream (bytes) before the response is a protocol error: a
chunk carrying even a whole 128k-token answer, JSON-escaped, is a few MiB."""

DECODE_SLICE_EVENTS = 64
"""Most events decoded in one turn of the event loop (about 60 us of work here,
``benchmarks/loadgen.py``): a response's decode, done at its end, yields to the loop between
slices, so a long answer's (2,000 chunks: 2 ms in one piece) neither holds up a send due
meanwhile nor the read times of the other streams."""

FRAME_SLICE_BYTES = 16_384
"""About the most bytes of one read split into events in one turn of the event loop (about
20 us of work), for the same reason; the cut goes between two events (:func:`slice_end`)."""


def slice_end(piece: bytes) -> int:
    """Where to cut a read for one slice of framing: after the last event separator within
    :data:`FRAME_SLICE_BYTES`, else after the first one past it, else at its end. Cut between
    whole events, a slice takes the SSE decoder's fast path (one split in C); cut inside a
    line, every later slice would go line by line (1.5 times the CPU, measured)."""
    if len(piece) <= FRAME_SLICE_BYTES:
        return len(piece)
    cut = piece.rfind(b"\n\n", 0, FRAME_SLICE_BYTES)
    if cut < 0:
        cut = piece.find(b"\n\n", FRAME_SLICE_BYTES)
    return len(piece) if cut < 0 else cut + 2


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


def may_end_or_fail(piece: bytes) -> bool:
    """Whether a read not split into events yet may carry an error or ``[DONE]`` (then it
    is decoded at once: the request fails, or ends, at that read)."""
    return ERROR_MARK in piece or DONE in piece


class StreamReads:
    """One response being read: its reads so far (arrival time, SSE data) and what the
    ones already decoded said. :func:`~tokenwatt.collect.load.stream.read_stream` makes one
    per response."""

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
        # Reads not decoded yet, oldest first: (arrival time, raw bytes, or the read's SSE data
        # when the framing was already split, [DONE] removed). A read decoded in slices
        # leaves its rest at the front.
        self.pending: deque[tuple[float, bytes | list[bytes]]] = deque()
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
            if datas[-1] == DONE:
                self.done = True
                datas.pop()
            if DONE in datas:
                self.done = True
                del datas[datas.index(DONE) :]
        return datas

    async def preview(self, now: float, piece: bytes) -> bool:
        """Decode a read that came before the first text chunk at once, so that
        ``first_token_s`` is known while the response streams: split into events about
        :data:`FRAME_SLICE_BYTES` at a time and decoded :data:`DECODE_SLICE_EVENTS` at a time
        (yielding to the loop between slices) until a text chunk turns up; what follows it
        in the read stays pending, as it came or as events. True when that rest may carry an
        error or ``[DONE]``: the caller decodes it at once (see the module docstring).

        Decoded here, not kept for the end: the first reads are decoded either way, and
        once is cheaper than a look for the first text chunk and a decode later (a
        one-read response, the whole of it at high rates, is decoded in one go).

        Raises:
            StreamError: as :meth:`decode_slices`, for the part of the read decoded here.
        """
        if len(self.head) < _HEAD_BYTES:
            self.head += piece[: _HEAD_BYTES - len(self.head)]
        rest, datas = piece, []
        try:
            while rest:
                cut = slice_end(rest)
                datas = self.datas(rest[:cut])
                rest = rest[cut:]
                while datas:
                    some, datas = datas[:DECODE_SLICE_EVENTS], datas[DECODE_SLICE_EVENTS:]
                    self._decode_reads([(now, some)])
                    if self.res.chunk_s:  # a text chunk: the first token came in this read
                        self._keep(now, datas, rest)
                        return any(ERROR_MARK in d for d in datas) or may_end_or_fail(rest)
                    if datas:
                        await make_way(yield_anyway=True)
                if rest:  # a slice with no event at all yields too
                    await make_way(yield_anyway=True)
        except asyncio.CancelledError:
            self._keep(now, datas, rest)  # what was not decoded yet is decoded as it stops
            raise
        return False

    def _keep(self, now: float, datas: list[bytes], rest: bytes) -> None:
        """Keep the part of a read not decoded yet: its events split already, then its bytes."""
        if datas:
            self.pending.append((now, datas))
        if rest:
            self.pending.append((now, rest))

    def decode_pending(self) -> None:
        """Decode every pending read, in order, in one go (:meth:`decode_slices`' work
        without its yields: for a stream cut short, whose task cannot yield any more).

        Raises:
            StreamError: as :meth:`decode_slices`.
        """
        if not self.pending:
            return
        with self._decoding():
            while self.pending:
                self._decode_reads(self._next_slice())

    async def decode_slices(self, *, yield_first: bool = False) -> None:
        """Decode every pending read, in order, :data:`DECODE_SLICE_EVENTS` events at a time,
        yielding to the event loop between slices (and before the first with ``yield_first``:
        right after other work, the preview's): one msgspec decode per slice; read by read
        (exactly as the reads came) when an event in it is not JSON, so that the fault names
        its read's bytes. Cancelled in a yield, the reads not yet decoded stay pending.
        ``first_token_s``, set by the preview's decode, stands meanwhile (an early stop may
        read it).

        Raises:
            StreamError: ``protocol`` (an event not JSON), ``stream_error`` (an error
                object in the stream).
        """
        if not self.pending:
            return
        first = not yield_first
        with self._decoding():
            while self.pending:
                await make_way(yield_anyway=not first)
                first = False
                self._decode_reads(self._next_slice())

    @contextlib.contextmanager
    def _decoding(self) -> Iterator[None]:
        """Around a decode: a fault drops what came after it."""
        try:
            yield
        except StreamError:
            self.pending.clear()  # the stream failed there: what came after is not part of it
            raise

    def _next_slice(self) -> list[tuple[float, list[bytes]]]:
        """Take up to :data:`DECODE_SLICE_EVENTS` events off the front of ``pending``, each
        with its read's time, splitting at most :data:`FRAME_SLICE_BYTES` of a raw read into
        events; the rest of a read split here goes back to the front."""
        pending, batch, events = self.pending, [], 0
        while pending and events < DECODE_SLICE_EVENTS:
            now, p = pending.popleft()
            if isinstance(p, bytes):
                cut = slice_end(p)
                if cut < len(p):
                    pending.appendleft((now, p[cut:]))
                datas = self.datas(p[:cut])
            else:
                datas = p
            room = DECODE_SLICE_EVENTS - events
            if len(datas) > room:
                pending.appendleft((now, datas[room:]))
                datas = datas[:room]
            if datas:
                batch.append((now, datas))
                events += len(datas)
        return batch

    def _decode_reads(self, reads: list[tuple[float, list[bytes]]]) -> None:
        """Decode one slice of reads: one decode for all of them; read by read when an
        event is not JSON, so that the fault names its read's bytes. An error object in
        the stream needs no second pass: :meth:`take` applies the slice read by read, and
        stops at the error with the text before it stamped with its read's time."""
        events = [data for _, datas in reads for data in datas]
        if not events:
            return
        try:
            chunks = _CHUNKS.decode(b"[" + b",".join(events) + b"]")
        except msgspec.DecodeError:
            for now, datas in reads:  # the fault's read, message and state as they came
                self.take(self.decode_read(datas), 0, len(datas), now)
            return
        start = 0
        for now, datas in reads:
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
            raise not_a_stream(self.head, self.content_type)
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


def not_a_stream(head: bytes, content_type: str) -> StreamError:
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
