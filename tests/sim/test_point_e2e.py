"""``tokenwatt collect`` with no spec, against ``tokenwatt sim``: flags in, a run record out.

The simulator runs as a child process on 127.0.0.1 (``--time-scale 2``: half the CPU); the
collector runs as the CLI does, in a child process of its own.
"""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tokenwatt.collect.plan.modes import apply_mode
from tokenwatt.collect.plan.point import PointFlags, point_spec
from tokenwatt.records import RunRecord
from tokenwatt.records.spec.spec import fingerprint

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sim_process import REPO, SimProcess, start_sim

COMMON = ("--input-tokens", "16", "--output-tokens", "8", "--duration", "1", "--warmup", "0.3")


@pytest.fixture(scope="module")
def sim() -> Iterator[SimProcess]:
    process = start_sim("--time-scale", "2")
    try:
        yield process
    finally:
        process.stop()


def collect(sim: SimProcess, out: Path, *load: str) -> tuple[RunRecord, str]:
    cmd = [
        sys.executable,
        "-m",
        "tokenwatt",
        "collect",
        "--endpoint",
        sim.endpoint,
        "--model",
        "tokenwatt-sim",
        "--out",
        str(out),
        "--mode",
        "smoke",
        "--no-progress",
        "--ttft-p99-ms",
        "2000",
        "--tpot-p99-ms",
        "400",
        *COMMON,
        *load,
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return RunRecord.model_validate_json(out.read_text()), done.stdout + done.stderr


def test_rates_without_a_spec_give_one_window_per_rate(sim: SimProcess, tmp_path: Path) -> None:
    record, stderr = collect(sim, tmp_path / "a.json", "--rates", "4,8")
    assert "effective spec:" in stderr and "rates: [4.0, 8.0]" in stderr
    spec = record.spec
    assert spec.engine.model == "tokenwatt-sim" and spec.sweep.fixed
    assert spec.sweep.rates == [4.0, 8.0]
    assert spec.workload.input_tokens is not None and spec.workload.input_tokens.median == 16
    assert spec.workload.output_tokens is not None and spec.workload.output_tokens.p90 == 8
    assert spec.measurement.window_s == 1.0 and spec.measurement.warmup_s == 0.3
    assert record.probes == []
    assert [r.window.rate_rps for r in record.repeats] == [4.0, 8.0]
    assert all(r.window.profile == "poisson" for r in record.repeats)
    # Conditioned arrivals: exactly rate × window requests in each window.
    assert [r.window.requests for r in record.repeats] == [4, 8]
    assert record.complete and record.result is not None
    # The fingerprint is the flags' spec's: the same flags (any endpoint) give the same one.
    flags = PointFlags(
        model="tokenwatt-sim",
        rates=(4.0, 8.0),
        input_tokens=16,
        output_tokens=8,
        duration_s=1.0,
        warmup_s=0.3,
        ttft_p99_ms=2000.0,
        tpot_p99_ms=400.0,
    )
    rebuilt = apply_mode(point_spec(flags, "http://elsewhere:1/v1"), "smoke")
    assert record.fingerprint == fingerprint(rebuilt) == fingerprint(record.spec)


def test_concurrency_without_a_spec_runs_closed_loop_windows(
    sim: SimProcess, tmp_path: Path
) -> None:
    record, output = collect(sim, tmp_path / "c.json", "--concurrency", "1,3")
    assert record.spec.measurement.profile == "concurrency"
    windows = [r.window for r in record.repeats]
    assert [w.concurrency for w in windows] == [1, 3]
    assert all(w.profile == "concurrency" and w.send_lag_p99_ms is None for w in windows)
    assert all(w.rate_rps == pytest.approx(w.requests / w.duration_s) for w in windows)
    # Both meet the loose limits; the result is the higher goodput (3 clients), at the rate
    # it measured.
    assert record.result is not None and record.result.slo_pass_count == 2
    assert record.result.concurrency == 3
    assert record.result.rate_rps == windows[1].rate_rps
    # The end-of-run line names the clients found and says windows, not repeats.
    rate = f"{record.result.rate_rps:.4g}"
    assert f"{record.label}: 3 clients ({rate} req/s), goodput " in output
    assert "(2 of 2 loads met the SLO;" in output


def first_cells(output: str) -> list[str]:
    """The first cell of every body row of the rich tables in ``output``."""
    lines = [line for line in output.splitlines() if "│" in line]
    cells = [line.strip().strip("│").split("│")[0].strip() for line in lines]
    return [c for c in cells if c.startswith("#")]


def report_page(run: Path, tmp: Path) -> tuple[str, Path]:
    """``tokenwatt report --demo`` of one run, then ``tokenwatt build``: the page's text."""
    from click.testing import CliRunner

    from tokenwatt.cli import cli

    reports = tmp / "reports"
    reports.mkdir()
    out = reports / "fixed.json"
    made = CliRunner().invoke(
        cli, ["report", str(run), "--title", "Fixed loads", "--demo", "--out", str(out)]
    )
    assert made.exit_code == 0, made.output
    assert "Fixed loads, no SLO search: 2 of 2 windows met the SLO" in made.output
    built = CliRunner().invoke(cli, ["build", "--reports", str(reports), "--out", str(tmp / "d")])
    assert built.exit_code == 0, built.output
    page = (tmp / "d" / "reports" / "fixed-loads.md").read_text(encoding="utf-8")
    return html.unescape(page), out  # record text on the page is escaped (":" as "&#58;")


def test_a_fixed_rate_run_is_reported_as_fixed_loads(sim: SimProcess, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from tokenwatt.cli import cli
    from tokenwatt.records import load_report

    run = tmp_path / "a.json"
    record, output = collect(sim, run, "--rates", "4,8")
    # One label per window wherever it is named (analysis.window_labels): the end-of-run
    # table, show, show --json, show --requests and the page.
    labels = ["#1 load 1 of 2: 4 req/s", "#2 load 2 of 2: 8 req/s"]
    assert first_cells(output) == labels
    shown = CliRunner().invoke(cli, ["show", str(run)], env={"COLUMNS": "250"})
    assert first_cells(shown.output) == labels and "repeat" not in shown.output
    as_json = CliRunner().invoke(cli, ["show", "--json", "--requests", str(run)])
    data = json.loads(as_json.output)
    assert [w["window"] for w in data["windows"]] == labels
    assert [w["window"] for w in data["requests"]] == labels
    requests = CliRunner().invoke(cli, ["show", "--requests", str(run)], env={"COLUMNS": "250"})
    assert first_cells(requests.output[requests.output.index("per-request file") :]) == labels
    page, out = report_page(run, tmp_path)
    report = load_report(out)
    cfg = report.configs[0]
    top = record.repeats[1].window
    # The operating point is the highest load that met the SLO: one window, not two repeats.
    assert (cfg.repeats, cfg.slo_pass_count) == (1, 1)
    assert cfg.goodput_tok_s == round(top.goodput_tok_s, 1)
    assert [r.rate_rps for r in cfg.repeats_detail] == [8.0]
    assert report.workload.arrival == "Poisson, measured at each of 4, 8 req/s"
    assert "| #1 load 1 of 2: 4 req/s | 4.00 |" in page
    assert "| #2 load 2 of 2: 8 req/s | 8.00 |" in page
    assert "repeat 1" not in page
    assert "no SLO search was run" in page
    assert (
        "Fixed loads, no SLO search: 2 of 2 windows met the SLO, the highest goodput at 8 req/s."
        in page
    )


def test_a_fixed_concurrency_run_speaks_in_clients(sim: SimProcess, tmp_path: Path) -> None:
    from tokenwatt.records import load_report

    run = tmp_path / "c.json"
    record, _ = collect(sim, run, "--concurrency", "1,3")
    page, out = report_page(run, tmp_path)
    report = load_report(out)
    assert report.workload.arrival == "closed loop, measured at each of 1, 3 clients"
    assert [r.rate_rps for r in report.configs[0].repeats_detail] == [
        record.repeats[1].window.rate_rps
    ]
    assert "| #1 load 1 of 2: 1 client | 1 clients · " in page
    assert "| #2 load 2 of 2: 3 clients | 3 clients · " in page
    assert "the highest goodput at 3 clients (" in page
