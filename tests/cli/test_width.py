"""The default tables fit a terminal of 120 columns, ``--wide`` shows every column, and a
warning is printed once per ``collect`` run (ARCHITECTURE.md, the CLI's row)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.cells import cell_len
from rich.console import Console

from tests.runs_factory import make_run, tuned_run
from tokenwatt.cli import cli
from tokenwatt.cli.collect_report import print_collect_end
from tokenwatt.cli.progress import TerminalReporter
from tokenwatt.cli.terminal import WIDTH, report_output, report_table, run_table
from tokenwatt.records import RunInput, RunRecord


def _lines(renderable: object, width: int) -> list[str]:
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return console.export_text().splitlines()


def _widest(lines: list[str]) -> int:
    return max(cell_len(line.rstrip()) for line in lines)


def test_the_window_table_fits_120_columns_without_wrapping_its_numbers() -> None:
    record = make_run()
    lines = _lines(run_table(record), WIDTH)
    assert _widest(lines) <= WIDTH
    # Unconstrained, the compact table needs no more than 120 columns; the wide one more.
    assert _widest(_lines(run_table(record), 10_000)) <= WIDTH
    assert _widest(_lines(run_table(record, wide=True), 10_000)) > WIDTH
    row = next(line for line in lines if "repeat 2 of 2" in line)
    w = record.repeats[1].window
    assert "113 / 340" in row and "30.7 / 43.9" in row  # p50 / p99, on one line
    assert f" {w.requests} " in row


def test_a_long_label_wraps_its_words_not_the_numbers() -> None:
    record = make_run()
    record.label = "a-configuration-name " * 6
    record.repeats[1].window.failure_reason = "queueing/KV-bound " * 8
    record.repeats[1].window.slo_pass = False
    lines = _lines(run_table(record), WIDTH)
    assert _widest(lines) <= WIDTH
    assert any("113 / 340" in line for line in lines)


def _report_summary(tmp_path: Path) -> dict[str, object]:
    from tokenwatt import analysis

    runs = [make_run(), tuned_run()]
    inputs = [RunInput(name=f"runs/{run.label}.json", sha256="0" * 64, run=run) for run in runs]
    report = analysis.summarise(inputs, title="KV cache", cards=64)
    return report_output(report, tmp_path / "r.json", runs)


def test_the_report_table_fits_120_columns(tmp_path: Path) -> None:
    summary = _report_summary(tmp_path)
    assert _widest(_lines(report_table(summary), WIDTH)) <= WIDTH
    wide = _lines(report_table(summary, wide=True), 10_000)
    assert _widest(wide) > WIDTH
    compact = "\n".join(_lines(report_table(summary), 10_000))
    assert "none: failed the accuracy gate" in "\n".join(wide)
    assert "none: failed the accuracy gate" not in compact  # the conclusion says why
    assert "│ role" not in compact and "baseline" in compact


@pytest.mark.parametrize("command", ["show", "report"])
def test_wide_shows_every_column(tmp_path: Path, command: str) -> None:
    paths = []
    for run in (make_run(), tuned_run()):
        path = tmp_path / f"{run.label}.json"
        path.write_text(run.model_dump_json(), encoding="utf-8")
        paths.append(str(path))
    if command == "show":
        args, extra = ["show", paths[0]], r"ITL ms p50/p90/p99"
    else:
        args = ["report", *paths, "--title", "KV", "--out", str(tmp_path / "r.json"), "--force"]
        extra = r"┃\s+role\s+┃"
    env = {"COLUMNS": "300"}
    compact = CliRunner().invoke(cli, args, env=env)
    wide = CliRunner().invoke(cli, [*args, "--wide"], env=env)
    assert compact.exit_code == 0 and wide.exit_code == 0, compact.output + wide.output
    assert re.search(extra, compact.stdout) is None
    assert re.search(extra, wide.stdout) is not None


def _warned_run() -> RunRecord:
    record = make_run()
    record.repeats[0].window.warnings.append("power readings sparse in this window")
    assert record.result is not None
    record.result.warnings.append("pass/fail is not repeatable at 9 req/s")
    return record


@pytest.mark.parametrize("live", [True, False])
def test_collect_says_each_warning_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], live: bool
) -> None:
    """With the live display, measurement showed both warnings during the run (as
    ``Measurement._note`` and ``Measurement.run`` do); the end of the run used to say them a
    second time. Without it, the end of the run is where they are said."""
    record = _warned_run()
    stderr = io.StringIO()
    reporter = TerminalReporter(live=live, console=Console(file=stderr, width=300))
    reporter.note("repeat 1/2 at 9 req/s: meets the SLO")
    reporter.note("  warning: power readings sparse in this window")
    reporter.note("warning: pass/fail is not repeatable at 9 req/s")
    status = print_collect_end(record, tmp_path / "run.json", reporter)
    assert status == 0
    said = stderr.getvalue() + capsys.readouterr().out
    assert said.count("power readings sparse in this window") == 1
    assert said.count("pass/fail is not repeatable at 9 req/s") == 1
