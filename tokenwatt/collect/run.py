"""``tokenwatt collect`` (= ``tokenwatt run``): measure one configuration into a run record.

Steps: load the spec and apply the mode; read the API key from the variable the spec
names; probe the engine; open the power meter; run the SLO search (DESIGN.md) with the load
generator, scraping ``/metrics`` and reading power per window; measure the repeats at the
found rate; compute MBU when the model's geometry is known; run the accuracy suite; write
the :class:`~tokenwatt.records.RunRecord`.

The record is written atomically (a temporary file in the same folder, then
``os.replace``), after every window as a checkpoint and at the end. Ctrl-C or an engine that
stops answering ends the run with a valid record marked ``complete: false`` that keeps
everything measured so far.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tokenwatt import __version__
from tokenwatt.collect.modes import PRESETS
from tokenwatt.collect.options import CollectOptions
from tokenwatt.collect.progress import Progress
from tokenwatt.collect.runfile import (
    check_run_options,
    environment_from,
    git_commit,
    load_run_spec,
    read_api_key,
    suite_path,
    write_record,
)
from tokenwatt.collect.search import (
    Phase,
    ProbeOutcome,
    ProbePolicy,
    SearchOptions,
    measure_repeats,
    monotonicity_warnings,
    slo_search,
)
from tokenwatt.collect.verdict import RETRIED_PREFIX, classification_view, retried
from tokenwatt.errors import EngineError, InputError, Problem, TelemetryError
from tokenwatt.records.power import PowerWindow
from tokenwatt.records.run import (
    EngineMetrics,
    Probe,
    Repeat,
    RunRecord,
    SearchResult,
    ToolInfo,
)
from tokenwatt.records.spec import Spec, fingerprint
from tokenwatt.records.window import WindowSummary

FAST_WARMUP_AFTER_PASS = 10 / 45
"""``--fast-search``: warm-up after a passing probe, as a share of ``warmup_s`` (10 of 45 s)."""
FAST_SCOUT_WINDOW = 15 / 60
"""``--fast-search``: scout window as a share of ``search_window_s`` (15 of 60 s)."""
CLIENT_LAG_RETRY_FRACTION = 0.1
"""A probe that missed while the client itself ran late — send-lag p99 above 10% of the TTFT
limit (and above DESIGN.md's 10 ms client-bound mark) — is measured once more: TTFT counts
from the scheduled time, so the client's lag alone can push it over the limit."""

REPEAT_SEED_STRIDE = 1000
"""Repeat *i* uses arrival seed ``workload.seed + 1000 × (i + 1)``: a fresh Poisson sample,
while every search probe reuses ``workload.seed`` (common random numbers make pass/fail
smoother in rate)."""


class EngineDiedError(EngineError):
    """The engine stopped answering in the middle of the run."""


class _Run:
    """One collect run's state, so that an interruption can write what was measured."""

    def __init__(self, opts: CollectOptions, spec: Spec, api_key: str | None) -> None:
        self.opts = opts
        self.spec = spec
        self.api_key = api_key
        self.meter: Any = None
        self.progress = Progress(enabled=opts.progress)
        self.history: list[tuple[float, bool]] = []
        m = spec.measurement
        self.policy = ProbePolicy(m.warmup_s, m.search_window_s)
        self.search_options = SearchOptions()
        if opts.fast_search:
            self.policy = ProbePolicy(
                m.warmup_s,
                m.search_window_s,
                warmup_after_pass_s=m.warmup_s * FAST_WARMUP_AFTER_PASS,
                scout_window_s=m.search_window_s * FAST_SCOUT_WINDOW,
                scout_until_rel=0.5,
            )
            self.search_options = SearchOptions(bisect_until_rel=0.05, geometric_bisect=True)
        self.record = RunRecord(
            tool=ToolInfo(
                version=__version__, git_commit=git_commit(Path(__file__).resolve().parent)
            ),
            label=opts.label,
            role=opts.role,
            mode=opts.mode,
            spec=spec,
            fingerprint=fingerprint(spec),
            command=opts.command,
            started=dt.datetime.now(dt.UTC),
            complete=False,
            incomplete_reason="in progress",
        )
        if not PRESETS[opts.mode].reportable:
            self.record.not_covered.append(
                "Smoke mode: a pipeline check; its numbers are not measurements"
            )

    def checkpoint(self) -> None:
        write_record(self.record, self.opts.out)

    # -- one window --------------------------------------------------------------------

    async def _window(
        self, rate: float, duration_s: float, warmup_s: float, seed: int, early_stop: bool
    ) -> tuple[WindowSummary, EngineMetrics | None, PowerWindow | None]:
        from tokenwatt.analysis.latency import missed_beyond_doubt
        from tokenwatt.collect.arrivals import window_request_count
        from tokenwatt.collect.loadgen import LoadConfig, run_window
        from tokenwatt.collect.probes import MetricsScraper
        from tokenwatt.collect.workload import workload_for

        spec = self.spec
        cfg = LoadConfig(
            endpoint=spec.engine.endpoint,
            model=spec.engine.model,
            slo=spec.slo,
            api=spec.engine.api,
            api_key=self.api_key,
            ignore_eos=spec.engine.ignore_eos,
            max_concurrency=spec.measurement.max_concurrency,
            request_timeout_s=spec.measurement.request_timeout_s,
        )
        stop: Callable[[Any, float], bool] | None = None
        if early_stop:
            import time

            expected = window_request_count(rate, warmup_s, duration_s, seed)

            def stop(requests: Any, _elapsed: float) -> bool:
                # collect.stream sets first_token_s at the first text chunk, so a request
                # still streaming is not counted as waiting for its first token.
                return missed_beyond_doubt(requests, expected, spec.slo, now_s=time.perf_counter())

        scraper = MetricsScraper(
            spec.engine.endpoint, interval_s=min(1.0, duration_s / 4), api_key=self.api_key
        )
        power: list[PowerWindow | None] = [None]
        metrics: list[EngineMetrics | None] = [None]
        stopping = [False]
        lead_s = 0.05  # the load generator starts its schedule this long after the call

        async def watch() -> None:
            await asyncio.sleep(lead_s + warmup_s)
            # Scrapes of the warm-up are dropped; the first one of the window is the
            # baseline of the counters.
            scraper.scrapes.clear()
            await scraper.scrape_once()
            if self.meter is not None:
                self.meter.start_window()
            try:
                await asyncio.sleep(duration_s)
            finally:
                stopping[0] = True  # a cancel from here on would lose the window's metrics
                # The meter first: no await before it, so a cancellation of this task
                # cannot leave its window open.
                if self.meter is not None:
                    try:
                        power[0] = self.meter.stop_window()
                    except TelemetryError as exc:
                        self.record.not_covered.append(f"Power: {exc}")
                        self.meter = None
                metrics[0] = await scraper.stop()

        # Opening the scraper's HTTP client blocks the event loop for a moment (TLS
        # context); do it before the load generator's schedule starts.
        await scraper.start()
        watcher = asyncio.create_task(watch())
        try:
            result = await run_window(
                cfg,
                rate_rps=rate,
                duration_s=duration_s,
                warmup_s=warmup_s,
                requests=workload_for(spec, base_dir=self.opts.spec_path.parent),
                seed=seed,
                progress=self.progress.update,
                stop_early=stop,
            )
        finally:
            if not watcher.done() and not stopping[0]:
                watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            if metrics[0] is None:  # stopped before the window began
                await scraper.stop()
        summary = result.summary
        if not summary.slo_pass:
            from tokenwatt.analysis.failure import classify_failure

            view = classification_view(result, spec.slo)
            mode = classify_failure(view, metrics[0], slo=spec.slo)
            if mode is not None:
                # An early-stopped window's own reason counts our cancellations as errors;
                # the view's says what the engine did.
                detail = view.failure_reason
                summary.failure_reason = f"{mode} ({detail})" if detail else mode
        return summary, metrics[0], power[0]

    def _check_engine(self, summary: WindowSummary) -> None:
        """A window where nothing succeeded: ask the engine whether it is still there."""
        if summary.completed > 0 or summary.errors == 0:
            return
        from tokenwatt.collect.probes import probe_engine

        try:
            probe_engine(self.spec.engine.endpoint, self.api_key, timeout_s=5.0)
        except EngineError as exc:
            raise EngineDiedError(f"the engine stopped answering: {exc}") from exc

    def run_one(
        self,
        step: str,
        rate: float,
        duration_s: float,
        seed: int,
        early_stop: bool,
        warmup_s: float | None = None,
    ) -> tuple[WindowSummary, EngineMetrics | None, PowerWindow | None, ProbeOutcome]:
        self.progress.begin(step)
        if warmup_s is None:
            warmup_s = self.spec.measurement.warmup_s
        summary, metrics, power = asyncio.run(
            self._window(rate, duration_s, warmup_s, seed, early_stop)
        )
        saved = max(0.0, duration_s - summary.duration_s) if summary.stopped_early else 0.0
        outcome = ProbeOutcome(
            summary.slo_pass,
            warmup_s=warmup_s,
            window_s=summary.duration_s,
            saved_s=saved,
            stopped_early=summary.stopped_early,
        )
        verdict = "meets the SLO" if summary.slo_pass else f"misses: {summary.failure_reason}"
        self.progress.note(f"{step} at {rate:.4g} req/s: {verdict}")
        return summary, metrics, power, outcome

    # -- the whole run -----------------------------------------------------------------

    def _measured(
        self,
        step: str,
        rate: float,
        duration_s: float,
        seed: int,
        early_stop: bool,
        store: Callable[[WindowSummary, EngineMetrics | None, PowerWindow | None], None],
        warmup_s: float | None = None,
    ) -> ProbeOutcome:
        """One window; a miss that the client's own lag may explain is measured again once.

        Both windows are stored (the first marked :data:`RETRIED_PREFIX`); the verdict is
        the second's, the GPU time is both's.
        """
        spent = ProbeOutcome(False)
        for attempt in range(2):
            summary, metrics, power, outcome = self.run_one(
                step, rate, duration_s, seed, early_stop, warmup_s
            )
            spent = ProbeOutcome(
                outcome.passed,
                warmup_s=spent.warmup_s + outcome.warmup_s,
                window_s=spent.window_s + outcome.window_s,
                saved_s=spent.saved_s + outcome.saved_s,
                stopped_early=outcome.stopped_early,
            )
            retry = attempt == 0 and not summary.slo_pass and self._client_lagged(summary)
            if retry:
                self.progress.note(
                    f"{step}: the client lagged (send-lag p99 {summary.send_lag_p99_ms:.0f} ms);"
                    " this window's verdict is not used, measuring again"
                )
                summary.failure_reason = (
                    f"{RETRIED_PREFIX} (send-lag p99 {summary.send_lag_p99_ms:.0f} ms), "
                    f"measured again: {summary.failure_reason}"
                )
            store(summary, metrics, power)
            self.checkpoint()
            self._check_engine(summary)
            if not retry:
                break
        return spent

    def _client_lagged(self, summary: WindowSummary) -> bool:
        limit_ms = CLIENT_LAG_RETRY_FRACTION * self.spec.slo.ttft_p99_ms
        return summary.client_bound and summary.send_lag_p99_ms > max(10.0, limit_ms)

    def probe(self, rate: float, phase: Phase) -> ProbeOutcome:
        """One search probe (the callback of :func:`slo_search`)."""
        warmup_s, window_s = self.policy.plan(phase, self.history)

        def store(w: WindowSummary, metrics: EngineMetrics | None, _p: PowerWindow | None) -> None:
            self.record.probes.append(
                Probe(phase=phase, window=w, metrics=metrics, warmup_s=warmup_s)
            )

        step = f"{phase} probe {len(self.record.probes) + 1}"
        outcome = self._measured(
            step, rate, window_s, self.spec.workload.seed, True, store, warmup_s
        )
        self.history.append((rate, outcome.passed))
        return outcome

    def repeat(self, rate: float, index: int, backoffs: int) -> ProbeOutcome:
        """One measurement repeat (the callback of :func:`measure_repeats`)."""
        m = self.spec.measurement
        seed = self.spec.workload.seed + REPEAT_SEED_STRIDE * (index + 1)

        def store(w: WindowSummary, metrics: EngineMetrics | None, p: PowerWindow | None) -> None:
            self.record.repeats.append(Repeat(window=w, power=p, metrics=metrics, backoff=backoffs))

        step = f"repeat {index + 1}/{m.repeats}"
        return self._measured(step, rate, m.window_s, seed, False, store)

    def measure(self) -> None:
        spec, rec = self.spec, self.record
        trace = slo_search(self.probe, spec.sweep, self.search_options)
        warnings = list(trace.warnings)
        for w in warnings:
            self.progress.note(f"warning: {w}")
        result = SearchResult(
            rate_rps=0.0,
            goodput_tok_s=0.0,
            slo_pass_count=0,
            repeats=0,
            gpu_seconds=trace.gpu_seconds,
            gpu_seconds_saved=trace.gpu_seconds_saved,
            warnings=warnings,
        )
        rec.result = result
        if trace.found_rps is None:
            return
        s = spec.sweep
        reps = measure_repeats(
            self.repeat, trace.found_rps, spec.measurement.repeats, s.backoff, s.max_backoffs
        )
        points = [(p.rate_rps, p.outcome.passed) for p in trace.steps]
        repeat_points = [(p.rate_rps, p.outcome.passed) for p in reps.steps]
        extra = [w for w in monotonicity_warnings(points, repeat_points) if w not in warnings]
        final = [r for r in rec.repeats if r.backoff == reps.backoffs and not retried(r.window)]
        passing = [r for r in final if r.window.slo_pass]
        goodput = repeats_goodput(final, confirmed=reps.rate_rps is not None)
        if reps.rate_rps is None:
            extra.append("no repeat met the SLO after the last back-off; goodput is 0")
        rec.result = result.model_copy(
            update={
                "rate_rps": reps.rate_rps or 0.0,
                "goodput_tok_s": goodput,
                "slo_pass_count": len(passing),
                "repeats": len(final),
                "backoffs": reps.backoffs,
                "gpu_seconds": trace.gpu_seconds + reps.gpu_seconds,
                "gpu_seconds_saved": trace.gpu_seconds_saved + reps.gpu_seconds_saved,
                "warnings": warnings + extra,
            }
        )


def repeats_goodput(final: list[Repeat], *, confirmed: bool) -> float:
    """The run's goodput (tok/s): the mean goodput of the final repeats, all of which met
    the SLO; 0 when the back-offs ran out without a rate whose every repeat met it.

    DESIGN.md: goodput is taken at the highest rate whose windows meet the SLO. When the
    last back-off still had a miss there is no such rate, so a passing window measured
    before that miss is no goodput figure.
    """
    passing = [r for r in final if r.window.slo_pass]
    if not confirmed or not passing:
        return 0.0
    return sum(r.window.goodput_tok_s for r in passing) / len(passing)


def collect(opts: CollectOptions) -> RunRecord:
    """Measure one configuration and write its run record to ``opts.out``.

    Returns:
        The record as written; ``complete`` is False when the run was interrupted (Ctrl-C)
        or the engine died, with ``incomplete_reason`` saying which.

    Raises:
        SpecError: the spec is invalid (nothing is written).
        InputError: the API key variable is unset, the suite or engine log is unreadable.
        EngineError: the engine cannot be reached at the start (nothing is written).
    """
    from tokenwatt.collect.mbu_step import mbu_for
    from tokenwatt.collect.probes import probe_engine, scan_engine_log
    from tokenwatt.sim.server import SIM_VERSION

    spec = load_run_spec(opts.spec_path, opts.mode, opts.endpoint, opts.kv_dtype)
    api_key = read_api_key(spec, str(opts.spec_path), opts.environ)
    suite = suite_path(spec, opts.spec_path) if opts.accuracy else None
    if suite is not None and not suite.is_file():
        raise InputError([Problem(str(opts.spec_path), "accuracy.suite", f"no such file: {suite}")])
    check_run_options(
        label=opts.label,
        role=opts.role,
        mode=opts.mode,
        out=opts.out,
        spec_path=opts.spec_path,
        suite=suite,
        engine_log=opts.engine_log,
    )
    warnings = scan_engine_log(opts.engine_log) if opts.engine_log is not None else []
    info = probe_engine(spec.engine.endpoint, api_key)
    run = _Run(opts, spec, api_key)
    rec = run.record
    rec.engine_warnings = warnings
    rec.simulated = spec.hardware.adapter == "sim" or (info.engine_version or "").startswith(
        SIM_VERSION.split()[0]
    )
    if spec.engine.model not in info.served_models:
        rec.engine_warnings.append(
            f"engine.model {spec.engine.model!r} is not among the served models "
            f"{info.served_models}"
        )
    if spec.power.source != "none":
        from tokenwatt.telemetry import open_meter

        try:
            run.meter = open_meter(spec, sim_endpoint=spec.engine.endpoint)
        except TelemetryError as exc:
            rec.not_covered.append(f"Power: the meter could not be opened ({exc})")
    else:
        rec.not_covered.append("Power: no power source configured (power.source: none)")
    try:
        rec.environment = environment_from(info, run.meter, spec)
        if (info.engine_version or "").startswith(SIM_VERSION.split()[0]):
            # It speaks vLLM's metric names, but it is the simulator.
            rec.environment.engine_name = SIM_VERSION.split()[0]
        run.checkpoint()
        with run.progress:
            run.measure()
            mbu, note = mbu_for(spec, rec)
            rec.mbu = mbu
            if note:
                rec.not_covered.append(note)
            if suite is not None:
                from tokenwatt.collect.accuracy import run_suite

                run.progress.begin("accuracy suite")
                rec.accuracy = run_suite(
                    spec,
                    spec.engine.endpoint,
                    api_key,
                    suite,
                    limit=spec.accuracy.limit,
                    seeds=spec.accuracy.seeds,
                )
        rec.complete = True
        rec.incomplete_reason = None
    except KeyboardInterrupt:
        rec.incomplete_reason = "interrupted (Ctrl-C); everything measured so far is kept"
    except EngineDiedError as exc:
        rec.incomplete_reason = str(exc)
    finally:
        rec.finished = dt.datetime.now(dt.UTC)
        if run.meter is not None:
            with contextlib.suppress(TelemetryError):
                run.meter.close()
        run.checkpoint()
    return rec
