"""Vega-Lite chart specs for a report page, made with Altair.

Each chart's shape is built with Altair once per process (and validated against the
Vega-Lite schema there); a page's numbers go into the spec's top-level ``datasets``, so a
thousand pages cost a thousand dictionary copies, not a thousand Altair validations.
Record text (configuration labels) only ever travels as data values, which Vega draws as
SVG text: it is never parsed as markup.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from tokenwatt.analysis import fixed

ROLE_DOMAIN = ["baseline", "tuned"]
ROLE_RANGE = ["#7f8c8d", "#1f77b4"]
VERDICT_DOMAIN = ["pass", "fail", "no gate", "baseline"]
VERDICT_RANGE = ["#2e7d32", "#c62828", "#7f8c8d", "#455a64"]

ChartSpec = dict[str, Any]
Rows = list[dict[str, Any]]


def named_chart(alt: Any, name: str) -> Any:
    """A reference to a top-level named dataset (filled per page by :func:`chart_with_data`)."""
    return alt.Data(name=name)


def finish_chart(chart: Any) -> ChartSpec:
    spec: ChartSpec = chart.to_dict(validate=True)
    # vega-embed's theme (light or dark) must decide the colours of text and background.
    spec.pop("config", None)
    spec.pop("$schema", None)
    return spec


def chart_with_data(template: ChartSpec, **datasets: Rows) -> ChartSpec:
    # A shallow copy: templates are shared between pages and never modified.
    return {**template, "datasets": datasets}


@cache
def _bar_template(field: str, title: str, fmt: str, *, labelled: bool = False) -> ChartSpec:
    """A bar per configuration of ``field`` with its value beside the bar; ``labelled``:
    the value's text and position come from the rows' ``label`` and ``label_x`` (a row
    whose ``field`` is null draws no bar, as Vega-Lite leaves out invalid values, and its
    label sits at ``label_x``)."""
    import altair as alt

    base = alt.Chart(named_chart(alt, "rows"))
    y = alt.Y("name:N", sort=None, title=None)
    value = alt.Tooltip(f"{field}:Q", title=title, format=fmt)
    text = alt.Text(f"{field}:Q", format=fmt)
    if labelled:
        value, text = alt.Tooltip("label:N", title=title), alt.Text("label:N")
    bars = base.mark_bar().encode(
        x=alt.X(f"{field}:Q", title=title),
        y=y,
        color=alt.Color(
            "role:N",
            scale=alt.Scale(domain=ROLE_DOMAIN, range=ROLE_RANGE),
            legend=alt.Legend(title="Role"),
        ),
        tooltip=[alt.Tooltip("name:N", title="Configuration"), value],
    )
    labels = base.mark_text(align="left", dx=4).encode(
        x=alt.X("label_x:Q" if labelled else f"{field}:Q"), y=y, text=text
    )
    return finish_chart(alt.layer(bars, labels).properties(width="container", height=alt.Step(34)))


NOT_MEASURED_LABEL = "inconclusive: not measured"
"""What the goodput chart writes, with no bar, beside a configuration whose result is
inconclusive: a bar at 0 would read as "no goodput", which was never measured."""


def goodput_chart(rows: Rows) -> ChartSpec:
    """SLO goodput (tok/s) per configuration. Rows: ``name``, ``role``, ``goodput_tok_s``
    (None for a configuration whose result is inconclusive: no bar, and
    :data:`NOT_MEASURED_LABEL` where its value would be)."""
    data = [
        {
            **row,
            "label": NOT_MEASURED_LABEL
            if row["goodput_tok_s"] is None
            else fixed(row["goodput_tok_s"], 1, commas=True),
            "label_x": row["goodput_tok_s"] or 0.0,
        }
        for row in rows
    ]
    template = _bar_template("goodput_tok_s", "SLO goodput (tok/s)", ",.1f", labelled=True)
    return chart_with_data(template, rows=data)


def tokens_per_joule_chart(rows: Rows) -> ChartSpec:
    """Tokens per joule (tok/J) per configuration. Rows: ``name``, ``role``, ``tokens_per_j``."""
    return chart_with_data(
        _bar_template("tokens_per_j", "Tokens per joule (tok/J)", ".2f"), rows=rows
    )


@cache
def _accuracy_template() -> ChartSpec:
    import altair as alt

    y = alt.Y("name:N", sort=None, title=None)
    bars = (
        alt.Chart(named_chart(alt, "rows"))
        .mark_bar()
        .encode(
            x=alt.X("score:Q", title="Accuracy (%)", scale=alt.Scale(domain=[0, 100])),
            y=y,
            color=alt.Color(
                "verdict:N",
                scale=alt.Scale(domain=VERDICT_DOMAIN, range=VERDICT_RANGE),
                legend=alt.Legend(title="Gate"),
            ),
            tooltip=[
                alt.Tooltip("name:N", title="Configuration"),
                alt.Tooltip("score:Q", title="Score (%)", format=".1f"),
                alt.Tooltip("verdict:N", title="Gate"),
            ],
        )
    )
    rule = (
        alt.Chart(named_chart(alt, "gate"))
        .mark_rule(strokeDash=[6, 3], strokeWidth=2, color="#c62828")
        .encode(
            x="gate_pts:Q",
            tooltip=[alt.Tooltip("gate_pts:Q", title="Gate line (%)", format=".1f")],
        )
    )
    # Value labels just past the bar's end, like the goodput and tokens/J charts.
    labels = (
        alt.Chart(named_chart(alt, "rows"))
        .mark_text(align="left", dx=4)
        .encode(x="score:Q", y=y, text=alt.Text("score:Q", format=".1f"))
    )
    return finish_chart(
        alt.layer(bars, rule, labels).properties(width="container", height=alt.Step(34))
    )


def accuracy_chart(rows: Rows, gate_pts: float | None) -> ChartSpec:
    """Accuracy (%) per configuration against the gate line (baseline score − threshold).

    Rows: ``name``, ``score``, ``verdict`` (pass, fail, no gate, baseline).
    """
    gate = [] if gate_pts is None else [{"gate_pts": gate_pts}]
    return chart_with_data(_accuracy_template(), rows=rows, gate=gate)


@cache
def _power_template() -> ChartSpec:
    import altair as alt

    shade = (
        alt.Chart()
        .mark_rect(opacity=0.3)
        .encode(
            x=alt.X("t_s:Q", title="Time in window (s)"),
            x2="t_end_s:Q",
            color=alt.Color("throttle:N", title="Throttle reasons"),
            tooltip=[alt.Tooltip("throttle:N", title="Throttle reasons")],
        )
        .transform_filter("datum.throttle != ''")
    )
    line = (
        alt.Chart()
        .mark_line(color="#1f77b4")
        .encode(
            x=alt.X("t_s:Q"),
            y=alt.Y("power_w:Q", title="Board power (W)"),
            tooltip=[
                alt.Tooltip("t_s:Q", title="t (s)", format=".0f"),
                alt.Tooltip("power_w:Q", title="Power (W)", format=".0f"),
            ],
        )
    )
    chart = alt.layer(shade, line, data=named_chart(alt, "rows")).properties(width=560, height=140)
    return finish_chart(chart.facet(row=alt.Row("name:N", sort=None, title=None)))


def power_chart(rows: Rows) -> ChartSpec:
    """Board power (W) over the window per configuration, throttle-reason samples shaded.

    Rows: ``name``, ``t_s``, ``t_end_s``, ``power_w``, ``throttle`` (reasons joined, or "").
    """
    return chart_with_data(_power_template(), rows=rows)


@cache
def _mbu_template() -> ChartSpec:
    import altair as alt

    bars = (
        alt.Chart(named_chart(alt, "rows"))
        .mark_bar()
        .encode(
            x=alt.X("gbs:Q", stack="zero", title="Derived memory traffic (GB/s)"),
            y=alt.Y("name:N", sort=None, title=None),
            color=alt.Color("part:N", title="Bytes read", sort=["weights", "KV cache"]),
            order=alt.Order("order:Q"),
            tooltip=[
                alt.Tooltip("name:N", title="Configuration"),
                alt.Tooltip("part:N", title="Part"),
                alt.Tooltip("gbs:Q", title="GB/s", format=",.0f"),
            ],
        )
    )
    rated = (
        alt.Chart(named_chart(alt, "rated"))
        .mark_rule(strokeDash=[6, 3], color="#c62828")
        .encode(x="gbs:Q", tooltip=[alt.Tooltip("gbs:Q", title="Rated (GB/s)", format=",.0f")])
    )
    return finish_chart(alt.layer(bars, rated).properties(width="container", height=alt.Step(34)))


def mbu_chart(rows: Rows, rated_gbs: float | None) -> ChartSpec:
    """MBU breakdown: weight and KV-cache traffic (GB/s) per configuration, rated line.

    Rows: ``name``, ``part`` (weights, KV cache), ``gbs``, ``order``.
    """
    rated = [] if rated_gbs is None else [{"gbs": rated_gbs}]
    return chart_with_data(_mbu_template(), rows=rows, rated=rated)
