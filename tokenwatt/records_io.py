"""The file half of ``tokenwatt report`` and ``tokenwatt schema``.

Reads and hashes run records for ``report`` and writes report records and the JSON Schema
files atomically; the summarising itself is the pure :func:`tokenwatt.analysis.summarise`
and the schemas come from :func:`tokenwatt.records.json_schemas`. It lives outside
:mod:`tokenwatt.records` so that importing the records (as the pure analysis stage does)
never brings file writing with it; only the CLI imports it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tokenwatt.errors import InputError, Problem, RecordError, TokenwattError
from tokenwatt.files import atomic_write_bytes, file_sha256, same_file
from tokenwatt.records import (
    ReplicationV1,
    ReportV3,
    RunInput,
    RunRecord,
    UpdateV2,
    load_report,
    problems_from,
    read_json,
    read_request_rows,
    request_log_path,
    schema_files,
    validate,
)


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
    return RunInput(name=name, sha256=digest, run=run, request_rows=repeat_rows(path, run))


def repeat_rows(path: Path, run: RunRecord) -> tuple[dict[str, Any], ...] | None:
    """The repeats' lines of the run's per-request file beside ``path``
    (``RUN.requests.jsonl.gz``), after checking the file against the record's hash.

    None when the record names no such file or it is not there (a run copied without it):
    the report then has no latency distributions.

    Raises:
        RecordError: the file is there but unreadable, not the record's (hash or line
            count), or holds a line that is not a request row.
    """
    if run.requests_log is None:
        return None
    log = request_log_path(path)
    if not log.is_file():
        return None
    try:
        return tuple(r for r in read_request_rows(log, run.requests_log) if r["kind"] == "repeat")
    except InputError as exc:
        raise RecordError(exc.problems) from exc


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


def write_replication(record: ReplicationV1, out: Path) -> Path:
    """Write a replication record as JSON, atomically; an existing file is never replaced
    (replications are dated, one file each).

    Raises:
        InputError: ``out`` exists or cannot be written.
    """
    if out.exists():
        raise InputError([Problem(str(out), "", "already exists; a replication is never replaced")])
    text = record.model_dump_json(indent=2) + "\n"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(out, text.encode("utf-8"))
    except OSError as exc:
        raise InputError([Problem(str(out), "", f"cannot write: {exc.strerror or exc}")]) from exc
    return out


def load_reports(folder: Path) -> list[ReportV3]:
    """Every report record ``*.json`` in ``folder`` (hidden names aside), validated and
    migrated; the problems of every file are reported together.

    Raises:
        RecordError: no such folder, or one problem per problem of any file.
    """
    if not folder.is_dir():
        raise RecordError([Problem(str(folder), "", "no such folder of report records")])
    reports: list[ReportV3] = []
    problems: list[Problem] = []
    first: dict[str, Path] = {}
    for path in sorted(p for p in folder.glob("*.json") if not p.name.startswith(".")):
        try:
            report = load_report(path)
        except RecordError as exc:
            problems += exc.problems
            continue
        other = first.setdefault(report.id, path)
        if other != path:
            problems.append(
                Problem(str(path), "id", f"the id {report.id!r} is already used by {other}")
            )
            continue
        reports.append(report)
    if problems:
        raise RecordError(problems)
    return reports


def rows_bytes(
    rows: Sequence[dict[str, Any]], columns: Mapping[str, str], out: Path, fmt: str
) -> bytes:
    """``rows`` (one dict per row, keys ``columns``: name → kind, ``str``, ``bool``,
    ``int`` or ``float``) as the bytes of a CSV file (UTF-8, a header line, empty cells for
    missing values) or a Parquet file (pyarrow; typed columns, nulls kept); ``out`` names
    the file in messages.

    Raises:
        InputError: Parquet without pyarrow (naming the extra that brings it).
    """
    import io

    if fmt == "parquet":
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise InputError(
                [
                    Problem(
                        str(out),
                        "--out",
                        "writing Parquet needs pyarrow: pip install 'tokenwatt-bench[parquet]'",
                    )
                ]
            ) from None
        table = pa.Table.from_pylist([dict(r) for r in rows], schema=_arrow_schema(pa, columns))
        buffer = pa.BufferOutputStream()
        pq.write_table(table, buffer)
        data: bytes = buffer.getvalue().to_pybytes()
    else:
        import csv

        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=list(columns), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        data = text.getvalue().encode("utf-8")
    return data


def _arrow_schema(pa: Any, columns: Mapping[str, str]) -> Any:
    """The Arrow schema of ``columns`` (name → ``str``, ``bool``, ``int`` or ``float``)."""
    kinds = {"str": pa.string(), "bool": pa.bool_(), "int": pa.int64(), "float": pa.float64()}
    return pa.schema([pa.field(name, kinds[kind]) for name, kind in columns.items()])


class StaleSchemaError(TokenwattError):
    """``tokenwatt schema --check`` found committed schema files that differ from the models."""


@dataclass(frozen=True)
class SchemaExport:
    """What :func:`export_schemas` did: files written, and files already current."""

    written: list[Path]
    current: list[Path]


def export_schemas(out_dir: Path, *, check: bool = False) -> SchemaExport:
    """Write the JSON Schema files into ``out_dir``, or with ``check`` only compare them.

    Each file is written atomically (temporary file in the same folder, then ``os.replace``),
    and only when its text changed, so an up-to-date folder is left untouched.

    Raises:
        StaleSchemaError: with ``check``, when a file is missing or differs (names each one).
        InputError: a schema file cannot be read or written: a folder in its place, a file
            where ``out_dir`` should be, a full or read-only disk.
    """
    written: list[Path] = []
    current: list[Path] = []
    stale: list[Path] = []
    for path, text in schema_files(out_dir).items():
        try:
            old: str | None = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            old = None
        except (IsADirectoryError, NotADirectoryError) as exc:
            raise _cannot(path, exc) from exc
        except UnicodeDecodeError:
            old = None  # not UTF-8: stale, rewritten below
        if old == text:
            current.append(path)
        elif check:
            stale.append(path)
        else:
            try:
                out_dir.mkdir(parents=True, exist_ok=True)
                atomic_write_bytes(path, text.encode("utf-8"))
            except OSError as exc:
                raise _cannot(path, exc) from exc
            written.append(path)
    if stale:
        names = ", ".join(str(p) for p in stale)
        raise StaleSchemaError(
            f"schema files are stale or missing: {names}; run `tokenwatt schema` and commit them"
        )
    return SchemaExport(written, current)


def _cannot(path: Path, exc: OSError) -> InputError:
    """The error for a schema file that cannot be read or written (a folder in its place,
    a file where the folder should be, a full or read-only disk)."""
    why = "a folder is in the way" if path.is_dir() else str(exc.strerror or exc)
    return InputError([Problem(str(path), "", f"cannot read or write the schema file: {why}")])


def add_erratum(report_path: Path, run_file: str, text: str, today: dt.date) -> UpdateV2:
    """Record, in the report at ``report_path``, that the run record ``run_file`` (one of
    its ``run_files``) changed or was removed since the report was made: a dated update
    (``updates``) that the page shows at its top and that ``tokenwatt build`` then takes as
    the run record's accepted SHA-256 (None: removed). The record's figures stay as first
    published. Written atomically.

    The run record is looked for in the archive, the folder above the report's ``reports/``
    folder, as ``tokenwatt build`` looks for it.

    Raises:
        RecordError: the report cannot be read.
        InputError: ``run_file`` is not one the report cites; the run record is as the
            report (or its latest erratum) already keeps it; the text is empty; the report
            cannot be written.
    """
    report = load_report(report_path)
    cited = [f.path for f in report.run_files]
    if run_file not in cited:
        shown = ", ".join(cited) or "none"
        message = f"{run_file} is not a run record {report_path} cites (it cites: {shown})"
        raise InputError([Problem("--run", "", message)])
    # The archive as tokenwatt build sees it: the folder above the reports folder given.
    path = report_path.parent.resolve().parent / run_file
    if path.exists() and not path.is_file():
        raise InputError([Problem("--run", "", f"{run_file} is not a file ({path})")])
    sha = file_sha256(path) if path.is_file() else None
    kept: str | None = next(f.sha256 for f in report.run_files if f.path == run_file)
    for u in sorted(report.updates, key=lambda u: u.date):
        if u.run_file == run_file:
            kept = u.run_sha256  # None: removed
    if sha == kept:
        message = f"{run_file} is as the report already keeps it: there is no change to record"
        raise InputError([Problem("--run", "", message)])
    if not text.strip():
        raise InputError([Problem("--text", "", "is blank: say what changed and why")])
    try:
        update = UpdateV2(date=today, text=text.strip(), run_file=run_file, run_sha256=sha)
    except ValidationError as exc:
        raise InputError(problems_from("--text", exc)) from None
    updated = report.model_copy(update={"updates": [*report.updates, update]})
    # Through a symlink to the file it names, which stays a link.
    write_report(ReportV3.model_validate(updated.model_dump()), report_path.resolve(), force=True)
    return update
