"""``tokenwatt collect`` (= ``tokenwatt run``): measure one configuration into a run record.

Steps: load the spec and apply the mode; read the API key from the variable the spec
names; probe the engine; open the power meter; run the SLO search (methods/goodput.md) with the load
generator, scraping ``/metrics`` and reading power per window; measure the repeats at the
found rate; compute MBU when the model's geometry is known; run the accuracy suite; write
the :class:`~tokenwatt.records.RunRecord`.

The record is written atomically (a temporary file in the same folder, then
``os.replace``), after every window as a checkpoint and at the end. Ctrl-C or an engine that
stops answering ends the run with a valid record marked ``complete: false`` that keeps
everything measured so far.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenwatt import __version__
from tokenwatt.collect.closedloop import closed_loop_workers
from tokenwatt.collect.dataset import pin_dataset
from tokenwatt.collect.engine_proc import (
    apply_engine_cmd,
    check_launch_options,
    launched_engine,
    track_engine,
)
from tokenwatt.collect.fixed_loads import measure_fixed
from tokenwatt.collect.instruments import Instruments
from tokenwatt.collect.load_search import backed_off_concurrency, concurrency_search
from tokenwatt.collect.modes import PRESETS, mode_lines, mode_overrides
from tokenwatt.collect.options import CollectOptions
from tokenwatt.collect.point import run_spec, spec_yaml
from tokenwatt.collect.preflight import check_served_model, check_workload_fits
from tokenwatt.collect.progress import Progress
from tokenwatt.collect.request_log import RequestLogWriter, log_path, log_window
from tokenwatt.collect.runfile import (
    check_run_options,
    check_trace_file,
    environment_from,
    git_commit,
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
from tokenwatt.collect.stopping import GracefulStop, StopSignal, failure_reason
from tokenwatt.collect.tokens import load_token_counter
from tokenwatt.collect.verdict import RETRIED_PREFIX, retried
from tokenwatt.collect.window import WindowOutcome, WindowPlan, WindowRunner
from tokenwatt.collect.workers import pool_for, resolve_workers
from tokenwatt.collect.workload import WorkloadStream, workload_for
from tokenwatt.errors import EngineError, InputError, Problem, TelemetryError
from tokenwatt.files import exclusive_lock
from tokenwatt.records import (
    SIM_VERSION,
    Probe,
    PromptStats,
    Repeat,
    RunRecord,
    SearchResult,
    Spec,
    ToolInfo,
    WindowSummary,
    fingerprint,
)
from tokenwatt.telemetry import PowerMeter

FAST_WARMUP_AFTER_PASS = 10 / 45
"""``--fast-search``: warm-up after a passing probe, as a share of ``warmup_s`` (10 of 45 s)."""
FAST_SCOUT_WINDOW = 15 / 60
"""``--fast-search``: scout window as a share of ``search_window_s`` (15 of 60 s)."""
CLIENT_LAG_RETRY_FRACTION = 0.1
"""A probe that missed while the client itself ran late — send-lag p99 above 10% of the TTFT
limit (and above the 10 ms client-bound mark of methods/goodput.md) — is measured once more:
TTFT counts from the scheduled time, so the client's lag alone can push it over the limit."""

REPEAT_SEED_STRIDE = 1000
"""Repeat *i* uses arrival seed ``workload.seed + 1000 × (i + 1)``: a fresh Poisson sample,
while every search probe reuses ``workload.seed`` (common random numbers make pass/fail
smoother in rate)."""


class EngineDiedError(EngineError):
    """The engine stopped answering in the middle of the run."""


@dataclass(frozen=True)
class SearchSetup:
    """How the SLO search spends GPU time: the probe policy and the search options."""

    policy: ProbePolicy
    options: SearchOptions

    @classmethod
    def for_run(cls, spec: Spec, *, fast: bool) -> SearchSetup:
        """The search of methods/goodput.md, or ``--fast-search``'s cheaper one when ``fast``."""
        m = spec.measurement
        if not fast:
            return cls(ProbePolicy(m.warmup_s, m.search_window_s), SearchOptions())
        policy = ProbePolicy(
            m.warmup_s,
            m.search_window_s,
            warmup_after_pass_s=m.warmup_s * FAST_WARMUP_AFTER_PASS,
            scout_window_s=m.search_window_s * FAST_SCOUT_WINDOW,
            scout_until_rel=0.5,
        )
        return cls(policy, SearchOptions(bisect_until_rel=0.05, geometric_bisect=True))


