"""The SLO search and repeats, driven by scripted probe callbacks (no I/O)."""

from __future__ import annotations

import pytest

from tokenwatt.collect.measure.probe_policy import ProbePolicy
from tokenwatt.collect.measure.search import (
    ProbeOutcome,
    SearchOptions,
    SearchPhase,
    measure_repeats,
    monotonicity_warnings,
    slo_search,
)
from tokenwatt.records.spec.spec_load import SweepSpec


def sweep(**kw: object) -> SweepSpec:
    base: dict[str, object] = {
        "start_rps": 2,
        "growth": 2,
        "max_rps": 2000,
        "bisect_steps": 3,
        "backoff": 0.9,
        "max_backoffs": 4,
    }
    base.update(kw)
    return SweepSpec.model_validate(base)


class Boundary:
    """Passes below ``limit`` req/s; records each call."""

    def __init__(self, limit: float, warmup_s: float = 45, window_s: float = 60) -> None:
        self.limit = limit
        self.calls: list[tuple[float, SearchPhase]] = []
        self.warmup_s = warmup_s
        self.window_s = window_s

    def __call__(self, rate: float, phase: SearchPhase) -> ProbeOutcome:
        self.calls.append((rate, phase))
        return ProbeOutcome(rate <= self.limit, self.warmup_s, self.window_s)


def test_grow_then_three_bisections_follow_design_md() -> None:
    probe = Boundary(17.0)
    trace = slo_search(probe, sweep())
    assert probe.calls == [
        (2, "grow"),
        (4, "grow"),
        (8, "grow"),
        (16, "grow"),
        (32, "grow"),
        (24, "bisect"),
        (20, "bisect"),
        (18, "bisect"),
    ]
    assert trace.last_pass_rps == 16
    assert trace.first_miss_rps == 18
    assert trace.found_rps == 16
    assert trace.warnings == []
    assert trace.gpu_seconds == pytest.approx(8 * 105)


def test_bisection_moves_the_lower_bound_on_a_pass() -> None:
    probe = Boundary(29.0)
    trace = slo_search(probe, sweep())
    assert [r for r, p in probe.calls if p == "bisect"] == [24, 28, 30]
    assert (trace.last_pass_rps, trace.first_miss_rps) == (28, 30)


def test_growth_stops_at_max_rps_and_probes_it_once() -> None:
    probe = Boundary(1e9)
    trace = slo_search(probe, sweep(max_rps=10))
    assert probe.calls == [(2, "grow"), (4, "grow"), (8, "grow"), (10, "grow")]
    assert trace.last_pass_rps == 10
    assert trace.first_miss_rps is None


def test_explicit_rates_list_is_walked_until_a_miss() -> None:
    probe = Boundary(12.0)
    trace = slo_search(probe, sweep(rates=[5, 10, 15, 20], bisect_steps=1))
    assert probe.calls == [(5, "list"), (10, "list"), (15, "list"), (12.5, "bisect")]
    assert (trace.last_pass_rps, trace.first_miss_rps) == (10, 12.5)


def test_every_probe_failing_down_to_the_floor_is_none_met() -> None:
    probe = Boundary(0.05)
    trace = slo_search(probe, sweep())
    # start 2 req/s, floor max(2 / 64, 0.1) = 0.1: halved until the floor, probed last.
    assert probe.calls == [
        (2, "grow"),
        (1, "down"),
        (0.5, "down"),
        (0.25, "down"),
        (0.125, "down"),
        (0.1, "down"),
    ]
    assert trace.found_rps is None
    assert trace.none_met and trace.inconclusive is None
    assert trace.floor_rps == 0.1
    assert len(trace.warnings) == 1
    assert "every probe missed the SLO, down to the floor of 0.1 req/s" in trace.warnings[0]


def test_non_monotonic_pass_fail_warns_when_a_repeat_misses_where_a_probe_passed() -> None:
    trace = slo_search(Boundary(17.0), sweep())
    assert trace.warnings == []
    repeats = measure_repeats(lambda r, i, b: ProbeOutcome(r < 15.0), 16.0, 2, 0.9, 4)
    points = [(s.rate_rps, s.outcome.passed) for s in trace.steps]
    repeat_points = [(s.rate_rps, s.outcome.passed) for s in repeats.steps]
    warnings = monotonicity_warnings(points, repeat_points)
    assert len(warnings) == 1
    # the same rate passed as a probe and missed as a repeat: say so, not "16 missed but 16
    # passed"
    assert "not repeatable at 16 req/s" in warnings[0]
    assert "a search probe met the SLO but a repeat missed it" in warnings[0]
    assert "16 req/s missed" not in warnings[0]


def test_non_monotonic_warning_names_the_rates_and_window_kinds() -> None:
    warnings = monotonicity_warnings([(8.0, True), (16.0, False)], [(7.2, False)])
    assert len(warnings) == 1
    assert (
        "a repeat at 7.2 req/s missed the SLO but a search probe at 8 req/s passed" in (warnings[0])
    )
    same = monotonicity_warnings([(45.0, True), (45.0, False)])
    assert "one search probe met the SLO and another missed it" in same[0]


