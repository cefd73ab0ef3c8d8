"""The frontier page: every configuration of every note as a point, goodput per card (or
tokens per joule, or cost per million tokens) against per-user interactivity, with the
Pareto frontier per model and hardware (:mod:`tokenwatt.analysis.report.archive`).

The chart filters by model, hardware, engine, engine version, precision and note with
Vega-Lite parameters bound to drop-downs, and switches view with a radio: all in the
browser, no server. Gate failures and results not measured are drawn (hollow) but never
joined into a frontier. The tables below the chart list each frontier, for readers
without JavaScript.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from markupsafe import Markup

from tokenwatt.site.charts.charts import ChartSpec, Rows, finish_chart, named_chart
from tokenwatt.site.format.escape import json_for_script
from tokenwatt.site.format.fmt import num

VIEWS: dict[str, tuple[str, str, str, str]] = {
    # view: (value field, low field, high field, axis title)
    "goodput": (
        "goodput_per_card",
        "goodput_per_card_low",
        "goodput_per_card_high",
        "SLO goodput per card (tok/s)",
    ),
    "tokens_per_joule": (
        "tokens_per_joule",
        "tokens_per_joule_low",
        "tokens_per_joule_high",
        "Tokens per joule (tok/J)",
    ),
    "cost": ("usd_per_million_tokens", "", "", "US$ per million output tokens"),
}
"""The chart's views, as the radio names them."""

FILTERS = ("model", "hardware", "engine", "engine_version", "precision", "note")
"""The fields the drop-downs filter by, in the order shown."""

ALL = "all"


def _pick(index: int) -> str:
    """The Vega expression for field ``index`` (0 value, 1 low, 2 high) of the view."""
    clauses = []
    for view, fields in VIEWS.items():
        name = fields[index]
        clauses.append(f"view == '{view}' ? {f'datum.{name}' if name else 'null'}")
    return " : ".join(clauses) + " : null"


@cache
def _template(options: tuple[tuple[str, ...], ...]) -> ChartSpec:
    import altair as alt

    params = [
        alt.param(
            name="view",
            value="goodput",
            bind=alt.binding_radio(options=list(VIEWS), name="View: "),
        )
    ]
    for name, values in zip(FILTERS, options, strict=True):
        params.append(
            alt.param(
                name=f"f_{name}",
                value=ALL,
                bind=alt.binding_select(options=[ALL, *values], name=f"{name.replace('_', ' ')}: "),
            )
        )
    keep = " && ".join(f"(f_{n} == '{ALL}' || datum.{n} == f_{n})" for n in FILTERS)
    base = (
        alt.Chart(named_chart(alt, "rows"))
        .transform_filter(keep)
        .transform_calculate(y=_pick(0), y_low=_pick(1), y_high=_pick(2))
        .transform_filter("isValid(datum.y) && isValid(datum.interactivity_tok_s_user)")
    )
    x = alt.X("interactivity_tok_s_user:Q", title="Interactivity (tok/s per user, 1000 / p99 TPOT)")
    y = alt.Y("y:Q", title="goodput per card, tok/J or US$ per Mtok (the view)")
    colour = alt.Color("group:N", title="Model · hardware")
    tooltip = [
        alt.Tooltip("note:N", title="Note"),
        alt.Tooltip("config:N", title="Configuration"),
        alt.Tooltip("engine:N", title="Engine"),
        alt.Tooltip("engine_version:N", title="Version"),
        alt.Tooltip("precision:N", title="Precision"),
        alt.Tooltip("y:Q", title="Value", format=",.2f"),
        alt.Tooltip("interactivity_tok_s_user:Q", title="tok/s per user", format=".1f"),
        alt.Tooltip("standing:N", title="Standing"),
    ]
    points = base.mark_point(size=70, filled=True).encode(
        x=x,
        y=y,
        color=colour,
        shape=alt.Shape("standing:N", title="Standing"),
        opacity=alt.condition("datum.eligible", alt.value(1.0), alt.value(0.45)),
        tooltip=tooltip,
        href="href:N",
    )
    y_bars = (
        base.transform_filter("isValid(datum.y_low)")
        .mark_rule()
        .encode(x=x, y="y_low:Q", y2="y_high:Q", color=colour)
    )
    x_bars = (
        base.transform_filter("isValid(datum.interactivity_low)")
        .mark_rule()
        .encode(x="interactivity_low:Q", x2="interactivity_high:Q", y=y, color=colour)
    )
    line = (
        base.transform_filter(
            "(view == 'goodput' && datum.frontier_goodput) || "
            "(view == 'tokens_per_joule' && datum.frontier_tokens_per_joule) || "
            "(view == 'cost' && datum.frontier_cost)"
        )
        .mark_line(strokeDash=[4, 2])
        .encode(x=x, y=y, color=colour, order="interactivity_tok_s_user:Q", detail="group:N")
    )
    chart = alt.layer(line, y_bars, x_bars, points).add_params(*params)
    return finish_chart(chart.properties(width="container", height=420))


