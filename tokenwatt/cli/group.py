"""The command line: parses arguments, calls one typed function per command, prints.

This is the only module that imports every stage; each command imports its stage lazily so
that ``tokenwatt --help`` stays instant. Library errors become exit codes here and only here:
:class:`~tokenwatt.errors.InputError` exits 2, any other TokenwattError exits 1.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from tokenwatt import __version__
from tokenwatt.cli.collect import point_inputs, point_options
from tokenwatt.cli.exits import errors_to_exit
from tokenwatt.errors import InputError
from tokenwatt.text import terminal_safe

F = TypeVar("F", bound=Callable[..., Any])


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tokenwatt")
def cli() -> None:
    """TokenWatt Bench: SLO goodput, tokens per joule, MBU and an accuracy gate."""


@cli.command()
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
    from tokenwatt.site import build_site

    result = build_site(reports_dir, docs_dir, check=check)
    for warning in result.warnings:
        click.echo(f"warning: {terminal_safe(warning)}", err=True)
    click.echo(result.summary)


def _collect_options(func: F) -> F:
    """The options shared by ``collect`` and its alias ``run``."""
    options = [
        click.option(
            "--spec",
            "spec_path",
            type=click.Path(path_type=Path),
            default=None,
            help="Benchmark spec (specs/*.spec.yaml); without it, one is built from "
            "--endpoint, --model and the load flags.",
        ),
        click.option(
            "--label", default=None, help="Configuration name, e.g. vllm-fp8kv (default: --model)."
        ),
        click.option(
            "--role",
            type=click.Choice(["baseline", "tuned"]),
            default=None,
            help="Its role (default without --spec: baseline).",
        ),
        click.option(
            "--out",
            type=click.Path(path_type=Path, dir_okay=False),
            required=True,
            help=(
                "Run record to write (runs/X.json), atomically. Checked before measuring: "
                "never the spec, suite or engine log; an existing file is replaced only "
                "when it is a run record."
            ),
        ),
        click.option(
            "--mode",
            type=click.Choice(["smoke", "quick", "full"]),
            default="quick",
            show_default=True,
            help="Preset of windows, repeats and accuracy sample (smoke: never reported).",
        ),
        click.option(
            "--engine-log",
            type=click.Path(path_type=Path),
            default=None,
            help="Engine log to scan for known warnings (e.g. uncalibrated KV scales).",
        ),
        click.option("--endpoint", default=None, help="Overrides the spec's engine.endpoint."),
        click.option(
            "--engine-cmd",
            default=None,
            metavar="'CMD ARGS'",
            help="Start the engine with this command (no shell; {port}: a free port the "
            "endpoint then uses), wait until it answers, measure, stop it. Its log goes "
            "beside --out (X.engine.log). Overrides engine.launch.cmd.",
        ),
        click.option(
            "--kv-dtype",
            type=click.Choice(["auto", "bf16", "fp16", "fp8", "fp8_e4m3", "fp8_e5m2"]),
            default=None,
            help="Overrides the spec's model.kv_dtype for this configuration "
            "(per configuration, outside the fingerprint).",
        ),
        click.option("--no-accuracy", is_flag=True, help="Skip the accuracy suite."),
        click.option("--no-progress", is_flag=True, help="No live display on stderr."),
        click.option(
            "--fast-search",
            is_flag=True,
            help="Cheaper SLO search (short warm-ups after a pass, scout windows, bisect to 5%).",
        ),
        click.option(
            "--workers",
            default=None,
            metavar="N|auto",
            help="Load-generator processes sharing each window's one Poisson schedule "
            "(overrides measurement.workers; default 1: one process). 'auto': from the CPU "
            "cores and the expected chunk rate, never more than the cores less one.",
        ),
        click.option(
            "--ray-address",
            default=None,
            metavar="ADDR",
            help="Run the load-generator workers as Ray actors on this existing Ray cluster "
            "(HOST:6379, ray://HOST:10001 or auto; needs the [ray] extra): one per node, or "
            "--workers N spread over the nodes; each actor's clock offset is measured and "
            "corrected before every window. Overrides measurement.ray_address.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return point_options(func)


def _collect(
    spec_path: Path | None,
    label: str | None,
    role: str | None,
    out: Path,
    mode: str,
    engine_log: Path | None,
    endpoint: str | None,
    kv_dtype: str | None,
    no_accuracy: bool,
    no_progress: bool,
    fast_search: bool,
    workers: str | None,
    ray_address: str | None = None,
    engine_cmd: str | None = None,
    **point: Any,
) -> None:
    import shlex

    from tokenwatt.analysis import (
        every_request_failed,
        explain_run,
        gpu_minutes,
        power_warnings,
        run_doubt,
        run_notes,
        sustained_note,
    )
    from tokenwatt.collect import CollectOptions, StopSignal, collect, exit_status, usable_cores
    from tokenwatt.redact import scrub

    spec_path, label, role, flags = point_inputs(spec_path, label, role, point)
    opts = CollectOptions(
        point=flags,
        spec_path=spec_path,
        label=label,
        role=role,  # type: ignore[arg-type]
        out=out,
        mode=mode,  # type: ignore[arg-type]
        engine_log=engine_log,
        endpoint=endpoint,
        kv_dtype=kv_dtype,
        accuracy=not no_accuracy,
        command=scrub(shlex.join(["tokenwatt", *sys.argv[1:]])),
        progress=not no_progress,
        fast_search=fast_search,
        workers=workers,
        ray_address=ray_address,
        engine_cmd=engine_cmd,
    )
    try:
        record = collect(opts)
    except StopSignal as exc:  # before the first window: nothing was measured
        click.echo(f"stopped by {exc.name} before the first window; no record written", err=True)
        sys.exit(exit_status(exc.name))
    except KeyboardInterrupt:
        click.echo("interrupted (Ctrl-C) before the first window; no record written", err=True)
        sys.exit(130)
    _print_run_table(record)
    from tokenwatt.cli.terminal import passes_text

    r = record.result
    if r is not None:
        load = f"{r.rate_rps:.4g} req/s"
        if r.concurrency is not None:
            load = f"{r.concurrency} clients ({load})"
        # No accelerator is read with adapter none: the minutes are the client's.
        unit = "client-min" if record.spec.hardware.adapter == "none" else "GPU-min"
        click.echo(
            f"{record.label}: {load}, goodput {r.goodput_tok_s:,.1f} tok/s "
            f"({passes_text(record)}; "
            f"{gpu_minutes(r.gpu_seconds)} {unit}, "
            f"{gpu_minutes(r.gpu_seconds_saved)} saved by early stops)"
        )
        for warning in r.warnings:
            click.echo(f"warning: {terminal_safe(warning)}", err=True)
    keep_up = sustained_note(record)
    if keep_up is not None:
        click.echo(f"note: {keep_up}", err=True)
    click.echo(explain_run(record))
    for line in run_notes(record, usable_cores(), failed_line=False):
        click.echo(terminal_safe(line), err=True)
    for note in power_warnings(record, said_at_start=True):
        click.echo(f"warning: {terminal_safe(note)}", err=True)
    doubt = run_doubt(record)
    if doubt:
        click.echo(doubt)
    if record.accuracy is not None:
        click.echo(f"accuracy: {record.accuracy.score_pct:.1f}% ({record.accuracy.name})")
    if record.simulated:
        click.echo("note: simulated engine; these numbers are not measurements", err=True)
    click.echo(f"wrote {out}")
    failed = every_request_failed(record)
    if failed is not None:
        click.echo(terminal_safe(failed), err=True)
    if not record.complete:
        click.echo(f"incomplete: {terminal_safe(record.incomplete_reason or '')}", err=True)
        # The shell's status for a process ended by that signal: 128 + its number.
        signals = {"ctrl-c": "SIGINT", "sigterm": "SIGTERM", "sighup": "SIGHUP"}
        name = signals.get(record.interrupted or "")
        sys.exit(exit_status(name) if name else 1)
    if failed is not None:
        sys.exit(1)  # a valid record that says so, but nothing was measured


def _print_run_table(record: Any) -> None:
    """The run's windows as a table on stdout (:mod:`tokenwatt.cli.terminal`)."""
    from tokenwatt.cli.terminal import console, run_table

    console().print(run_table(record))


