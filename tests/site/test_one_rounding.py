"""One rounding per figure: a value is rounded once, from the value the record keeps, the
same way (half away from zero on its decimal form) wherever it is printed — the page's
results table and window table, ``tokenwatt report``'s table, ``collect``'s result line and
``show``'s window table. Report records keep figures as computed, not pre-rounded.

The values sit on a rounding edge on purpose: 177.85 and 44.15 ms are stored as the binary
177.8499… and 44.1499…, which Python's ``round(…, 1)`` and ``f"{…:.1f}"`` make 177.8 and 44.1
where the pages made 177.9 and 44.2; a mean
goodput of 4,572.25 tok/s is exact in binary, and round-half-even made it 4,572.2.
"""

from __future__ import annotations

import html
import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from tests.runs_factory import make_run, tuned_run
from tokenwatt.analysis import ms_cell, run_rows
from tokenwatt.analysis.report.summarise import summarise
from tokenwatt.cli.terminal import print_report, report_output, result_line
from tokenwatt.records import ReportV3, RunRecord
from tokenwatt.records.run.run_input import RunInput
from tokenwatt.site.pages.pages import render_report

TTFT = 177.85
TPOT = 44.15  # the binary 44.1499…: 44.1 to Python, 44.2 read as written
GOODPUTS = (4600.0, 4544.5)  # mean 4572.25


@pytest.fixture(scope="module")
def base() -> RunRecord:
    return make_run(
        goodput=sum(GOODPUTS) / 2,
        repeat_goodputs=GOODPUTS,
        ttft_p99s=(TTFT, 170.0),
        tpot_p99s=(TPOT, 43.9),
    )


@pytest.fixture(scope="module")
def report(base: RunRecord) -> ReportV3:
    runs = [base, tuned_run()]
    inputs = [RunInput(f"runs/{r.label}.json", f"{i}" * 64, r) for i, r in enumerate(runs)]
    return summarise(inputs, title="Rounding edges")


def test_the_report_record_keeps_the_figures_unrounded(report: ReportV3) -> None:
    config = report.configs[0]
    assert config.ttft_p99_ms == TTFT
    assert config.goodput_tok_s == 4572.25
    assert [r.goodput_tok_s for r in config.repeats_detail] == list(GOODPUTS)


def test_the_page_prints_each_figure_once_and_alike(report: ReportV3) -> None:
    page = html.unescape(render_report(report, "reports/x.json").page)
    rows = [line for line in page.splitlines() if line.startswith("| vllm-default |")]
    assert "4,572.3" in rows[0], rows  # throughput and efficiency
    assert "| 177.9 ✓ | 44.2 ✓ |" in rows[1], rows  # latency and accuracy
    repeat = [r for r in rows[2:] if "| 4,600.0 |" in r]  # the window table's repeat
    assert len(repeat) == 1 and "| 177.9 | 44.2 |" in repeat[0], rows
    search = [line for line in page.splitlines() if "repeat 1 of 2" in line and "177.9" in line]
    assert search, "the search table's repeat"
    assert not re.search(r"\b(177\.8|44\.1)\b", page)
    assert "4,572.2" not in page


def test_the_terminal_prints_them_as_the_page_does(base: RunRecord, report: ReportV3) -> None:
    out = io.StringIO()
    summary = report_output(report, Path("reports/x.json"), [base, tuned_run()])
    print_report(summary, Console(file=out, width=200))
    table = out.getvalue()
    assert "4,572.3" in table and "4,572.2" not in table, table
    assert "goodput 4,572.3 tok/s" in result_line(base)
    rows = run_rows(base)
    p99s = [ms_cell(row["tpot_ms"]["p99"]) for row in rows if row["tpot_ms"]["p99"] == TPOT]
    assert p99s == ["44.2"]  # whole ms from 100 ms on: 177.85 is "178" here
