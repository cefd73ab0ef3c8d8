"""The search below a first probe that missed, untrusted windows and repeats that never
pass, driven by scripted probe callbacks (no I/O)."""

from __future__ import annotations

from tokenwatt.collect.measure.load_search import concurrency_search
from tokenwatt.collect.measure.search import (
    ProbeOutcome,
    SearchPhase,
    measure_repeats,
    search_floor,
    slo_search,
)
from tokenwatt.records.spec.spec_load import SweepSpec


def sweep(**kw: object) -> SweepSpec:
    base: dict[str, object] = {
        "start_rps": 40,
        "growth": 2,
        "max_rps": 2000,
        "bisect_steps": 3,
        "backoff": 0.9,
        "max_backoffs": 2,
    }
    base.update(kw)
    return SweepSpec.model_validate(base)


class Script:
    """Passes at or below ``limit``; a load in ``untrusted`` answers an untrusted miss."""

    def __init__(self, limit: float, untrusted: dict[float, str] | None = None) -> None:
        self.limit = limit
        self.untrusted = untrusted or {}
        self.calls: list[tuple[float, SearchPhase]] = []

    def __call__(self, load: float, phase: SearchPhase) -> ProbeOutcome:
        self.calls.append((load, phase))
        if load in self.untrusted:
            return ProbeOutcome(False, untrusted=self.untrusted[load])
        return ProbeOutcome(load <= self.limit)


def test_a_first_probe_above_the_boundary_goes_down_and_bisects_to_it() -> None:
    probe = Script(7.0)
    trace = slo_search(probe, sweep())
    assert probe.calls[:4] == [(40, "grow"), (20, "down"), (10, "down"), (5, "down")]
    # then bisection between the pass at 5 and the lowest miss at 10
    assert [r for r, p in probe.calls if p == "bisect"] == [7.5, 6.25, 6.875]
    assert trace.found_rps == 6.875
    assert trace.first_miss_rps == 7.5
    assert not trace.none_met and trace.inconclusive is None
    assert trace.warnings == []


def test_a_listed_first_rate_that_misses_goes_down_too() -> None:
    probe = Script(3.0)
    trace = slo_search(probe, sweep(rates=[8, 16], bisect_steps=1))
    assert probe.calls == [(8, "list"), (4, "down"), (2, "down"), (3, "bisect")]
    assert trace.found_rps == 3


def test_the_spec_floor_is_probed_last_and_its_miss_is_none_met() -> None:
    probe = Script(0.0)
    trace = slo_search(probe, sweep(min_rps=12))
    assert probe.calls == [(40, "grow"), (20, "down"), (12, "down")]
    assert trace.none_met and trace.found_rps is None
    assert search_floor(sweep(min_rps=12)) == 12
    # default: start / 64, not below 0.1 req/s, never above the start
    assert search_floor(sweep()) == 40 / 64
    assert search_floor(sweep(start_rps=2)) == 0.1
    assert search_floor(sweep(start_rps=0.05)) == 0.05


def test_an_untrusted_miss_the_boundary_would_rest_on_makes_it_inconclusive() -> None:
    probe = Script(17.0, untrusted={24.0: "not proven idle before the window"})
    trace = slo_search(probe, sweep(start_rps=2))
    assert probe.calls[-1] == (24, "bisect")  # nothing after it
    assert trace.inconclusive is not None
    assert "24" in trace.inconclusive and "not proven idle" in trace.inconclusive
    assert trace.found_rps is None and not trace.none_met
    assert trace.warnings == []


def test_an_untrusted_first_probe_is_inconclusive_not_none_met() -> None:
    trace = slo_search(Script(1.0, untrusted={40.0: "cut short"}), sweep())
    assert trace.inconclusive is not None and not trace.none_met


def test_repeats_that_all_fail_after_the_probes_passed_have_no_rate() -> None:
    reps = measure_repeats(lambda r, i, b: ProbeOutcome(False), 16.0, 2, 0.9, 2)
    assert reps.rate_rps is None and reps.backoffs == 2
    assert reps.inconclusive is None  # the verdict: the boundary did not repeat (caller's)


def test_an_untrusted_repeat_stops_the_repeats_inconclusive() -> None:
    def measure(rate: float, index: int, backoffs: int) -> ProbeOutcome:
        if index == 1:
            return ProbeOutcome(False, untrusted="the server still had a backlog")
        return ProbeOutcome(True)

    reps = measure_repeats(measure, 16.0, 3, 0.9, 2)
    assert len(reps.steps) == 2 and reps.rate_rps is None
    assert reps.inconclusive is not None and "backlog" in reps.inconclusive


def test_closed_loop_search_goes_down_in_clients() -> None:
    probe = Script(3.0)
    trace = concurrency_search(probe, sweep(start_concurrency=16), 64)
    assert probe.calls[:4] == [(16, "grow"), (8, "down"), (4, "down"), (2, "down")]
    assert [c for c, p in probe.calls if p == "bisect"] == [3]
    assert trace.found_rps == 3


def test_closed_loop_one_client_missing_is_none_met() -> None:
    probe = Script(0.0)
    trace = concurrency_search(probe, sweep(start_concurrency=3, growth=1.5), 64)
    assert probe.calls == [(3, "grow"), (2, "down"), (1, "down")]
    assert trace.none_met
    assert "down to 1 client:" in trace.warnings[0]
