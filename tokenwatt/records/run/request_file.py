"""Reading the per-request file of a run (``RUN.requests.jsonl.gz`` beside ``RUN.json``).

The format (one JSON object per request, one gzip member per window) is described and
written by :mod:`tokenwatt.collect.measure.request_log`; reading it lives here, with the other
record readers, so that ``tokenwatt show`` and ``tokenwatt report`` (its latency
distributions) read it the same way.
"""

from __future__ import annotations

import gzip
import hashlib
import itertools
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tokenwatt.errors import InputError, Problem
from tokenwatt.records.run.run import RequestsLog

SUFFIX = ".requests.jsonl.gz"
"""What replaces the run record's ``.json`` in the per-request file's name."""

MAX_LINE_BYTES = 4096
"""A line longer than this is not one the collector wrote (a bound on what is read)."""


def log_path(record_path: Path) -> Path:
    """``runs/X.json`` -> ``runs/X.requests.jsonl.gz`` (any other name gets the suffix)."""
    name = record_path.name.removesuffix(".json")
    return record_path.with_name(name + SUFFIX)


def read_rows(path: Path, expected: RequestsLog) -> Iterator[dict[str, Any]]:
    """The file's rows, after checking its SHA-256 against the run record's.

    Raises:
        InputError: the file is missing or unreadable, its hash or line count is not the
            record's, or a line is not a request row: not JSON (NaN and Infinity included),
            fields missing or extra, a time not finite, a count below zero, or times out of
            the order the latency definitions need (the message names file, line and field).
    """
    name = str(path)
    digest = hashlib.sha256()
    try:
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        raise InputError(
            [Problem(name, "requests_log", f"cannot read the file: {exc.strerror or exc}")]
        ) from exc
    if digest.hexdigest() != expected.sha256:
        raise InputError(
            [
                Problem(
                    name,
                    "requests_log.sha256",
                    f"the file's SHA-256 is {digest.hexdigest()}, the run record says "
                    f"{expected.sha256}: it was changed or belongs to another run",
                )
            ]
        )
    return _rows(path, expected)


def _rows(path: Path, expected: RequestsLog) -> Iterator[dict[str, Any]]:
    """The rows, read line by line with every read bounded: a line is read at most
    ``MAX_LINE_BYTES + 1`` bytes far and no line past the record's count is read, so a
    file that decompresses to gigabytes (one endless line, or endless lines) costs at most
    ``requests * MAX_LINE_BYTES`` bytes of decompression and one line of memory."""
    count = 0
    name = str(path)
    try:
        with gzip.open(path, "rb") as fh:
            while line := fh.readline(MAX_LINE_BYTES + 1):
                count += 1
                if count > expected.requests:
                    raise InputError(
                        [
                            Problem(
                                name,
                                f"line {count}",
                                f"more lines than the run record's {expected.requests}"
                                " (requests_log.requests); the rest was not read",
                            )
                        ]
                    )
                yield _row(line, name, count)
    except (OSError, EOFError) as exc:
        raise InputError([Problem(str(path), "", f"not a gzip file: {exc}")]) from exc
    if count != expected.requests:
        raise InputError(
            [
                Problem(
                    str(path),
                    "requests_log.requests",
                    f"{count} lines, the run record says {expected.requests}",
                )
            ]
        )


_KEYS = frozenset(
    [
        *("kind", "index", "rate_rps", "in_window", "scheduled_s", "sent_s", "first_token_s"),
        *("last_token_s", "end_s", "input_tokens", "output_tokens", "status", "error"),
    ]
)
_LATER_KEYS = frozenset(["prompt", "prompt_text_tokens"])
"""Fields added later: files written before them lack them."""


def _row(line: bytes, name: str, number: int) -> dict[str, Any]:
    where = f"line {number}"
    if len(line) > MAX_LINE_BYTES:
        message = f"longer than {MAX_LINE_BYTES} bytes (the rest of the line was not read)"
        raise InputError([Problem(name, where, message)])
    try:
        row = json.loads(line, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise InputError([Problem(name, where, f"not JSON: {exc}")]) from exc
    if not isinstance(row, dict) or not _KEYS <= set(row) <= _KEYS | _LATER_KEYS:
        raise InputError([Problem(name, where, "not a request row (fields differ)")])
    if row["kind"] not in ("probe", "repeat") or not _is_count(row["index"]):
        raise InputError([Problem(name, f"{where}.kind", "not a probe or repeat")])
    problem = _row_problem(row)
    if problem is not None:
        field, message = problem
        raise InputError([Problem(name, f"{where}.{field}", message)])
    return row


def _no_constant(value: str) -> float:
    raise ValueError(f"{value} is not a number JSON allows (the collector never writes it)")


def _is_count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _is_number(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


# The times that must come in this order when present: a request's first token cannot
# arrive before it was scheduled, nor its last before its first, nor its end before its
# last (TTFT, TPOT and E2E are these differences, methods/goodput.md). Times may be below
# zero: they count from the window's start, and warm-up requests come before it.
_ORDER = ("scheduled_s", "first_token_s", "last_token_s", "end_s")


def _row_problem(row: dict[str, Any]) -> tuple[str, str] | None:
    """The first field of a request row that is not what the collector writes, and why."""
    if not _is_number(row["rate_rps"]) or row["rate_rps"] < 0:
        return "rate_rps", f"{row['rate_rps']!r} is not a finite rate of at least 0"
    if type(row["in_window"]) is not bool:
        return "in_window", "must be true or false"
    if not _is_number(row["scheduled_s"]):
        return "scheduled_s", f"{row['scheduled_s']!r} is not a finite time (s)"
    for field in ("sent_s", "first_token_s", "last_token_s", "end_s"):
        if row[field] is not None and not _is_number(row[field]):
            return field, f"{row[field]!r} is not a finite time (s) or null"
    for field in ("input_tokens", "output_tokens"):
        if row[field] is not None and not _is_count(row[field]):
            return field, f"{row[field]!r} is not a count of tokens (a whole number ≥ 0)"
    if row["status"] is not None and not _is_count(row["status"]):
        return "status", f"{row['status']!r} is not an HTTP status"
    if row["error"] is not None and not isinstance(row["error"], str):
        return "error", "must be an error kind (text) or null"
    if row["sent_s"] is None:
        # Never sent: nothing can have come back (a token, a status) for it.
        for field in ("first_token_s", "last_token_s", "status"):
            if row[field] is not None:
                return field, f"{row[field]!r} for a request never sent (sent_s is null)"
    order: tuple[str, ...] = _ORDER
    never_sent = row["sent_s"] is None and row["first_token_s"] is None
    if never_sent and row["error"] == "cancelled" and row["last_token_s"] is None:
        # A request the client cancelled before its scheduled time (a window stopped
        # early) ends before it was due: never sent, nothing of it was measured.
        order = tuple(f for f in _ORDER if f != "end_s")
    present = [(f, row[f]) for f in order if row[f] is not None]
    for (before, t0), (after, t1) in itertools.pairwise(present):
        if t1 < t0:
            return after, f"{t1} s is before {before} ({t0} s)"
    sent, first = row["sent_s"], row["first_token_s"]
    if sent is not None and first is not None and first < sent:
        return "first_token_s", f"{first} s is before sent_s ({sent} s)"
    return None
