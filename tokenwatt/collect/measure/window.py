"""One measurement window of a collect run: idle check, load, instruments, verdict.

:class:`WindowRunner` runs a :class:`WindowPlan` (a search probe or a repeat):

1. proves the engine idle (:mod:`tokenwatt.collect.measure.idle`: no request of ours
   open, ``/metrics`` running and waiting gauges at zero, within a bound that grows after
   an overloaded window), so the last window's requests do not load this one; a window
   that starts not proven idle is invalid (no verdict), and the caller measures it again;
2. hands the window to the instruments (:mod:`tokenwatt.collect.measure.instruments`: power and
   ``/metrics`` in threads of their own) and runs the load generator on a fresh event
   loop (or on the run's worker processes, :mod:`tokenwatt.collect.load.pool.workers`), with the
   early-stop rule for probes;
3. collects the instruments' readings (bounded wait) and names the failure mode of a
   window that missed the SLO.

Every window draws its requests from the one workload stream of the run, so no prompt is
sent twice unless the workload repeats it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from tokenwatt.collect.load.arrivals import window_request_count
from tokenwatt.collect.load.closedloop import run_closed_window
from tokenwatt.collect.load.event_loop import run_load
from tokenwatt.collect.load.loadgen import LEAD_S, LoadConfig, WindowResult, run_window
from tokenwatt.collect.load.pool.workers import WindowPool
from tokenwatt.collect.load.window_plan import WindowHooks
from tokenwatt.collect.load.window_plan import WindowPlan as WindowPlan  # measure's users' name
from tokenwatt.collect.measure.idle import NOT_IDLE_TAG, IdleGate, IdlePolicy, not_proven_reason
from tokenwatt.collect.measure.instruments import Instruments, InstrumentWindow
from tokenwatt.collect.measure.progress import Progress
from tokenwatt.collect.measure.stopping import GracefulStop
from tokenwatt.collect.measure.verdict import classification_view
from tokenwatt.collect.workload.workload import RequestSpec
from tokenwatt.records import (
    EngineMetrics,
    IdleStart,
    PowerWindow,
    RequestResult,
    Spec,
    WindowSummary,
)


@dataclass
class WindowOutcome:
    """What one window measured.

    Attributes:
        summary: the load generator's summary, with the failure mode of a miss.
        metrics: the engine's ``/metrics`` over the window, with the idle check before it
            (None when the window never began).
        power: the power window (None without a meter); invalid with reasons when the
            source failed or was late.
        warnings: human-readable flags of the window (not idle at its start, power or
            metrics invalid).
        requests: every request the window sent (warm-up and drain ones included), for
            the per-request file; emptied once written there.
        window_start_s: the window's start on the client's monotonic clock (s).
    """

    summary: WindowSummary
    metrics: EngineMetrics | None
    power: PowerWindow | None
    warnings: list[str] = field(default_factory=list)
    requests: list[RequestResult] = field(default_factory=list)
    window_start_s: float = 0.0


@dataclass(frozen=True)
class _Loaded:
    """The load generator's result and the window's instruments, still to be collected."""

    result: WindowResult
    instruments: InstrumentWindow


class WindowRunner:
    """Runs the windows of one collect run against one engine.

    Args:
        spec: the run's spec (engine, SLO, measurement limits).
        api_key: the engine's bearer token (never stored).
        workload: the run's one request stream, shared by every window.
        instruments: the run's power meter and ``/metrics`` scraper.
        progress: the live display.
        engine_name: the probe's engine name (llama.cpp gets a connection per request,
            :func:`tokenwatt.collect.load.http.keeps_streams_alive`).
        count_tokens: the model's tokenizer, to count outputs of a server without ``usage``.
        stop: the run's SIGTERM/SIGHUP handler: a signal during a window stops the window
            (kept, marked partial) instead of the process.
        pool: worker processes or Ray actors that send each window's schedule
            (:class:`~tokenwatt.collect.load.pool.workers.WorkerPool`,
            :class:`~tokenwatt.collect.load.pool.ray_pool.RayPool`); None: this process sends it on
            one event loop.
    """

    def __init__(
        self,
        spec: Spec,
        *,
        api_key: str | None,
        workload: Iterator[RequestSpec],
        instruments: Instruments,
        progress: Progress,
        engine_name: str | None = None,
        count_tokens: Callable[[str], int] | None = None,
        stop: GracefulStop | None = None,
        pool: WindowPool | None = None,
    ) -> None:
        self.spec = spec
        self.pool = pool
        self.workload = workload
        self.instruments = instruments
        self.progress = progress
        self.config = LoadConfig.for_spec(
            spec, api_key=api_key, engine_name=engine_name, count_tokens=count_tokens
        )
        self.idle = IdleGate(IdlePolicy.for_timeout(spec.measurement.request_timeout_s))
        self.idle_wait_s = self.idle.policy.base_s
        self.stop = stop or GracefulStop()

    def run(self, plan: WindowPlan) -> WindowOutcome:
        """Measure one window (see the module docstring).

        Raises:
            InputError: a request the API cannot take (from the load generator).
            KeyboardInterrupt: Ctrl-C; the instruments' window is ended first.
        """
        idle = self.idle.check(self.instruments)
        with self.stop.window():
            # The closed loop runs in this process (collect refuses workers with it).
            pool = self.pool is not None and plan.concurrency is None
            loaded = self._load_pool(plan) if pool else run_load(self._load(plan), plan.event_loop)
        readings = self.instruments.collect(loaded.instruments)
        if self.stop.requested is not None and loaded.result.summary.requests == 0:
            self.stop.raise_if_requested()  # stopped in its warm-up: nothing to keep
        metrics = readings.metrics
        if metrics is not None:
            metrics = metrics.model_copy(update={"idle_start": idle})
        summary = self._verdict(loaded.result, metrics)
        self.idle.after(summary, loaded.result.requests, readings.metrics)
        warnings = _warnings(idle, metrics, readings.power)
        if (not_idle := not_proven_reason(idle)) is not None:
            mark_cut(summary, not_idle, tag=NOT_IDLE_TAG)  # no verdict: measured again
        if self.stop.requested is not None:
            cut = f"interrupted by {self.stop.requested}: the window stopped early and is partial"
            warnings.append(cut)
            mark_cut(summary, cut, tag="interrupted")
        # The instruments' flags belong to the window the record and the page show.
        summary.warnings.extend(w for w in warnings if w not in summary.warnings)
        return WindowOutcome(
            summary=summary,
            metrics=metrics,
            power=readings.power,
            warnings=warnings,
            requests=loaded.result.requests,
            window_start_s=loaded.result.window_start_s,
        )

    def idle_power(self, seconds: float) -> PowerWindow | None:
        """Power with the engine idle for ``seconds`` (s), before the first window: the
        idle floor inside every window's board power. None without a power meter.

        The engine is first let go idle (as before a window); the readings come through the
        instruments, with their deadlines, like a window's.
        """
        if seconds <= 0 or self.instruments.meter is None:
            return None
        self.instruments.wait_idle(max_wait_s=self.idle_wait_s)
        win = self.instruments.begin(warmup_s=0.0, duration_s=seconds)
        time.sleep(LEAD_S + seconds)  # nothing runs meanwhile: the engine stays idle
        return self.instruments.collect(win).power

    async def _load(self, plan: WindowPlan) -> _Loaded:
        """The window on this process's event loop (open or closed loop)."""
        begin, hooks = self._hooks(plan)
        try:
            if plan.concurrency is not None:
                result = await run_closed_window(self.config, plan, self.workload, hooks)
            else:
                result = await run_window(self.config, plan, self.workload, hooks)
        finally:
            begin.end_now()
        return _Loaded(result=result, instruments=begin.window())

    def _load_pool(self, plan: WindowPlan) -> _Loaded:
        """:meth:`_load` with the pool's workers sending: the instruments are handed the
        window once every worker is ready, right before the shared start time is fixed."""
        assert self.pool is not None
        begin, hooks = self._hooks(plan)
        try:
            result = self.pool.run_window(self.config, plan, self.workload, hooks)
        finally:
            begin.end_now()
        return _Loaded(result=result, instruments=begin.window())

    def _hooks(self, plan: WindowPlan) -> tuple[_Begin, WindowHooks]:
        """The window's hooks: the live display, the early stop of a probe, the signal's
        interrupt, and the instruments handed the window right before its start is fixed
        (so both count the window from the same instant, ``LEAD_S`` after it, give or take
        the microseconds between the two calls)."""
        begin = _Begin(self.instruments, plan)
        hooks = WindowHooks(
            progress=self.progress.update,
            stop_early=self._stop_rule(plan) if plan.early_stop else None,
            interrupt=self.stop.interrupted,
            on_start=begin,
        )
        return begin, hooks

    def _stop_rule(self, plan: WindowPlan) -> Callable[[Sequence[RequestResult], float], bool]:
        from tokenwatt.analysis import missed_beyond_doubt

        expected = window_request_count(
            plan.rate_rps,
            plan.warmup_s,
            plan.duration_s,
            plan.seed,
            self.config.arrivals,
            self.config.profile,
        )
        slo = self.spec.slo

        def stop(requests: Sequence[RequestResult], _elapsed_s: float) -> bool:
            # collect.load.stream sets first_token_s at the first text chunk, so a request
            # still streaming is not counted as waiting for its first token.
            return missed_beyond_doubt(requests, expected, slo, now_s=time.perf_counter())

        return stop

    def _verdict(self, result: WindowResult, metrics: EngineMetrics | None) -> WindowSummary:
        """The summary, with the failure mode of a window that missed the SLO."""
        summary = result.summary
        if summary.slo_pass:
            return summary
        from tokenwatt.analysis import classify_failure

        view = classification_view(result, self.spec.slo, count_tokens=self.config.count_tokens)
        usable = metrics if metrics is not None and metrics.valid else None
        mode = classify_failure(view, usable, slo=self.spec.slo)
        # The stored p99s of an early-stopped window are infinite from our own
        # cancellations (methods/goodput.md); its reason says which limit the evidence
        # missed, from the view.
        detail = view.failure_reason
        if mode is not None:
            summary.failure_reason = f"{mode} ({detail})" if detail else mode
        elif summary.stopped_early:
            summary.failure_reason = detail
        return summary


