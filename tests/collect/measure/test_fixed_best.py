"""Fixed loads (``sweep.fixed``): the result is the best goodput among the loads that met
the SLO, a falling curve is flagged, and none met / inconclusive are told apart. Driven
through :func:`measure_fixed`'s ``Windows`` seam with scripted windows (no I/O)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.runs_factory import make_run, seed_spec, window
from tokenwatt.cli.terminal import result_line
from tokenwatt.collect.measure.fixed_loads import measure_fixed
from tokenwatt.collect.measure.measurement import window_cost
from tokenwatt.collect.measure.search import ProbeOutcome
from tokenwatt.collect.measure.window import WindowOutcome, WindowPlan
from tokenwatt.records import RunRecord, WindowSummary, untrusted_reason


class Note:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def note(self, text: str) -> None:
        self.lines.append(text)


class Scripted:
    """A closed-loop fixed-load run whose windows are given per client count."""

    def __init__(self, windows: dict[int, WindowSummary]) -> None:
        spec = seed_spec(
            sweep={"fixed": True, "concurrencies": sorted(windows)},
            measurement={"profile": "concurrency"},
        )
        self.spec = spec
        self.record: RunRecord = make_run(spec=spec).model_copy(
            update={"repeats": [], "probes": [], "result": None}
        )
        self.progress = Note()
        self.closed = True
        self.windows = windows

    def plan(self, load: float, **kwargs: Any) -> WindowPlan:
        return WindowPlan(rate_rps=load, concurrency=int(load), **kwargs)

    def _measured(
        self, step: str, plan: WindowPlan, store: Callable[[WindowOutcome], None]
    ) -> ProbeOutcome:
        assert plan.concurrency is not None
        summary = self.windows[plan.concurrency]
        store(WindowOutcome(summary=summary, power=None, metrics=None))
        return window_cost(plan, summary)


def clients(n: int, goodput: float, ok: bool = True, **kw: Any) -> WindowSummary:
    w = window(n * 0.5, goodput, ttft_p99=300.0 if ok else 9000.0, tpot_p99=40, slo_pass=ok)
    return w.model_copy(update={"concurrency": n, **kw})


def test_fewer_clients_with_more_goodput_are_the_result_and_the_fall_is_flagged() -> None:
    run = Scripted({4: clients(4, 1000.0), 8: clients(8, 1130.0), 16: clients(16, 1000.0)})
    measure_fixed(run)
    r = run.record.result
    assert r is not None and r.status == "measured"
    assert r.concurrency == 8 and r.goodput_tok_s == 1130.0
    assert r.slo_pass_count == 3
    assert any(
        "goodput is not monotonic in load: 1,000.0 tok/s at 16 clients is 11.5% below the "
        "1,130.0 tok/s at 8 clients" in w
        for w in r.warnings
    ), r.warnings


def test_a_rising_curve_has_no_warning_and_takes_the_top() -> None:
    run = Scripted({4: clients(4, 900.0), 8: clients(8, 1000.0), 16: clients(16, 900, False)})
    measure_fixed(run)
    r = run.record.result
    assert r is not None and r.concurrency == 8 and r.warnings == []


def test_no_load_met_is_none_met_and_an_unclean_window_is_inconclusive() -> None:
    run = Scripted({1: clients(1, 50.0, False), 2: clients(2, 80.0, False)})
    measure_fixed(run)
    r = run.record.result
    assert r is not None and r.status == "none_met"
    assert r.outcome() == ("none_met", r.status_reason)
    assert result_line(run.record) == (
        "result: no listed load met the SLO, the lowest (1 clients) included"
    )
    idle = clients(2, 80.0, False, valid=False, invalid_reason="not proven idle before it")
    assert untrusted_reason(idle) == "not proven idle before it"
    run = Scripted({1: clients(1, 50.0, False), 2: idle})
    measure_fixed(run)
    r = run.record.result
    assert r is not None and r.status == "inconclusive"
    assert result_line(run.record).startswith("inconclusive: no load met the SLO, and the ")
    assert "not proven idle" in result_line(run.record)


def test_overload_alone_is_a_trusted_miss() -> None:
    over = clients(
        2, 10.0, False, valid=False, invalid_reason="not sustained: the server started ..."
    )
    assert untrusted_reason(over) is None
    both = over.model_copy(update={"invalid_reason": "not sustained: x; cut short by a stop"})
    assert untrusted_reason(both) == "cut short by a stop"
