"""One tokens-per-joule figure: the page's headline, its Δ, the window table, the chart,
``tokenwatt report``'s table and its ``--json`` all agree when the repeats differ in length
and power (methods/energy.md: goodput tokens ÷ energy over the same windows, a ratio of
sums)."""

from __future__ import annotations

import html
import json

import pytest

from tests.runs_factory import make_run, power, tuned_run, window
from tokenwatt.analysis import analyse_report, report_summary
from tokenwatt.analysis.report.summarise import summarise
from tokenwatt.records.report.report_v3 import ReportV3
from tokenwatt.records.run.run import Repeat, RunRecord
from tokenwatt.records.run.run_input import RunInput
from tokenwatt.site.build import build_site
from tokenwatt.site.pages.chart_specs import chart_specs
from tokenwatt.site.pages.pages import render_report

# (goodput tok/s, window s, mean power W) per repeat: lengths and power differ on purpose.
BASE = [(4000.0, 60.0, 600.0), (5000.0, 180.0, 700.0)]
TUNED = [(5200.0, 200.0, 650.0), (4800.0, 40.0, 560.0)]


def _with_windows(run: RunRecord, reps: list[tuple[float, float, float]]) -> RunRecord:
    """``run`` with its two repeats replaced by windows of the given goodput, length and
    power (energy = power × length), and its result the repeats' mean goodput, as collect
    writes it."""
    repeats = [
        Repeat(
            window=window(9.0, g, ttft_p99=300.0, tpot_p99=40.0, slo_pass=True, duration=s),
            power=power(w, throttled=0, samples=int(s)),
        )
        for g, s, w in reps
    ]
    assert run.result is not None
    result = run.result.model_copy(update={"goodput_tok_s": sum(g for g, _, _ in reps) / 2})
    return run.model_copy(update={"repeats": repeats, "result": result})


# Hand-computed: Σ goodput × length ÷ Σ power × length.
#   baseline (4000×60 + 5000×180) / (600×60 + 700×180) = 1,140,000 / 162,000 = 7.037037
#   tuned    (5200×200 + 4800×40) / (650×200 + 560×40) = 1,232,000 / 152,400 = 8.083990
# Δ = 100 × (8.083990 / 7.037037 − 1) = +14.877%. Goodput ÷ mean power would give
# 4500 / 650 = 6.923 and 5000 / 605 = 8.264 (Δ +19.4%): not the same quantity.
BASE_TPJ = 1_140_000 / 162_000
TUNED_TPJ = 1_232_000 / 152_400
DELTA = 100 * (TUNED_TPJ / BASE_TPJ - 1)


@pytest.fixture(scope="module")
def report() -> ReportV3:
    runs = [_with_windows(make_run(), BASE), _with_windows(tuned_run(), TUNED)]
    inputs = [RunInput(f"runs/{r.label}.json", f"{i}" * 64, r) for i, r in enumerate(runs)]
    return summarise(inputs, title="Unequal windows")


@pytest.fixture(scope="module")
def page(report: ReportV3, tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("tpj-page")
    reports = root / "reports"
    reports.mkdir()
    (reports / f"{report.id}.json").write_text(report.model_dump_json(indent=2), "utf-8")
    build_site(reports, root / "docs", cache_dir=root / "cache")
    return html.unescape((root / "docs" / "reports" / f"{report.id}.md").read_text("utf-8"))


def test_the_analysis_gives_tokens_over_energy(report: ReportV3) -> None:
    analysis = analyse_report(report)
    base, tuned = analysis.configs
    assert base.tokens_per_joule == pytest.approx(BASE_TPJ, rel=1e-12)
    assert tuned.tokens_per_joule == pytest.approx(TUNED_TPJ, rel=1e-12)
    assert tuned.tokens_per_joule_delta_pct == pytest.approx(DELTA, rel=1e-12)
    assert round(DELTA, 1) == 14.9


def test_headline_delta_and_window_table_agree_on_the_page(page: str) -> None:
    lines = page.splitlines()
    headline = page.index("### Throughput and efficiency")
    rows = {
        label: next(
            line for line in page[headline:].splitlines() if line.startswith(f"| {label} |")
        )
        for label in ("vllm-default", "vllm-fp8kv")
    }
    assert "| 7.04 |" in rows["vllm-default"]
    assert "| 8.08 · Δ +14.9% (95% CI" in rows["vllm-fp8kv"]
    # The window table: each window's tokens ÷ its energy, with the energy shown, and
    # Σ tokens ÷ Σ energy of those very rows is the headline.
    window_rows = [
        line
        for line in lines
        if line.startswith("| vllm-") and "| ✓ |" in line and " J" not in line
    ]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in window_rows]
    shown = [(c[0], float(c[8].replace(",", "")), float(c[9])) for c in cells if len(c) > 9]
    assert shown == [
        ("vllm-default", 36_000.0, round(4000 * 60 / 36_000, 2)),
        ("vllm-default", 126_000.0, round(5000 * 180 / 126_000, 2)),
        ("vllm-fp8kv", 130_000.0, round(5200 * 200 / 130_000, 2)),
        ("vllm-fp8kv", 22_400.0, round(4800 * 40 / 22_400, 2)),
    ]


