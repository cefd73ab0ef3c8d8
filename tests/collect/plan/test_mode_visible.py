"""Modes are visible: what the mode replaced in the spec is printed at the start, kept in the
run record (``mode_overrides``), carried to the report's configurations and shown on the page.

The seed spec (45 s warm-ups, 60 s probes, 120 s windows, two repeats, 50 accuracy items,
idle power not set) under each preset of :mod:`tokenwatt.collect.plan.modes`.
"""

from __future__ import annotations

from pathlib import Path

from tests.runs_factory import make_run, tuned_run
from tokenwatt.analysis.report.summarise import summarise
from tokenwatt.collect.plan.modes import apply_mode, mode_lines, mode_overrides
from tokenwatt.collect.plan.runfile import load_spec_before_mode
from tokenwatt.records import ReportV3, RunInput, RunRecord
from tokenwatt.records.spec.mode import ModeOverride
from tokenwatt.site.pages.setup import mode_rows, setup_sections

REPO = Path(__file__).resolve().parents[3]
SEED_SPEC = REPO / "specs" / "lambda-qwen3-30b-a3b-fp8-tp1-dp1.spec.yaml"
SMOKE = [
    ModeOverride(field="measurement.warmup_s", spec_value=45.0, effective_value=5.0),
    ModeOverride(field="measurement.window_s", spec_value=120.0, effective_value=20.0),
    ModeOverride(field="measurement.search_window_s", spec_value=60.0, effective_value=10.0),
    ModeOverride(field="measurement.repeats", spec_value=2, effective_value=1),
    ModeOverride(field="accuracy.limit", spec_value=50, effective_value=5),
    ModeOverride(field="power.idle_s", spec_value=None, effective_value=0.0),
]


def test_mode_overrides_name_every_replaced_value_in_order() -> None:
    raw = load_spec_before_mode(SEED_SPEC, None)
    assert mode_overrides(raw, apply_mode(raw, "smoke")) == SMOKE
    # quick mode's caps are the seed's own schedule: only the idle power is the mode's
    assert mode_overrides(raw, apply_mode(raw, "quick")) == [
        ModeOverride(field="power.idle_s", spec_value=None, effective_value=0.0)
    ]
    assert mode_overrides(raw, apply_mode(raw, "full")) == [
        ModeOverride(field="power.idle_s", spec_value=None, effective_value=30.0)
    ]
    chosen = raw.model_copy(update={"power": raw.power.model_copy(update={"idle_s": 0.0})})
    assert mode_overrides(chosen, apply_mode(chosen, "quick")) == []


def test_the_start_lines_give_the_effective_values_and_what_changed() -> None:
    raw = load_spec_before_mode(SEED_SPEC, None)
    smoke = apply_mode(raw, "smoke")
    assert mode_lines(smoke, "smoke", SMOKE) == [
        "smoke mode: warm-up 5 s, search window 10 s, measurement window 20 s, 1 repeat; "
        "search from 2 req/s ×2 up to 2000 req/s, 3 bisection steps; accuracy 5 items × 1 "
        "seed; idle power 0 s",
        "smoke mode replaced spec values: measurement.warmup_s 45 → 5; measurement.window_s "
        "120 → 20; measurement.search_window_s 60 → 10; measurement.repeats 2 → 1; "
        "accuracy.limit 50 → 5; power.idle_s not set → 0",
    ]
    chosen = raw.model_copy(update={"power": raw.power.model_copy(update={"idle_s": 0.0})})
    quick = apply_mode(chosen, "quick")
    assert mode_lines(quick, "quick", [], accuracy=False) == [
        "quick mode: warm-up 45 s, search window 60 s, measurement window 120 s, 2 repeats; "
        "search from 2 req/s ×2 up to 2000 req/s, 3 bisection steps; accuracy not run "
        "(--no-accuracy); idle power 0 s",
        "quick mode replaced no spec value",
    ]


def _report(*runs: RunRecord) -> ReportV3:
    inputs = [RunInput(f"runs/{r.label}.json", "a" * 64, r) for r in runs]
    return summarise(inputs, title="modes", demo=True)


