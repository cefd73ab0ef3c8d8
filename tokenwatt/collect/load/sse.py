"""Incremental Server-Sent Events decoding, as the WHATWG HTML standard defines it.

Fed the raw bytes of a response as they arrive, in pieces of any size, it returns the events
completed so far. It copes with real framing: events split across reads (mid-line, between
CR and LF, inside a UTF-8 sequence), several events in one read, CRLF, CR or LF line ends,
``:`` comments, ``data:`` with or without the space, multi-line data, and very large events
(a long line arriving in many reads is joined once, not re-copied on every read).

One departure from the standard, which ignores unknown fields: an ``error:`` line is read as
an ``error`` event with that data. llama.cpp's server (``server_sent_event(sink, "error",
...)``, builds of 2024-2025) sends a failure inside a streamed response that way, and
dropping it would hide the failure.

Why our own: the load generator uses aiohttp (httpx could not hold the target rate, see
``benchmarks/loadgen.py``), and ``httpx-sse`` works on httpx responses only; the aiohttp
SSE clients on PyPI are unmaintained or reconnecting ``EventSource`` clients. This decoder
is one small class on bytes, fast enough for tens of thousands of events per second.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

_BOM = b"\xef\xbb\xbf"


class SseEvent(NamedTuple):
    """One dispatched event: its type (``message`` unless ``event:`` said otherwise), its
    data (``data:`` lines joined with newlines) and the last event id seen, if any."""

    event: str
    data: str
    id: str | None = None


class SseLineTooLongError(ValueError):
    """A line of the stream grew past the decoder's ``max_line`` bytes (the message says
    how long the bound is)."""


class SseDecoder:
    """Turns a byte stream into :class:`SseEvent` objects, one :meth:`feed` at a time.

    An event is dispatched at the blank line that ends it; an event without ``data`` lines is
    not dispatched, and one still incomplete when the stream ends is discarded (the standard's
    rules). Bytes that are not UTF-8 decode to U+FFFD.

    ``max_line`` (bytes, None: no bound): a line that grows longer raises
    :class:`SseLineTooLongError` from :meth:`feed`, so that a stream that never ends its line
    cannot grow the decoder's memory without bound.
    """

    __slots__ = (
        "_after_cr",
        "_data",
        "_event",
        "_last_id",
        "_max_line",
        "_pending",
        "_pending_size",
        "_started",
    )

    def __init__(self, max_line: int | None = None) -> None:
        self._max_line = max_line
        self._pending_size = 0  # bytes in _pending
        self._pending: list[bytes] = []  # pieces of the current, unfinished line
        self._after_cr = False  # the last piece ended with CR: a leading LF is its partner
        self._started = False
        self._data: list[bytes] = []
        self._event: bytes = b""
        self._last_id: str | None = None

    @property
    def last_event_id(self) -> str | None:
        """The last ``id:`` field seen (the standard's last event ID), or None."""
        return self._last_id

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """Decode one piece of the stream; return the events it completed (maybe none)."""
        out: list[Any] = []
        self._feed(chunk, out, True)
        return out

    def feed_data(self, chunk: bytes) -> list[bytes]:
        """Like :meth:`feed`, but return only each event's data, as undecoded UTF-8 bytes.

        The load generator's fast path: no str decoding, no event objects. The data of an
        ``error`` event (``event: error``, or llama.cpp's ``error:`` line) comes back as the
        JSON object ``{"error": "<its data>"}``, so that a reader of data alone still sees a
        failure the server reported that way.
        """
        out: list[Any] = []
        self._feed(chunk, out, False)
        return out

    def _feed(self, chunk: bytes, out: list[Any], full: bool) -> None:
        if not self._started and chunk[:1] not in (b"", _BOM[:1]) and not self._pending:
            self._started = True  # no byte-order mark to strip
        if (
            chunk[-2:] == b"\n\n"
            and self._started
            and not self._pending
            and not self._data
            and not self._event
            and not self._after_cr
            and b"\r" not in chunk
        ):
            # Fast path, the framing servers actually send: whole events, LF line ends.
            events = chunk.count(b"\n\ndata: ") + 1
            if chunk[:6] == b"data: " and chunk.count(b"\n") == 2 * events:
                # Every newline is part of an event separator, so every line is one
                # "data: " line: one split in C yields all the data.
                datas = chunk[6:-2].split(b"\n\ndata: ")
                if full:
                    last_id = self._last_id
                    out.extend(
                        SseEvent("message", d.decode("utf-8", "replace"), last_id) for d in datas
                    )
                else:
                    out.extend(datas)
                return
            for block in chunk[:-2].split(b"\n\n"):
                if block[:6] == b"data: " and b"\n" not in block:
                    data = block[6:]
                    out.append(
                        SseEvent("message", data.decode("utf-8", "replace"), self._last_id)
                        if full
                        else data
                    )
                else:
                    self._lines(block.split(b"\n"), out, full)
                    self._lines([b""], out, full)
            return
        if self._after_cr:
            self._after_cr = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if not self._started and chunk:
            if self._pending:
                chunk = b"".join(self._pending) + chunk
                self._pending = []
                self._pending_size = 0
            if len(chunk) < len(_BOM) and _BOM.startswith(chunk):
                self._keep(chunk)  # maybe the start of a BOM: wait for more
                return
            self._started = True
            if chunk.startswith(_BOM):
                chunk = chunk[len(_BOM) :]
        if b"\r" in chunk:
            if chunk[-1:] == b"\r":
                self._after_cr = True
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if b"\n" not in chunk:
            if chunk:
                self._keep(chunk)
            return
        lines = chunk.split(b"\n")
        if self._pending:
            self._keep(lines[0])
            lines[0] = b"".join(self._pending)
            self._pending = []
            self._pending_size = 0
        tail = lines.pop()
        if tail:
            self._keep(tail)
        self._lines(lines, out, full)

    def _keep(self, piece: bytes) -> None:
        """Add a piece to the unfinished line, within ``max_line``."""
        self._pending.append(piece)
        self._pending_size += len(piece)
        if self._max_line is not None and self._pending_size > self._max_line:
            size = self._pending_size
            self._pending = []
            self._pending_size = 0
            raise SseLineTooLongError(
                f"a line of the event stream is longer than {self._max_line:,} bytes"
                f" ({size:,} bytes without a line end)"
            )

    def _lines(self, lines: list[bytes], out: list[Any], full: bool) -> None:
        data = self._data
        for line in lines:
            if line.startswith(b"data:"):
                value = line[5:]
                data.append(value[1:] if value[:1] == b" " else value)
            elif not line:
                if data:
                    joined = data[0] if len(data) == 1 else b"\n".join(data)
                    if self._event == b"error" and not full:
                        joined = _error_object(joined)
                    if full:
                        kind = self._event.decode("utf-8", "replace") if self._event else "message"
                        text = joined.decode("utf-8", "replace")
                        out.append(SseEvent(kind, text, self._last_id))
                    else:
                        out.append(joined)
                    data.clear()
                self._event = b""
            elif line[:1] == b":":
                continue
            else:
                name, colon, value = line.partition(b":")
                if colon and value[:1] == b" ":
                    value = value[1:]
                if name == b"event":
                    self._event = value
                elif name == b"data":  # "data" with no colon: an empty data line
                    data.append(value)
                elif name == b"error":  # llama.cpp's error line: see the module docstring
                    self._event = b"error"
                    data.append(value)
                elif name == b"id" and b"\0" not in value:
                    self._last_id = value.decode("utf-8", "replace")
                # "retry" and unknown fields are ignored: this client never reconnects.


def _error_object(data: bytes) -> bytes:
    """An error event's data as the JSON object ``{"error": "<data>"}`` (valid JSON whatever
    the data was: plain text or a JSON object, kept verbatim as a string)."""
    text = data.decode("utf-8", "replace")
    return b'{"error":' + json.dumps(text).encode() + b"}"
