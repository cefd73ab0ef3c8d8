"""Reading an OpenAI-style streamed completion (``/v1/completions`` or chat) into timings.

The hot path, run for every network read after the first token, only takes the read's
arrival time and keeps its bytes. Everything else — SSE framing, JSON decoding, which chunks
carry text, content vs reasoning, usage — is done when the response has ended, over all its
reads together
(:class:`~tokenwatt.collect.load.stream_reads.StreamReads`): one msgspec decode per slice of
:data:`~tokenwatt.collect.load.stream_reads.DECODE_SLICE_EVENTS` events, parsed into just the
fields used here (text, delta, usage, error), yielding to the event loop between slices, so
that a long answer's decode (2 ms for 2,000 chunks in one piece on this machine) holds up
neither a send due meanwhile nor the read times of the other streams. Each chunk still gets
the arrival time of the read it came in, so the timings are exactly those of decoding read
by read.

Two things are known during the stream, because the load generator acts on them while a
window runs: the first text chunk's arrival (``first_token_s``; an early stop counts a
request still without one past the TTFT limit as a miss), found by decoding each read at
once, in slices, until a text chunk turns up (the rest of that read is kept for the end);
and an error in the stream, whose read (one containing ``error``) is decoded at once, before
the first token or after it, so that the request fails there, with the server's message,
not at the request timeout (so does a read before the first token with an event that is
no JSON: ``protocol``). A response that comes in one read (an instant server's, at high
rates) is thus decoded in one go as it arrives.
``benchmarks/loadgen.py`` measures the client's CPU per chunk.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import aiohttp

from tokenwatt.collect.load.stream_reads import StreamError, StreamReads, may_end_or_fail
from tokenwatt.records import RequestResult

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


async def read_stream(resp: aiohttp.ClientResponse, res: RequestResult) -> None:
    """Read one streamed completion into ``res``: chunk times, first/last token, usage.

    Every chunk of one network read gets that read's arrival time. A chunk counts when it
    carries generated text of any kind: ``first_token_s`` is the first such chunk,
    reasoning or content; ``first_content_s`` the first carrying content (the answer of a
    reasoning model). Output tokens come from ``usage`` (``stream_options.include_usage``);
    without it they are the number of text chunks (an estimate, ``usage_missing`` set)
    and the text's pieces are kept in ``output_text`` so that a tokenizer can count them
    afterwards (:func:`tokenwatt.analysis.window.latency.summarise_window`).

    While the response streams only the reads up to its first text chunk are decoded (see
    the module docstring); the rest is filled in when it ends. A request that stops early
    (timeout, cancellation, a broken connection) keeps what its reads held: they are decoded
    as it stops.

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
    stream = StreamReads(res)
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
                if await stream.preview(now, piece):  # its rest may fail, or end, here
                    await stream.decode_slices(yield_first=True)
            else:
                pending.append((now, piece))
                if may_end_or_fail(piece):  # fail, or end, at this read
                    await stream.decode_slices()
            if stream.done:
                if not resp.content.at_eof():  # the body goes on past [DONE]
                    await _after_done(reads, res, now)
                break
        await stream.decode_slices()
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


def _keep_partial(stream: StreamReads) -> None:
    """A stream cut short (timeout, cancellation, broken connection, a fault): decode what
    came, as reading read by read would have, ignoring a fault (the request already failed)."""
    with contextlib.suppress(StreamError):
        stream.decode_pending()
