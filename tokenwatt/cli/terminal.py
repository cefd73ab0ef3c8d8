"""Tables on the terminal (rich) for ``collect``, ``show`` and ``report``.

Text from records is data: every cell is a :class:`rich.text.Text` made by :func:`plain`,
never rich markup, and control characters (C0, DEL, C1: the escape that starts a terminal
sequence among them) are shown as ``\\xNN`` instead of reaching the terminal. Unicode's
directional controls are isolated as on the pages
(:func:`tokenwatt.site.format.escape.bidi_isolated`).
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tokenwatt.analysis import (
    LATENCIES,
    errors_cell,
    explain_run,
    fixed,
    ms_cell,
    run_rows,
    triple_cell,
    workload_text,
)
from tokenwatt.errors import TokenwattError
from tokenwatt.records import RunRecord
from tokenwatt.site import bidi_isolated
from tokenwatt.text import terminal_safe

PIPE_WIDTH = 10_000
"""Columns a table may take when stdout is not a terminal and ``COLUMNS`` is unset: wide
enough that no row of ours wraps, so piped output (``| less -S``, ``> file``, CI logs) keeps
one line per row. A table is as wide as its cells need, never padded to this."""


def console() -> Console:
    """The console the commands print their tables to (stdout).

    On a terminal, rich's own width (the terminal's). Otherwise rich would take 80 columns,
    or the width of stdin's or stderr's terminal (``tokenwatt show RUN.json | less``), and
    wrap every row over several lines; there the width is ``COLUMNS`` when it is set (an
    explicit choice) and :data:`PIPE_WIDTH` when not. No colour or style sequences off a
    terminal (rich's own rule, and ``NO_COLOR`` is honoured on one).
    """
    if sys.stdout.isatty():
        return Console(soft_wrap=False)
    columns = os.environ.get("COLUMNS", "")
    width = int(columns) if columns.isdigit() and int(columns) > 0 else PIPE_WIDTH
    return Console(width=width, soft_wrap=False, no_color=True, highlight=False)


def plain(value: object) -> Text:
    """``value`` as inert terminal text: control characters shown as ``\\xNN``
    (:func:`tokenwatt.text.terminal_safe`, tab and newline included: a cell is one line),
    no markup."""
    return Text(
        bidi_isolated(terminal_safe(str(value)).replace("\t", "\\x09").replace("\n", "\\x0a"))
    )


WIDTH = 120
"""Columns the default (compact) tables are made to fit: the window table of ``collect``
and ``show``, ``report``'s configurations. ``--wide`` shows every column instead."""

TEXT_COLUMNS = frozenset({"window", "verdict", "configuration", "accuracy", "capacity credit"})
"""Columns of words, which wrap between words on a narrow terminal; every other column
(numbers) keeps its cells on one line."""


def _table(
    title: str,
    headers: Sequence[str],
    rows: Sequence[Sequence[object]],
    *,
    compact: bool = False,
) -> Table:
    # Compact: no padding inside the outer borders (two columns of the 120).
    table = Table(title=plain(title), title_justify="left", pad_edge=not compact)
    for i, header in enumerate(headers):
        words = header in TEXT_COLUMNS
        table.add_column(
            _header(header),
            justify="left" if i == 0 else "right",
            overflow="fold",
            no_wrap=not words,
            min_width=None if words else len(max(header.split("\n"), key=len)),
        )
    table.columns[-1].justify = "left"
    for row in rows:
        table.add_row(*(plain(cell) for cell in row))
    return table


def _header(header: str) -> Text:
    """A column header: constant text of ours, which may break over lines at ``\\n``."""
    return Text("\n").join(plain(part) for part in header.split("\n"))


WINDOW_HEADERS = (
    "window",
    "req/s",
    "done req/s",
    "requests",
    "cancelled",
    "errors",
    "TTFT ms p50/p90/p99",
    "TPOT ms p50/p90/p99",
    "ITL ms p50/p90/p99",
    "E2E ms p50/p90/p99",
    "out tok/s",
    "verdict",
)


def window_cells(row: dict[str, Any]) -> list[str]:
    """One :func:`~tokenwatt.analysis.report.run_table.window_row` as the wide table's cells."""
    return [
        row["window"],
        f"{row['rate_rps']:.4g}",
        f"{row['achieved_rps']:.4g}",
        str(row["requests"]),
        str(row["cancelled_by_client"]),
        errors_cell(row),
        *(triple_cell(row[key]) for key in LATENCIES),
        fixed(row["output_tok_s"], 1, commas=True),
        row["verdict"],
    ]


COMPACT_HEADERS = (
    "window",
    "done\nreq/s",
    "requests",
    "errors",
    "TTFT ms\np50 / p99",
    "TPOT ms\np50 / p99",
    "out\ntok/s",
    "verdict",
)
"""The window table that fits :data:`WIDTH` columns: the rate set is in the window's label,
the requests the client cancelled join the errors, TTFT and TPOT show p50 and p99 (the
SLO's), ITL and E2E are left to ``--wide``."""


def compact_window_cells(row: dict[str, Any]) -> list[str]:
    """One :func:`~tokenwatt.analysis.report.run_table.window_row` as the compact table's cells."""
    errors = errors_cell(row)
    cancelled = row["cancelled_by_client"]
    if cancelled:
        errors = f"{cancelled} cancelled" if errors == "0" else f"{errors}, {cancelled} cancelled"
    return [
        row["window"],
        f"{row['achieved_rps']:.4g}",
        str(row["requests"]),
        errors,
        *(" / ".join(ms_cell(row[key][p]) for p in ("p50", "p99")) for key in LATENCIES[:2]),
        fixed(row["output_tok_s"], 1, commas=True),
        row["verdict"],
    ]


def run_title(record: RunRecord) -> str:
    """``label (role, mode, workload)`` with the simulated and incomplete flags."""
    flags = [record.role, f"{record.mode} mode", f"workload {workload_text(record)}"]
    if record.simulated:
        flags.append("simulated")
    if not record.complete:
        flags.append("incomplete")
    return f"{record.label} ({', '.join(flags)})"


def run_table(record: RunRecord, *, wide: bool = False) -> Table:
    """Every window of ``record``. ``wide``: rate set and achieved (completed requests /
    window), requests, those the client cancelled (early stop; counted as misses), errors by
    kind, p50/p90/p99 of TTFT, TPOT, ITL and E2E, output tokens/s and the verdict; the
    default is the compact form (:data:`COMPACT_HEADERS`), which fits :data:`WIDTH` columns
    when the labels and verdicts do and otherwise wraps only those."""
    if wide:
        return _table(run_title(record), WINDOW_HEADERS, list(map(window_cells, run_rows(record))))
    rows = [compact_window_cells(row) for row in run_rows(record)]
    return _table(run_title(record), COMPACT_HEADERS, rows, compact=True)


def result_line(record: RunRecord) -> str:
    """The run's result in one line (rate and goodput), or why there is none."""
    r = record.result
    if r is None:
        if record.spec.sweep.fixed:
            return "result: none (the run stopped before its loads were measured)"
        return "result: none (the search did not finish)"
    status, reason = r.outcome()
    if status == "inconclusive":
        return f"inconclusive: {reason}"
    if status == "none_met":
        return f"result: {reason or 'no load met the SLO'}"
    return (
        f"result: {r.rate_rps:.4g} req/s, goodput {fixed(r.goodput_tok_s, 1, commas=True)} tok/s "
        f"({passes_text(record)})"
    )


def passes_text(record: RunRecord) -> str:
    """How many of the result's windows met the SLO: ``2/2 repeats met the SLO`` (repeats at
    the found rate), or for a fixed-load run, whose windows are the listed loads at different
    rates, ``2 of 2 loads met the SLO``."""
    r = record.result
    if r is None:
        return "no result"
    if record.spec.sweep.fixed:
        return f"{r.slo_pass_count} of {r.repeats} loads met the SLO"
    return f"{r.slo_pass_count}/{r.repeats} repeats met the SLO"


def print_run(record: RunRecord, console: Console, *, wide: bool = False) -> None:
    """The window table, the result line, the sentence on why the result rate is where it
    is, each window's warnings, its most common error with what the server said, the
    client-bound advice and the line saying every request failed
    (:func:`~tokenwatt.analysis.report.run_warnings.run_notes`), and what the run does not cover
    (the record's ``not_covered``, one a line), with a warning for each thing missing in
    its power (:func:`power_warnings`); ``wide``: every column of :func:`run_table`. The
    result's own warnings and the keep-up note follow the result line, as ``collect``
    prints them (``collect``'s "not beyond doubt" sentence and accuracy line are not
    printed here)."""
    from tokenwatt.analysis import explain_run, power_warnings, run_notes, sustained_note

    console.print(run_table(record, wide=wide))
    console.print(plain(result_line(record)))
    for warning in record.result.warnings if record.result is not None else []:
        console.print(plain(f"warning: {warning}"))
    keep_up = sustained_note(record)
    if keep_up is not None:
        console.print(plain(f"note: {keep_up}"))
    console.print(plain(explain_run(record)))
    for line in run_notes(record):
        console.print(plain(line), soft_wrap=True)
    for note in power_warnings(record):
        if note not in record.not_covered:  # those are listed just below
            console.print(plain(f"warning: {note}"))
    if record.not_covered:
        console.print(plain("not covered:"))
        for note in record.not_covered:
            console.print(plain(f"  - {note}"))


REQUEST_HEADERS = (
    "window",
    "req/s",
    "lines",
    "counted",
    "cancelled",
    "errors",
    "TTFT ms p50/p90/p99",
    "TPOT ms p50/p90/p99",
    "E2E ms p50/p90/p99",
)


def requests_table(title: str, windows: Sequence[dict[str, Any]]) -> Table:
    """The per-window distributions of
    :func:`~tokenwatt.analysis.report.run_table.labelled_request_windows`, each window named by its
    label (as in :func:`run_table`); a column of text prompt lengths when the file has them
    (a dataset run)."""
    texts = any(w.get("prompt_text_tokens") for w in windows)
    rows = [
        [
            w["window"],
            f"{w['rate_rps']:.4g}",
            str(w["requests"]),
            str(w["counted"]),
            str(w["cancelled"]),
            str(w["errors"]),
            *(triple_cell(w[key]) for key in ("ttft_ms", "tpot_ms", "e2e_ms")),
            *([_tokens_cell(w.get("prompt_text_tokens"))] if texts else []),
        ]
        for w in windows
    ]
    headers = (*REQUEST_HEADERS, *(["text prompt tokens p50/p90/p99"] if texts else []))
    return _table(title, headers, rows)


def _tokens_cell(p: dict[str, Any] | None) -> str:
    """Token-count percentiles in one cell (``"-"`` where there are none)."""
    if p is None:
        return "- / - / -"
    return " / ".join("-" if p[k] is None else f"{p[k]:,.6g}" for k in ("p50", "p90", "p99"))


REPORT_HEADERS = (
    "configuration",
    "role",
    "goodput tok/s [95% CI]",
    "vs baseline",
    "tok/J",
    "SLO repeats",
    "accuracy",
    "capacity credit",
)


COMPACT_REPORT_HEADERS = (
    "configuration",
    "goodput tok/s [95% CI]",
    "vs baseline",
    "tok/J",
    "SLO\nrepeats",
    "accuracy",
    "capacity credit",
)
"""The configurations table that fits :data:`WIDTH` columns: the role is the ``vs baseline``
cell of the baseline, and a capacity credit that is not given says ``none`` (the
conclusion below the table says why); the accuracy verdict wraps between words."""


def report_table(summary: dict[str, Any], *, wide: bool = False) -> Table:
    """The configurations of :func:`~tokenwatt.analysis.report.report_table.report_summary`:
    label, role, goodput with its interval, change from the baseline, tokens per joule,
    repeats that met the SLO, the accuracy verdict and the capacity credit; compact
    (:data:`COMPACT_REPORT_HEADERS`) unless ``wide``."""
    from tokenwatt.analysis import fixed, goodput_cell

    rows = []
    for row in summary["configs"]:
        delta = row["goodput_delta_pct"]
        tpj = row["tokens_per_joule"]
        cells = [
            row["label"],
            row["role"],
            goodput_cell(row),
            "–" if delta is None else f"{delta:+.1f}%".replace("-", "−"),
            # Two decimals for every row, as the page shows them (1.30 beside 1.36).
            "–" if tpj is None else fixed(tpj, 2),
            f"{row['slo_pass_count']}/{row['repeats']}",
            row["accuracy"],
            row["capacity"],
        ]
        rows.append(cells if wide else _compact_config(row, cells))
    title = f"{summary['title']} ({summary['cards']} cards)"
    headers = REPORT_HEADERS if wide else COMPACT_REPORT_HEADERS
    return _table(title, headers, rows, compact=not wide)


def _compact_config(row: dict[str, Any], cells: list[str]) -> list[str]:
    """A configuration's wide cells (:data:`REPORT_HEADERS`) in the compact form."""
    baseline = row["role"] == "baseline"
    capacity = cells[7] if baseline or row["capacity_credited"] else "none"
    vs = "baseline" if baseline and row["goodput_delta_pct"] is None else cells[3]
    return [cells[0], cells[2], vs, cells[4], cells[5], cells[6], capacity]


def report_output(report: Any, target: Path, runs: Sequence[RunRecord]) -> dict[str, Any]:
    """Everything ``tokenwatt report`` prints, as one JSON-ready mapping (its ``--json``):
    :func:`~tokenwatt.analysis.report.report_table.report_summary` plus the file written, each
    run's explanation of its result rate (and doubt, or None) and the band warning (or
    None)."""
    from tokenwatt.analysis import analyse_report, band_warning, report_summary, run_doubt

    analysis = analyse_report(report)
    out = {"file": str(target), **report_summary(report, analysis)}
    out["explanations"] = [
        {"label": run.label, "why": explain_run(run), "doubt": run_doubt(run)} for run in runs
    ]
    out["band_warning"] = band_warning(analysis)
    return out


def _configurations(n: int) -> str:
    return "1 configuration" if n == 1 else f"{n} configurations"


def print_report(summary: dict[str, Any], console: Console, *, wide: bool = False) -> None:
    """:func:`report_output` as text: the written file, the configurations table (every
    column with ``wide``), the capacity conclusion, each run's explanation and doubt, the
    variance bands. The band warning is left to the caller (stderr)."""
    console.print(
        plain(f"wrote {summary['file']} ({_configurations(len(summary['configs']))})"),
        soft_wrap=True,
    )
    console.print(report_table(summary, wide=wide))
    if summary["conclusion"]:
        console.print(plain(summary["conclusion"]), soft_wrap=True)
    for item in summary["explanations"]:
        console.print(plain(f"{item['label']}: {item['why']}"), soft_wrap=True)
        if item["doubt"]:
            console.print(plain(f"{item['label']}: {item['doubt']}"), soft_wrap=True)
    measured = summary["variance_band_measured_pct"]
    if measured is not None:
        console.print(
            plain(
                f"variance band: stated ±{summary['variance_band_pct']:.2f}%, measured from "
                f"the repeats ±{measured:.2f}%"
            ),
            soft_wrap=True,
        )


def show_run(path: Path, *, with_requests: bool) -> tuple[RunRecord, list[dict[str, Any]] | None]:
    """Read a run record (and, asked for, its per-request file) for ``tokenwatt show``.

    Everything is read and checked before anything is printed, so bad input prints only
    the error.

    Returns:
        The record, and the per-window request distributions, each named by the window's
        label (None unless asked for).

    Raises:
        InputError: the file is missing, unreadable, not JSON, a report record or not a
            valid run record; with ``with_requests``, the record names no per-request
            file, or the file is missing, changed (SHA-256) or malformed. Each message
            names the file and the field.
    """
    from tokenwatt.analysis import labelled_request_windows
    from tokenwatt.collect import read_rows
    from tokenwatt.errors import InputError, Problem
    from tokenwatt.records import read_json
    from tokenwatt.records_io import load_run

    name = str(path)
    if path.is_file():
        data = read_json(path)
        if isinstance(data, dict) and "configs" in data and "probes" not in data:
            raise InputError(
                [Problem(name, "configs", "is a report record; `show` reads run records")]
            )
    record = load_run(path).run
    if not with_requests:
        return record, None
    log = record.requests_log
    if log is None:
        raise InputError([Problem(name, "requests_log", "the record names no per-request file")])
    if Path(log.file).name != log.file:
        raise InputError(
            [Problem(name, "requests_log.file", f"{log.file!r} is not a plain file name")]
        )
    return record, labelled_request_windows(record, read_rows(path.parent / log.file, log))


def json_text(data: Any) -> str:
    """``data`` as the JSON every ``--json`` prints: indented, strict (``allow_nan=False``:
    NaN and Infinity are not JSON, and a script reading the output would take them or
    choke on them).

    Raises:
        TokenwattError: a number that is not finite, named by its path (a bug: every input
            is checked before it is summarised).
    """
    try:
        return json.dumps(data, indent=2, allow_nan=False)
    except ValueError as exc:
        where = _nonfinite_path(data) or "?"
        raise TokenwattError(f"--json: {where} is not a finite number; nothing printed") from exc


def _nonfinite_path(data: Any, path: str = "") -> str | None:
    if isinstance(data, float) and not math.isfinite(data):
        return path or "(the value)"
    items = (
        data.items()
        if isinstance(data, dict)
        else enumerate(data)
        if isinstance(data, list)
        else []
    )
    for k, v in items:
        found = _nonfinite_path(v, f"{path}.{k}" if isinstance(k, str) else f"{path}[{k}]")
        if found:
            return found.lstrip(".")
    return None


__all__ = [
    "PIPE_WIDTH",
    "console",
    "json_text",
    "ms_cell",
    "plain",
    "print_report",
    "print_run",
    "report_output",
    "report_table",
    "requests_table",
    "run_table",
    "run_title",
    "show_run",
    "window_cells",
]
