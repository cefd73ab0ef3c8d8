"""``tokenwatt export``: every configuration's headline figures, one row each, as CSV and
Parquet (registered on the group in :mod:`tokenwatt.cli.group`)."""

from __future__ import annotations

from pathlib import Path

import click

from tokenwatt.cli.exits import errors_to_exit
from tokenwatt.errors import InputError, Problem

FORMATS = {".csv": "csv", ".parquet": "parquet"}
"""The file suffixes ``--out`` takes, and the format each writes."""


@click.command("export")
@click.option(
    "--reports",
    "reports_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("reports"),
    show_default=True,
    help="Folder of report records.",
)
@click.option(
    "--out",
    "outs",
    multiple=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="File to write, .csv or .parquet (repeatable); default archive.csv and archive.parquet.",
)
@errors_to_exit
def export(reports_dir: Path, outs: tuple[Path, ...]) -> None:
    """Write every configuration of every report as one row (note, spec fingerprint,
    engine, hardware, headline figures with their intervals, frontier flags)."""
    from tokenwatt.files import atomic_write_bytes
    from tokenwatt.records_io import load_reports, rows_bytes

    targets = list(dict.fromkeys(outs)) or [Path("archive.csv"), Path("archive.parquet")]
    bad = [t for t in targets if t.suffix.lower() not in FORMATS]
    if bad:
        raise InputError([Problem(str(t), "--out", "must end in .csv or .parquet") for t in bad])
    from tokenwatt import analysis

    unwritable = [
        Problem(str(t), "--out", why) for t in targets if (why := _unwritable(t)) is not None
    ]
    if unwritable:
        raise InputError(unwritable)
    rows = [r.as_dict() for r in analysis.archive_rows(load_reports(reports_dir))]
    # Every file's bytes first: a missing pyarrow or a bad row writes none of them.
    data = {t: rows_bytes(rows, analysis.COLUMNS, t, FORMATS[t.suffix.lower()]) for t in targets}
    for target, content in data.items():
        try:
            atomic_write_bytes(target, content)
        except OSError as exc:
            raise InputError(
                [Problem(str(target), "--out", f"cannot write: {exc.strerror or exc}")]
            ) from exc
        click.echo(f"wrote {len(rows)} row(s) to {target}")


def _unwritable(target: Path) -> str | None:
    """Why ``target`` cannot be written, or None: checked for every file before any is
    written, so that one bad ``--out`` leaves no other file behind."""
    import os

    folder = target.parent if str(target.parent) else Path()
    if target.is_dir():
        return "is a folder"
    if not folder.is_dir():
        return f"its folder {folder} does not exist"
    if not os.access(folder, os.W_OK):
        return f"its folder {folder} cannot be written"
    return None
