"""What ``tokenwatt collect`` prints when the run ends, and its exit status.

On stdout: the window table (:func:`tokenwatt.cli.terminal.run_table`), the result line,
the sentence on why the result rate is where it is, the doubt, the accuracy score and the
file written. On stderr, through the run's reporter (:mod:`tokenwatt.cli.progress`): the
result's warnings, the keep-up note, each window's warnings and the error notes, what the
run lacks in power, the simulated-engine note, and why a run is incomplete.

A warning the live display already showed during the run (a window's warning, the
search's) is not said again here: each warning is printed once per run.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from tokenwatt.analysis import fixed
from tokenwatt.cli.progress import TerminalReporter
from tokenwatt.records import RunRecord

SIGNALS = {"ctrl-c": "SIGINT", "sigterm": "SIGTERM", "sighup": "SIGHUP"}
"""The record's ``interrupted`` value → the signal's name, for the exit status."""


def print_collect_end(
    record: RunRecord, out: Path, reporter: TerminalReporter, *, wide: bool = False
) -> int:
    """Print the end of a collect run (module docstring); ``wide``: every column of the
    window table (:func:`tokenwatt.cli.terminal.run_table`).

    Returns:
        The exit status: 0; for an incomplete run the shell's status of the signal that
        ended it (128 + its number) or 1; 1 when every request failed (a valid record that
        says so, but nothing was measured).
    """
    from tokenwatt.analysis import every_request_failed, run_doubt
    from tokenwatt.cli.terminal import console, run_table
    from tokenwatt.collect import exit_status

    console().print(run_table(record, wide=wide))
    _result(record, reporter)
    doubt = run_doubt(record)
    if doubt:
        click.echo(doubt)
    if record.accuracy is not None:
        score = fixed(record.accuracy.score_pct, 1)
        click.echo(f"accuracy: {score}% ({record.accuracy.name})")
    if record.simulated:
        reporter.line("note: simulated engine; these numbers are not measurements")
    click.echo(f"wrote {out}")
    failed = every_request_failed(record)
    if failed is not None:
        reporter.line(failed)
    if not record.complete:
        reporter.line(f"incomplete: {record.incomplete_reason or ''}")
        name = SIGNALS.get(record.interrupted or "")
        return exit_status(name) if name else 1
    return 1 if failed is not None else 0


def _result(record: RunRecord, reporter: TerminalReporter) -> None:
    """The result line and the sentence on it (stdout), then the warnings and notes below
    the table (stderr), each said once."""
    from tokenwatt.analysis import (
        explain_run,
        gpu_minutes,
        power_warnings,
        run_notes,
        sustained_note,
        window_warnings,
    )
    from tokenwatt.cli.terminal import passes_text
    from tokenwatt.collect import usable_cores

    r = record.result
    if r is not None:
        # No accelerator is read with adapter none: the minutes are the client's.
        unit = "client-min" if record.spec.hardware.adapter == "none" else "GPU-min"
        cost = f"{gpu_minutes(r.gpu_seconds)} {unit}, "
        cost += f"{gpu_minutes(r.gpu_seconds_saved)} saved by early stops"
        status, reason = r.outcome()
        if status == "measured":
            load = f"{r.rate_rps:.4g} req/s"
            if r.concurrency is not None:
                load = f"{r.concurrency} clients ({load})"
            goodput = fixed(r.goodput_tok_s, 1, commas=True)
            what = f"{load}, goodput {goodput} tok/s ({passes_text(record)}; {cost})"
        # Not measured is never "0 req/s, goodput 0.0": the status and its reason.
        elif status == "inconclusive":
            what = f"inconclusive ({reason or 'no reason recorded'}; {cost})"
        else:  # none_met: the reason starts "no load met the SLO, down to …"
            what = f"{reason or 'no load met the SLO'} ({cost})"
        click.echo(f"{record.label}: {what}")
        for warning in r.warnings:
            reporter.warning(warning)
    keep_up = sustained_note(record)
    if keep_up is not None:
        reporter.line(f"note: {keep_up}")
    click.echo(explain_run(record))
    # A window's warning the live display showed under the window is not listed again.
    said = {
        f"warning: {label}: {text}"
        for label, text in window_warnings(record)
        if reporter.shown(f"warning: {text}")
    }
    for line in run_notes(record, usable_cores(), failed_line=False):
        if line not in said:
            reporter.line(line)
    for note in power_warnings(record, said_at_start=True):
        reporter.warning(note)


__all__ = ["SIGNALS", "print_collect_end"]


def measured_or_exit(
    opts: Any,
    reporter: TerminalReporter,
    nothing: str,
    announce: Callable[[], None] | None = None,
) -> RunRecord:
    """``collect``'s :func:`~tokenwatt.collect.measure_configuration` for the commands that
    measure (``collect``, ``replicate``): a signal or Ctrl-C before the first window says
    so with ``nothing`` (what was not written) and exits 128 + the signal's number (130).
    ``announce``: as :func:`~tokenwatt.collect.measure_configuration`'s.
    """
    from tokenwatt.collect import StopSignal, exit_status, measure_configuration

    try:
        return measure_configuration(opts, reporter, announce=announce)
    except StopSignal as exc:  # before the first window: nothing was measured
        click.echo(f"stopped by {exc.name} before the first window; {nothing}", err=True)
        sys.exit(exit_status(exc.name))
    except KeyboardInterrupt:
        click.echo(f"interrupted (Ctrl-C) before the first window; {nothing}", err=True)
        sys.exit(130)
