"""Latency against load, the configuration comparison, and sections shown only when
measured: a report made from the runs factory's runs (seed-like, hand-checkable numbers)."""

from __future__ import annotations

import html
import json
from typing import Any

from sitecase import HOSTILE

from tests.runs_factory import make_run, tuned_run
from tokenwatt.analysis.report.summarise import summarise
from tokenwatt.analysis.window.search_story import gpu_minutes
from tokenwatt.records import RunInput
from tokenwatt.records.report.report_v3 import ReportV3
from tokenwatt.records.run.run import RunRecord
from tokenwatt.site.charts.offscale import ms_text
from tokenwatt.site.pages.pages import render_report, unique_items


def report_of(*runs: RunRecord, cards: int = 64) -> ReportV3:
    inputs = [RunInput(f"runs/{r.label}.json", f"{i}" * 64, r) for i, r in enumerate(runs)]
    return summarise(inputs, title="Latency on the page", cards=cards)


def page_of(report: ReportV3) -> str:
    return render_report(report, "reports/x.json").page


def chart(page: str, name: str) -> dict[str, Any]:
    marker = f'<script type="application/json" id="tw-spec-{name}">'
    line = next(x for x in page.splitlines() if x.startswith(marker))
    spec: dict[str, Any] = json.loads(line[len(marker) : -len("</script>")])
    return spec


def test_latency_chart_data_are_the_windows_of_the_search() -> None:
    report = report_of(make_run(), tuned_run())
    spec = chart(page_of(report), "latency-rate")
    rows = spec["datasets"]["rows"]
    base = [r for r in rows if r["name"] == "vllm-default"]
    # The factory's windows: p50 TTFT = p99 / 3, p50 TPOT = 0.7 × p99 (ms).
    expected = []
    for rate, ttft, tpot, ok, step in [
        (2.0, 300.0, 40.0, True, "probe"),
        (4.0, 300.0, 40.0, True, "probe"),
        (8.0, 300.0, 40.0, True, "probe"),
        (16.0, 32000.0, 48.0, False, "probe"),
        (9.0, 350.0, 45.0, True, "probe"),
        (9.0, 320.0, 44.6, True, "repeat"),
        (9.0, 340.0, 43.9, True, "repeat"),
    ]:
        verdict = "meets SLO" if ok else "misses SLO"
        for metric, percentile, ms in [
            ("TTFT", "p50", round(round(ttft / 3, 2), 3)),
            ("TTFT", "p99", ttft),
            ("TPOT", "p50", round(round(tpot * 0.7, 2), 3)),
            ("TPOT", "p99", tpot),
        ]:
            expected.append(
                {
                    "name": "vllm-default",
                    "metric": metric,
                    "percentile": percentile,
                    "load": rate,
                    "ms": ms,
                    "step": step,
                    "verdict": verdict,
                    "judged": True,
                    "y": ms,
                    "off_scale": False,
                    "off_label": "",
                    "value_text": ms_text(ms),
                    "marker": verdict,
                }
            )
    assert sorted(base, key=lambda r: json.dumps(r, sort_keys=True)) == sorted(
        expected, key=lambda r: json.dumps(r, sort_keys=True)
    )
    assert len(rows) == 2 * len(expected)
    assert spec["datasets"]["limits"] == [
        {"metric": "TTFT", "ms": 2000.0, "label": "p99 TTFT limit"},
        {"metric": "TPOT", "ms": 50.0, "label": "p99 TPOT limit"},
    ]


def test_remeasured_windows_are_left_out_and_infinite_ones_drawn_off_scale() -> None:
    run = make_run()
    run.probes[3].window.ttft_ms.p99 = "inf"
    report = report_of(run, tuned_run())
    report.configs[0].search[5].remeasured = True
    spec = chart(page_of(report), "latency-rate")
    rows = spec["datasets"]["rows"]
    base = [r for r in rows if r["name"] == "vllm-default"]
    (inf,) = [
        r for r in base if r["load"] == 16.0 and r["metric"] == "TTFT" and r["percentile"] == "p99"
    ]
    params = {p["name"]: p["value"] for p in spec["params"]}
    # The tuned run's 32,000 ms at 16 req/s is the largest finite TTFT: the axis tops at 2×.
    assert params["ttft_hi"] == 64000.0
    assert inf["ms"] is None and inf["y"] == 64000.0 and inf["off_scale"]
    assert inf["off_label"] == "∞" and inf["marker"] == "off scale (value labelled)"
    assert len([r for r in base if r["step"] == "repeat"]) == 4  # one repeat of two: 4 values
    assert len(base) == 7 * 4 - 4


