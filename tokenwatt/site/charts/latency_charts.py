"""Latency against load on a report page: p50 and p99 TTFT and TPOT per window.

One point per window of each configuration's SLO search (``configs[].search``: the probes
and the repeats), in absolute units (ms) against the window's load, one line per
configuration and percentile through the median at each load, and the SLO limits drawn as
rules (the limits bound the p99; the p50 lines show how far below them the typical request
is). Windows whose verdict was not used (measured again because the client lagged) are
left out. An invalid window (not judged) is drawn apart: a hollow circle the line does not
join. An infinite latency (failed requests reached that percentile), or one far above its
limit, is drawn off scale: a labelled triangle at the top of the axis
(:mod:`tokenwatt.site.charts.offscale`).

Latency distributions (CDFs) at the found operating point come from the record's
``latency_at_operating_point`` (quantiles over the requests of the repeats at the found
load, kept when the run's per-request file was there): one line per configuration, the SLO
limits as rules. A configuration without an operating point
(:func:`no_operating_point`: no rate met the SLO) draws no line, and the caption says so; a
record without any distribution has no CDF chart.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

from tokenwatt.records import ConfigV3, LatencyMsV3, ReportV3, SearchWindowV3
from tokenwatt.site.charts.charts import ChartSpec, Rows, chart_with_data, finish_chart, named_chart
from tokenwatt.site.charts.offscale import (
    OFF_SCALE_LEGEND,
    OFF_SCALE_SHAPE,
    SPAN_ABOVE_LIMIT,
    LogAxis,
    log_axis,
    log_axis_params,
    ms_text,
    place,
)
from tokenwatt.site.format.windows import finite_ms

LOAD_TITLES = {"rate": "Arrival rate (req/s)", "concurrency": "Concurrent requests"}
"""The load axis per load kind. Every window is rate-driven (Poisson arrivals at
``rate_rps``) unless the record says it held a fixed number of requests in flight."""

METRICS = ("TTFT", "TPOT")


def window_load(w: SearchWindowV3) -> tuple[str, float]:
    """A window's load: ``("concurrency", n)`` when the record says it held ``n`` requests
    in flight, else ``("rate", rate_rps)`` (req/s)."""
    if w.profile == "concurrency" and w.concurrency is not None:
        return "concurrency", float(w.concurrency)
    return "rate", float(w.rate_rps)


INVALID_LEGEND = "invalid window (not judged)"
"""The legend entry of an invalid window's hollow marker."""

MARKERS = ["meets SLO", "misses SLO", OFF_SCALE_LEGEND]
"""The latency chart's filled point shapes, in legend order: circle, cross and the
off-scale triangle; an invalid window (``marker`` :data:`INVALID_LEGEND`) is a hollow
circle with a legend of its own."""
SHAPES = ["circle", "cross", OFF_SCALE_SHAPE]


def _latency_value(value: LatencyMsV3) -> float | None:
    """A latency (ms) to place on the axis: ∞ for ``"inf"``, None without a sample."""
    if value == "inf":
        return math.inf
    return finite_ms(value)


def _window_values(w: SearchWindowV3) -> dict[tuple[str, str], float | None]:
    return {
        ("TTFT", "p50"): _latency_value(w.ttft_p50_ms),
        ("TTFT", "p99"): _latency_value(w.ttft_p99_ms),
        ("TPOT", "p50"): _latency_value(w.tpot_p50_ms),
        ("TPOT", "p99"): _latency_value(w.tpot_p99_ms),
    }


