"""A fixed-load run (``sweep.fixed``): one window at each listed load, no SLO search.

What ``tokenwatt collect --rate R``, ``--rates R1,R2,…`` and ``--concurrency C[,C…]`` ask
for. Each listed load (``sweep.rates`` in req/s for the open loop, ``sweep.concurrencies``
in clients for the closed loop) gets one window of ``measurement.window_s`` after
``measurement.warmup_s``, in order, every one of them whatever the verdicts: no early stop,
bisection, repeats or back-off. The windows are stored as the record's repeats (each with
its power and ``/metrics``, ``backoff`` 0), since each is a full measurement window; the
search probes stay empty. Every window reuses the workload's seed (common random numbers
across loads, as the search's probes do).

The result is the highest listed load whose window met the SLO: its rate (measured, in
the closed loop), goodput and client count; 0 when none met it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from tokenwatt.collect.measure.load_search import fixed_loads
from tokenwatt.collect.measure.progress import Progress
from tokenwatt.collect.measure.search import ProbeOutcome, monotonicity_warnings
from tokenwatt.collect.measure.window import WindowOutcome, WindowPlan
from tokenwatt.records import Repeat, RunRecord, SearchResult, Spec, WindowSummary, retried


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

    def load_of(w: WindowSummary) -> float:
        return float(w.concurrency) if w.concurrency is not None else w.rate_rps

    best = max(passing, key=load_of, default=None)
    points = [(load_of(w), w.slo_pass) for w in windows]
    warnings = monotonicity_warnings(points, unit=unit)
    rec.result = SearchResult(
        rate_rps=best.rate_rps if best is not None else 0.0,
        goodput_tok_s=best.goodput_tok_s if best is not None else 0.0,
        slo_pass_count=len(passing),
        repeats=len(windows),
        gpu_seconds=gpu_s,
        warnings=warnings,
        concurrency=best.concurrency if best is not None else None,
    )
    for w in warnings:
        measurement.progress.note(f"warning: {w}")


__all__ = ["Windows", "measure_fixed"]
