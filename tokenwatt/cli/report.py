"""``tokenwatt build``, ``show`` and ``report``: the commands that read records and print
them or write the report record and the site's pages (registered on the group in
:mod:`tokenwatt.cli.group`; each imports its stage lazily, so that ``tokenwatt --help``
stays instant).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tokenwatt.cli.exits import errors_to_exit
from tokenwatt.errors import InputError
from tokenwatt.text import terminal_safe


@click.command()
@click.option(
    "--reports",
    "reports_dir",
    type=click.Path(path_type=Path),
    default=Path("reports"),
    show_default=True,
    help="Folder of report records.",
)
@click.option(
    "--out",
    "docs_dir",
    type=click.Path(path_type=Path),
    default=Path("docs"),
    show_default=True,
    help="MkDocs docs folder to write (generated, git-ignored).",
)
@click.option("--check", is_flag=True, help="Write nothing; exit 1 when the pages are stale.")
@errors_to_exit
def build(reports_dir: Path, docs_dir: Path, check: bool) -> None:
    """Validate report records and write the lab-notes site's pages."""
    from tokenwatt.cli.reference import cli_reference_markdown
    from tokenwatt.site import build_site

    root = click.get_current_context().find_root().command
    reference = cli_reference_markdown(root)
    result = build_site(reports_dir, docs_dir, check=check, cli_reference=reference)
    for warning in result.warnings:
        click.echo(f"warning: {terminal_safe(warning)}", err=True)
    click.echo(result.summary)


@click.command()
@click.argument("run_file", metavar="RUN.json", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@click.option(
    "--requests",
    "with_requests",
    is_flag=True,
    help="Also the per-window TTFT/TPOT/E2E distributions from the per-request file "
    "beside the record, checked against the SHA-256 the record keeps.",
)
@click.option(
    "--wide", is_flag=True, help="Every column of the table; the default fits 120 columns."
)
@errors_to_exit
def show(run_file: Path, as_json: bool, with_requests: bool, wide: bool) -> None:
    """Print a run record's windows: rate, errors, latency percentiles, tok/s, verdict."""

    from tokenwatt.analysis import run_json
    from tokenwatt.cli.terminal import (
        console,
        json_text,
        plain,
        print_run,
        requests_table,
        show_run,
    )

    record, windows = show_run(run_file, with_requests=with_requests)
    if as_json:
        data = run_json(record)
        if windows is not None:
            data["requests"] = windows
        click.echo(json_text(data))
        return
    out = console()
    print_run(record, out, wide=wide)
    if windows is not None:
        log = record.requests_log
        assert log is not None
        title = f"per-request file {log.file} (SHA-256 checked, {log.requests} requests)"
        out.print(requests_table(title, windows))
        out.print(
            plain(
                "failed requests and those the client cancelled count as infinite; warm-up ones not"
            )
        )


@click.command()
@click.argument("run_files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--title", required=True, help="The lab note's title.")
@click.option("--id", "report_id", help="Report id (default: from the title).")
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Report file to write (default: reports/ID.json).",
)
@click.option(
    "--cards", type=click.IntRange(min=1), default=64, show_default=True, help="fleet.cards."
)
@click.option("--demo", is_flag=True, help="Allow smoke-mode and simulated runs (a demo report).")
@click.option("--force", is_flag=True, help="Replace the report file if it exists.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@click.option(
    "--wide", is_flag=True, help="Every column of the table; the default fits 120 columns."
)
@errors_to_exit
def report(
    run_files: tuple[Path, ...],
    title: str,
    report_id: str | None,
    out: Path | None,
    cards: int,
    demo: bool,
    force: bool,
    as_json: bool,
    wide: bool,
) -> None:
    """Summarise run records (one per configuration) into a report record.

    Prints the configurations (goodput, tokens/J, accuracy verdict, capacity credit) as a
    table, the capacity conclusion and, per configuration, the sentence that says why its
    result rate is where it is; ``--json`` prints the same as JSON.
    """
    from pydantic import ValidationError

    from tokenwatt import analysis
    from tokenwatt.analysis import report_command, slug
    from tokenwatt.errors import Problem
    from tokenwatt.records import problems_from
    from tokenwatt.records_io import load_runs, write_report

    runs = load_runs(list(run_files))
    command = report_command(
        [r.name for r in runs],
        title=title,
        report_id=report_id,
        out=out.as_posix() if out is not None else None,
        cards=cards if cards != 64 else None,
        demo=demo,
    )
    try:
        record = analysis.summarise(
            runs, title=title, report_id=report_id, cards=cards, demo=demo, command=command
        )
    except ValidationError as exc:  # from the options (--title, --id) the record carries
        problems = [Problem("<command line>", p.field, p.message) for p in problems_from("", exc)]
        raise InputError(problems) from None
    target = out if out is not None else Path("reports") / f"{report_id or slug(title)}.json"
    write_report(record, target, force=force, inputs=list(run_files))
    _print_report(record, target, [item.run for item in runs], as_json=as_json, wide=wide)
    source = click.get_current_context().get_parameter_source("cards")
    if not as_json and source is click.core.ParameterSource.DEFAULT:
        # The capacity figures scale with the fleet: say where its size came from.
        click.echo(
            f"note: capacity figures assume a fleet of {cards} cards (the default; --cards)",
            err=True,
        )


def _print_report(
    record: Any, target: Path, runs: list[Any], *, as_json: bool, wide: bool = False
) -> None:
    """What ``report`` prints (:func:`tokenwatt.cli.terminal.report_output`): JSON, or tables
    and sentences; the band warning goes to stderr either way."""

    from tokenwatt.cli.terminal import console, json_text, print_report, report_output

    summary = report_output(record, target, runs)
    if as_json:
        click.echo(json_text(summary))
    else:
        print_report(summary, console(), wide=wide)
    if summary["band_warning"]:
        click.echo(f"warning: {terminal_safe(summary['band_warning'])}", err=True)


@click.command()
@click.argument("report_file", metavar="REPORT.json", type=click.Path(path_type=Path))
@click.option(
    "--run",
    "run_file",
    required=True,
    help="The run record whose change to record, as the report's run_files names it (runs/X.json).",
)
@click.option("--text", required=True, help="What changed and why; the page shows it, dated.")
@errors_to_exit
def erratum(report_file: Path, run_file: str, text: str) -> None:
    """Record that a run record a report cites changed or was removed: a dated update on
    the note's page, after which ``tokenwatt build`` accepts the run record as it is now.
    The note's figures stay as first published; make the report again to change them."""
    import datetime as dt

    from tokenwatt.records_io import add_erratum

    update = add_erratum(report_file, run_file, text, dt.date.today())
    state = "removed" if update.run_sha256 is None else f"SHA-256 {update.run_sha256[:12]}…"
    click.echo(
        f"wrote {report_file}: update of {update.date.isoformat()} accepts {run_file} ({state})"
    )
