"""The run's result status from :class:`Measurement`: a window that cannot be trusted is
measured once more, then makes the result inconclusive; repeats that never meet the SLO
after passing probes are inconclusive; a search whose floor misses is none_met. Driven
through a scripted window runner (the window is the seam; no I/O)."""

from __future__ import annotations

from collections.abc import Callable

from tests.runs_factory import make_run, seed_spec, window
from tokenwatt.analysis import explain_run
from tokenwatt.cli.terminal import result_line
from tokenwatt.collect.measure.measurement import Measurement, SearchSetup
from tokenwatt.collect.measure.window import WindowOutcome, WindowPlan
from tokenwatt.records import RunRecord, WindowSummary, retried

Verdict = Callable[[WindowPlan, int], WindowSummary]
record_seed = seed_spec().workload.seed  # probes reuse the workload's seed, repeats do not


class Progress:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def begin(self, step: str) -> None:
        self.lines.append(f"begin {step}")

    def note(self, text: str) -> None:
        self.lines.append(text)


class Stop:
    def interrupted(self) -> bool:
        return False

    def raise_if_requested(self) -> None:
        return None


class Runner:
    """Answers each window with ``verdict(plan, n)`` (n: windows run so far)."""

    def __init__(self, verdict: Verdict) -> None:
        self.verdict = verdict
        self.progress = Progress()
        self.stop = Stop()
        self.plans: list[WindowPlan] = []

    def run(self, plan: WindowPlan) -> WindowOutcome:
        self.plans.append(plan)
        return WindowOutcome(summary=self.verdict(plan, len(self.plans)), metrics=None, power=None)


def at(plan: WindowPlan, ok: bool, **kw: object) -> WindowSummary:
    w = window(
        plan.rate_rps, plan.rate_rps * 100, ttft_p99=300 if ok else 9e3, tpot_p99=40, slo_pass=ok
    )
    return w.model_copy(update=kw)


def measure(verdict: Verdict, **sweep: object) -> tuple[RunRecord, Runner]:
    spec = seed_spec(
        sweep={
            "start_rps": 8,
            "growth": 2,
            "max_rps": 64,
            "bisect_steps": 1,
            "max_backoffs": 1,
            "backoff": 0.5,
            **sweep,
        },
        measurement={"repeats": 2},
    )
    record = make_run(spec=spec).model_copy(update={"repeats": [], "probes": [], "result": None})
    runner = Runner(verdict)
    m = Measurement(
        record,
        runner,  # type: ignore[arg-type]
        SearchSetup.for_run(spec, fast=False),
        checkpoint=lambda: None,
        check_engine=lambda: None,
    )
    m.run()
    return record, runner


def test_a_first_miss_goes_down_and_the_result_is_measured() -> None:
    record, _ = measure(lambda p, n: at(p, p.rate_rps <= 3))
    r = record.result
    assert r is not None and r.status == "measured" and r.rate_rps == 3
    assert [p.phase for p in record.probes] == ["grow", "down", "down", "bisect"]
    assert result_line(record).startswith("result: 3 req/s")


def test_repeats_that_all_fail_after_passing_probes_are_inconclusive() -> None:
    # every probe passes (up to max_rps), every repeat and back-off misses
    record, _ = measure(lambda p, n: at(p, p.seed == record_seed))
    r = record.result
    assert r is not None and r.status == "inconclusive"
    assert r.goodput_tok_s == 0 and r.rate_rps == 0
    assert r.status_reason is not None and "the boundary did not repeat" in r.status_reason
    assert result_line(record) == f"inconclusive: {r.status_reason}"


def test_an_unclean_repeat_is_measured_again_then_inconclusive() -> None:
    def verdict(p: WindowPlan, n: int) -> WindowSummary:
        if p.seed != record_seed:  # a repeat: never proven idle
            return at(p, False, valid=False, invalid_reason="not proven idle before it")
        return at(p, p.rate_rps <= 20)

    record, runner = measure(verdict)
    r = record.result
    assert r is not None and r.status == "inconclusive"
    assert r.status_reason is not None and "not proven idle" in r.status_reason
    assert len(record.repeats) == 2  # the first repeat and its one re-measurement
    assert retried(record.repeats[0].window) and not retried(record.repeats[1].window)
    assert any("could not be measured cleanly" in line for line in runner.progress.lines)


