"""Reading run records for ``tokenwatt report`` and writing report records atomically.

The I/O half of ``tokenwatt report``; the summarising itself is the pure
:func:`tokenwatt.analysis.summarise.summarise`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tokenwatt.errors import InputError, Problem, RecordError
from tokenwatt.files import atomic_write_bytes, same_file
from tokenwatt.records.load import read_json, validate
from tokenwatt.records.report_v3 import ReportV3
from tokenwatt.records.run import RunRecord


@dataclass(frozen=True)
class RunInput:
    """One run record with where it came from.

    Attributes:
        name: the run file's path as the user gave it (used in messages and ``run_files``).
        sha256: the file's SHA-256 (hex) as read.
        run: the validated run record.
    """

    name: str
    sha256: str
    run: RunRecord


def load_run(path: Path) -> RunInput:
    """Read, hash and validate one run record file.

    The hash is of the exact bytes validated, so a report's ``run_files`` names what it used.

    Raises:
        RecordError: unreadable file, bad JSON, or schema problems (one per problem).
    """
    name = path.as_posix()
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RecordError([Problem(name, "", f"cannot read the file: {exc.strerror}")]) from exc
    digest = hashlib.sha256(data).hexdigest()
    run = validate(RunRecord, read_json(path), name)
    return RunInput(name=name, sha256=digest, run=run)


def load_runs(paths: list[Path]) -> list[RunInput]:
    """:func:`load_run` for every path; problems of all files are reported together.

    Raises:
        RecordError: every problem of every file that failed.
    """
    runs: list[RunInput] = []
    problems: list[Problem] = []
    for path in paths:
        try:
            runs.append(load_run(path))
        except RecordError as exc:
            problems += exc.problems
    if problems:
        raise RecordError(problems)
    return runs


def write_report(
    report: ReportV3, out: Path, *, force: bool = False, inputs: Sequence[Path] = ()
) -> Path:
    """Write a report record as JSON, atomically (:func:`tokenwatt.files.atomic_file`).

    A crash leaves either the old file or the new one, never half of one.

    Args:
        report: the record to write.
        out: the file to write.
        force: replace ``out`` if it exists.
        inputs: the run files the report was made from; ``out`` may never be one of them,
            even with ``force`` (that would destroy a measurement).

    Raises:
        InputError: ``out`` is one of ``inputs``, exists and ``force`` is false, or cannot
            be written (its folder, a full or read-only disk).
    """
    for given in inputs:
        if same_file(out, given):
            raise InputError(
                [
                    Problem(
                        str(out),
                        "--out",
                        f"is the run file {given} given as input; writing the report there "
                        "would destroy the run record (choose another --out)",
                    )
                ]
            )
    if out.exists() and not force:
        raise InputError(
            [Problem(str(out), "", "already exists; pass --force to replace it, or --out")]
        )
    text = report.model_dump_json(indent=2, exclude_defaults=False) + "\n"
    try:
        atomic_write_bytes(out, text.encode("utf-8"))
    except OSError as exc:
        raise InputError([Problem(str(out), "", f"cannot write: {exc.strerror or exc}")]) from exc
    return out
