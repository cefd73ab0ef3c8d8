"""Charts that do not mislead: off-scale values, the probe line's order, invalid windows
apart, no latency distribution for a configuration without an operating point.

The helper (:mod:`tokenwatt.site.charts.offscale`) with finite, infinite, huge and all-infinite
values; then the Vega-Lite specs a report page carries (made from the runs factory's
seed-like runs, whose numbers are checkable by hand), and one render of the probe chart
to SVG by vl-convert (the Vega the site ships), to see the label drawn.
"""

from __future__ import annotations

import html
import json
import math
from typing import Any

import pytest
from sitecase import HOSTILE

from tests.runs_factory import make_run, tuned_run
from tokenwatt.analysis.report.summarise import summarise
from tokenwatt.records import RunInput
from tokenwatt.records.report.report_v3 import LatencyDistributionV3, ReportV3
from tokenwatt.records.run.run import RunRecord
from tokenwatt.site.charts.latency_charts import INVALID_LEGEND, no_operating_point
from tokenwatt.site.charts.offscale import (
    OFF_SCALE_LEGEND,
    log_axis,
    ms_text,
    place,
    ratio_text,
)
from tokenwatt.site.pages.pages import render_report

# ---- the helper ------------------------------------------------------------------------


def test_finite_values_are_on_scale_inside_a_domain_with_headroom() -> None:
    axis = log_axis([120.0, 300.0, None], 2000.0)
    # The limit (2,000 ms) is the largest value shown: 2× above it, 120 / 2 below.
    assert (axis.lo, axis.hi, axis.cap) == (60.0, 4000.0, 200_000.0)
    at = place(300.0, axis, ms_text)
    assert at is not None
    assert (at.y, at.off_scale, at.label, at.value_text) == (300.0, False, "", "300 ms")


def test_an_infinite_value_sits_at_the_top_labelled_infinite() -> None:
    axis = log_axis([120.0, 32000.0, math.inf], 2000.0)
    assert axis.hi == 64000.0  # ∞ does not stretch the axis
    at = place(math.inf, axis, ms_text)
    assert at is not None
    assert (at.y, at.off_scale, at.label, at.value_text) == (64000.0, True, "∞", "∞")


def test_a_huge_finite_value_is_off_scale_with_its_true_value() -> None:
    axis = log_axis([120.0, 300.0, 5e6], 2000.0)
    # 5,000 s is over 100 × the limit: it does not set the top, it is drawn there.
    assert axis.hi == 4000.0
    at = place(5e6, axis, ms_text)
    assert at is not None
    assert (at.y, at.off_scale) == (4000.0, True)
    assert at.label == "off scale: 5,000 s" and at.value_text == "5,000 s"
    just = place(200_000.0, axis, ms_text)  # exactly at the cap: still on scale
    assert just is not None and not just.off_scale and just.y == 200_000.0


def test_an_all_infinite_series_sits_above_the_limit() -> None:
    axis = log_axis([math.inf, None, math.inf], 50.0)
    assert (axis.lo, axis.hi) == (25.0, 100.0)
    at = place(math.inf, axis, ms_text)
    assert at is not None and at.y == 100.0 > 50.0 and at.label == "∞"


def test_nothing_to_place_and_bad_axes() -> None:
    axis = log_axis([], 1.0)
    assert place(None, axis, ratio_text) is None
    assert place(0.0, axis, ratio_text) is None
    with pytest.raises(ValueError, match="limit"):
        log_axis([1.0], 0.0)
    with pytest.raises(ValueError, match="limit"):
        log_axis([1.0], math.inf)
    with pytest.raises(ValueError, match="headroom"):
        log_axis([1.0], 1.0, headroom=1.0)


def test_value_words() -> None:
    assert [ms_text(v) for v in (0.854, 44.62, 812.4, 12_345.0, 1_250_000.0)] == [
        "0.85 ms",
        "44.6 ms",
        "812 ms",
        "12.3 s",
        "1,250 s",
    ]
    assert [ratio_text(v) for v in (0.42, 16.0, 1250.0)] == ["×0.42", "×16", "×1,250"]


# ---- the specs on a page ---------------------------------------------------------------


def report_of(*runs: RunRecord) -> ReportV3:
    inputs = [RunInput(f"runs/{r.label}.json", f"{i}" * 64, r) for i, r in enumerate(runs)]
    return summarise(inputs, title="Off scale")


