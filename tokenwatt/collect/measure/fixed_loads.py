"""A fixed-load run (``sweep.fixed``): one window at each listed load, no SLO search.

What ``tokenwatt collect --rate R``, ``--rates R1,R2,…`` and ``--concurrency C[,C…]`` ask
for. Each listed load (``sweep.rates`` in req/s for the open loop, ``sweep.concurrencies``
in clients for the closed loop) gets one window of ``measurement.window_s`` after
``measurement.warmup_s``, in order, every one of them whatever the verdicts: no early stop,
bisection, repeats or back-off. The windows are stored as the record's repeats (each with
its power and ``/metrics``, ``backoff`` 0), since each is a full measurement window; the
search probes stay empty. Every window reuses the workload's seed (common random numbers
across loads, as the search's probes do).

The result is the load with the highest goodput among those whose window met the SLO: its
rate (measured, in the closed loop), goodput and client count (fewer clients may serve
more: then the result is the fewer). A goodput that falls as the load rises, among loads
that met the SLO, or a pass above a miss, is warned of as non-monotonic. When no window met
the SLO the result is ``none_met``, unless a window could not be trusted (not proven idle,
cut short, …; :func:`~tokenwatt.records.untrusted_reason`) or no window missed for the load
(every request refused or broken, or no window sent one; timeouts count as the load's):
then it is ``inconclusive``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from tokenwatt.analysis import not_load_reason
from tokenwatt.collect.measure.load_search import fixed_loads
from tokenwatt.collect.measure.progress import Progress
from tokenwatt.collect.measure.search import ProbeOutcome, monotonicity_warnings
from tokenwatt.collect.measure.window import WindowOutcome, WindowPlan
from tokenwatt.records import (
    Repeat,
    ResultStatus,
    RunRecord,
    SearchResult,
    Spec,
    WindowSummary,
    retried,
    untrusted_reason,
)


class Windows(Protocol):
    """What :func:`measure_fixed` needs of the run's
    :class:`~tokenwatt.collect.measure.measurement.Measurement`: its spec and record, the
    live display, whether the loop is closed, and a window planned and measured as the
    search's are. A protocol, so that this module does not import ``measurement`` back
    (``Measurement.run`` calls :func:`measure_fixed`)."""

    @property
    def spec(self) -> Spec: ...

    @property
    def record(self) -> RunRecord: ...

    @property
    def progress(self) -> Progress: ...

    @property
    def closed(self) -> bool: ...

    def plan(self, load: float, **kwargs: Any) -> WindowPlan: ...

    def _measured(
        self, step: str, plan: WindowPlan, store: Callable[[WindowOutcome], None]
    ) -> ProbeOutcome: ...


def measure_fixed(measurement: Windows) -> None:
    """Measure every listed load and fill ``measurement.record.result`` (module docstring).

    The record is written after every window (the measurement's checkpoint), like a search.
    """
    spec, rec = measurement.spec, measurement.record
    m = spec.measurement
    loads = fixed_loads(spec.sweep, m.profile)
    unit = "clients" if measurement.closed else "req/s"
    gpu_s = 0.0
    for i, load in enumerate(loads):
        plan = measurement.plan(
            load, duration_s=m.window_s, warmup_s=m.warmup_s, seed=spec.workload.seed
        )

        def store(o: WindowOutcome) -> None:
            rec.repeats.append(Repeat(window=o.summary, power=o.power, metrics=o.metrics))

        # The words of the window's label (analysis.window_labels): "load 1 of 3".
        step = f"load {i + 1} of {len(loads)}"
        gpu_s += measurement._measured(step, plan, store).gpu_s
    windows = [r.window for r in rec.repeats if not retried(r.window)]
    passing = [w for w in windows if w.slo_pass]
    best = max(passing, key=lambda w: w.goodput_tok_s, default=None)
    points = [(load_of(w), w.slo_pass) for w in windows]
    warnings = monotonicity_warnings(points, unit=unit) + goodput_falls(passing, unit)
    status, reason = fixed_status(windows, unit, spec.engine.endpoint)
    unclean = [w for w in windows if untrusted_reason(w) is not None]
    if best is not None and unclean:
        warnings.append(
            f"{len(unclean)} of {len(windows)} loads could not be measured cleanly "
            f"({untrusted_reason(unclean[0])}); the result is the best of the others"
        )
    rec.result = SearchResult(
        rate_rps=best.rate_rps if best is not None else 0.0,
        goodput_tok_s=best.goodput_tok_s if best is not None else 0.0,
        slo_pass_count=len(passing),
        repeats=len(windows),
        gpu_seconds=gpu_s,
        warnings=warnings,
        concurrency=best.concurrency if best is not None else None,
        status=status,
        status_reason=reason,
    )
    for w in warnings:
        measurement.progress.note(f"warning: {w}")
    if reason is not None:
        measurement.progress.note(f"{status.replace('_', ' ')}: {reason}")


def load_of(w: WindowSummary) -> float:
    """A fixed-load window's load: its clients in the closed loop, else its rate (req/s)."""
    return float(w.concurrency) if w.concurrency is not None else w.rate_rps


def fixed_status(
    windows: list[WindowSummary], unit: str, endpoint: str
) -> tuple[ResultStatus, str | None]:
    """measured when a window met the SLO; else inconclusive when one could not be trusted,
    or when no window's misses came from the load (every request failed on something a
    lower load cannot help, or no window sent one; a timeout is the load's:
    :func:`~tokenwatt.analysis.not_load_reason`, as the search judges its probes); else
    none_met."""
    if any(w.slo_pass for w in windows):
        return "measured", None
    unclean = [(w, why) for w in windows if (why := untrusted_reason(w)) is not None]
    if unclean:
        w, why = unclean[0]
        return "inconclusive", (
            f"no load met the SLO, and the window at {load_of(w):g} {unit} could not be "
            f"measured cleanly ({why})"
        )
    if not windows:
        return "inconclusive", "no load was measured"
    if (not_load := not_load_reason(windows, endpoint, listed=True)) is not None:
        return "inconclusive", not_load
    lowest = min(load_of(w) for w in windows)
    return "none_met", f"no listed load met the SLO, the lowest ({lowest:g} {unit}) included"


def goodput_falls(passing: list[WindowSummary], unit: str) -> list[str]:
    """At most one warning when, among the loads that met the SLO, goodput (tok/s) falls as
    the load rises: the largest drop below the best goodput at a lower load, in words."""
    ordered = sorted(passing, key=load_of)
    worst: tuple[float, WindowSummary, WindowSummary] | None = None
    for i, high in enumerate(ordered):
        lower = [w for w in ordered[:i] if load_of(w) < load_of(high)]
        best_low = max(lower, key=lambda w: w.goodput_tok_s, default=None)
        if best_low is None or high.goodput_tok_s >= best_low.goodput_tok_s:
            continue
        drop = 100 * (1 - high.goodput_tok_s / best_low.goodput_tok_s)
        if worst is None or drop > worst[0]:
            worst = (drop, best_low, high)
    if worst is None:
        return []
    drop, low, high = worst
    return [
        f"goodput is not monotonic in load: {high.goodput_tok_s:,.1f} tok/s at "
        f"{load_of(high):g} {unit} is {drop:.1f}% below the {low.goodput_tok_s:,.1f} tok/s at "
        f"{load_of(low):g} {unit}, and both met the SLO; the result is the higher goodput"
    ]


__all__ = ["Windows", "fixed_status", "goodput_falls", "load_of", "measure_fixed"]
