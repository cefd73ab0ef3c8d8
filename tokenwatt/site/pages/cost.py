"""The cloud cost on a report page and on the index (runs of ``tokenwatt cloud session``).

Record text (instance type, session id) goes through :func:`~tokenwatt.site.format.escape.md_text`;
numbers through :mod:`~tokenwatt.site.format.fmt`. The session totals come from
:func:`tokenwatt.analysis.session_totals`.
"""

from __future__ import annotations

from typing import Any

from tokenwatt.analysis import session_totals
from tokenwatt.records import ReportV3
from tokenwatt.site.format.escape import md_text, trusted
from tokenwatt.site.format.fmt import num, pct


def cloud_rows(report: ReportV3, names: list[str]) -> list[dict[str, Any]]:
    """One row per configuration with a cloud cost: instance, $/h, run length, share, cost."""
    rows = []
    for name, cfg in zip(names, report.configs, strict=True):
        c = cfg.cost
        if c is None:
            continue
        rows.append(
            {
                "name": md_text(name),
                "instance": md_text(c.provider) + trusted(" ") + md_text(c.instance_type),
                "price": num(c.price_usd_per_hour, 2),
                "minutes": num(c.run_s / 60.0, 1),
                "share": pct(100.0 * c.share, 0),
                "cost": num(c.cost_usd, 2),
            }
        )
    return rows


def cloud_totals(report: ReportV3) -> list[dict[str, Any]]:
    """Each distinct cloud session of the report with its whole cost."""
    return [
        {
            "id": md_text(t.session_id),
            "instance": md_text(t.instance_type),
            "cost": num(t.cost_usd, 2),
            "confirmed": t.confirmed,
        }
        for t in session_totals(c.cost for c in report.configs)
    ]


def cloud_brief(report: ReportV3) -> str:
    """The index's few words: ``cloud $4.48`` (summed over the report's sessions), with
    ``(termination not confirmed)`` when a session's was not; empty without a cloud cost."""
    totals = session_totals(c.cost for c in report.configs)
    if not totals:
        return ""
    text = f"cloud ${sum(t.cost_usd for t in totals):.2f}"
    if not all(t.confirmed for t in totals):
        text += " (termination not confirmed)"
    return text