class _Begin:
    """Hands the instruments the window when called (a window's ``on_start`` hook), and
    ends their window however the load ended."""

    def __init__(self, instruments: Instruments, plan: WindowPlan) -> None:
        self.instruments = instruments
        self.plan = plan
        self.win: InstrumentWindow | None = None

    def __call__(self) -> None:
        self.win = self.instruments.begin(
            warmup_s=self.plan.warmup_s, duration_s=self.plan.duration_s
        )

    def end_now(self) -> None:
        """End the instruments' window now, if it began."""
        if self.win is not None:
            self.win.end_now()

    def window(self) -> InstrumentWindow:
        """The instruments' window (the load generator called the hook before its start)."""
        assert self.win is not None
        return self.win


def mark_cut(summary: WindowSummary, reason: str, *, tag: str) -> None:
    """Mark a window cut short by something other than the engine's service (a signal to
    the collector, the engine's death): invalid, with ``reason`` first in its
    ``invalid_reason`` and ``tag`` (one word) as its failure reason, so that no table or
    sentence reads the cut as an SLO miss, nor its verdict as measured (``slo_beyond_doubt``
    cleared).
    """
    summary.valid = False
    summary.slo_pass = False
    summary.slo_beyond_doubt = None
    summary.invalid_reason = "; ".join(r for r in (reason, summary.invalid_reason) if r)
    summary.failure_reason = tag


def _warnings(
    idle: IdleStart, metrics: EngineMetrics | None, power: PowerWindow | None
) -> list[str]:
    out = []
    if (not_idle := not_proven_reason(idle)) is not None:
        out.append(f"{not_idle}; the window is invalid")
    if metrics is not None and not metrics.valid and metrics.invalid_reason:
        out.append(f"engine metrics invalid: {metrics.invalid_reason}")
    if power is not None and not power.valid:
        out.append("power invalid: " + "; ".join(power.invalid_reasons))
    return out