def latency_rows(report: ReportV3, names: list[str]) -> dict[str, tuple[Rows, dict[str, LogAxis]]]:
    """Chart rows and y axes by load kind. Per window whose verdict was used (one measured
    again because the client lagged is left out) and latency with a value above 0 ms, one
    row with ``name``, ``metric`` (TTFT, TPOT), ``percentile`` (p50, p99), ``load``,
    ``ms`` (the latency; None when infinite), ``y`` (where it is drawn), ``off_scale``,
    ``off_label``, ``value_text`` (the latency in words), ``step`` (probe, repeat),
    ``verdict`` (meets SLO, misses SLO), ``judged`` (false for an invalid window, drawn
    hollow and not joined by the line) and ``marker`` (a :data:`MARKERS` entry). The axes,
    one per metric (:func:`~tokenwatt.site.charts.offscale.log_axis` over that metric's values,
    its SLO limit inside), place infinite and far-off values at the top, labelled."""
    limits = {"TTFT": report.slo.ttft_p99_ms, "TPOT": report.slo.tpot_p99_ms}
    raw: dict[str, list[tuple[dict[str, Any], float]]] = {}
    for name, cfg in zip(names, report.configs, strict=True):
        for w in cfg.search:
            if w.remeasured:
                continue
            kind, load = window_load(w)
            verdict = "meets SLO" if w.slo_pass else "misses SLO"
            for (metric, percentile), value in _window_values(w).items():
                if value is None or value <= 0:
                    continue  # no sample; a log axis has no place for 0 ms
                row = {
                    "name": name,
                    "metric": metric,
                    "percentile": percentile,
                    "load": round(load, 6),
                    "ms": round(value, 3) if math.isfinite(value) else None,
                    "step": w.step,
                    "verdict": verdict,
                    "judged": w.valid,
                }
                raw.setdefault(kind, []).append((row, value))
    return {kind: _placed(items, limits) for kind, items in raw.items()}


def _placed(
    items: list[tuple[dict[str, Any], float]], limits: dict[str, float]
) -> tuple[Rows, dict[str, LogAxis]]:
    """One load kind's rows with where each is drawn, and the axis per metric."""
    axes = {
        m: log_axis((v for r, v in items if r["metric"] == m and math.isfinite(v)), lim)
        for m, lim in limits.items()
    }
    rows: Rows = []
    for row, value in items:
        at = place(value, axes[row["metric"]], ms_text)
        if at is None:  # pragma: no cover - values > 0 are always placed
            continue
        if at.off_scale:
            marker = OFF_SCALE_LEGEND
        else:
            marker = row["verdict"] if row["judged"] else INVALID_LEGEND
        rows.append(
            {
                **row,
                "y": round(at.y, 3),
                "off_scale": at.off_scale,
                "off_label": at.label,
                "value_text": at.value_text,
                "marker": marker,
            }
        )
    return rows, axes


def limit_rows(report: ReportV3) -> Rows:
    """The SLO limits (ms) to draw as rules, one per metric."""
    return [
        {"metric": "TTFT", "ms": report.slo.ttft_p99_ms, "label": "p99 TTFT limit"},
        {"metric": "TPOT", "ms": report.slo.tpot_p99_ms, "label": "p99 TPOT limit"},
    ]


def no_operating_point(cfg: ConfigV3) -> str | None:
    """Why a configuration has no operating point to show a latency distribution at, in
    words; None when it has one. Today's records say so by their result: no rate met the
    SLO in every repeat (goodput 0, no repeat passed). The one place to add a result status
    (e.g. inconclusive) when records gain one."""
    if cfg.goodput_tok_s <= 0 or cfg.slo_pass_count == 0:
        return "no rate met the SLO, so it has no operating point"
    return None


def cdf_rows(report: ReportV3, names: list[str]) -> Rows:
    """CDF rows at each configuration's found operating point: per configuration with a
    ``latency_at_operating_point``, metric and finite quantile above 0 ms, one row with
    ``name``, ``metric`` (TTFT, TPOT), ``share`` (the level as a fraction, 0.01 … 1) and
    ``ms``. Infinite quantiles (failed requests) are left out, so such a line stops short of
    1; none when no configuration has a distribution. A configuration without an operating
    point (:func:`no_operating_point`) has no rows, whatever its record holds."""
    rows: Rows = []
    for name, cfg in zip(names, report.configs, strict=True):
        dist = cfg.latency_at_operating_point
        if dist is None or no_operating_point(cfg) is not None:
            continue
        for metric, values in (("TTFT", dist.ttft_ms), ("TPOT", dist.tpot_ms)):
            for level, value in zip(dist.levels_pct, values, strict=False):
                ms = finite_ms(value)
                if ms is None or ms <= 0:
                    continue
                rows.append(
                    {"name": name, "metric": metric, "share": round(level / 100, 4), "ms": ms}
                )
    return rows


