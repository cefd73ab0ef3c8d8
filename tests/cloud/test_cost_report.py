"""The cloud cost from the run records into the report record, its pages and the index."""

from __future__ import annotations

import html

import pytest

from tests.runs_factory import make_run, tuned_run
from tokenwatt import analysis
from tokenwatt.records import CloudCost, RunInput
from tokenwatt.site.pages.pages import render_report
from tokenwatt.site.pages.templates import render_index


def cost(share: float, *, confirmed: bool = True, session: str = "s1") -> CloudCost:
    return CloudCost(
        provider="lambda", instance_type="gpu_1x_h100_sxm5", region="us-west-3",
        instance_id="i0001", session_id=session, price_usd_per_hour=3.29, session_s=3770.0,
        billed_s=3780.0, session_cost_usd=3.4545, run_s=2400.0 * share, share=share,
        cost_usd=round(3.4545 * share, 6), terminate_confirmed=confirmed,
    )  # fmt: skip


def report(*costs: CloudCost | None):
    runs = [make_run(), tuned_run()]
    runs = [r.model_copy(update={"cost": c}) for r, c in zip(runs, costs, strict=True)]
    inputs = [RunInput(name=f"runs/{r.label}.json", sha256="0" * 64, run=r) for r in runs]
    return analysis.summarise(inputs, title="Cloud note", demo=True)


def test_dollars_and_kwh_per_million_tokens():
    # 3.29 $/h over 4,572.3 tok/s × 3,600 s: 16,460,280 tokens an hour.
    assert analysis.usd_per_million_tokens(3.29, 4572.3) == pytest.approx(0.199875093, rel=1e-8)
    assert analysis.usd_per_million_tokens(3.29, 0.0) is None
    # 10⁶ tokens at 7.18 tok/J: 139,275.8 J = 0.0386877 kWh.
    assert analysis.kwh_per_million_tokens(7.18) == pytest.approx(0.0386877128, rel=1e-8)
    assert analysis.kwh_per_million_tokens(None) is None


def test_session_totals_count_each_session_once():
    totals = analysis.session_totals(
        [cost(0.625), cost(0.375, confirmed=False), None, cost(1.0, session="s2")]
    )
    assert [(t.session_id, t.cost_usd, t.confirmed) for t in totals] == [
        ("s1", 3.4545, False),
        ("s2", 3.4545, True),
    ]


def test_report_carries_the_cost_per_configuration():
    rec = report(cost(0.625), cost(0.375))
    assert [c.cost.share for c in rec.configs if c.cost] == [0.625, 0.375]
    assert rec.configs[0].cost == cost(0.625)


def test_page_shows_cost_per_million_tokens_and_the_session_total():
    page = html.unescape(render_report(report(cost(0.625), cost(0.375)), "r.json").page)
    header = next(line for line in page.splitlines() if line.startswith("| Configuration | Engine"))
    assert "| $ / M output tokens | kWh / M tokens |" in header
    baseline = next(line for line in page.splitlines() if line.startswith("| vllm-default | "))
    assert "| 0.20 |" in baseline  # 0.1999 $/M output tokens at 4,572.3 tok/s
    # 62.5% shown with no decimal rounds half away from zero, as every number on the page
    assert "| vllm-default | lambda gpu_1x_h100_sxm5 | 3.29 | 25.0 | 63% | 2.16 |" in page
    assert "| vllm-fp8kv | lambda gpu_1x_h100_sxm5 | 3.29 | 15.0 | 38% | 1.30 |" in page
    assert "Session s1 (gpu_1x_h100_sxm5): **$3.45** in all." in page


def test_page_without_cost_has_no_cost_columns():
    page = render_report(report(None, None), "r.json").page
    assert "M output tokens" not in page
    assert "Cloud cost" not in page


def test_index_shows_the_session_total_and_an_unconfirmed_termination():
    rendered = render_report(report(cost(0.625), cost(0.375, confirmed=False)), "r.json")
    assert rendered.cloud == "cloud $3.45 (termination not confirmed)"
    index = html.unescape(render_index([rendered]))
    assert "· cloud $3.45 (termination not confirmed) |" in index
    plain = render_report(report(None, None), "r.json")
    assert plain.cloud == ""
    assert "· cloud" not in render_index([plain])
