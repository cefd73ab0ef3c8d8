"""A note's replications: the dated "Replications" section and the trend of each headline
figure across the published measurement and every replication of a configuration.

Verdicts are recomputed from the report's configuration and the replication's ``measured``
one (:func:`tokenwatt.analysis.replication_checks`), never read from the stored figures.
"""

from __future__ import annotations

import datetime as dt
from functools import cache
from typing import Any

from markupsafe import Markup

from tokenwatt import analysis
from tokenwatt.records import ConfigV3, FigureCheck, ReplicationV1, ReportV3
from tokenwatt.site.charts.charts import ChartSpec, Rows, finish_chart, named_chart
from tokenwatt.site.format.escape import json_for_script
from tokenwatt.site.format.fmt import num


def _span(low: float | None, high: float | None) -> Markup:
    if low is None:
        return Markup("")
    top = num(high) if high is not None else Markup("∞")
    return Markup(" [") + num(low) + Markup(", ") + top + Markup("]")


def _figure_rows(checks: list[FigureCheck]) -> list[dict[str, Any]]:
    return [
        {
            "figure": analysis.FIGURE_NAMES[c.figure],
            "old": num(c.old) + _span(c.old_low, c.old_high),
            "new": num(c.new) + _span(c.new_low, c.new_high),
            "verdict": c.verdict,
            "reason": c.reason or "",
        }
        for c in checks
    ]


def judged(report: ReportV3, rep: ReplicationV1) -> tuple[ConfigV3, list[FigureCheck], str] | None:
    """The report's configuration the replication measured again, the figures' checks and
    the verdict, recomputed; None when the report has no configuration of that label."""
    old = next((c for c in report.configs if c.label == rep.config), None)
    if old is None:
        return None
    checks = analysis.replication_checks(old, rep.measured)
    return old, checks, analysis.replication_verdict(checks)


def _when(rep: ReplicationV1) -> dt.datetime:
    """When it was measured, a time without an offset read as UTC (so that both kinds
    order together)."""
    at = rep.measured_at
    return at if at.utcoffset() is not None else at.replace(tzinfo=dt.UTC)


def replication_sections(report: ReportV3, reps: list[ReplicationV1]) -> list[dict[str, Any]]:
    """The Replications section's entries, newest first."""
    out = []
    for rep in sorted(reps, key=_when, reverse=True):
        result = judged(report, rep)
        if result is None:
            continue
        old, checks, verdict = result
        out.append(
            {
                "date": rep.measured_at.strftime("%Y-%m-%d %H:%M UTC")
                if rep.measured_at.utcoffset() is not None
                else rep.measured_at.strftime("%Y-%m-%d %H:%M"),
                "config": rep.config,
                "verdict": verdict,
                "disagreeing": ", ".join(analysis.disagreeing_names(checks)),
                "engine_old": old.settings.get("engine_version") or report.software.engine_version,
                "engine_new": rep.measured.settings.get("engine_version"),
                "changed": ", ".join(
                    analysis.SETTING_LABELS.get(name, name)
                    for name in analysis.changed_settings(old.settings, rep.measured.settings)
                ),
                "run_file": rep.run_file,
                "command": rep.command,
                "rows": _figure_rows(checks),
            }
        )
    return out


def latest_verdict(report: ReportV3, reps: list[ReplicationV1]) -> str:
    """The latest replication's verdict (agrees, disagrees, inconclusive); empty without."""
    for rep in sorted(reps, key=_when, reverse=True):
        result = judged(report, rep)
        if result is not None:
            return result[2]
    return ""


TREND_MARKER = Markup("<!-- tokenwatt: trends -->")  # site.build.TREND_MARKER_TEXT
"""Where the trend chart goes on a note's page: the build replaces it (or removes it) once
every note is loaded, since the trend also draws other notes of the same spec fingerprint
(:func:`trend_section`)."""

_ROW_FIGURES: dict[str, tuple[str, str | None, str | None]] = {
    # archive row field of each figure: (value, low, high)
    "goodput_tok_s": ("goodput_tok_s", "goodput_low", "goodput_high"),
    "ttft_p99_ms": ("ttft_p99_ms", None, None),
    "tpot_p99_ms": ("tpot_p99_ms", None, None),
    "tokens_per_joule": ("tokens_per_joule", "tokens_per_joule_low", "tokens_per_joule_high"),
    "accuracy": ("accuracy_score", None, None),
}


def note_points(row: dict[str, Any]) -> Rows:
    """The trend points another note's configuration gives (an archive row): each figure
    at its publication date, with its engine version."""
    out: Rows = []
    for figure, (value, low, high) in _ROW_FIGURES.items():
        if row.get(value) is None:
            continue
        out.append(
            {
                "config": row["config"],
                "figure": analysis.FIGURE_NAMES[figure],  # type: ignore[index]
                "date": row["published"],
                "value": row[value],
                "low": row.get(low) if low else None,
                "high": row.get(high) if high else None,
                "version": row.get("engine_version") or "not stated",
                "what": f"note {row['note']}",
            }
        )
    return out


TREND_NOTES = 20
"""Other notes of one configuration a trend draws at most: the most recently published."""

FamilyRows = dict[tuple[str, str], list[dict[str, Any]]]
"""Archive rows by (spec fingerprint, configuration label), newest first."""