def test_chart_terminal_and_json_agree(report: ReportV3) -> None:
    analysis = analyse_report(report)
    charts = chart_specs(report, analysis, ["vllm-default", "vllm-fp8kv"])
    tpj_chart = next(c for c in charts if c["id"] == "tokens-per-joule")["spec"]
    values = [row["tokens_per_j"] for row in tpj_chart["datasets"][tpj_chart["data"]["name"]]]
    assert values == [7.037, 8.084]  # the chart keeps three decimals
    summary = json.loads(json.dumps(report_summary(report, analysis), allow_nan=False))
    rows = summary["configs"]
    assert rows[0]["tokens_per_joule"] == pytest.approx(BASE_TPJ, rel=1e-12)
    assert rows[1]["tokens_per_joule"] == pytest.approx(TUNED_TPJ, rel=1e-12)
    assert rows[0]["tokens_per_joule_delta_pct"] is None
    assert rows[1]["tokens_per_joule_delta_pct"] == pytest.approx(DELTA, rel=1e-12)


def test_accuracy_chart_names_the_baseline_as_the_table_does(report: ReportV3) -> None:
    analysis = analyse_report(report)
    charts = chart_specs(report, analysis, ["vllm-default", "vllm-fp8kv"])
    acc = next(c for c in charts if c["id"] == "accuracy")["spec"]
    verdicts = [(row["name"], row["verdict"]) for row in acc["datasets"]["rows"]]
    tuned = analysis.configs[1].gate
    assert tuned is not None
    assert verdicts == [
        ("vllm-default", "baseline"),
        ("vllm-fp8kv", "pass" if tuned.passed else "fail"),
    ]


def test_a_refused_power_figure_says_why_on_the_page_in_place_of_the_figures() -> None:
    """A window whose power the cross-check refused (issue 21) shows the record's reason in
    its power cell, as data, and neither its power nor its energy nor a tokens per joule."""
    why = "energy counter | 212 W against 431 W from the samples (more than 5% apart)"
    base = _with_windows(make_run(), BASE)
    first = base.repeats[0]
    assert first.power is not None
    refused = first.power.model_copy(update={"valid": False, "invalid_reasons": [why]})
    base.repeats[0] = first.model_copy(update={"power": refused})
    runs = [base, _with_windows(tuned_run(), TUNED)]
    inputs = [RunInput(f"runs/{r.label}.json", f"{i}" * 64, r) for i, r in enumerate(runs)]
    report = summarise(inputs, title="Refused power")
    assert report.configs[0].repeats_detail[0].power_refused == [why]
    assert report.configs[0].repeats_detail[1].power_refused == []
    page = render_report(report, "reports/x.json").page
    rows = [line for line in page.splitlines() if line.startswith("| vllm&#45;default | 9")]
    # The reason's "|" is escaped, so it cannot split the cell: 12 cells as in every row.
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert len(cells) == 12 and html.unescape(cells[7]) == f"refused: {why}"
    assert cells[8:10] == ["—", "—"]  # no energy, no tokens per joule
    assert "refused" not in rows[1]


def test_when_every_window_s_power_is_refused_the_page_says_why_not_no_power_source() -> None:
    why = "a reading of 41,000 W is off the plausible band (likely milliwatts)"
    runs = []
    for run in (_with_windows(make_run(), BASE), _with_windows(tuned_run(), TUNED)):
        for i, rep in enumerate(run.repeats):
            assert rep.power is not None
            bad = rep.power.model_copy(update={"valid": False, "invalid_reasons": [why]})
            run.repeats[i] = rep.model_copy(update={"power": bad})
        runs.append(run)
    inputs = [RunInput(f"runs/{r.label}.json", f"{i}" * 64, r) for i, r in enumerate(runs)]
    page = html.unescape(render_report(summarise(inputs, title="All refused"), "r.json").page)
    assert "No power was measured (no power source)" not in page
    assert page.count(f"refused: {why}") == 4