def new_record(opts: CollectOptions, spec: Spec) -> RunRecord:
    """The run record as it stands before the first window (``complete`` false)."""
    record = RunRecord(
        tool=ToolInfo(version=__version__, git_commit=git_commit(Path(__file__).resolve().parent)),
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
        record.not_covered.append("Smoke mode: a pipeline check; its numbers are not measurements")
    return record


def window_cost(plan: WindowPlan, summary: WindowSummary) -> ProbeOutcome:
    """What a measured window cost and concluded, for the search's bookkeeping."""
    stopped = summary.stopped_early
    return ProbeOutcome(
        passed=summary.slo_pass,
        warmup_s=plan.warmup_s,
        window_s=summary.duration_s,
        saved_s=max(0.0, plan.duration_s - summary.duration_s) if stopped else 0.0,
        stopped_early=stopped,
    )


class Measurement:
    """The SLO search and the repeats of one run; every window is stored in the record
    (and the record written) as soon as it is measured.

    Args:
        record: the run record to fill.
        runner: runs one window.
        setup: the search's policy and options.
        checkpoint: writes the record (called after every window).
        check_engine: raises :class:`EngineDiedError` when the engine is gone.
    """

    def __init__(
        self,
        record: RunRecord,
        runner: WindowRunner,
        setup: SearchSetup,
        *,
        checkpoint: Callable[[], None],
        check_engine: Callable[[], None],
    ) -> None:
        self.record = record
        self.spec = record.spec
        self.runner = runner
        self.progress = runner.progress
        self.setup = setup
        self.checkpoint = checkpoint
        self.check_engine = check_engine
        self.history: list[tuple[float, bool]] = []
        self.request_log: RequestLogWriter | None = None
        self.closed = self.spec.measurement.profile == "concurrency"

    def _log_requests(self, outcome: WindowOutcome) -> None:
        """Add the window just stored to the per-request file (:func:`log_window`)."""
        if not log_window(self.request_log, self.record, outcome):
            self.request_log = None

    def plan(self, load: float, **kwargs: Any) -> WindowPlan:
        """A window at ``load``: req/s in the open loop, clients in the closed loop
        (a backed-off load rounded down to whole clients)."""
        if not self.closed:
            return WindowPlan(rate_rps=load, **kwargs)
        return WindowPlan(rate_rps=load, concurrency=backed_off_concurrency(load), **kwargs)

    def _measured(
        self, step: str, plan: WindowPlan, store: Callable[[WindowOutcome], None]
    ) -> ProbeOutcome:
        """One window; a miss that the client's own lag may explain is measured again once.

        Both windows are stored (the first marked :data:`RETRIED_PREFIX`); the verdict is
        the second's, the GPU time is both's.
        """
        spent: ProbeOutcome | None = None
        for attempt in range(2):
            self.progress.begin(step)
            outcome = self.runner.run(plan)
            summary = outcome.summary
            cost = window_cost(plan, summary)
            spent = cost if spent is None else _plus(spent, cost)
            self._note(step, plan, outcome)
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
            store(outcome)
            self._log_requests(outcome)
            self.checkpoint()
            self.runner.stop.raise_if_requested()
            # Nothing answered, or the connection failed: is the engine still there? (One
            # that died late in a window still answered most of it.)
            transport = {"connect", "disconnect"} & set(summary.error_kinds)
            if (summary.completed == 0 and summary.errors > 0) or transport:
                self.check_engine()
            if not retry:
                break
        assert spent is not None
        return spent

    def _note(self, step: str, plan: WindowPlan, outcome: WindowOutcome) -> None:
        s = outcome.summary
        verdict = "meets the SLO" if s.slo_pass else f"misses: {s.failure_reason}"
        load = f"{plan.rate_rps:.4g} req/s"
        if plan.concurrency is not None:
            load = f"{plan.concurrency} clients ({s.rate_rps:.4g} req/s measured)"
        self.progress.note(f"{step} at {load}: {verdict}")
        for warning in outcome.warnings:
            self.progress.note(f"  warning: {warning}")

    def _client_lagged(self, summary: WindowSummary) -> bool:
        limit_ms = CLIENT_LAG_RETRY_FRACTION * self.spec.slo.ttft_p99_ms
        lag = summary.send_lag_p99_ms  # None in a closed loop: no schedule to lag behind
        return summary.client_bound and lag is not None and lag > max(10.0, limit_ms)

    def probe(self, rate: float, phase: Phase) -> ProbeOutcome:
        """One search probe (the callback of :func:`slo_search`)."""
        warmup_s, window_s = self.setup.policy.plan(phase, self.history)
        plan = self.plan(
            rate,
            duration_s=window_s,
            warmup_s=warmup_s,
            seed=self.spec.workload.seed,
            early_stop=not self.closed,
        )

        def store(o: WindowOutcome) -> None:
            self.record.probes.append(
                Probe(phase=phase, window=o.summary, metrics=o.metrics, warmup_s=warmup_s)
            )

        outcome = self._measured(f"{phase} probe {len(self.record.probes) + 1}", plan, store)
        self.history.append((rate, outcome.passed))
        return outcome

    def repeat(self, rate: float, index: int, backoffs: int) -> ProbeOutcome:
        """One measurement repeat (the callback of :func:`measure_repeats`)."""
        m = self.spec.measurement
        plan = self.plan(
            rate,
            duration_s=m.window_s,
            warmup_s=m.warmup_s,
            seed=self.spec.workload.seed + REPEAT_SEED_STRIDE * (index + 1),
        )

        def store(o: WindowOutcome) -> None:
            self.record.repeats.append(
                Repeat(window=o.summary, power=o.power, metrics=o.metrics, backoff=backoffs)
            )

        return self._measured(f"repeat {index + 1}/{m.repeats}", plan, store)

    def run(self) -> None:
        """The SLO search, then the repeats at the rate it found; fills ``record.result``."""
        spec, rec = self.spec, self.record
        if spec.sweep.fixed:
            measure_fixed(self)
            return
        if self.closed:
            ceiling = spec.measurement.max_concurrency
            trace = concurrency_search(self.probe, spec.sweep, ceiling)
        else:
            trace = slo_search(self.probe, spec.sweep, self.setup.options)
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
        unit = "clients" if self.closed else "req/s"
        more = monotonicity_warnings(points, repeat_points, unit=unit)
        extra = [w for w in more if w not in warnings]
        final = [r for r in rec.repeats if r.backoff == reps.backoffs and not retried(r.window)]
        passing = [r for r in final if r.window.slo_pass]
        goodput = repeats_goodput(final, confirmed=reps.rate_rps is not None)
        if reps.rate_rps is None:
            extra.append("no repeat met the SLO after the last back-off; goodput is 0")
        rate = reps.rate_rps or 0.0
        clients = None
        if self.closed and reps.rate_rps is not None:
            # The closed loop's rate is what the passing repeats measured at the clients found.
            clients = backed_off_concurrency(reps.rate_rps)
            rate = sum(r.window.rate_rps for r in passing) / max(len(passing), 1)
        rec.result = result.model_copy(
            update={
                "rate_rps": rate,
                "concurrency": clients,
                "goodput_tok_s": goodput,
                "slo_pass_count": len(passing),
                "repeats": len(final),
                "backoffs": reps.backoffs,
                "gpu_seconds": trace.gpu_seconds + reps.gpu_seconds,
                "gpu_seconds_saved": trace.gpu_seconds_saved + reps.gpu_seconds_saved,
                "warnings": warnings + extra,
            }
        )


def _plus(a: ProbeOutcome, b: ProbeOutcome) -> ProbeOutcome:
    """Two windows' costs together; the verdict is the later one's."""
    return ProbeOutcome(
        passed=b.passed,
        warmup_s=a.warmup_s + b.warmup_s,
        window_s=a.window_s + b.window_s,
        saved_s=a.saved_s + b.saved_s,
        stopped_early=b.stopped_early,
    )


def repeats_goodput(final: list[Repeat], *, confirmed: bool) -> float:
    """The run's goodput (tok/s): the mean goodput of the final repeats, all of which met
    the SLO; 0 when the back-offs ran out without a rate whose every repeat met it.

    methods/goodput.md: goodput is taken at the highest rate whose windows meet the SLO. When the
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
        The record as written; ``complete`` is False when the run was interrupted (Ctrl-C,
        SIGTERM, SIGHUP) or the engine died, with ``interrupted`` naming which and
        ``incomplete_reason`` saying it in words.

    Raises:
        SpecError: the spec is invalid (nothing is written).
        InputError: the API key variable is unset, the suite or engine log is unreadable.
        EngineError: the engine cannot be reached at the start (nothing is written).
        StopSignal: SIGTERM or SIGHUP before the first window (nothing is written).
        KeyboardInterrupt: Ctrl-C before the first window (nothing is written).
        Exception: anything unexpected is raised on; once the record exists it is written
            first, ``complete: false`` with ``incomplete_reason`` naming the error
            (:func:`tokenwatt.collect.stopping.failure_reason`).
    """
    # From the start: a signal during the checks stops the run cleanly (lock released).
    with GracefulStop() as stop:
        return _collect(opts, stop)


def _collect(opts: CollectOptions, stop: GracefulStop) -> RunRecord:
    from tokenwatt.collect.probes import probe_engine, scan_engine_log

    raw, spec = run_spec(opts)
    spec = apply_engine_cmd(pin_dataset(spec, opts.spec_path), opts.engine_cmd)
    overrides = mode_overrides(raw, spec)
    if opts.point is not None and opts.point.any_given:
        # What the flags made of the spec, before anything is sent: the record stores it.
        print("effective spec:\n" + spec_yaml(spec), file=sys.stderr, flush=True)
    api_key = read_api_key(spec, str(opts.spec_path), opts.environ)
    suite = suite_path(spec, opts.spec_path) if opts.accuracy else None
    if suite is not None and not suite.is_file():
        raise InputError([Problem(str(opts.spec_path), "accuracy.suite", f"no such file: {suite}")])
    check_trace_file(spec, opts.spec_path)
    check_run_options(
        label=opts.label,
        role=opts.role,
        mode=opts.mode,
        out=opts.out,
        spec_path=opts.spec_path,
        suite=suite,
        engine_log=opts.engine_log,
    )
    for line in mode_lines(spec, opts.mode, overrides, accuracy=suite is not None):
        print(line, file=sys.stderr, flush=True)
    check_launch_options(spec, opts.engine_log)
    with (
        exclusive_lock(opts.out, what="tokenwatt collect"),
        launched_engine(spec, opts.out, api_key) as engine,
    ):
        spec = engine.spec_for(spec) if engine is not None else spec
        engine_log = engine.plan.log_path if engine is not None else opts.engine_log
        warnings = scan_engine_log(engine_log) if engine_log is not None else []
        info = probe_engine(spec.engine.endpoint, api_key)
        # Everything that can refuse the run does so before the first request.
        served_warnings = check_served_model(spec, info, opts.spec_path)
        counter = load_token_counter(spec, opts.spec_path)
        stream = workload_for(
            spec,
            base_dir=opts.spec_path.parent,
            context_length=info.max_model_len,
            count_tokens=counter,
            spec_file=opts.spec_path,
        )
        fit_notes = check_workload_fits(spec, stream, info, opts.spec_path, count_tokens=counter)
        rec = new_record(opts, spec)
        rec.mode_overrides = overrides
        rec.engine_warnings = warnings + served_warnings
        if engine is not None:
            track_engine(engine, rec, lambda: write_record(rec, opts.out), served_warnings)
        rec.not_covered += fit_notes
        sim_name = SIM_VERSION.split()[0]
        is_sim_engine = (info.engine_version or "").startswith(sim_name)
        rec.simulated = spec.hardware.adapter == "sim" or is_sim_engine
        meter = _open_meter(spec, rec)
        workers = closed_loop_workers(spec, resolve_workers(spec, stream))
        # Started once for the run, before the idle check and the first window.
        pool = pool_for(spec, workers) or contextlib.nullcontext()
        with (
            pool as worker_pool,
            Instruments(spec.engine.endpoint, api_key=api_key, meter=meter) as instruments,
        ):
            rec.environment = environment_from(info, meter, spec)
            if is_sim_engine:
                # It speaks vLLM's metric names, but it is the simulator.
                rec.environment.engine_name = sim_name
            runner = WindowRunner(
                spec,
                api_key=api_key,
                workload=stream,  # one stream: every window draws fresh requests from it
                instruments=instruments,
                progress=Progress(enabled=opts.progress),
                engine_name=info.engine_name,
                count_tokens=counter,
                stop=stop,
                pool=worker_pool,
            )
            _measure(opts, rec, runner, suite, stream)
    return rec


def _open_meter(spec: Spec, rec: RunRecord) -> PowerMeter | None:
    """The spec's power meter, or None (noted in ``rec.not_covered``)."""
    if spec.power.source == "none":
        rec.not_covered.append("Power: no power source configured (power.source: none)")
        return None
    from tokenwatt.telemetry import open_meter

    try:
        return open_meter(spec, sim_endpoint=spec.engine.endpoint)
    except TelemetryError as exc:
        rec.not_covered.append(f"Power: the meter could not be opened ({exc})")
        return None


def _measure(
    opts: CollectOptions,
    rec: RunRecord,
    runner: WindowRunner,
    suite: Path | None,
    stream: WorkloadStream,
) -> None:
    """Everything after the set-up: search, repeats, MBU, accuracy; the record is written
    however it ends (Ctrl-C, SIGTERM/SIGHUP and a dead engine leave it ``complete: false``).
    """
    from tokenwatt.collect.mbu_step import mbu_for

    spec = rec.spec
    api_key = runner.config.api_key
    progress = runner.progress

    def checkpoint() -> None:
        write_record(rec, opts.out)

    measurement = Measurement(
        rec,
        runner,
        SearchSetup.for_run(spec, fast=opts.fast_search),
        checkpoint=checkpoint,
        check_engine=lambda: _check_engine(spec.engine.endpoint, api_key),
    )
    measurement.request_log = RequestLogWriter(log_path(opts.out))
    try:
        checkpoint()
        with progress:
            if spec.power.idle_s:
                progress.begin("idle power")
                rec.idle_power = runner.idle_power(spec.power.idle_s)
                checkpoint()
            measurement.run()
            rec.mbu, note = mbu_for(spec, rec)
            if note:
                rec.not_covered.append(note)
            if suite is not None:
                from tokenwatt.collect.accuracy import run_suite

                progress.begin("accuracy suite")
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
    except StopSignal as exc:
        runner.stop.settle()
        rec.interrupted = "sigterm" if exc.name == "SIGTERM" else "sighup"
        rec.incomplete_reason = (
            f"stopped by {exc.name}; everything measured so far is kept (the window in "
            "flight, if any, is marked partial)"
        )
    except KeyboardInterrupt:
        runner.stop.settle()
        rec.interrupted = "ctrl-c"
        rec.incomplete_reason = "interrupted (Ctrl-C); everything measured so far is kept"
    except EngineDiedError as exc:
        rec.interrupted = "engine-died"
        rec.incomplete_reason = str(exc)
    except BaseException as exc:
        # Whatever else ends the run (a bug, memory, a library's error) is raised on, but
        # the record says so instead of staying "in progress".
        rec.incomplete_reason = failure_reason(exc, secrets=[api_key or ""])
        raise
    finally:
        rec.finished = dt.datetime.now(dt.UTC)
        rec.prompts = PromptStats(
            **stream.counts(), notes=stream.notes(), dataset=stream.dataset_stats()
        )
        checkpoint()


def _check_engine(endpoint: str, api_key: str | None) -> None:
    """After a window where nothing succeeded: is the engine still there?

    Raises:
        EngineDiedError: it does not answer ``/v1/models``.
    """
    from tokenwatt.collect.probes import probe_engine

    try:
        probe_engine(endpoint, api_key, timeout_s=5.0)
    except EngineError as exc:
        raise EngineDiedError(f"the engine stopped answering: {exc}") from exc
