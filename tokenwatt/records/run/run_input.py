"""A run record together with where it came from: what ``tokenwatt report`` summarises.

A plain data type with no I/O, so the pure :mod:`tokenwatt.analysis` can take it;
:mod:`tokenwatt.records_io` reads and hashes the files that become these.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tokenwatt.records.run.run import RunRecord


@dataclass(frozen=True)
class RunInput:
    """One run record with where it came from.

    Attributes:
        name: the run file's path as the user gave it (used in messages and ``run_files``).
        sha256: the file's SHA-256 (hex) as read.
        run: the validated run record.
        request_rows: the repeats' lines of the run's per-request file
            (``RUN.requests.jsonl.gz``, :mod:`tokenwatt.records.run.request_file`), hash checked;
            None when the run kept no such file or it was not found beside the record.
    """

    name: str
    sha256: str
    run: RunRecord
    request_rows: tuple[Mapping[str, Any], ...] | None = None
