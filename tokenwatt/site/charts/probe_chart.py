"""The SLO search chart of a report page: each probe's worse p99 over its limit, by rate.

Per probe of ``configs[].search`` (windows measured again because the client lagged are
left out: their verdict was replaced by the next window's), the worse of p99 TTFT / TTFT
limit and p99 TPOT / TPOT limit against the arrival rate, on log axes; ≤ 1 (the dashed
line) meets the SLO. The line joins a configuration's probes in rate order, so a search
that went up and came back down draws one curve, not a zig-zag in time; each point is
labelled with its window's number in the run (the order of measurement, the ``#N`` of the
whole-search table). An infinite ratio, or one more than
:data:`~tokenwatt.site.charts.offscale.SPAN_ABOVE_LIMIT` times the limit, is drawn off scale
(:mod:`tokenwatt.site.charts.offscale`): a labelled triangle at the top of the axis.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

from tokenwatt.analysis import config_labels
from tokenwatt.records import ReportV3, SearchWindowV3
from tokenwatt.site.charts.charts import ChartSpec, Rows, finish_chart, named_chart
from tokenwatt.site.charts.offscale import (
    OFF_SCALE_LEGEND,
    OFF_SCALE_SHAPE,
    SPAN_ABOVE_LIMIT,
    LogAxis,
    log_axis,
    log_axis_params,
    ms_text,
    place,
    ratio_text,
)
from tokenwatt.site.format.windows import probe_outcome

MARKERS = ["meets SLO", "misses SLO", OFF_SCALE_LEGEND]
"""The probe chart's point shapes, in legend order (circle, cross, triangle)."""
SHAPES = ["circle", "cross", OFF_SCALE_SHAPE]


def probe_ratio(p: SearchWindowV3, ttft_limit_ms: float, tpot_limit_ms: float) -> float | None:
    """The worse of p99 TTFT / limit and p99 TPOT / limit (≤ 1 meets the SLO), at least
    0.001 (a log axis has no 0).

    ∞ when either p99 is infinite (``"inf"``), and for a miss with no finite p99 or whose
    only finite one is within its limit while the other is null (a record that stored an
    infinite p99 as null, as v2 did): such a probe missed on the p99 it has no number for.
    A miss whose p99s are both finite and within the limits (it missed on errors) is drawn
    at its ratio, below the line, with the miss's marker. None for a met probe without a
    p99 (nothing to draw)."""
    ratios: list[float] = []
    missing = False
    for value, limit in ((p.ttft_p99_ms, ttft_limit_ms), (p.tpot_p99_ms, tpot_limit_ms)):
        if value == "inf":
            return math.inf
        if isinstance(value, int | float):
            ratios.append(value / limit)
        else:
            missing = True
    if not ratios:
        return None if p.slo_pass else math.inf
    worst = max(max(ratios), 1e-3)
    if not p.slo_pass and worst <= 1.0 and missing:
        return math.inf
    return worst


def _p99_text(value: object) -> str:
    if value == "inf":
        return "∞"
    return ms_text(float(value)) if isinstance(value, int | float) else "—"


def sweep_rows(report: ReportV3, names: list[str]) -> tuple[Rows, LogAxis]:
    """The probe chart's rows, and its y axis (:func:`~tokenwatt.site.charts.offscale.log_axis`
    over every finite ratio, the limit 1 inside). Per probe: ``name``, ``rate_rps``,
    ``order`` (its window's number in the run), ``window`` (its label), ``slo_load`` (the
    ratio; None when infinite), ``y`` (where it is drawn), ``off_scale``, ``off_label``,
    ``value_text`` (the ratio in words), ``marker`` (a :data:`MARKERS` entry), ``verdict``,
    ``outcome`` (the failure mode when missed), ``ttft_text``, ``tpot_text`` (the p99s)."""
    slo = report.slo
    probes: list[tuple[str, int, str, SearchWindowV3, float]] = []
    for name, cfg in zip(names, report.configs, strict=True):
        for label, w in zip(config_labels(cfg, report), cfg.search, strict=True):
            if w.step != "probe" or w.remeasured:
                continue
            ratio = probe_ratio(w, slo.ttft_p99_ms, slo.tpot_p99_ms)
            if ratio is not None:
                probes.append((name, label.number, label.label, w, ratio))
    axis = log_axis((r for *_, r in probes if math.isfinite(r)), 1.0)
    rows: Rows = []
    for name, number, text, w, ratio in probes:
        at = place(ratio, axis, ratio_text)
        if at is None:  # pragma: no cover - probe_ratio gives ratios > 0
            continue
        verdict = "meets SLO" if w.slo_pass else "misses SLO"
        rows.append(
            {
                "name": name,
                "rate_rps": w.rate_rps,
                "order": number,
                "window": text,
                "slo_load": round(ratio, 6) if math.isfinite(ratio) else None,
                "y": round(at.y, 6),
                "off_scale": at.off_scale,
                "off_label": at.label,
                "value_text": at.value_text,
                "marker": OFF_SCALE_LEGEND if at.off_scale else verdict,
                "verdict": verdict,
                "outcome": probe_outcome(w),
                "ttft_text": _p99_text(w.ttft_p99_ms),
                "tpot_text": _p99_text(w.tpot_p99_ms),
            }
        )
    return rows, axis