def specs_of(report: ReportV3) -> tuple[str, dict[str, dict[str, Any]]]:
    page = render_report(report, "reports/x.json").page
    specs = {}
    for line in page.splitlines():
        if line.startswith('<script type="application/json" id="tw-spec-'):
            name = line.split('id="tw-spec-')[1].split('"')[0]
            specs[name] = json.loads(line.split(">", 1)[1].rsplit("</script>", 1)[0])
    return page, specs


def params(spec: dict[str, Any]) -> dict[str, float]:
    return {p["name"]: p["value"] for p in spec["params"]}


def layer_with(layers: list[dict[str, Any]], mark: str, filt: str | None) -> dict[str, Any]:
    """The one layer with mark type ``mark`` and the filter expression ``filt`` (None: a
    layer with no transform at all)."""
    found = [
        x
        for x in layers
        if x["mark"]["type"] == mark
        and (("transform" not in x) if filt is None else {"filter": filt} in x.get("transform", []))
    ]
    assert len(found) == 1, found
    return found[0]


def infinite_run() -> RunRecord:
    """The seed's baseline, except that its 16 req/s probe (#4) has an infinite p99 TTFT."""
    run = make_run()
    run.probes[3].window.ttft_ms.p99 = "inf"
    return run


def test_probe_chart_clamps_an_infinite_p99_to_the_top_with_a_labelled_triangle() -> None:
    _page, specs = specs_of(report_of(infinite_run(), tuned_run()))
    spec = specs["sweep"]
    rows = {r["rate_rps"]: r for r in spec["datasets"]["rows"] if r["name"] == "vllm-default"}
    top = params(spec)["load_hi"]
    # The tuned run's 16 req/s probe: 32,000 ms over 2,000 ms = 16, the largest finite ratio.
    assert top == 32.0
    inf = rows[16.0]
    assert (inf["y"], inf["off_scale"], inf["off_label"]) == (32.0, True, "∞")
    assert inf["slo_load"] is None
    assert inf["marker"] == OFF_SCALE_LEGEND and inf["ttft_text"] == "∞"
    # 2 req/s: max(300 / 2,000, 40 / 50) = 0.8, drawn where it is.
    assert rows[2.0]["y"] == rows[2.0]["slo_load"] == 0.8 and not rows[2.0]["off_scale"]
    layers = spec["layer"]
    points = layer_with(layers, "point", None)
    shape = points["encoding"]["shape"]["scale"]
    assert dict(zip(shape["domain"], shape["range"], strict=True))[OFF_SCALE_LEGEND] == (
        "triangle-up"
    )
    label = layer_with(layers, "text", "datum.off_scale")
    assert label["encoding"]["text"]["field"] == "off_label"
    y = points["encoding"]["y"]["scale"]
    assert y["domainMax"] == {"expr": "load_hi"} and y["nice"] is False


def test_probe_line_joins_probes_in_rate_order_labelled_in_measured_order() -> None:
    # The factory's search grew 2, 4, 8, 16 req/s, missed, and came back down to 9.
    _page, specs = specs_of(report_of(make_run(), tuned_run()))
    spec = specs["sweep"]
    mine = [r for r in spec["datasets"]["rows"] if r["name"] == "vllm-default"]
    assert [(r["rate_rps"], r["order"]) for r in mine] == [
        (2.0, 1),
        (4.0, 2),
        (8.0, 3),
        (16.0, 4),
        (9.0, 5),
    ]
    assert mine[4]["window"].startswith("#5 probe 5 at 9 req/s")
    line = layer_with(spec["layer"], "line", "!datum.off_scale")
    assert line["encoding"]["order"] == {"field": "rate_rps", "type": "quantitative"}
    numbers = [
        x
        for x in spec["layer"]
        if x["mark"]["type"] == "text" and x["encoding"]["text"]["field"] == "order"
    ]
    assert len(numbers) == 1


def test_invalid_windows_are_hollow_and_not_joined() -> None:
    report = report_of(make_run(), tuned_run())
    bad = report.configs[0].search[2]
    assert bad.rate_rps == 8.0
    bad.valid, bad.invalid_reason, bad.slo_pass = False, "the idle check failed", False
    _page, specs = specs_of(report)
    spec = specs["latency-rate"]
    rows = [r for r in spec["datasets"]["rows"] if r["name"] == "vllm-default"]
    at8 = [r for r in rows if r["load"] == 8.0]
    assert len(at8) == 4
    assert all(not r["judged"] and r["marker"] == INVALID_LEGEND for r in at8)
    ttft = spec["vconcat"][0]["layer"]
    line = layer_with(ttft, "line", "datum.judged && !datum.off_scale")
    assert line["encoding"]["y"]["field"] == "y"
    hollow = layer_with(ttft, "point", "!datum.judged && !datum.off_scale")
    assert hollow["mark"]["filled"] is False
    assert hollow["encoding"]["shape"]["scale"]["domain"] == [INVALID_LEGEND]
    filled = layer_with(ttft, "point", "datum.judged || datum.off_scale")
    assert filled["mark"]["filled"] is True