def test_configuration_diff_marks_what_differs() -> None:
    report = report_of(make_run(), tuned_run())
    text = html.unescape(page_of(report))
    section = text[text.index("## Configurations compared") :]
    section = section[: section.index("\n## ", 5)]
    lines = [x for x in section.splitlines() if x.startswith("| ")]
    assert lines[0] == "| Setting | ≠ | vllm-default | vllm-fp8kv |"
    assert "| Engine flags (spec) | ≠ | — | **--kv-cache-dtype fp8** |" in lines
    assert "| KV-cache dtype | ≠ | **bf16** | **fp8** |" in lines
    assert "| KV-cache capacity (tokens) | ≠ | **445008** | **890080** |" in lines
    assert "| Engine version |  | 0.31.0 | 0.31.0 |" in lines
    # What differs comes first.
    marks = [x.split(" | ")[1] for x in lines[2:]]
    assert marks == sorted(marks, key=lambda m: m != "≠")


def test_configuration_values_are_escaped() -> None:
    report = report_of(make_run(), tuned_run())
    report.configs[1].settings["engine_flags"] = HOSTILE
    page = page_of(report)
    assert HOSTILE not in page
    assert f"**{HOSTILE}**" in html.unescape(page)


def test_without_power_there_is_no_power_table_or_column() -> None:
    runs = [make_run(), tuned_run()]
    for run in runs:
        for r in run.repeats:
            r.power = None
    page = html.unescape(page_of(report_of(*runs)))
    assert "Board power" not in page
    assert "Tokens/J" not in page
    assert "### Power" not in page
    assert "No power was measured" in page


def test_with_power_the_power_table_is_there() -> None:
    page = html.unescape(page_of(report_of(make_run(), tuned_run())))
    assert "### Power" in page and "| Board power (W) |" in page


def test_without_accuracy_there_is_no_gate_or_suite() -> None:
    page = html.unescape(page_of(report_of(make_run(score_pct=None), tuned_run(score_pct=None))))
    assert "### Accuracy suite" not in page
    assert "| Gate |" not in page
    assert "Suite" not in page
    assert "No accuracy suite was run" in page


def test_one_repeat_shows_no_band() -> None:
    one = {
        "repeat_goodputs": (4600.0,),
        "repeat_passes": (True,),
        "ttft_p99s": (320.0,),
        "tpot_p99s": (44.6,),
        "powers_w": (640.0,),
        "throttled": (100,),
    }
    page = html.unescape(page_of(report_of(make_run(**one), tuned_run(**one, goodput=4600.0))))
    assert "| Variance band | one repeat: no band |" in page
    assert "| Variance band | ±" not in page


def test_two_repeats_show_the_band() -> None:
    page = html.unescape(page_of(report_of(make_run(), tuned_run())))
    assert "one repeat: no band" not in page
    assert "| Variance band | ±" in page


def test_fleet_size_is_explained() -> None:
    page = html.unescape(page_of(report_of(make_run(), tuned_run())))
    assert "a fleet of 64 cards running the baseline" in page
    assert "`tokenwatt report`'s default" in page
    page = html.unescape(page_of(report_of(make_run(), tuned_run(), cards=8)))
    assert "a fleet of 8 cards running the baseline" in page
    assert "default" not in page[page.index("a fleet of 8") :][:200]


def test_missed_window_shows_no_goodput() -> None:
    text = html.unescape(page_of(report_of(make_run(), tuned_run())))
    row = next(
        x for x in text.splitlines() if x.startswith("| #4 probe 4 at 16 req/s (grow) | 16.00 |")
    )
    assert row.endswith("| 32,000.0 | 48.0 | — | — |")


def test_seed_without_search_says_why() -> None:
    from sitecase import SEED_RECORD

    from tokenwatt.records import load_report

    page = html.unescape(render_report(load_report(SEED_RECORD), str(SEED_RECORD)).page)
    assert "This record keeps no window of the SLO search" in page
    assert "tw-spec-latency" not in page


def test_hardware_none_is_never_shown_as_one_times_none() -> None:
    report = report_of(make_run(), tuned_run())
    report.hardware.accelerator = "none"
    rendered = render_report(report, "reports/x.json")
    assert rendered.hardware == "hardware not recorded"
    assert "| Accelerator | — |" in html.unescape(rendered.page)


def test_not_covered_lines_that_repeat_another_are_shown_once() -> None:
    items = [
        "Simulated engine; no real hardware",
        "Quick mode: x",
        "Simulated engine: no real hardware or engine was measured",
        "quick MODE  x.",
        "```",
        "```",
    ]
    assert unique_items(items) == [
        "Simulated engine: no real hardware or engine was measured",
        "Quick mode: x",
        "```",
    ]


def test_gpu_minutes_never_rounds_to_a_false_zero() -> None:
    assert [gpu_minutes(s) for s in (0.0, 1.0, 2.9, 3.0, 144.0, 6000.0)] == [
        "0",
        "<0.1",
        "<0.1",
        "0.1",
        "2.4",
        "100.0",
    ]