@cache
def _sweep_template() -> ChartSpec:
    import altair as alt

    base = alt.Chart(named_chart(alt, "rows"))
    x = alt.X("rate_rps:Q", title="Arrival rate (req/s)", scale=alt.Scale(type="log"))
    y = alt.Y(
        "y:Q",
        title="Worst p99 / SLO limit",
        scale=alt.Scale(
            type="log",
            domainMin=alt.ExprRef("load_lo"),
            domainMax=alt.ExprRef("load_hi"),
            nice=False,
        ),
    )
    colour = alt.Color("name:N", sort=None, title="Configuration")
    # Joined in rate order (x), whatever order the search measured them in; an off-scale
    # point has no height to join (it stands apart at the top).
    line = (
        base.transform_filter("!datum.off_scale")
        .mark_line(opacity=0.6)
        .encode(x=x, y=y, color=colour, detail="name:N", order=alt.Order("rate_rps:Q"))
    )
    points = base.mark_point(filled=True, size=70).encode(
        x=x,
        y=y,
        color=colour,
        shape=alt.Shape("marker:N", scale=alt.Scale(domain=MARKERS, range=SHAPES), title="Probe"),
        tooltip=[
            alt.Tooltip("name:N", title="Configuration"),
            alt.Tooltip("window:N", title="Window"),
            alt.Tooltip("rate_rps:Q", title="Rate (req/s)", format=".2f"),
            alt.Tooltip("value_text:N", title="Worst p99 / limit"),
            alt.Tooltip("ttft_text:N", title="p99 TTFT"),
            alt.Tooltip("tpot_text:N", title="p99 TPOT"),
            alt.Tooltip("verdict:N", title="Probe"),
            alt.Tooltip("outcome:N", title="Outcome"),
        ],
    )
    order = base.mark_text(align="left", dx=6, dy=8, fontSize=10).encode(
        x=x, y=y, text="order:N", color=colour
    )
    off = (
        base.transform_filter("datum.off_scale")
        .mark_text(dy=-12, fontSize=11, fontWeight="bold")
        .encode(x=x, y=y, text="off_label:N")
    )
    limit = (
        alt.Chart(named_chart(alt, "limit"))
        .mark_rule(strokeDash=[6, 3], color="#c62828")
        .encode(y="slo_load:Q")
    )
    chart = alt.layer(line, points, order, off, limit).properties(width="container", height=260)
    return finish_chart(chart)


def sweep_chart(rows: Rows, axis: LogAxis) -> ChartSpec:
    """The SLO search chart spec (rows and axis as :func:`sweep_rows` makes them)."""
    return {
        **_sweep_template(),
        "params": log_axis_params("load", axis),
        "datasets": {"rows": rows, "limit": [{"slo_load": 1.0}]},
    }


def sweep_item(report: ReportV3, names: list[str]) -> dict[str, Any] | None:
    """The page's SLO search chart (id, title, caption, spec); None without a probe."""
    rows, axis = sweep_rows(report, names)
    if not rows:
        return None
    return {
        "id": "sweep",
        "title": "SLO search: probes against the SLO limit",
        "caption": (
            "Each probe's worse p99 over its limit against the arrival rate (log scales): "
            "at or below the dashed line meets the SLO. The line joins each "
            "configuration's probes in rate order; the small number by a point is its "
            "window's number in the run (the order measured, as in the whole-search "
            "table). A triangle at the top is off scale, not joined by the line: an "
            f"infinite p99, or one more than {SPAN_ABOVE_LIMIT:.0f} times its limit, with "
            "its true value beside it."
        ),
        "spec": sweep_chart(rows, axis),
    }