def _cdf_panel(alt: Any, metric: str) -> Any:
    keep = alt.datum.metric == metric
    x = alt.X("ms:Q", title=f"{metric} (ms)", scale=alt.Scale(type="log"))
    line = (
        alt.Chart(named_chart(alt, "rows"))
        .transform_filter(keep)
        .mark_line(interpolate="step-after")
        .encode(
            x=x,
            y=alt.Y("share:Q", title="Share of requests", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("name:N", sort=None, title="Configuration"),
            order=alt.Order("share:Q"),
            tooltip=[
                alt.Tooltip("name:N", title="Configuration"),
                alt.Tooltip("share:Q", title="Quantile", format=".1%"),
                alt.Tooltip("ms:Q", title=f"{metric} (ms)", format=",.1f"),
            ],
        )
    )
    rule = (
        alt.Chart(named_chart(alt, "limits"))
        .transform_filter(keep)
        .mark_rule(strokeDash=[6, 3], color="#c62828")
        .encode(x="ms:Q", tooltip=[alt.Tooltip("label:N"), alt.Tooltip("ms:Q", format=",.0f")])
    )
    return alt.layer(line, rule).properties(width="container", height=220)


@cache
def _cdf_template() -> ChartSpec:
    import altair as alt

    return finish_chart(alt.vconcat(*(_cdf_panel(alt, m) for m in METRICS)))


def cdf_chart(rows: Rows, limits: Rows) -> ChartSpec:
    """TTFT and TPOT CDFs (share of requests against ms, log scale), one line per
    configuration, the SLO limits as dashed rules. Rows as :func:`cdf_rows` makes."""
    return chart_with_data(_cdf_template(), rows=rows, limits=limits)


def _y(alt: Any, metric: str, field: str = "y:Q") -> Any:
    """The panel's log y axis, its domain read from the page's parameters."""
    prefix = metric.lower()
    scale = alt.Scale(
        type="log",
        domainMin=alt.ExprRef(f"{prefix}_lo"),
        domainMax=alt.ExprRef(f"{prefix}_hi"),
        nice=False,
    )
    return alt.Y(field, title=f"{metric} (ms)", scale=scale)


def _tooltip(alt: Any, metric: str, load_title: str) -> list[Any]:
    return [
        alt.Tooltip("name:N", title="Configuration"),
        alt.Tooltip("step:N", title="Window"),
        alt.Tooltip("load:Q", title=load_title, format=",.2f"),
        alt.Tooltip("percentile:N", title="Percentile"),
        alt.Tooltip("value_text:N", title=metric),
        alt.Tooltip("verdict:N", title="SLO"),
        alt.Tooltip("marker:N", title="Drawn as"),
    ]


def _point_layers(alt: Any, base: Any, metric: str, x: Any, load_title: str) -> list[Any]:
    """The windows as points: judged ones filled (circle, cross), invalid ones hollow, the
    off-scale ones as triangles at the top with their labels."""
    y = _y(alt, metric)
    colour = alt.Color("name:N", sort=None, title="Configuration")
    tooltip = _tooltip(alt, metric, load_title)
    shape = alt.Shape("marker:N", scale=alt.Scale(domain=MARKERS, range=SHAPES), title="Window")
    judged = (
        base.transform_filter("datum.judged || datum.off_scale")
        .mark_point(filled=True, size=45)
        .encode(x=x, y=y, color=colour, shape=shape, tooltip=tooltip)
    )
    # Its own shape scale, so that its legend entry is drawn hollow too.
    hollow_shape = alt.Shape(
        "marker:N",
        scale=alt.Scale(domain=[INVALID_LEGEND], range=["circle"]),
        title="Not judged",
    )
    hollow = (
        base.transform_filter("!datum.judged && !datum.off_scale")
        .mark_point(filled=False, size=45, strokeWidth=1.5)
        .encode(x=x, y=y, color=colour, shape=hollow_shape, tooltip=tooltip)
    )
    off = (
        base.transform_filter("datum.off_scale")
        .mark_text(dy=-11, fontSize=11, fontWeight="bold")
        .encode(x=x, y=y, text="off_label:N")
    )
    return [judged, hollow, off]


def _panel(alt: Any, metric: str, load_title: str) -> Any:
    keep = alt.datum.metric == metric
    x = alt.X("load:Q", title=load_title, scale=alt.Scale(zero=False))
    dash = alt.StrokeDash(
        "percentile:N",
        scale=alt.Scale(domain=["p50", "p99"], range=[[4, 3], [1, 0]]),
        title="Percentile",
    )
    base = alt.Chart(named_chart(alt, "rows")).transform_filter(keep)
    # Only judged, on-scale windows make the line: an invalid window is shown apart, and an
    # off-scale one has no height to join.
    line = (
        base.transform_filter("datum.judged && !datum.off_scale")
        .mark_line(opacity=0.7)
        .encode(
            x=x,
            y=_y(alt, metric, "median(y):Q"),
            color=alt.Color("name:N", sort=None, title="Configuration"),
            strokeDash=dash,
        )
    )
    rule = (
        alt.Chart(named_chart(alt, "limits"))
        .transform_filter(keep)
        .mark_rule(strokeDash=[6, 3], color="#c62828")
        .encode(y="ms:Q", tooltip=[alt.Tooltip("label:N"), alt.Tooltip("ms:Q", format=",.0f")])
    )
    return (
        alt.layer(line, *_point_layers(alt, base, metric, x, load_title), rule)
        .resolve_scale(shape="independent")
        .properties(width="container", height=220)
    )


@cache
def _latency_template(kind: str) -> ChartSpec:
    import altair as alt

    title = LOAD_TITLES[kind]
    return finish_chart(alt.vconcat(*(_panel(alt, m, title) for m in METRICS)))


def latency_chart(kind: str, rows: Rows, axes: dict[str, LogAxis], limits: Rows) -> ChartSpec:
    """p50 and p99 TTFT and TPOT (ms, log scale) against load of kind ``kind`` (a key of
    :data:`LOAD_TITLES`), SLO limits as dashed rules. Rows and axes as :func:`latency_rows`
    makes them."""
    params = [p for m in METRICS for p in log_axis_params(m.lower(), axes[m])]
    datasets = {"rows": rows, "limits": limits}
    return {**_latency_template(kind), "params": params, "datasets": datasets}


def latency_charts(report: ReportV3, names: list[str]) -> list[dict[str, Any]]:
    """The page's latency charts (id, title, caption, spec): against load, one per load kind
    the record's windows use (none when no window has a latency), then the CDFs at the
    operating point when a configuration has them (:func:`cdf_rows`)."""
    by_kind = latency_rows(report, names)
    return [
        {
            "id": f"latency-{kind}",
            "title": f"Latency against load: {LOAD_TITLES[kind].lower()}",
            "caption": (
                "p50 (dashed) and p99 (solid) TTFT and TPOT of every window of the SLO "
                "search, probes and repeats, on a log scale; the lines join the median of "
                "the judged windows at each load, the red rules are the SLO limits on the "
                "p99. An invalid window (not judged) is a hollow circle, not joined by the "
                "line. A triangle at the top is off scale: an infinite latency (failed "
                "requests reached that percentile) or one more than "
                f"{SPAN_ABOVE_LIMIT:.0f} times its limit, with its true value beside it. "
                "Windows measured again because the client lagged are left out (see the "
                "whole-search table)."
            ),
            "spec": latency_chart(kind, rows, axes, limit_rows(report)),
        }
        for kind, (rows, axes) in sorted(by_kind.items())
    ] + _cdf_charts(report, names)


def _left_out(report: ReportV3, names: list[str]) -> str:
    """The caption's sentence on configurations left out of the CDFs ("" when none)."""
    why = [
        f"{name} is left out: {reason}."
        for name, cfg in zip(names, report.configs, strict=True)
        if cfg.latency_at_operating_point is not None
        and (reason := no_operating_point(cfg)) is not None
    ]
    return " ".join(why)


def _cdf_charts(report: ReportV3, names: list[str]) -> list[dict[str, Any]]:
    rows = cdf_rows(report, names)
    if not rows:
        return []
    left_out = _left_out(report, names)
    return [
        {
            "id": "latency-cdf",
            "title": "Latency distribution at the operating point",
            "caption": (
                "Share of requests (y) with a TTFT or TPOT up to the value on the x axis "
                "(ms, log scale), over every request of the repeats at the load each "
                "configuration was found to sustain, from the run's per-request file "
                "(quantiles p1 to p99, p99.9 and the maximum). Failed requests count as "
                "infinitely slow, so a line that stops below 100% has failures above it; "
                "the red rules are the SLO limits on the p99."
                + (f" {left_out}" if left_out else "")
            ),
            "spec": cdf_chart(rows, limit_rows(report)),
        }
    ]