def test_the_report_and_its_page_say_what_the_mode_replaced() -> None:
    base = make_run(mode="smoke").model_copy(update={"mode_overrides": SMOKE[3:5]})
    tuned = tuned_run(mode="smoke").model_copy(update={"mode_overrides": SMOKE[3:5]})
    report = _report(base, tuned)
    assert [(c.mode, c.mode_overrides) for c in report.configs] == [("smoke", SMOKE[3:5])] * 2
    assert mode_rows(report) == [
        ("Mode", "smoke"),
        ("Spec values the mode replaced", "measurement.repeats 2 → 1; accuracy.limit 50 → 5"),
    ]
    section = next(s for s in setup_sections(report) if s["title"].startswith("Measurement"))
    assert section["rows"][-2:] == mode_rows(report)

    # Configurations that differ are named; a run from before the field says so.
    old = tuned_run().model_copy(update={"mode_overrides": None})
    assert mode_rows(_report(make_run().model_copy(update={"mode_overrides": []}), old)) == [
        ("Mode", "quick"),
        ("Spec values the mode replaced", "vllm-default: none; vllm-fp8kv: not recorded"),
    ]
    # Reports made before either was kept show neither row.
    configs = [
        c.model_dump(mode="json", exclude={"mode", "mode_overrides"}) for c in report.configs
    ]
    plain = ReportV3.model_validate(report.model_dump(mode="json") | {"configs": configs})
    assert mode_rows(plain) == []


def test_the_start_line_of_fixed_loads_and_of_a_search_over_clients_names_no_rate_search() -> None:
    from tokenwatt.collect.plan.point import PointFlags, point_spec

    rates = point_spec(PointFlags(model="m", rates=(10.0, 20.0), duration_s=3), "http://h/v1")
    assert mode_lines(apply_mode(rates, "quick"), "quick", [], accuracy=False)[0].split("; ")[
        :2
    ] == [
        "quick mode: warm-up 10 s, measurement window 3 s",
        "search none: one window at each of 10, 20 req/s",
    ]
    clients = point_spec(PointFlags(model="m", concurrencies=(2, 8)), "http://h/v1")
    assert (
        "search none: one window at each of 2, 8 clients"
        in mode_lines(apply_mode(clients, "quick"), "quick", [], accuracy=False)[0]
    )
    swept = point_spec(PointFlags(model="m", sweep=True, profile="concurrency"), "http://h/v1")
    line = mode_lines(apply_mode(swept, "quick"), "quick", [], accuracy=False)[0]
    assert "req/s" not in line and "search from 1 clients ×" in line


def test_a_fixed_load_run_without_accuracy_prints_only_what_applies() -> None:
    """``collect --rates ... --no-accuracy --mode quick``: the mode's accuracy sample and the
    repeats and search windows a fixed-load run never uses are not printed, neither in the
    mode lines nor in the effective spec (the record's spec keeps them)."""
    from tokenwatt.collect.plan.modes import not_applying
    from tokenwatt.collect.plan.point import PointFlags, point_spec, spec_yaml

    raw = point_spec(PointFlags(model="m", rates=(10.0, 20.0), duration_s=3), "http://h/v1")
    raw = raw.model_copy(update={"accuracy": raw.accuracy.model_copy(update={"suite": "s.jsonl"})})
    quick = apply_mode(raw, "quick")
    overrides = mode_overrides(raw, quick)
    assert "accuracy.limit" in [o.field for o in overrides]  # the mode did replace it
    lines = mode_lines(quick, "quick", overrides, accuracy=False)
    assert lines[1] == "quick mode replaced spec values: power.idle_s not set → 0"
    assert "accuracy not run (--no-accuracy)" in lines[0] and "repeat" not in lines[0]
    unused = not_applying(quick, accuracy=False)
    text = spec_yaml(quick, unused)
    assert "repeats:" not in text and "accuracy:" not in text and "growth:" not in text
    assert "search_window_s" not in text.split("# not used")[0]
    assert "window_s: 3.0" in text and "rates: [10.0, 20.0]" in text
    assert text.endswith(
        "# not used by this run (kept in the record): accuracy, measurement.repeats, "
        "measurement.search_window_s, sweep.backoff, sweep.bisect_steps, sweep.growth, "
        "sweep.max_backoffs, sweep.max_rps, sweep.start_rps\n"
    )
    # With the suite run, the accuracy sample is printed and named as replaced.
    lines = mode_lines(quick, "quick", overrides, accuracy=True)
    assert "accuracy.limit not set → 50" in lines[1]
