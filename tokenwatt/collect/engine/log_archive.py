"""The launched engine's log as the archive keeps it: gzip-compressed and capped.

While the engine runs, its log is plain text beside the run record (``RUN.engine.log``), so
that ``tail -f`` and an error message's tail see each line at once. Once the engine has
stopped, :func:`archive_log` replaces it with ``RUN.engine.log.gz``: the first
:data:`HEAD_BYTES` and the last :data:`TAIL_BYTES` of it, cut at line ends, with one line in
between saying how much was left out. A llama.cpp server at debug verbosity writes a line
per request and slot event, 2–7 MB a run, which does not belong in a git repository; the
start (the engine's configuration, the model's metadata, its warnings at load) and the end
(the last requests, the shutdown, the error that stopped it) are what a reader looks for.
Compressed, a capped log is a few hundred kilobytes.
"""

from __future__ import annotations

import gzip
import io
from dataclasses import dataclass
from pathlib import Path

from tokenwatt.files import atomic_file

HEAD_BYTES = 1 << 20
"""Bytes kept from the start of the engine's log (1 MiB)."""
TAIL_BYTES = 3 << 20
"""Bytes kept from its end (3 MiB)."""
CUT_LINE = "[tokenwatt: {n:,} bytes of the engine's log left out here]\n"
"""The line written where the middle of a long log was left out."""


@dataclass(frozen=True)
class ArchivedLog:
    """What :func:`archive_log` wrote.

    Attributes:
        path: the compressed log (``RUN.engine.log.gz``).
        log_bytes: bytes the engine wrote (scrubbed), before the cap and compression.
        left_out_bytes: bytes of its middle left out (0: the whole log is kept).
    """

    path: Path
    log_bytes: int
    left_out_bytes: int


def archived_path(log: Path) -> Path:
    """Where :func:`archive_log` puts ``log``: ``RUN.engine.log`` → ``RUN.engine.log.gz``."""
    return log.with_name(log.name + ".gz")


def _head_and_tail(log: Path) -> tuple[bytes, bytes, int]:
    """The kept start and end of ``log`` (cut at line ends) and its size, in bytes."""
    size = log.stat().st_size
    with log.open("rb") as f:
        if size <= HEAD_BYTES + TAIL_BYTES:
            return f.read(), b"", size
        head = f.read(HEAD_BYTES)
        head = head[: head.rfind(b"\n") + 1] or head
        f.seek(size - TAIL_BYTES)
        tail = f.read()
    newline = tail.find(b"\n")
    tail = tail[newline + 1 :] if 0 <= newline < len(tail) - 1 else tail
    return head, tail, size


def archive_log(log: Path) -> ArchivedLog:
    """Replace the plain ``log`` with its capped, compressed copy (see the module).

    The copy is written atomically (:func:`tokenwatt.files.atomic_file`) and only then is
    the plain file removed, so a failure leaves the plain log as it was. The gzip header
    holds no time or name: the same log gives the same bytes.

    Raises:
        OSError: the log cannot be read or the copy written.
    """
    head, tail, size = _head_and_tail(log)
    left_out = size - len(head) - len(tail)
    target = archived_path(log)
    with (
        atomic_file(target) as raw,
        gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as gz,
    ):
        gz.write(head)
        if left_out:
            gz.write(CUT_LINE.format(n=left_out).encode())
            gz.write(tail)
    log.unlink()
    return ArchivedLog(path=target, log_bytes=size, left_out_bytes=left_out)


def open_log_text(path: Path) -> io.TextIOBase:
    """An engine log for reading as text, plain or gzip-compressed (by its ``.gz`` name);
    undecodable bytes read as U+FFFD.

    Raises:
        OSError: it cannot be opened.
    """
    if path.name.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="replace")
    return io.TextIOWrapper(path.open("rb"), encoding="utf-8", errors="replace")


__all__ = [
    "CUT_LINE",
    "HEAD_BYTES",
    "TAIL_BYTES",
    "ArchivedLog",
    "archive_log",
    "archived_path",
    "open_log_text",
]