def families(archive: list[dict[str, Any]]) -> FamilyRows:
    """The archive's rows grouped by spec fingerprint and configuration label, newest
    first: the same configuration of the same measurement, in every note that has it."""
    out: FamilyRows = {}
    for row in archive:
        if row.get("fingerprint"):
            out.setdefault((row["fingerprint"], row["config"]), []).append(row)
    for rows in out.values():
        rows.sort(key=lambda r: (r["published"], r["note"]), reverse=True)
    return out


def trend_section(note: str, own_rows: list[dict[str, Any]], trend: Rows, fams: FamilyRows) -> str:
    """The trend chart's Markdown for note ``note``: its replications' points (``trend``)
    and, for each of its configurations (``own_rows``), the same configuration in other
    notes of the same spec fingerprint (:func:`families`; the :data:`TREND_NOTES` most
    recent); its own published point when any of those exist. Empty when there is nothing
    to draw beyond the note itself."""
    others: Rows = []
    left_out = 0
    demo = any(r.get("demo") or r.get("simulated") for r in own_rows)
    for row in own_rows:
        family = [
            r
            for r in fams.get((row.get("fingerprint") or "", row["config"]), [])
            if r["note"] != note
        ]
        # A retracted note's figures are not to be relied on; a demo's (simulated, smoke)
        # are no measurement, and only a demo note may draw them.
        family = [
            r
            for r in family
            if r.get("status") != "retracted"
            and (demo or not (r.get("simulated") or r.get("demo")))
        ]
        left_out += max(len(family) - TREND_NOTES, 0)
        others += [p for r in family[:TREND_NOTES] for p in note_points(r)]
    if not trend and not others:
        return ""
    rows = list(trend)
    if not trend:  # the note's own point, which the replications' rows otherwise hold
        configs = {p["config"] for p in others}
        rows = [p for r in own_rows if r["config"] in configs for p in note_points(r)]
        for p in rows:
            p["what"] = "published"
    rows = sorted([*rows, *others], key=lambda r: (r["config"], r["figure"], r["date"]))
    spec = trend_chart(rows)
    more = (
        f" The {left_out} older note(s) of the same configuration are left out; the frontier "
        "page and `tokenwatt export` have them all."
        if left_out
        else ""
    )
    return (
        "### Headline figures over time\n\n"
        "The published measurement, every replication and the other notes of the same spec "
        "fingerprint, each point labelled with its engine version; bars are 95% intervals. "
        "A replication whose result was not measured (no load met the SLO, or inconclusive) "
        f"has no point: its entry above says so.{more}\n\n"
        '<div class="tw-chart" id="tw-chart-trends" data-tw-spec="tw-spec-trends"></div>\n'
        f'<script type="application/json" id="tw-spec-trends">{json_for_script(spec)}</script>\n'
    )


def trend_rows(report: ReportV3, reps: list[ReplicationV1]) -> Rows:
    """One row per configuration, figure and measurement (the published one, then each
    replication by date): value, interval ends, engine version and date."""
    rows: Rows = []
    for rep in reps:
        result = judged(report, rep)
        if result is None:
            continue
        old, checks, _ = result
        old_version = old.settings.get("engine_version") or report.software.engine_version
        new_version = rep.measured.settings.get("engine_version")
        for c in checks:
            for when, value, low, high, version, what in (
                (
                    report.published.isoformat(),
                    c.old,
                    c.old_low,
                    c.old_high,
                    old_version,
                    "published",
                ),
                (
                    rep.measured_at.date().isoformat(),
                    c.new,
                    c.new_low,
                    c.new_high,
                    new_version,
                    "replication",
                ),
            ):
                if value is None:
                    continue
                rows.append(
                    {
                        "config": rep.config,
                        "figure": analysis.FIGURE_NAMES[c.figure],
                        "date": when,
                        "value": value,
                        "low": low,
                        "high": high,
                        "version": version or "not stated",
                        "what": what,
                    }
                )
    unique = {(r["config"], r["figure"], r["date"], r["what"]): r for r in rows}
    return sorted(unique.values(), key=lambda r: (r["config"], r["figure"], r["date"]))


@cache
def _trend_template() -> ChartSpec:
    import altair as alt

    base = alt.Chart()
    x = alt.X("date:T", title="Measured")
    y = alt.Y("value:Q", title=None, scale=alt.Scale(zero=False))
    colour = alt.Color("config:N", title="Configuration")
    line = base.mark_line(point=True).encode(
        x=x,
        y=y,
        color=colour,
        tooltip=[
            alt.Tooltip("config:N", title="Configuration"),
            alt.Tooltip("figure:N", title="Figure"),
            alt.Tooltip("date:T", title="Measured"),
            alt.Tooltip("value:Q", title="Value", format=",.2f"),
            alt.Tooltip("version:N", title="Engine version"),
            alt.Tooltip("what:N", title="Measurement"),
        ],
    )
    bars = (
        base.transform_filter("isValid(datum.low) && isValid(datum.high)")
        .mark_rule()
        .encode(x=x, y="low:Q", y2="high:Q", color=colour)
    )
    labels = base.mark_text(dy=-10, fontSize=10).encode(x=x, y=y, text="version:N", color=colour)
    chart = (
        alt.layer(line, bars, labels, data=named_chart(alt, "rows"))
        .properties(width=560, height=140)
        .facet(row=alt.Row("figure:N", title=None))
        .resolve_scale(y="independent")
    )
    return finish_chart(chart)


def trend_chart(rows: Rows) -> ChartSpec:
    """Each headline figure over time, one panel per figure, the engine version on each
    point, with 95% intervals where known."""
    return {**_trend_template(), "datasets": {"rows": rows}}
