"""Latency against load on a report page: p50 and p99 TTFT and TPOT per window.

One point per window of each configuration's SLO search (``configs[].search``: the probes
and the repeats), in absolute units (ms) against the window's load, one line per
configuration and percentile through the median at each load, and the SLO limits drawn as
rules (the limits bound the p99; the p50 lines show how far below them the typical request
is). Windows whose verdict was not used (measured again because the client lagged) or
that were invalid are left out, and so is a latency without a finite value (∞: failed
requests reached that percentile; the whole-search table shows them).

Latency distributions (CDFs) at the found operating point come from the record's
``latency_at_operating_point`` (quantiles over the requests of the repeats at the found
load, kept when the run's per-request file was there): one line per configuration, the SLO
limits as rules. A record without them has no CDF chart.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from tokenwatt.records import ReportV3, SearchWindowV3
from tokenwatt.site.charts import Rows, Spec, _finish, _named, _with_data
from tokenwatt.site.windows import finite_ms

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


def latency_rows(report: ReportV3, names: list[str]) -> dict[str, Rows]:
    """Chart rows by load kind: per used, valid window and finite latency, one row with
    ``name``, ``metric`` (TTFT, TPOT), ``percentile`` (p50, p99), ``load``, ``ms``,
    ``step`` (probe, repeat) and ``verdict`` (meets SLO, misses SLO)."""
    out: dict[str, Rows] = {}
    for name, cfg in zip(names, report.configs, strict=True):
        for w in cfg.search:
            if w.remeasured or not w.valid:
                continue
            kind, load = window_load(w)
            values = {
                ("TTFT", "p50"): w.ttft_p50_ms,
                ("TTFT", "p99"): w.ttft_p99_ms,
                ("TPOT", "p50"): w.tpot_p50_ms,
                ("TPOT", "p99"): w.tpot_p99_ms,
            }
            for (metric, percentile), value in values.items():
                ms = finite_ms(value)
                if ms is None or ms <= 0:
                    continue  # a log axis has no place for 0 ms; ∞ is in the table
                out.setdefault(kind, []).append(
                    {
                        "name": name,
                        "metric": metric,
                        "percentile": percentile,
                        "load": round(load, 6),
                        "ms": round(ms, 3),
                        "step": w.step,
                        "verdict": "meets SLO" if w.slo_pass else "misses SLO",
                    }
                )
    return out


def limit_rows(report: ReportV3) -> Rows:
    """The SLO limits (ms) to draw as rules, one per metric."""
    return [
        {"metric": "TTFT", "ms": report.slo.ttft_p99_ms, "label": "p99 TTFT limit"},
        {"metric": "TPOT", "ms": report.slo.tpot_p99_ms, "label": "p99 TPOT limit"},
    ]


def cdf_rows(report: ReportV3, names: list[str]) -> Rows:
    """CDF rows at each configuration's found operating point: per configuration with a
    ``latency_at_operating_point``, metric and finite quantile above 0 ms, one row with
    ``name``, ``metric`` (TTFT, TPOT), ``share`` (the level as a fraction, 0.01 … 1) and
    ``ms``. Infinite quantiles (failed requests) are left out, so such a line stops short of
    1; none when no configuration has a distribution."""
    rows: Rows = []
    for name, cfg in zip(names, report.configs, strict=True):
        dist = cfg.latency_at_operating_point
        if dist is None:
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
        alt.Chart(_named(alt, "rows"))
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
        alt.Chart(_named(alt, "limits"))
        .transform_filter(keep)
        .mark_rule(strokeDash=[6, 3], color="#c62828")
        .encode(x="ms:Q", tooltip=[alt.Tooltip("label:N"), alt.Tooltip("ms:Q", format=",.0f")])
    )
    return alt.layer(line, rule).properties(width="container", height=220)


@cache
def _cdf_template() -> Spec:
    import altair as alt

    return _finish(alt.vconcat(*(_cdf_panel(alt, m) for m in METRICS)))


def cdf_chart(rows: Rows, limits: Rows) -> Spec:
    """TTFT and TPOT CDFs (share of requests against ms, log scale), one line per
    configuration, the SLO limits as dashed rules. Rows as :func:`cdf_rows` makes."""
    return _with_data(_cdf_template(), rows=rows, limits=limits)


def _panel(alt: Any, metric: str, load_title: str) -> Any:
    keep = alt.datum.metric == metric
    x = alt.X("load:Q", title=load_title, scale=alt.Scale(zero=False))
    y = alt.Y("ms:Q", title=f"{metric} (ms)", scale=alt.Scale(type="log"))
    colour = alt.Color("name:N", sort=None, title="Configuration")
    dash = alt.StrokeDash(
        "percentile:N",
        scale=alt.Scale(domain=["p50", "p99"], range=[[4, 3], [1, 0]]),
        title="Percentile",
    )
    base = alt.Chart(_named(alt, "rows")).transform_filter(keep)
    line = base.mark_line(opacity=0.7).encode(
        x=x,
        y=alt.Y("median(ms):Q", title=f"{metric} (ms)", scale=alt.Scale(type="log")),
        color=colour,
        strokeDash=dash,
    )
    points = base.mark_point(filled=True, size=45).encode(
        x=x,
        y=y,
        color=colour,
        shape=alt.Shape(
            "verdict:N",
            scale=alt.Scale(domain=["meets SLO", "misses SLO"], range=["circle", "cross"]),
            title="Window",
        ),
        tooltip=[
            alt.Tooltip("name:N", title="Configuration"),
            alt.Tooltip("step:N", title="Window"),
            alt.Tooltip("load:Q", title=load_title, format=",.2f"),
            alt.Tooltip("percentile:N", title="Percentile"),
            alt.Tooltip("ms:Q", title=f"{metric} (ms)", format=",.1f"),
            alt.Tooltip("verdict:N", title="SLO"),
        ],
    )
    rule = (
        alt.Chart(_named(alt, "limits"))
        .transform_filter(keep)
        .mark_rule(strokeDash=[6, 3], color="#c62828")
        .encode(y="ms:Q", tooltip=[alt.Tooltip("label:N"), alt.Tooltip("ms:Q", format=",.0f")])
    )
    return alt.layer(line, points, rule).properties(width="container", height=220)


@cache
def _latency_template(kind: str) -> Spec:
    import altair as alt

    title = LOAD_TITLES[kind]
    return _finish(alt.vconcat(*(_panel(alt, m, title) for m in METRICS)))


def latency_chart(kind: str, rows: Rows, limits: Rows) -> Spec:
    """p50 and p99 TTFT and TPOT (ms, log scale) against load of kind ``kind`` (a key of
    :data:`LOAD_TITLES`), SLO limits as dashed rules. Rows as :func:`latency_rows` makes."""
    return _with_data(_latency_template(kind), rows=rows, limits=limits)


def latency_charts(report: ReportV3, names: list[str]) -> list[dict[str, Any]]:
    """The page's latency charts (id, title, caption, spec): against load, one per load kind
    the record's windows use (none when no window has a finite latency), then the CDFs at
    the operating point when a configuration has them (:func:`cdf_rows`)."""
    by_kind = latency_rows(report, names)
    return [
        {
            "id": f"latency-{kind}",
            "title": f"Latency against load: {LOAD_TITLES[kind].lower()}",
            "caption": (
                "p50 (dashed) and p99 (solid) TTFT and TPOT of every window of the SLO "
                "search, probes and repeats, on a log scale; the lines join the median of "
                "the windows at each load, the red rules are the SLO limits on the p99. "
                "Windows measured again or invalid, and infinite p99s, are left out (see "
                "the whole-search table)."
            ),
            "spec": latency_chart(kind, rows, limit_rows(report)),
        }
        for kind, rows in sorted(by_kind.items())
    ] + _cdf_charts(report, names)


def _cdf_charts(report: ReportV3, names: list[str]) -> list[dict[str, Any]]:
    rows = cdf_rows(report, names)
    if not rows:
        return []
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
            ),
            "spec": cdf_chart(rows, limit_rows(report)),
        }
    ]
