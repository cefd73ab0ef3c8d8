"""A fixed-load run's page lists only the settings the run used, as ``collect`` printed them."""

from __future__ import annotations

from tests.runs_factory import make_run, seed_spec
from tokenwatt.analysis import summarise
from tokenwatt.records import ModeOverride, ReportV3
from tokenwatt.records.run.run_input import RunInput
from tokenwatt.site.pages.setup import mode_rows, setup_sections

OVERRIDES = [
    ModeOverride(field="accuracy.limit", spec_value=None, effective_value=50),
    ModeOverride(field="power.idle_s", spec_value=None, effective_value=0),
]


def _report(*, fixed: bool) -> ReportV3:
    sweep = {"fixed": True, "rates": [2.0, 4.0, 20.0]} if fixed else {}
    run = make_run(spec=seed_spec(sweep=sweep), score_pct=None)
    run = run.model_copy(update={"mode_overrides": OVERRIDES, "accuracy": None})
    return summarise([RunInput("runs/a.json", "a" * 64, run)], title="fixed")


def _rows(report: ReportV3, title: str) -> dict[str, object]:
    section = next(s for s in setup_sections(report) if s["title"] == title)
    return dict(section["rows"])


def test_a_fixed_load_page_shows_no_search_settings() -> None:
    report = _report(fixed=True)
    rows = _rows(report, "Measurement")
    assert list(rows) == [
        "Warm-up",
        "Measurement window",
        "Request timeout",
        "Mode",
        "Spec values the mode replaced",
    ]
    # accuracy was not run: its limit is not among what the mode replaced (collect's list)
    assert rows["Spec values the mode replaced"] == "power.idle_s not set → 0"
    assert "Repeats per configuration" not in _rows(report, "SLO")


def test_a_search_page_keeps_them() -> None:
    report = _report(fixed=False)
    rows = _rows(report, "Measurement and SLO search")
    assert [
        k
        for k in rows
        if k in ("Search window", "Repeats", "Start rate / growth", "Bisection steps")
    ] == ["Search window", "Repeats", "Start rate / growth", "Bisection steps"]
    assert _rows(report, "SLO")["Repeats per configuration"] == "2"
    # the accuracy section is unused here too (no result), so only power.idle_s remains
    assert mode_rows(report)[-1] == ("Spec values the mode replaced", "power.idle_s not set → 0")


def test_a_count_nobody_stated_is_a_dash() -> None:
    run = make_run(spec=seed_spec(hardware={"adapter": "none", "gpus": None}), score_pct=None)
    run = run.model_copy(update={"accuracy": None})
    report = summarise([RunInput("runs/a.json", "a" * 64, run)], title="no hardware")
    assert _rows(report, "Hardware")["Count"] == "—"
    stated = _report(fixed=False)  # the seed states its GPUs
    assert _rows(stated, "Hardware")["Count"] != "—"