def _standing(row: dict[str, Any]) -> str:
    if row["result_status"] != "measured":
        return str(row["result_status"]).replace("_", " ")
    if row["gate"] == "fail":
        return "gate failed"
    return "measured"


def chart_rows(rows: list[dict[str, Any]]) -> Rows:
    """The chart's data: the archive rows with what the chart adds (group, standing,
    eligible, a link to the note)."""
    out = []
    for row in rows:
        standing = _standing(row)
        out.append(
            {
                **row,
                "group": f"{row['model']} · {row['hardware']}",
                "standing": standing,
                "eligible": standing == "measured",
                "href": f"../reports/{row['note']}/",
            }
        )
    return out


def frontier_chart(rows: list[dict[str, Any]]) -> ChartSpec:
    """The Vega-Lite spec of the frontier chart over ``rows`` (:func:`chart_rows`)."""
    options = tuple(
        tuple(sorted({str(r[name]) for r in rows if r.get(name) is not None})) for name in FILTERS
    )
    return {**_template(options), "datasets": {"rows": chart_rows(rows)}}


def frontier_tables(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One table per model and hardware: its frontier points (goodput view), most
    interactive first, with intervals and links; plus how many points it left off."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["model"], row["hardware"]), []).append(row)
    out = []
    for (model, hardware), members in sorted(groups.items()):
        front = [r for r in members if r["frontier_goodput"]]
        front.sort(key=lambda r: -(r["interactivity_tok_s_user"] or 0.0))
        out.append(
            {
                "model": model,
                "hardware": hardware,
                "points": len(members),
                "excluded": _excluded(members),
                "updated": any(r.get("updated") for r in front),
                "rows": [
                    {
                        "note": r["note"],
                        "title": r["title"],
                        "updated": bool(r.get("updated")),
                        "demo": bool(r.get("demo")),
                        "config": r["config"],
                        "engine": " ".join(x for x in (r["engine"], r["engine_version"]) if x),
                        "precision": r["precision"],
                        "interactivity": num(r["interactivity_tok_s_user"]),
                        "goodput": num(r["goodput_per_card"]),
                        "goodput_ci": _span(r["goodput_per_card_low"], r["goodput_per_card_high"]),
                        "tpj": num(r["tokens_per_joule"], 2),
                        "cost": num(r["usd_per_million_tokens"], 2),
                    }
                    for r in front
                ],
            }
        )
    return out


def _excluded(members: list[dict[str, Any]]) -> str:
    """How many configurations the frontier left off, and why, e.g. "1 (gate failed)"."""
    counts: dict[str, int] = {}
    for r in members:
        standing = _standing(r)
        if standing != "measured":
            counts[standing] = counts.get(standing, 0) + 1
    if not counts:
        return ""
    return ", ".join(f"{n} ({why})" for why, n in sorted(counts.items()))


def _span(low: float | None, high: float | None) -> Markup:
    if low is None or high is None:
        return Markup("no interval")
    return num(low) + Markup(" – ") + num(high)


def frontier_context(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What ``frontier.md.j2`` needs: the chart's JSON and the tables."""
    return {
        "chart_json": json_for_script(frontier_chart(rows)) if rows else None,
        "tables": frontier_tables(rows),
        "points": len(rows),
        "notes": len({r["note"] for r in rows}),
    }