def test_an_unclean_window_measured_clean_the_second_time_counts() -> None:
    def verdict(p: WindowPlan, n: int) -> WindowSummary:
        if n == 1:
            return at(p, False, valid=False, invalid_reason="not proven idle before it")
        return at(p, p.rate_rps <= 20)

    record, _ = measure(verdict)
    r = record.result
    assert r is not None and r.status == "measured" and r.rate_rps > 0
    assert retried(record.probes[0].window)


def test_a_floor_that_misses_is_none_met() -> None:
    record, _ = measure(lambda p, n: at(p, False), min_rps=2)
    r = record.result
    assert r is not None and r.status == "none_met"
    assert [p.window.rate_rps for p in record.probes] == [8, 4, 2]
    assert result_line(record) == "result: no load met the SLO, down to 2 req/s"


def test_a_floor_refused_by_the_server_is_inconclusive_not_none_met() -> None:
    """Every probe got HTTP 400: the engine's capacity was never measured, so "no load meets
    the SLO" would be a claim about a load that never ran."""

    def refused(plan: WindowPlan, n: int) -> WindowSummary:
        w = at(plan, False)
        return w.model_copy(
            update={"completed": 0, "errors": w.requests, "error_kinds": {"http_400": w.requests}}
        )

    record, _ = measure(refused, min_rps=2)
    r = record.result
    assert r is not None and r.status == "inconclusive" and r.rate_rps == 0
    assert r.status_reason == (
        "the server refused the requests (HTTP 400) at every rate probed: the misses came "
        "from that, not from the load, so no capacity was measured"
    )
    story = explain_run(record)
    assert story.startswith("No rate met the SLO, and not for the load: the lowest probe")
    assert story.endswith("; so the result is inconclusive.")


def test_a_search_that_missed_for_the_load_somewhere_is_none_met_whatever_else() -> None:
    """The first probe missed on latency (the load), the lower ones were refused: the load
    did decide a verdict, so this is no search that measured nothing."""

    def mixed(plan: WindowPlan, n: int) -> WindowSummary:
        w = at(plan, False)
        if plan.rate_rps == 8:  # the first probe
            return w
        kinds = {"http_400": w.requests}
        return w.model_copy(update={"completed": 0, "errors": w.requests, "error_kinds": kinds})

    record, _ = measure(mixed, min_rps=2)
    r = record.result
    assert r is not None and r.status == "none_met"
    assert not explain_run(record).startswith("No rate met the SLO, and not for the load")


def test_probes_stopped_early_as_hopeless_are_none_met_not_inconclusive() -> None:
    """Every probe stopped early on a TTFT it could not meet, its requests cancelled, none
    completed: the load decided that (a finding), so none_met, never "nothing measured"."""

    def hopeless(plan: WindowPlan, n: int) -> WindowSummary:
        w = at(plan, False)
        kinds = {"cancelled": w.requests}
        return w.model_copy(update={"completed": 0, "stopped_early": True, "error_kinds": kinds})

    record, _ = measure(hopeless, min_rps=2)
    r = record.result
    assert r is not None and r.status == "none_met"
    assert r.status_reason == "no load met the SLO, down to 2 req/s"


def test_a_search_whose_probes_sent_nothing_is_inconclusive() -> None:
    def empty(plan: WindowPlan, n: int) -> WindowSummary:
        return at(plan, False).model_copy(update={"requests": 0, "completed": 0})

    record, _ = measure(empty, min_rps=2)
    r = record.result
    assert r is not None and r.status == "inconclusive"
    assert r.status_reason == "no probe completed a request: no load was measured"
    # Its warning does not claim that no load meets the SLO.
    (missed,) = r.warnings
    assert missed.startswith("every probe missed the SLO, down to ")
    assert missed.endswith(
        ": no probe sent a request, so this is no finding on the load; "
        "make each window long enough for arrivals at its rate"
    )
