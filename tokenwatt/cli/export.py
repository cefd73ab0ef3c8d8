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
    from tokenwatt.records_io import load_reports, write_rows

    targets = list(outs) or [Path("archive.csv"), Path("archive.parquet")]
    bad = [t for t in targets if t.suffix.lower() not in FORMATS]
    if bad:
        raise InputError([Problem(str(t), "--out", "must end in .csv or .parquet") for t in bad])
    from tokenwatt import analysis

    rows = analysis.archive_rows(load_reports(reports_dir))
    for target in targets:
        write_rows(
            [r.as_dict() for r in rows], analysis.COLUMNS, target, FORMATS[target.suffix.lower()]
        )
        click.echo(f"wrote {len(rows)} row(s) to {target}")