def test_monotonic_points_give_no_warning() -> None:
    assert monotonicity_warnings([(2, True), (4, True), (8, False), (6, True), (7, False)]) == []
    assert monotonicity_warnings([(8, False), (4, False)]) == []
    assert monotonicity_warnings([(3, True), (2, False)]) != []


def test_gpu_seconds_and_savings_sum_over_probes() -> None:
    def probe(rate: float, phase: SearchPhase) -> ProbeOutcome:
        if rate <= 10:
            return ProbeOutcome(True, 45, 60)
        return ProbeOutcome(False, 45, 15, saved_s=45, stopped_early=True)

    trace = slo_search(probe, sweep(bisect_steps=1))
    # 2, 4, 8 pass; 16 misses early; 12 misses early.
    assert [s.rate_rps for s in trace.steps] == [2, 4, 8, 16, 12]
    assert trace.gpu_seconds == pytest.approx(3 * 105 + 2 * 60)
    assert trace.gpu_seconds_saved == pytest.approx(90)


def test_bisect_until_relative_width_option() -> None:
    probe = Boundary(17.0)
    trace = slo_search(probe, sweep(), SearchOptions(bisect_until_rel=0.05))
    assert trace.last_pass_rps is not None and trace.first_miss_rps is not None
    assert (trace.first_miss_rps - trace.last_pass_rps) / trace.last_pass_rps <= 0.05
    assert trace.last_pass_rps <= 17.0 < trace.first_miss_rps


def test_geometric_bisection_and_start_override() -> None:
    probe = Boundary(100.0)
    trace = slo_search(
        probe, sweep(bisect_steps=1), SearchOptions(geometric_bisect=True, start_rps=50)
    )
    assert probe.calls[0] == (50, "grow")
    assert probe.calls[-1][1] == "bisect"
    assert probe.calls[-1][0] == pytest.approx((100 * 200) ** 0.5)
    assert (trace.last_pass_rps, trace.first_miss_rps) == (100, pytest.approx(100 * 2**0.5))


def test_repeats_all_pass_at_the_found_rate() -> None:
    calls: list[tuple[float, int, int]] = []

    def measure(rate: float, index: int, backoffs: int) -> ProbeOutcome:
        calls.append((rate, index, backoffs))
        return ProbeOutcome(True, 0, 120)

    trace = measure_repeats(measure, 16.0, 2, 0.9, 4)
    assert calls == [(16.0, 0, 0), (16.0, 1, 0)]
    assert trace.rate_rps == 16.0
    assert trace.backoffs == 0
    assert trace.gpu_seconds == 240


def test_a_missed_repeat_backs_off_and_remeasures_every_repeat() -> None:
    calls: list[tuple[float, int, int]] = []

    def measure(rate: float, index: int, backoffs: int) -> ProbeOutcome:
        calls.append((round(rate, 6), index, backoffs))
        return ProbeOutcome(rate < 15.0)

    trace = measure_repeats(measure, 16.0, 2, 0.9, 4)
    assert calls == [(16.0, 0, 0), (14.4, 0, 1), (14.4, 1, 1)]
    assert trace.rate_rps == pytest.approx(14.4)
    assert trace.backoffs == 1


def test_back_offs_run_out() -> None:
    trace = measure_repeats(lambda r, i, b: ProbeOutcome(False), 16.0, 2, 0.5, 2)
    assert [s.rate_rps for s in trace.steps] == [16.0, 8.0, 4.0]
    assert trace.rate_rps is None
    assert trace.backoffs == 2


@pytest.mark.parametrize(
    ("repeats", "backoff", "max_backoffs"), [(0, 0.9, 1), (1, 1.0, 1), (1, 0.9, -1)]
)
def test_repeats_reject_bad_arguments(repeats: int, backoff: float, max_backoffs: int) -> None:
    with pytest.raises(ValueError, match="repeats"):
        measure_repeats(lambda r, i, b: ProbeOutcome(True), 1.0, repeats, backoff, max_backoffs)


def test_default_probe_policy_is_design_md() -> None:
    policy = ProbePolicy(45, 60)
    assert policy.plan("grow", []) == (45, 60)
    assert policy.plan("bisect", [(2, True), (4, False)]) == (45, 60)


def test_probe_policy_options_shorten_only_undoubted_probes() -> None:
    policy = ProbePolicy(45, 60, warmup_after_pass_s=10, scout_window_s=15, scout_until_rel=0.5)
    assert policy.plan("grow", []) == (45, 15)  # first probe: full warm-up, scout window
    assert policy.plan("grow", [(2, True)]) == (10, 15)  # after a pass: short warm-up
    # Bracket 8..32 is 300% wide: still scouting; after a miss: full warm-up.
    assert policy.plan("bisect", [(8, True), (32, False)]) == (45, 15)
    # Bracket 16..20 is 25% wide: the verdict is close, full window.
    assert policy.plan("bisect", [(8, True), (32, False), (16, True), (20, False)]) == (45, 60)
    assert policy.plan("bisect", [(16, True), (20, False), (18, True)]) == (10, 60)
