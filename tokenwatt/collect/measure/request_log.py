"""The per-request file of a run: ``RUN.requests.jsonl.gz`` beside ``RUN.json``.

One JSON object per line, one line per request the load generator sent in a window
(search probe or repeat), in the order the windows were measured:

``kind``
    ``"probe"`` or ``"repeat"``; ``index`` is the window's place in the record's ``probes``
    or ``repeats`` list (from 0).
``rate_rps``
    The window's offered rate (requests/s).
``in_window``
    False for warm-up and drain requests (not in the window's figures).
``scheduled_s``, ``sent_s``, ``first_token_s``, ``last_token_s``, ``end_s``
    Seconds from the window's start on the client's monotonic clock, rounded to the
    microsecond: when the schedule said to send, when it was sent, the first and the last
    chunk of generated text, and the end of the response (or of the failure); null when
    it did not happen.
``input_tokens``, ``output_tokens``
    Prompt and generated tokens (from ``usage``, or counted by the client).
``prompt``, ``prompt_text_tokens``
    ``"ids"`` when token ids were sent, ``"text"`` for a text prompt; a text prompt's
    length measured with the model's tokenizer before sending (tokens, without the chat
    template; null when not measured or for ids). ``input_tokens`` stays what the server
    counted, template included.
``status``, ``error``
    HTTP status (null when no response came) and the error kind (null when none;
    ``cancelled`` for a request the client cancelled itself).

No request text, no error message or body: only timings, counts and kinds, so no
credential can reach the file.

Writing: every window's lines become one gzip member (RFC 1952, section 2.2: a gzip file is
a series of members, and ``gzip`` readers read them all as one stream). After each window
the whole file is written again, atomically (:func:`tokenwatt.files.atomic_file`): the
previous members copied and the new one added, so a reader never sees half a file and the
run holds only one window's requests in memory. The run record, checkpointed right after,
carries the file's SHA-256 (:class:`~tokenwatt.records.run.run.RequestsLog`); a crash between
the two leaves a file one window ahead of its hash, which ``tokenwatt show --requests``
reports as a mismatch.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from tokenwatt.collect.measure.window import WindowOutcome
from tokenwatt.files import atomic_file
from tokenwatt.records import (
    REQUEST_FILE_MAX_LINE_BYTES,
    REQUEST_FILE_SUFFIX,
    RequestResult,
    RequestsLog,
    RunRecord,
    read_request_rows,
    request_log_path,
)

# Reading the file (and naming it) lives with the record readers; the names stay here too.
SUFFIX = REQUEST_FILE_SUFFIX
MAX_LINE_BYTES = REQUEST_FILE_MAX_LINE_BYTES
log_path = request_log_path
read_rows = read_request_rows

__all__ = [
    "MAX_LINE_BYTES",
    "SUFFIX",
    "RequestLogWriter",
    "gzip_member",
    "log_path",
    "log_window",
    "read_rows",
    "request_row",
]


def _at(t: float | None, start: float) -> float | None:
    return None if t is None else round(t - start, 6)


def request_row(
    r: RequestResult, *, kind: str, index: int, rate_rps: float, start_s: float
) -> dict[str, Any]:
    """One request as its line's object (see the module docstring); times from ``start_s``."""
    end = r.finished_s if r.finished_s is not None else r.last_token_s
    return {
        "kind": kind,
        "index": index,
        "rate_rps": rate_rps,
        "in_window": r.in_window,
        "scheduled_s": _at(r.scheduled_s, start_s),
        # A request that never got a concurrency slot was never sent (sent_s unset).
        "sent_s": _at(r.sent_s, start_s) if r.sent_s else None,
        "first_token_s": _at(r.first_token_s, start_s),
        "last_token_s": _at(r.last_token_s, start_s),
        "end_s": _at(end, start_s),
        "input_tokens": r.prompt_tokens,
        "prompt": "ids" if r.prompt_ids_sent is not None else "text",
        "prompt_text_tokens": r.prompt_text_tokens,
        "output_tokens": r.output_tokens,
        "status": r.status,
        "error": r.error,
    }


def gzip_member(rows: Sequence[dict[str, Any]]) -> bytes:
    """The rows as compact JSON Lines in one gzip member (``mtime`` 0: the same rows give
    the same bytes)."""
    text = "".join(json.dumps(row, separators=(",", ":")) + "\n" for row in rows)
    return gzip.compress(text.encode("utf-8"), mtime=0)


class RequestLogWriter:
    """Keeps ``RUN.requests.jsonl.gz`` up to date, one window at a time.

    Args:
        path: the file to write (:func:`log_path` of the run record).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._hash = hashlib.sha256()
        self._requests = 0
        self._windows = 0
        self._written = False

    def add_window(
        self,
        requests: Sequence[RequestResult],
        *,
        kind: Literal["probe", "repeat"],
        index: int,
        rate_rps: float,
        start_s: float,
    ) -> RequestsLog:
        """Add one window's requests and write the file again, atomically.

        Returns:
            What the run record keeps about the file now (name, SHA-256, counts).

        Raises:
            OSError: the file cannot be written (the previous version is kept).
        """
        rows = [
            request_row(r, kind=kind, index=index, rate_rps=rate_rps, start_s=start_s)
            for r in requests
        ]
        member = gzip_member(rows)
        with atomic_file(self.path) as out:
            if self._written:
                with self.path.open("rb") as previous:
                    shutil.copyfileobj(previous, out)
            out.write(member)
        self._written = True
        self._hash.update(member)
        self._requests += len(rows)
        self._windows += 1
        return RequestsLog(
            file=self.path.name,
            sha256=self._hash.hexdigest(),
            requests=self._requests,
            windows=self._windows,
        )


def log_window(writer: RequestLogWriter | None, rec: RunRecord, outcome: WindowOutcome) -> bool:
    """Add the window just stored in ``rec`` to the per-request file; ``rec`` keeps its hash.

    The window's requests are dropped from ``outcome`` either way (the file keeps them, so
    the run's memory holds one window's). A file that cannot be written is noted in
    ``rec.not_covered`` and the run goes on without it.

    Returns:
        False when the writer failed (the caller stops logging), else True.
    """
    requests, outcome.requests = outcome.requests, []
    if writer is None:
        return True
    is_probe = bool(rec.probes) and rec.probes[-1].window is outcome.summary
    kind: Literal["probe", "repeat"] = "probe" if is_probe else "repeat"
    index = len(rec.probes if is_probe else rec.repeats) - 1
    try:
        rec.requests_log = writer.add_window(
            requests,
            kind=kind,
            index=index,
            rate_rps=outcome.summary.rate_rps,
            start_s=outcome.window_start_s,
        )
    except OSError as exc:
        rec.requests_log = None
        rec.not_covered.append(
            f"Per-request file: cannot write it ({exc.strerror or exc}); none is kept"
        )
        return False
    return True
