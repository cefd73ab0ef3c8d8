"""A configuration whose result is inconclusive (or met no load) is never a number: no
"−100%" on the page or the index, no capacity saving, the sentence and the admonition say
inconclusive. Runs from tests/runs_factory.py, through summarise, the page and the index."""

from __future__ import annotations

import re

import pytest

from tests.runs_factory import make_run, tuned_run, window
from tokenwatt import analysis
from tokenwatt.records import Repeat, RunInput, RunRecord
from tokenwatt.site.charts.charts import NOT_MEASURED_LABEL
from tokenwatt.site.pages.chart_specs import chart_specs
from tokenwatt.site.pages.pages import render_report
from tokenwatt.site.pages.templates import render_index

REASON = (
    "the boundary did not repeat: search probes met the SLO at 9 req/s, but no repeat did "
    "there nor after 2 back-off(s), down to 7.29 req/s"
)
# The page escapes "-" as "&#45;"; any of the three before 100% is a −100%.
MINUS_100 = re.compile(r"(−|-|&#45;|&minus;)\s*100(\.0)?\s*(%|&#37;)")


def _unrepeated(**overrides: object) -> RunRecord:
    """The issue's run: probes passed at 9 req/s, every repeat (and back-off) missed."""
    run = tuned_run(**overrides)
    misses = [
        Repeat(
            window=window(rate, 300.0, ttft_p99=9000.0, tpot_p99=80.0, slo_pass=False),
            backoff=b,
        )
        for b, rate in enumerate((9.0, 8.1, 7.29))
    ]
    assert run.result is not None
    result = run.result.model_copy(
        update={
            "rate_rps": 0.0,
            "goodput_tok_s": 0.0,
            "slo_pass_count": 0,
            "repeats": 1,
            "backoffs": 2,
            "status": "inconclusive",
            "status_reason": REASON,
        }
    )
    return run.model_copy(update={"repeats": misses, "result": result})


def _inputs(*runs: RunRecord) -> list[RunInput]:
    return [RunInput(run=r, name=f"runs/{r.label}.json", sha256="0" * 64) for r in runs]


def _pages(*runs: RunRecord) -> tuple[str, str, analysis.ReportAnalysis]:
    report = analysis.summarise(_inputs(*runs), title="KV test", demo=True)
    page = render_report(report, "reports/kv-test.json")
    return page.page, render_index([page]), analysis.analyse_report(report)


def test_an_inconclusive_tuned_configuration_shows_no_minus_100_and_no_saving() -> None:
    page, index, result = _pages(make_run(), _unrepeated())
    tuned = result.tuned[0]
    assert tuned.config.result_status == "inconclusive"
    assert tuned.capacity is None and tuned.goodput_delta_pct is None
    assert not MINUS_100.search(page), MINUS_100.search(page)
    assert not MINUS_100.search(index)
    assert '\n\n!!! warning "Inconclusive: vllm&#45;fp8kv"\n' in page
    assert "the boundary did not repeat" in page
    sentence = analysis.conclusion(result, 64)
    assert sentence.startswith("vllm-fp8kv is inconclusive (the boundary did not repeat")
    assert "no saving claimed" in sentence and "%" not in sentence
    assert "vllm&#45;fp8kv&#58; inconclusive, not measured → no saving claimed" in index
    assert "so the result is inconclusive" in page and "goodput is 0" not in page


def test_the_goodput_chart_draws_no_bar_for_an_inconclusive_configuration() -> None:
    report = analysis.summarise(_inputs(make_run(), _unrepeated()), title="KV test", demo=True)
    result = analysis.analyse_report(report)
    names = [c.config.label for c in result.configs]
    (goodput,) = [c for c in chart_specs(report, result, names) if c["id"] == "goodput"]
    base, tuned = goodput["spec"]["datasets"]["rows"]
    assert base["goodput_tok_s"] == result.baseline.config.goodput_tok_s > 0
    assert base["label"] == f"{base['goodput_tok_s']:,.1f}"
    assert (tuned["goodput_tok_s"], tuned["label"]) == (None, NOT_MEASURED_LABEL)
    assert tuned["label_x"] == 0.0


def test_an_old_run_record_with_zero_goodput_reads_inconclusive_not_minus_100() -> None:
    old = _unrepeated()
    assert old.result is not None
    old = old.model_copy(
        update={"result": old.result.model_copy(update={"status": None, "status_reason": None})}
    )
    page, index, result = _pages(make_run(), old)
    assert result.tuned[0].config.result_status == "inconclusive"
    assert not MINUS_100.search(page) and not MINUS_100.search(index)


def test_an_inconclusive_baseline_leaves_the_tuned_one_uncompared() -> None:
    base = _unrepeated(label="vllm-default", role="baseline", kv_dtype="bf16")
    page, index, result = _pages(base, tuned_run())
    assert result.tuned[0].capacity is None and result.tuned[0].goodput_delta_pct is None
    assert "cannot be compared: the baseline vllm-default is inconclusive" in (
        analysis.conclusion(result, 64)
    )
    assert "baseline inconclusive, not compared" in index
    assert not MINUS_100.search(page)


@pytest.mark.parametrize("status", ["none_met"])
def test_none_met_is_said_as_a_finding_without_a_percentage(status: str) -> None:
    run = _unrepeated()
    assert run.result is not None
    reason = "no load met the SLO, down to 0.1 req/s"
    result = run.result.model_copy(update={"status": status, "status_reason": reason})
    page, index, got = _pages(make_run(), run.model_copy(update={"result": result}))
    assert '!!! note "No load met: vllm&#45;fp8kv"' in page
    assert "vllm&#45;fp8kv&#58; no load met the SLO → no saving" in index
    assert not MINUS_100.search(page)
    assert got.tuned[0].capacity is None
