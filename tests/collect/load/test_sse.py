"""The SSE decoder against every framing a real server may produce, fed in every split."""

from __future__ import annotations

import pytest

from tokenwatt.collect.load.sse import SseDecoder, SseEvent, SseLineTooLongError


def decode(pieces: list[bytes]) -> list[SseEvent]:
    decoder = SseDecoder()
    events: list[SseEvent] = []
    for piece in pieces:
        events += decoder.feed(piece)
    return events


def data_only(pieces: list[bytes]) -> list[bytes]:
    decoder = SseDecoder()
    out: list[bytes] = []
    for piece in pieces:
        out += decoder.feed_data(piece)
    return out


CASES: dict[str, tuple[bytes, list[SseEvent]]] = {
    "lf": (b"data: a\n\ndata: b\n\n", [SseEvent("message", "a"), SseEvent("message", "b")]),
    "no space after colon": (
        b"data:a\n\ndata:  b\n\n",
        [SseEvent("message", "a"), SseEvent("message", " b")],
    ),
    "crlf": (
        b"data: a\r\n\r\ndata: b\r\n\r\n",
        [SseEvent("message", "a"), SseEvent("message", "b")],
    ),
    "cr": (b"data: a\r\rdata: b\r\r", [SseEvent("message", "a"), SseEvent("message", "b")]),
    "mixed line ends": (
        b"data: a\r\n\ndata: b\r\r\ndata: c\n\r",
        [SseEvent("message", "a"), SseEvent("message", "b"), SseEvent("message", "c")],
    ),
    "comments": (b": hello\n\n:\ndata: a\n: inside\n\n", [SseEvent("message", "a")]),
    "multi-line data": (b"data: a\ndata:\ndata: b\n\n", [SseEvent("message", "a\n\nb")]),
    "event and id fields": (
        b"event: ping\nid: 42\ndata: x\n\ndata: y\n\n",
        [SseEvent("ping", "x", "42"), SseEvent("message", "y", "42")],
    ),
    "field without colon": (
        b"data\n\ndata\ndata\n\n",
        [SseEvent("message", ""), SseEvent("message", "\n")],
    ),
    "event without data is not dispatched": (
        b"event: x\n\nretry: 5\n\ndata: z\n\n",
        [SseEvent("message", "z")],
    ),
    "utf-8": ("data: é€😀\n\n".encode(), [SseEvent("message", "é€😀")]),
    "bom": (b"\xef\xbb\xbfdata: a\n\n", [SseEvent("message", "a")]),
    "unfinished event discarded": (b"data: a\n\ndata: b\n", [SseEvent("message", "a")]),
    "blank lines between events": (
        b"\n\n\ndata: a\n\n\n\ndata: b\n\n",
        [SseEvent("message", "a"), SseEvent("message", "b")],
    ),
    "unknown fields ignored": (b"foo: bar\ndata: a\nbaz\n\n", [SseEvent("message", "a")]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_whole_stream_in_one_read(name: str) -> None:
    stream, expected = CASES[name]
    assert decode([stream]) == expected
    assert data_only([stream]) == [e.data.encode() for e in expected]


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_split_point(name: str) -> None:
    stream, expected = CASES[name]
    for i in range(len(stream) + 1):
        assert decode([stream[:i], stream[i:]]) == expected, f"split at {i}"
    for i in range(1, len(stream)):
        for j in range(i, len(stream)):
            assert data_only([stream[:i], stream[i:j], stream[j:]]) == [
                e.data.encode() for e in expected
            ]


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_byte_at_a_time(name: str) -> None:
    stream, expected = CASES[name]
    assert decode([stream[i : i + 1] for i in range(len(stream))]) == expected


def test_many_events_in_one_read_after_a_split_one() -> None:
    stream = b"".join(b'data: {"n": %d}\n\n' % i for i in range(100))
    events = decode([stream[:7], stream[7:]])
    assert [e.data for e in events] == [f'{{"n": {i}}}' for i in range(100)]


def test_a_one_megabyte_event_in_small_reads() -> None:
    payload = b"x" * 1_000_000 + "é".encode()
    stream = b"data: " + payload + b"\r\n\r\ndata: next\r\n\r\n"
    pieces = [stream[i : i + 1000] for i in range(0, len(stream), 1000)]
    events = decode(pieces)
    assert len(events) == 2 and events[0].data == payload.decode() and events[1].data == "next"


def test_invalid_utf8_becomes_replacement_character() -> None:
    assert decode([b"data: \xff\n\n"]) == [SseEvent("message", "\ufffd")]


def test_last_event_id_is_kept() -> None:
    decoder = SseDecoder()
    decoder.feed(b"id: 1\ndata: a\n\nid: 2\n\n")
    assert decoder.last_event_id == "2"


def test_a_line_may_reach_max_line_across_reads_but_not_pass_it() -> None:
    decoder = SseDecoder(max_line=12)
    assert decoder.feed_data(b"data: ab") == []
    assert decoder.feed_data(b"cdef\n\n") == [b"abcdef"]  # 12 bytes: at the bound
    assert decoder.feed_data(b"data: abc") == []
    with pytest.raises(SseLineTooLongError, match=r"longer than 12 bytes \(13 bytes without"):
        decoder.feed_data(b"defg")


ERROR_EVENTS = (
    b'data: {"a": 1}\n\nevent: error\ndata: busy\n\n'
    b'error: {"code":500,"message":"x"}\n\ndata: {"b": 2}\n\n'
)


def test_error_events_and_llama_cpp_error_lines_in_every_split() -> None:
    assert decode([ERROR_EVENTS]) == [
        SseEvent("message", '{"a": 1}'),
        SseEvent("error", "busy"),
        SseEvent("error", '{"code":500,"message":"x"}'),
        SseEvent("message", '{"b": 2}'),
    ]
    # Data alone: an error event's data comes as a JSON error object, verbatim as a string.
    expected = [
        b'{"a": 1}',
        b'{"error":"busy"}',
        b'{"error":"{\\"code\\":500,\\"message\\":\\"x\\"}"}',
        b'{"b": 2}',
    ]
    for i in range(len(ERROR_EVENTS) + 1):
        assert data_only([ERROR_EVENTS[:i], ERROR_EVENTS[i:]]) == expected, f"split at {i}"
