"""Reading an OpenAI-style streamed completion (``/v1/completions`` or chat) into timings.

The SSE events of each network read are decoded together: their data joined into one JSON
array and parsed by msgspec into just the fields used here (text, delta, usage, error),
several times faster than ``json.loads`` event by event (``benchmarks/loadgen.py``).
"""

from __future__ import annotations

import re
import time
from typing import Any

import aiohttp
import msgspec

from tokenwatt.collect.sse import SseDecoder
from tokenwatt.records import RequestResult


class _Delta(msgspec.Struct):
    content: str | None = None
    reasoning_content: str | None = None  # reasoning models' thinking (vLLM)
    reasoning: str | None = None


class _Choice(msgspec.Struct):
    text: str | None = None  # completions
    delta: _Delta | None = None  # chat


class _Usage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class _Chunk(msgspec.Struct):
    """The fields of a streamed chunk that matter here; others are skipped unparsed."""

    choices: list[_Choice] | None = None
    usage: _Usage | None = None
    error: Any = None


# One typed decode per network read (its events joined into a JSON array): msgspec skips
# the fields we do not read, several times faster than json.loads chunk by chunk.
_CHUNKS = msgspec.json.Decoder(list[_Chunk])


MAX_USAGE_TOKENS = 100_000_000
"""Largest token count taken from a server's ``usage`` (no context is 10^8 tokens long); a
count outside ``[0, MAX_USAGE_TOKENS]`` makes the response a protocol error."""


class StreamError(Exception):
    """A stream that broke the protocol; ``kind`` is the request's error kind and the
    message (if any) says what was wrong."""

    def __init__(self, kind: str, message: str | None = None) -> None:
        super().__init__(message or kind)
        self.kind = kind


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


def _choice_text(choice: _Choice) -> tuple[str, bool]:
    """The chunk's generated text and whether it is content (False: reasoning only)."""
    if choice.text:
        return choice.text, True
    delta = choice.delta
    if delta is None:
        return "", False
    if delta.content:
        return delta.content, True
    return delta.reasoning_content or delta.reasoning or "", False


async def read_stream(resp: aiohttp.ClientResponse, res: RequestResult) -> None:
    """Read one streamed completion into ``res``: chunk times, first/last token, usage.

    Every chunk of one network read gets that read's arrival time. A chunk counts when it
    carries generated text of any kind: ``first_token_s`` is the first such chunk,
    reasoning or content; ``first_content_s`` the first carrying content (the answer of a
    reasoning model). Output tokens come from ``usage`` (``stream_options.include_usage``);
    without it they are the number of text chunks (an estimate, ``usage_missing`` set)
    and the text's pieces are kept in ``output_text`` so that a tokenizer can count them
    afterwards (:func:`tokenwatt.analysis.latency.summarise_window`).

    Raises:
        StreamError: ``protocol`` (not JSON, or no ``[DONE]``), ``stream_error`` (an error
            object in the stream), ``empty`` (``[DONE]`` with no text chunk).
        aiohttp.ClientError: the connection broke.
    """
    decoder = SseDecoder()
    chunk_s = res.chunk_s
    # References to strings msgspec already decoded: cheap, and dropped when usage arrives.
    pieces: list[str] = []
    usage: _Usage | None = None
    done = False
    clock = time.perf_counter
    async for piece in resp.content.iter_any():
        now = clock()
        datas = decoder.feed_data(piece)
        if not datas:
            continue
        if datas[-1] == b"[DONE]":
            done = True
            datas.pop()
        if not datas:
            continue
        joined = b"[" + b",".join(datas) + b"]"
        try:
            chunks = _CHUNKS.decode(joined)
        except msgspec.DecodeError as exc:
            raise StreamError("protocol", _bad_event(exc, joined)) from exc
        texts = 0
        for chunk in chunks:
            choices = chunk.choices
            if choices:
                text, content = _choice_text(choices[0])
                if text:
                    texts += 1
                    pieces.append(text)
                    if content:
                        if res.first_content_s is None:
                            res.first_content_s = now
                    else:
                        res.reasoning = True
            elif chunk.error is not None:
                raise StreamError("stream_error", f"the stream carried an error: {chunk.error}")
            if chunk.usage is not None:
                usage = chunk.usage
        if texts:
            if not chunk_s:
                res.first_token_s = now
            chunk_s.extend([now] * texts)
            res.last_token_s = now
    if not done:
        raise StreamError("protocol", "the stream ended without data: [DONE]")
    completion = _usage_count(usage.completion_tokens, "completion_tokens") if usage else None
    prompt = _usage_count(usage.prompt_tokens, "prompt_tokens") if usage else None
    if completion is not None:
        res.output_tokens = completion
        if prompt is not None:
            res.prompt_tokens = prompt
    else:
        res.output_tokens = len(chunk_s)
        res.usage_missing = True
        res.output_text = pieces
    if not chunk_s:
        raise StreamError("empty", "[DONE] came with no generated text")
