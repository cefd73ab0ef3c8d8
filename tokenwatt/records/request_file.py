"""Reading the per-request file of a run (``RUN.requests.jsonl.gz`` beside ``RUN.json``).

The format (one JSON object per request, one gzip member per window) is described and
written by :mod:`tokenwatt.collect.request_log`; reading it lives here, with the other
record readers, so that ``tokenwatt show`` and ``tokenwatt report`` (its latency
distributions) read it the same way.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tokenwatt.errors import InputError, Problem
from tokenwatt.records.run import RequestsLog

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
            record's, or a line is not a request row (the message names file and line).
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
    count = 0
    try:
        with gzip.open(path, "rb") as fh:
            for line in fh:
                count += 1
                yield _row(line, str(path), count)
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
        raise InputError([Problem(name, where, f"longer than {MAX_LINE_BYTES} bytes")])
    try:
        row = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise InputError([Problem(name, where, f"not JSON: {exc}")]) from exc
    if not isinstance(row, dict) or not _KEYS <= set(row) <= _KEYS | _LATER_KEYS:
        raise InputError([Problem(name, where, "not a request row (fields differ)")])
    if row["kind"] not in ("probe", "repeat") or not isinstance(row["index"], int):
        raise InputError([Problem(name, f"{where}.kind", "not a probe or repeat")])
    return row
