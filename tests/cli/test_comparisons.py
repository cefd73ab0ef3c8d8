"""A comparison printed with its operands never reads as level when it is not, and signed
numbers carry the true minus sign, in the terminal (``report``) and on the page (``build``).

Real ``tokenwatt report`` and ``tokenwatt build`` through click's runner, on run records
built in Python whose numbers sit just past their limits: a probe's p99 TTFT 2,000.4 ms
against a 2,000 ms limit, an accuracy drop of 1.04 points against a 1-point gate, a goodput
12.5% below the baseline.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from click.testing import CliRunner

from tests.runs_factory import make_run, tuned_run
from tokenwatt.analysis import comparison, signed, trimmed, value_text
from tokenwatt.cli import cli
from tokenwatt.records import Percentiles


def test_comparison_adds_decimals_only_where_rounding_would_mislead() -> None:
    assert comparison(812.3, 500, decimals=0, unit=" ms") == "812 ms > 500 ms"
    assert comparison(100.04, 100, decimals=0, unit=" ms") == "100.04 ms > 100 ms"
    assert comparison(100.0004, 100, decimals=0, unit=" ms") == "100.0004 ms > 100 ms"
    assert comparison(99.996, 100, decimals=0, unit=" ms") == "99.996 ms ≤ 100 ms"
    assert comparison(100.0, 100, decimals=0, unit=" ms") == "100 ms ≤ 100 ms"
    assert comparison(62.43, 50, decimals=1, unit=" ms", strip=True) == "62.4 ms > 50 ms"
    assert comparison(1e-9 + 100, 100, decimals=0, unit=" ms") == "just over 100 ms"
    gate = ("≥", "≥", "<")
    assert comparison(-1.04, -1, decimals=1, unit=" pts", sign=True, ops=gate) == (
        "−1.04 pts < −1 pts"
    )
    assert comparison(-0.96, -1, decimals=1, unit=" pts", sign=True, ops=gate) == (
        "−0.96 pts ≥ −1 pts"
    )
    assert value_text(2000.4, 2000, 0) == "2,000.4"


def test_signed_numbers_use_one_minus_and_no_negative_zero() -> None:
    assert signed(-3.0, 1, "%") == "\u22123.0%"
    assert signed(10.55, 1, "%") == "+10.6%" or signed(10.55, 1, "%") == "+10.5%"
    assert signed(-0.04, 1, "%") == "0.0%"
    assert trimmed(-2.0) == "\u22122" and trimmed(1234.5) == "1,234.5"


def _runs(tmp_path: Path) -> list[str]:
    base = make_run()
    probe = base.probes[3].window  # the 16 req/s probe that missed p99 TTFT
    probe.ttft_ms = Percentiles(p50=700.0, p90=1900.0, p99=2000.4)
    tuned = tuned_run(score_pct=94.96, goodput=4000.0, repeat_goodputs=(4010.0, 3990.0))
    paths = []
    for run in (base, tuned):
        path = tmp_path / f"{run.label}.json"
        path.write_text(run.model_dump_json(), encoding="utf-8")
        paths.append(str(path))
    return paths


def test_report_terminal_shows_true_comparisons_and_minus_signs(tmp_path: Path) -> None:
    paths = _runs(tmp_path)
    out = tmp_path / "reports" / "kv.json"
    args = ["report", *paths, "--title", "KV", "--out", str(out)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    text = result.output
    assert "missed p99 TTFT (2,000.4 ms > 2,000 ms)" in text
    assert "fails the 1-point gate (\u22121.04 points)" in text
    assert "vllm-fp8kv (\u221212.5% goodput) earns no capacity saving" in text
    assert "failed the accuracy gate by 1.04 points against a 1.0-point threshold" in text
    assert "-12.5" not in text and "-1.0" not in text
    data = json.loads(CliRunner().invoke(cli, [*args, "--force", "--json"]).output)
    assert "\u221212.5% goodput" in data["conclusion"]


def test_report_page_shows_true_comparisons_and_minus_signs(tmp_path: Path) -> None:
    paths = _runs(tmp_path)
    reports = tmp_path / "reports"
    out = reports / "kv.json"
    made = CliRunner().invoke(cli, ["report", *paths, "--title", "KV", "--out", str(out)])
    assert made.exit_code == 0, made.output
    docs = tmp_path / "docs"
    built = CliRunner().invoke(cli, ["build", "--reports", str(reports), "--out", str(docs)])
    assert built.exit_code == 0, built.output
    # The page escapes record-adjacent text as entities (&#62; for >): read it as shown.
    page = html.unescape(next(docs.rglob("kv.md")).read_text(encoding="utf-8"))
    assert "✗ fail (\u22121.04 pts < \u22121 pts)" in page
    assert "missed p99 TTFT (2,000.4 ms > 2,000 ms)" in page
    assert "\u221212.5%" in page
    assert "-12.5%" not in page and "-1.0" not in page