@cli.command()
@click.argument("run_file", metavar="RUN.json", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@click.option(
    "--requests",
    "with_requests",
    is_flag=True,
    help="Also the per-window TTFT/TPOT/E2E distributions from the per-request file "
    "beside the record, checked against the SHA-256 the record keeps.",
)
@errors_to_exit
def show(run_file: Path, as_json: bool, with_requests: bool) -> None:
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
    print_run(record, out)
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


@cli.command()
@_collect_options
@errors_to_exit
def collect(**kwargs: Any) -> None:
    """Measure a configuration (SLO search, repeats, power, MBU, accuracy) into a run record."""
    _collect(**kwargs)


@cli.command("run")
@_collect_options
@errors_to_exit
def run_command(**kwargs: Any) -> None:
    """Same as ``collect``."""
    _collect(**kwargs)


@cli.command()
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
    _print_report(record, target, [item.run for item in runs], as_json=as_json)
    source = click.get_current_context().get_parameter_source("cards")
    if not as_json and source is click.core.ParameterSource.DEFAULT:
        # The capacity figures scale with the fleet: say where its size came from.
        click.echo(
            f"note: capacity figures assume a fleet of {cards} cards (the default; --cards)",
            err=True,
        )


def _print_report(record: Any, target: Path, runs: list[Any], *, as_json: bool) -> None:
    """What ``report`` prints (:func:`tokenwatt.cli.terminal.report_output`): JSON, or tables
    and sentences; the band warning goes to stderr either way."""

    from tokenwatt.cli.terminal import console, json_text, print_report, report_output

    summary = report_output(record, target, runs)
    if as_json:
        click.echo(json_text(summary))
    else:
        print_report(summary, console())
    if summary["band_warning"]:
        click.echo(f"warning: {terminal_safe(summary['band_warning'])}", err=True)


from tokenwatt.cli.tools import model_info_cmd, schema, sim, suites  # noqa: E402 (registered on the group)

for _command in (sim, suites, schema, model_info_cmd):
    cli.add_command(_command)

from tokenwatt.cli.init import init_command  # noqa: E402 (registered after cli exists)

cli.add_command(init_command)

from tokenwatt.cli.session import session_command  # noqa: E402 (registered on the group)

cli.add_command(session_command)

from tokenwatt.cli.cloud import cloud_group  # noqa: E402 (registered on the group)

cli.add_command(cloud_group)


def main() -> None:
    """Entry point of the ``tokenwatt`` console script."""
    cli()