def test_a_latency_far_above_its_limit_is_off_scale_on_latency_against_load() -> None:
    report = report_of(make_run(), tuned_run())
    report.configs[1].search[1].tpot_p99_ms = 1e6  # 1,000 s per token, 20,000 × the limit
    _page, specs = specs_of(report)
    spec = specs["latency-rate"]
    (far,) = [
        r
        for r in spec["datasets"]["rows"]
        if r["name"] == "vllm-fp8kv" and r["load"] == 4.0 and r["metric"] == "TPOT"
        if r["percentile"] == "p99"
    ]
    assert far["ms"] == 1e6 and far["off_scale"] and far["y"] == params(spec)["tpot_hi"]
    assert far["off_label"] == "off scale: 1,000 s"
    assert params(spec)["tpot_hi"] == 100.0  # the 50 ms limit is the largest shown TPOT


def distribution() -> LatencyDistributionV3:
    levels = [50.0, 99.0, 100.0]
    return LatencyDistributionV3(
        levels_pct=levels,
        requests=100,
        ttft_ms=[100.0, 300.0, 400.0],
        tpot_requests=100,
        tpot_ms=[30.0, 40.0, 45.0],
    )


def test_no_latency_distribution_for_a_configuration_without_an_operating_point() -> None:
    report = report_of(make_run(), tuned_run())
    base, tuned = report.configs
    assert no_operating_point(tuned) is None
    base.latency_at_operating_point = tuned.latency_at_operating_point = distribution()
    tuned.label = HOSTILE
    tuned.goodput_tok_s, tuned.slo_pass_count = 0.0, 0
    assert no_operating_point(tuned) == "no rate met the SLO, so it has no operating point"
    page, specs = specs_of(report)
    rows = specs["latency-cdf"]["datasets"]["rows"]
    assert {r["name"] for r in rows} == {"vllm-default"}
    assert HOSTILE not in page  # the name in the caption is record text, escaped
    text = html.unescape(page)
    assert f"{HOSTILE} is left out: no rate met the SLO, so it has no operating point." in text


def test_the_probe_chart_draws_the_off_scale_label() -> None:
    vlc = pytest.importorskip("vl_convert")
    _page, specs = specs_of(report_of(infinite_run(), tuned_run()))
    spec = {**specs["sweep"], "width": 500}
    svg = vlc.vegalite_to_svg(spec)
    # A text mark (role "text") holding ∞, and the triangle's tooltip carrying the value.
    assert 'aria-roledescription="text mark"' in svg
    assert ">∞</text>" in svg
    assert "Worst p99 / limit: ∞" in svg


def test_probe_ratio_says_infinite_only_for_a_p99_without_a_number() -> None:
    from tokenwatt.records.report.report_v3 import SearchWindowV3
    from tokenwatt.site.charts.probe_chart import probe_ratio

    def probe(ok: bool, ttft: object, tpot: object) -> SearchWindowV3:
        return SearchWindowV3.model_validate(
            {
                "step": "probe",
                "rate_rps": 4.0,
                "slo_pass": ok,
                "ttft_p99_ms": ttft,
                "tpot_p99_ms": tpot,
            }
        )

    assert probe_ratio(probe(False, "inf", 40.0), 2000.0, 50.0) == math.inf
    # A v2-style miss: TTFT stored as null (∞ then), TPOT within its limit.
    assert probe_ratio(probe(False, None, 40.0), 2000.0, 50.0) == math.inf
    assert probe_ratio(probe(False, None, None), 2000.0, 50.0) == math.inf
    # Missed on errors with both p99s within their limits: drawn where it is, below 1.
    assert probe_ratio(probe(False, 1000.0, 40.0), 2000.0, 50.0) == 0.8
    assert probe_ratio(probe(True, 3000.0, 40.0), 2000.0, 50.0) == 1.5
    assert probe_ratio(probe(True, None, None), 2000.0, 50.0) is None
