"""The SLO search of methods/goodput.md as pure functions of a probe callback.

Nothing here does I/O or reads a clock: the caller's ``probe`` runs a window (against a real
engine, the simulator, or a seeded model in ``benchmarks/search_cost.py``) and reports
whether it met the SLO and how many GPU-seconds it cost. That keeps the algorithm testable
with scripted callbacks and its cost measurable without a GPU.

Default behaviour is exactly the search of methods/goodput.md: grow from ``start_rps`` by ``growth``
until a probe misses or ``max_rps`` is reached (or walk the explicit ``rates`` list); when the
very first probe misses, go down by ``growth`` until a probe passes or the floor
(:func:`search_floor`) misses too; then bisect ``bisect_steps`` times between the last pass
and the first miss. A probe whose window cannot be trusted (``ProbeOutcome.untrusted``)
ends the search as inconclusive: no boundary may rest on it. Options in
:class:`SearchOptions` change that only when asked for (see their docstrings).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from tokenwatt.records import SweepSpec

SearchPhase = Literal["grow", "list", "down", "bisect"]

FLOOR_DIVISOR = 64.0
"""Without ``sweep.min_rps`` the floor of the search is ``start_rps / 64`` (six halvings at a
growth of 2) …"""
FLOOR_MIN_RPS = 0.1
"""… but not below 0.1 req/s: a window of a minute at a lower rate holds a handful of
requests, too few for a p99 (and never above ``start_rps`` itself)."""


def search_floor(sweep: SweepSpec) -> float:
    """The lowest rate (req/s) the search probes when its first probe misses:
    ``sweep.min_rps``, else ``start_rps / 64`` but not below 0.1 req/s, never above the first
    rate probed (``start_rps``, or the first of ``sweep.rates``)."""
    first = sweep.rates[0] if sweep.rates else sweep.start_rps
    if sweep.min_rps is not None:
        return min(sweep.min_rps, first)
    return min(first, max(sweep.start_rps / FLOOR_DIVISOR, FLOOR_MIN_RPS))


class UntrustedWindow(Exception):  # noqa: N818 - a signal inside the search, not an error
    """Raised by :func:`recorder`'s wrapper when a window cannot be trusted; the searches
    catch it and end inconclusive (``load``: the window's load; ``reason``: why)."""

    def __init__(self, load: float, reason: str) -> None:
        super().__init__(reason)
        self.load = load
        self.reason = reason


@dataclass(frozen=True)
class ProbeOutcome:
    """What one probe (or repeat) window cost and concluded.

    Attributes:
        passed: the window met the SLO (p99 TTFT and p99 TPOT within limits).
        warmup_s: GPU-seconds of warm-up spent before the window (s).
        window_s: GPU-seconds of measurement actually spent (s); shorter than the planned
            window when the probe stopped early.
        saved_s: planned window seconds *not* spent because the probe missed the SLO beyond
            doubt and stopped early (s).
        stopped_early: the window was cut short by the early-stop rule.
        untrusted: why the window's verdict cannot be used (it is invalid for a reason
            other than the server's own overload: not proven idle, cut short, served other
            than asked), after any measuring again; None for a verdict the search may use.
    """

    passed: bool
    warmup_s: float = 0.0
    window_s: float = 0.0
    saved_s: float = 0.0
    stopped_early: bool = False
    untrusted: str | None = None

    @property
    def gpu_s(self) -> float:
        """Warm-up plus window (s): what the probe held the GPU for."""
        return self.warmup_s + self.window_s


@dataclass(frozen=True)
class ProbeStep:
    """One probe the search ran: its rate (req/s), phase and outcome."""

    rate_rps: float
    phase: SearchPhase
    outcome: ProbeOutcome


@dataclass(frozen=True)
class SearchOptions:
    """Departures from the default search (methods/goodput.md); the defaults change nothing.

    Attributes:
        bisect_until_rel: when set, bisect until (first miss − last pass) / last pass is at
            most this fraction (e.g. 0.05), instead of a fixed ``bisect_steps``; at most
            ``max_bisect_steps`` steps either way.
        geometric_bisect: split the interval at the geometric mean instead of the
            arithmetic one (the error is relative, so this balances it in ratio terms).
        start_rps: a start rate overriding ``sweep.start_rps`` (e.g. a previous run's
            found rate × 0.8), clamped to ``max_rps``.
    """

    bisect_until_rel: float | None = None
    geometric_bisect: bool = False
    start_rps: float | None = None
    max_bisect_steps: int = 12


class _StepCost:
    """GPU time spent by a trace's steps, each carrying a :class:`ProbeOutcome`."""

    steps: Sequence[ProbeStep] | Sequence[RepeatStep]

    @property
    def gpu_seconds(self) -> float:
        """GPU-seconds of every step, warm-ups plus windows (s)."""
        return sum(s.outcome.gpu_s for s in self.steps)

    @property
    def gpu_seconds_saved(self) -> float:
        """Window seconds not spent thanks to early stops (s)."""
        return sum(s.outcome.saved_s for s in self.steps)


@dataclass
class SearchTrace(_StepCost):
    """Everything the search did.

    Attributes:
        steps: every probe, in order.
        last_pass_rps: the highest passing rate below the first miss (req/s), or None when
            every probe missed.
        first_miss_rps: the lowest missing rate above ``last_pass_rps`` (req/s), or None when
            nothing missed up to ``max_rps``.
        warnings: plain sentences, e.g. non-monotonic pass/fail or every probe failing.
        floor_rps: the lowest load the search would go down to (req/s, or clients).
        inconclusive: why the search could not conclude (a window it would rest on could
            not be trusted); None when it concluded.
    """

    steps: list[ProbeStep] = field(default_factory=list)
    last_pass_rps: float | None = None
    first_miss_rps: float | None = None
    warnings: list[str] = field(default_factory=list)
    floor_rps: float | None = None
    inconclusive: str | None = None

    @property
    def found_rps(self) -> float | None:
        """The rate the repeats are measured at: the last pass (req/s), or None."""
        return None if self.inconclusive is not None else self.last_pass_rps

    @property
    def none_met(self) -> bool:
        """True when the search concluded that no load meets the SLO: every probe missed,
        the floor included, and none was untrusted."""
        return self.inconclusive is None and bool(self.steps) and self.last_pass_rps is None


ProbeFn = Callable[[float, SearchPhase], ProbeOutcome]


def slo_search(
    probe: ProbeFn, sweep: SweepSpec, options: SearchOptions | None = None
) -> SearchTrace:
    """Find the highest arrival rate (req/s) whose window meets the SLO.

    Grow phase: probe ``start_rps``, ``start_rps × growth``, … until a probe misses or the
    next rate would pass ``max_rps`` (``max_rps`` itself is then probed once), or walk
    ``sweep.rates`` until a miss. Down phase, when the first probe missed: divide the rate
    by ``growth`` until a probe passes, the floor (:func:`search_floor`) probed last; a
    miss there concludes that no rate meets the SLO (``trace.none_met``). Bisect phase:
    ``bisect_steps`` times, probe the midpoint of (last pass, first miss) and move the
    bound it lands on. A window that cannot be trusted ends the search inconclusive
    (``trace.inconclusive``). Source: methods/goodput.md.

    Args:
        probe: runs one window at a rate; called as ``probe(rate_rps, phase)``. It may raise
            (e.g. KeyboardInterrupt); the search does not catch anything.
        sweep: the spec's ``sweep`` section.
        options: departures from the default algorithm (see :class:`SearchOptions`).

    Returns:
        The :class:`SearchTrace`, with warnings when pass/fail was not monotonic in rate or
        when every probe failed.
    """
    opts = options or SearchOptions()
    trace = SearchTrace(floor_rps=search_floor(sweep))

    run = recorder(probe, trace)
    start = min(opts.start_rps or sweep.start_rps, sweep.max_rps)

    def more(lo: float, hi: float, steps: int) -> bool:
        if steps >= opts.max_bisect_steps:
            return False
        if opts.bisect_until_rel is None:
            return steps < sweep.bisect_steps
        return (hi - lo) / lo > opts.bisect_until_rel

    def midpoint(lo: float, hi: float) -> float:
        return math.sqrt(lo * hi) if opts.geometric_bisect else (lo + hi) / 2

    def search() -> tuple[float | None, float | None]:
        last_pass, first_miss = bracket(
            run, sweep.rates, start, lambda r: min(r * sweep.growth, sweep.max_rps), sweep.max_rps
        )
        if last_pass is None and first_miss is not None:
            floor = min(search_floor(sweep), first_miss)
            last_pass, first_miss = descend(run, first_miss, lambda r: r / sweep.growth, floor)
        if last_pass is not None and first_miss is not None:
            last_pass, first_miss = bisect(run, last_pass, first_miss, midpoint, more)
        return last_pass, first_miss

    conclude(trace, search)
    if trace.inconclusive is None:
        trace.warnings.extend(_warnings(trace.steps, trace.floor_rps, "req/s"))
    return trace


def conclude(trace: SearchTrace, search: Callable[[], tuple[float | None, float | None]]) -> None:
    """Run ``search`` (which returns (last pass, first miss)) into ``trace``; a window it
    cannot trust (:class:`UntrustedWindow`) leaves the trace inconclusive, with no bounds."""
    try:
        trace.last_pass_rps, trace.first_miss_rps = search()
    except UntrustedWindow as exc:
        trace.last_pass_rps = trace.first_miss_rps = None
        trace.inconclusive = (
            f"the window at {exc.load:g} could not be measured cleanly ({exc.reason}), and "
            "the boundary would rest on it"
        )


def recorder(probe: ProbeFn, trace: SearchTrace) -> Callable[[float, SearchPhase], bool]:
    """``probe`` wrapped to append each step to ``trace`` and return whether it passed.

    Raises:
        UntrustedWindow: the probe's window cannot be trusted (``outcome.untrusted``).
    """

    def run(load: float, phase: SearchPhase) -> bool:
        outcome = probe(load, phase)
        trace.steps.append(ProbeStep(load, phase, outcome))
        if outcome.untrusted is not None:
            raise UntrustedWindow(load, outcome.untrusted)
        return outcome.passed

    return run


def bracket(
    run: Callable[[float, SearchPhase], bool],
    listed: Sequence[float] | None,
    start: float,
    grow: Callable[[float], float],
    ceiling: float,
) -> tuple[float | None, float | None]:
    """The list or grow phase of a search: (last pass, first miss), each None if none.

    With ``listed``, walk it until a miss; else probe ``start``, then ``grow(load)`` after
    each pass, until a miss or a pass at ``ceiling``. Shared by the search over rate and
    the closed loop's over clients.
    """
    last_pass: float | None = None
    if listed is not None:
        for load in listed:
            if not run(load, "list"):
                return last_pass, load
            last_pass = load
        return last_pass, None
    load = start
    while run(load, "grow"):
        last_pass = load
        if load >= ceiling:
            return last_pass, None
        load = grow(load)
    return last_pass, load


def descend(
    run: Callable[[float, SearchPhase], bool],
    first_miss: float,
    down: Callable[[float], float],
    floor: float,
) -> tuple[float | None, float]:
    """The down phase, after a first probe that missed: probe ``down(load)`` (never below
    ``floor``; the floor itself is probed once) until one passes. Returns (the pass, or None
    when the floor missed too; the lowest miss above it). Shared by both searches."""
    lowest_miss = first_miss
    while lowest_miss > floor:
        load = max(down(lowest_miss), floor)
        if run(load, "down"):
            return load, lowest_miss
        lowest_miss = load
    return None, lowest_miss


def bisect(
    run: Callable[[float, SearchPhase], bool],
    lo: float,
    hi: float,
    midpoint: Callable[[float, float], float],
    more: Callable[[float, float, int], bool],
) -> tuple[float, float]:
    """The bisect phase: probe ``midpoint(lo, hi)`` and move the bound it lands on while
    ``more(lo, hi, steps_so_far)``; returns the final (last pass, first miss)."""
    steps = 0
    while more(lo, hi, steps):
        mid = midpoint(lo, hi)
        if run(mid, "bisect"):
            lo = mid
        else:
            hi = mid
        steps += 1
    return lo, hi


def _warnings(steps: list[ProbeStep], floor: float | None, unit: str) -> list[str]:
    """All-probes-failed and non-monotonic warnings for the search's own probes."""
    if steps and not any(s.outcome.passed for s in steps):
        lowest = min(s.rate_rps for s in steps)
        where = f"{lowest:g} {unit}"
        if floor is not None and lowest <= floor:
            where = f"the floor of {where}"
        return [
            f"every probe missed the SLO, down to {where}: no load meets it; "
            "relax the SLO or measure another configuration"
        ]
    return monotonicity_warnings([(s.rate_rps, s.outcome.passed) for s in steps], unit=unit)


def monotonicity_warnings(
    points: list[tuple[float, bool]],
    repeats: list[tuple[float, bool]] | None = None,
    *,
    unit: str = "req/s",
) -> list[str]:
    """Warn when pass/fail is not monotonic in rate: a miss at or below a passing rate.

    The search itself only probes between its last pass and first miss, so it cannot see
    this alone; it shows when its probes are combined with the repeats at the found rate
    (a repeat missing where the probe passed), which is what the collector does. A window
    the collector measured again because the client lagged is one point (the second
    window's verdict), so a retry is never read as non-monotonic.

    Args:
        points: (rate in req/s, passed) for every search probe, in any order.
        repeats: (rate in req/s, passed) for every measurement repeat, if any.
        unit: the load's unit in the sentence (``clients`` for a closed-loop search).

    Returns:
        At most one warning sentence naming the lowest miss and the highest pass at or
        below it, and which kind of window each was; at a single rate it says that windows
        at that rate disagreed.
    """
    tagged = [(r, ok, "search probe") for r, ok in points]
    tagged += [(r, ok, "repeat") for r, ok in repeats or []]
    passes = [(r, kind) for r, ok, kind in tagged if ok]
    misses = [(r, kind) for r, ok, kind in tagged if not ok]
    if not passes or not misses:
        return []
    low_miss = min(r for r, _ in misses)
    high_pass = max(r for r, _ in passes)
    if low_miss > high_pass:
        return []
    advice = "; the boundary is noisy here, consider longer windows"
    if low_miss == high_pass:
        passed = sorted({k for r, k in passes if r == high_pass})
        missed = sorted({k for r, k in misses if r == low_miss})
        if passed == missed:
            what = f"one {passed[0]} met the SLO and another missed it"
        else:
            met, miss = " and a ".join(passed), " and a ".join(missed)
            what = f"a {met} met the SLO but a {miss} missed it"
        return [
            f"pass/fail is not repeatable at {high_pass:g} {unit}: {what} "
            f"(each window draws its own arrivals){advice}"
        ]
    miss_kind = sorted({k for r, k in misses if r == low_miss})[0]
    pass_kind = sorted({k for r, k in passes if r == high_pass})[0]
    return [
        f"pass/fail is not monotonic in rate: a {miss_kind} at {low_miss:g} {unit} missed the "
        f"SLO but a {pass_kind} at {high_pass:g} {unit} passed{advice}"
    ]


@dataclass(frozen=True)
class RepeatStep:
    """One measurement repeat: rate (req/s), repeat index, backoff count and outcome."""

    rate_rps: float
    index: int
    backoff: int
    outcome: ProbeOutcome


@dataclass
class RepeatTrace(_StepCost):
    """The repeats at the found rate and any back-offs.

    Attributes:
        steps: every repeat window, in order.
        rate_rps: the rate at which every repeat passed (req/s), or None when the back-offs
            ran out first.
        backoffs: how many times the rate was multiplied by ``backoff``.
        inconclusive: why the repeats stopped without a verdict (a window that could not be
            measured cleanly); None otherwise.
    """

    steps: list[RepeatStep] = field(default_factory=list)
    rate_rps: float | None = None
    backoffs: int = 0
    inconclusive: str | None = None


MeasureFn = Callable[[float, int, int], ProbeOutcome]


def measure_repeats(
    measure: MeasureFn, rate_rps: float, repeats: int, backoff: float, max_backoffs: int
) -> RepeatTrace:
    """Measure ``repeats`` windows at ``rate_rps``, backing off when one misses.

    When a repeat misses the SLO, the rate is multiplied by ``backoff`` (< 1) and all
    ``repeats`` windows are measured again at the new rate, at most ``max_backoffs`` times
    (methods/goodput.md). The remaining repeats at a rate that already missed are not
    run: they could not rescue it. A window that cannot be trusted (``untrusted``) stops
    the repeats: ``inconclusive`` says why, ``rate_rps`` stays None.

    Args:
        measure: runs one window; called as ``measure(rate_rps, repeat_index, backoff_count)``.
        rate_rps: the found rate (req/s).
        repeats: windows per rate (≥ 1).
        backoff: rate multiplier after a miss, 0 < backoff < 1.
        max_backoffs: how many back-offs are allowed (≥ 0).

    Returns:
        The :class:`RepeatTrace`; ``rate_rps`` is None when every rate tried missed.

    Raises:
        ValueError: ``repeats`` < 1, ``backoff`` outside (0, 1) or ``max_backoffs`` < 0.
    """
    if repeats < 1 or not 0 < backoff < 1 or max_backoffs < 0:
        raise ValueError(
            f"need repeats ≥ 1, 0 < backoff < 1, max_backoffs ≥ 0; got {repeats}, "
            f"{backoff}, {max_backoffs}"
        )
    trace = RepeatTrace()
    rate = rate_rps
    for backoffs in range(max_backoffs + 1):
        trace.backoffs = backoffs
        all_passed = True
        for index in range(repeats):
            outcome = measure(rate, index, backoffs)
            trace.steps.append(RepeatStep(rate, index, backoffs, outcome))
            if outcome.untrusted is not None:
                trace.inconclusive = (
                    f"repeat {index + 1} at {rate:g} could not be measured cleanly "
                    f"({outcome.untrusted})"
                )
                return trace
            if not outcome.passed:
                all_passed = False
                break
        if all_passed:
            trace.rate_rps = rate
            return trace
        if backoffs < max_backoffs:
            rate *= backoff
    return trace
