"""The engine's log as the archive keeps it: compressed, capped to its start and end, and
still read by the warning scan and the error tail."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from tokenwatt.collect.engine.log_archive import (
    HEAD_BYTES,
    TAIL_BYTES,
    archive_log,
    archived_path,
    open_log_text,
)
from tokenwatt.collect.engine.probes import scan_engine_log
from tokenwatt.errors import InputError


def write_log(path: Path, lines: int) -> bytes:
    body = b"".join(
        f"slot update_slots: id {i % 4} | task {i} | prompt done, n_past = {i * 7}\n".encode()
        for i in range(lines)
    )
    path.write_bytes(body)
    return body


def test_a_short_log_is_kept_whole_and_compressed(tmp_path: Path) -> None:
    log = tmp_path / "r.engine.log"
    body = write_log(log, 500) + b"WARNING: Using KV cache scaling factor 1.0 for fp8_e4m3\n"
    log.write_bytes(body)
    archived = archive_log(log)
    assert archived.path == archived_path(log) == tmp_path / "r.engine.log.gz"
    assert not log.exists()
    assert gzip.decompress(archived.path.read_bytes()) == body
    assert (archived.log_bytes, archived.left_out_bytes) == (len(body), 0)
    assert archived.path.stat().st_size < len(body) / 5
    # the scan reads the compressed log as it read the plain one
    (warning,) = scan_engine_log(archived.path)
    assert "(1×)" in warning and "scaling factor 1.0" in warning


def test_a_long_log_keeps_its_start_and_end_at_line_ends_and_says_what_was_cut(
    tmp_path: Path,
) -> None:
    log = tmp_path / "r.engine.log"
    body = write_log(log, 120_000)  # about 8 MB, as a debug-verbosity llama.cpp run writes
    assert len(body) > HEAD_BYTES + TAIL_BYTES
    archived = archive_log(log)
    kept = gzip.decompress(archived.path.read_bytes())
    head, marker, tail = kept.partition(b"[tokenwatt: ")
    marker_line, _, tail = (marker + tail).partition(b"\n")
    assert body.startswith(head) and body.endswith(tail)
    assert head.endswith(b"\n") and len(head) <= HEAD_BYTES
    assert len(tail) <= TAIL_BYTES and tail.startswith(b"slot ")  # a whole first line
    assert archived.left_out_bytes == len(body) - len(head) - len(tail) > 0
    assert marker_line.decode() == (
        f"[tokenwatt: {archived.left_out_bytes:,} bytes of the engine's log left out here]"
    )
    assert archived.log_bytes == len(body)
    assert archived.path.stat().st_size < 1 << 20  # what goes into git: under a megabyte
    # the same log gives the same bytes (no time or name in the gzip header)
    again = tmp_path / "again.engine.log"
    again.write_bytes(body)
    assert archive_log(again).path.read_bytes() == archived.path.read_bytes()


def test_a_failed_archive_leaves_the_plain_log(tmp_path: Path) -> None:
    log = tmp_path / "r.engine.log"
    body = write_log(log, 10)
    archived_path(log).mkdir()  # the target is a folder: the write fails
    with pytest.raises(OSError):
        archive_log(log)
    assert log.read_bytes() == body


def test_a_cut_off_compressed_log_is_named_not_a_traceback(tmp_path: Path) -> None:
    log = tmp_path / "r.engine.log"
    write_log(log, 5000)
    archived = archive_log(log)
    archived.path.write_bytes(archived.path.read_bytes()[:200])
    with pytest.raises(InputError, match="cannot read the engine log"):
        scan_engine_log(archived.path)
    with open_log_text(tmp_path / "r.engine.log.gz") as fh, pytest.raises(EOFError):
        fh.read()
