"""Latency CDFs at the operating point, end to end: a real ``tokenwatt collect`` against
``tokenwatt sim`` writes the per-request file, ``tokenwatt report`` keeps the TTFT and TPOT
quantiles of the final repeats' requests, ``tokenwatt build`` draws them; without the file
there is no CDF. The quantiles are recomputed here from the gzip file with NumPy.
"""

from __future__ import annotations

import gzip
import json
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from tests.sim.sim_process import SimRun
from tokenwatt.analysis.report.latency_cdf import quantile
from tokenwatt.cli import cli
from tokenwatt.records import CDF_LEVELS_PCT, RunRecord, load_report


@pytest.fixture
def collected(sim_run: SimRun) -> SimRun:
    """The session's run of ``collect`` against the simulator (``tests/sim/conftest.py``),
    label ``sim-fp8``, with its per-request file."""
    return sim_run


def expected_quantiles(record: RunRecord, gz: Path) -> tuple[int, list[float], list[float]]:
    """From the gzip file alone: the in-window, not-cancelled requests of the repeats at the
    last back-off, their TTFT and TPOT (ms) and NumPy's linear quantiles of both."""
    with gzip.open(gz, "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    last = max(r.backoff for r in record.repeats)
    final = {
        i
        for i, r in enumerate(record.repeats)
        if r.backoff == last and not (r.window.failure_reason or "").startswith("client-bound")
    }
    picked = [
        r
        for r in rows
        if r["kind"] == "repeat"
        and r["index"] in final
        and r["in_window"]
        and r["error"] != "cancelled"
    ]
    assert picked and all(r["error"] is None for r in picked)  # the sim fails none here
    ttft = [(r["first_token_s"] - r["scheduled_s"]) * 1e3 for r in picked]
    tpot = [
        (r["last_token_s"] - r["first_token_s"]) / (r["output_tokens"] - 1) * 1e3
        for r in picked
        if r["output_tokens"] > 1
    ]
    levels = np.array(CDF_LEVELS_PCT)
    return (
        len(picked),
        [round(float(v), 3) for v in np.percentile(ttft, levels)],
        [round(float(v), 3) for v in np.percentile(tpot, levels)],
    )


def chart_specs(page: str) -> dict[str, Any]:
    specs = {}
    for line in page.splitlines():
        if line.startswith('<script type="application/json" id="tw-spec-'):
            name = line.split('id="tw-spec-')[1].split('"')[0]
            specs[name] = json.loads(line.split(">", 1)[1].rsplit("</script>", 1)[0])
    return specs


def report_and_build(run: Path, tmp: Path) -> tuple[int, str, Path]:
    reports = tmp / "reports"
    reports.mkdir()
    out = reports / "cdf.json"
    made = CliRunner().invoke(
        cli, ["report", str(run), "--title", "CDF check", "--demo", "--out", str(out)]
    )
    if made.exit_code != 0:
        return made.exit_code, made.output, out
    built = CliRunner().invoke(cli, ["build", "--reports", str(reports), "--out", str(tmp / "d")])
    assert built.exit_code == 0, built.output
    return 0, (tmp / "d" / "reports" / "cdf-check.md").read_text(encoding="utf-8"), out


def test_report_keeps_and_page_draws_the_quantiles_of_the_gz_file(
    collected: SimRun, tmp_path: Path
) -> None:
    log = collected.record.requests_log
    assert log is not None
    gz = collected.path.with_name(log.file)
    n, ttft, tpot = expected_quantiles(collected.record, gz)
    code, page, out = report_and_build(collected.path, tmp_path)
    assert code == 0, page
    dist = load_report(out).configs[0].latency_at_operating_point
    assert dist is not None
    assert dist.levels_pct == list(CDF_LEVELS_PCT)
    assert len(dist.levels_pct) == 101 and dist.levels_pct[-2:] == [99.9, 100.0]
    assert dist.requests == n
    assert dist.ttft_ms == pytest.approx(ttft, abs=1.5e-3)
    assert dist.tpot_ms == pytest.approx(tpot, abs=1.5e-3)
    assert dist.ttft_ms[-1] == pytest.approx(max(ttft), abs=1.5e-3)
    rows = chart_specs(page)["latency-cdf"]["datasets"]["rows"]
    got = {
        m: [(r["share"], r["ms"]) for r in rows if r["metric"] == m and r["name"] == "sim-fp8"]
        for m in ("TTFT", "TPOT")
    }
    shares = [round(q / 100, 4) for q in CDF_LEVELS_PCT]
    assert got["TTFT"] == list(zip(shares, dist.ttft_ms, strict=True))
    assert got["TPOT"] == list(zip(shares, dist.tpot_ms, strict=True))
    limits = chart_specs(page)["latency-cdf"]["datasets"]["limits"]
    assert [(x["metric"], x["ms"]) for x in limits] == [("TTFT", 400.0), ("TPOT", 100.0)]
    assert "Latency distribution at the operating point" in page


def test_without_the_gz_file_there_is_no_cdf(collected: SimRun, tmp_path: Path) -> None:
    run = tmp_path / collected.path.name
    shutil.copy(collected.path, run)
    code, page, out = report_and_build(run, tmp_path)
    assert code == 0, page
    assert load_report(out).configs[0].latency_at_operating_point is None
    assert "latency-cdf" not in chart_specs(page)
    assert "Latency distribution at the operating point" not in page


def test_a_gz_file_that_is_not_the_runs_is_refused(collected: SimRun, tmp_path: Path) -> None:
    log = collected.record.requests_log
    assert log is not None
    run = tmp_path / collected.path.name
    shutil.copy(collected.path, run)
    data = collected.path.with_name(log.file).read_bytes()
    (tmp_path / log.file).write_bytes(data[:-1])
    code, output, out = report_and_build(run, tmp_path)
    assert code == 2
    assert f"{tmp_path / log.file}: requests_log.sha256: the file's SHA-256 is" in output
    assert not out.exists()


def test_quantile_is_the_linear_method_and_knows_infinity() -> None:
    assert quantile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert quantile([1.0, 2.0, 3.0, 4.0], 100) == 4.0
    assert quantile([10.0, 20.0], 99.9) == pytest.approx(19.99)
    assert quantile([1.0, math.inf], 0) == 1.0
    assert quantile([1.0, math.inf], 50) == math.inf
    assert quantile([5.0], 1) == 5.0
    with pytest.raises(ValueError, match="no values"):
        quantile([], 50)
