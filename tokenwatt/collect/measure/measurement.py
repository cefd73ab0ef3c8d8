"""One run's SLO search and repeats: every window measured, stored and checkpointed.

:class:`Measurement` drives the search of methods/goodput.md (or the closed loop's search
over clients, or the fixed loads) through a :class:`~tokenwatt.collect.measure.window.WindowRunner`,
stores each window in the run record as soon as it is measured, measures a miss once more
when the client's own lag may explain it, takes no verdict from a pass on a schedule the
client did not keep (measured once more), warns of every other client-bound window, and
fills ``record.result``.
:func:`tokenwatt.collect.run.collect` sets it up and writes the record.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from tokenwatt.analysis import (
    LATE_SCHEDULE_TAG,
    client_bound_warning,
    fit_search_warning,
    late_schedule_reason,
    not_load_reason,
)
from tokenwatt.collect.measure.fixed_loads import measure_fixed
from tokenwatt.collect.measure.idle import IDLE_RETRIES, NOT_IDLE_TAG
from tokenwatt.collect.measure.load_search import backed_off_concurrency, concurrency_search
from tokenwatt.collect.measure.probe_policy import ProbePolicy
from tokenwatt.collect.measure.request_log import RequestLogWriter, log_window
from tokenwatt.collect.measure.search import (
    ProbeOutcome,
    RepeatTrace,
    SearchOptions,
    SearchPhase,
    SearchTrace,
    measure_repeats,
    monotonicity_warnings,
    slo_search,
)
from tokenwatt.collect.measure.verdict import RETRIED_PREFIX, WORKER_DIED_PREFIX, retried
from tokenwatt.collect.measure.window import WindowOutcome, WindowPlan, WindowRunner, mark_cut
from tokenwatt.errors import EngineError
from tokenwatt.records import (
    NOT_IDLE_PREFIX,
    UNCLEAN_PREFIX,
    Probe,
    Repeat,
    ResultStatus,
    RunRecord,
    SearchResult,
    Spec,
    WindowSummary,
    untrusted_reason,
)

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
        """One window; a miss that the client's own lag or a dead worker process may explain,
        or a window that cannot be trusted for another reason — a pass on a schedule the
        client did not keep included (:func:`~tokenwatt.analysis.late_schedule_reason`:
        marked invalid first) — is measured again once (:meth:`_mark_retry`), and a window
        that started with the engine not proven idle up to :data:`IDLE_RETRIES` times
        (:meth:`_mark_not_idle`).

        Every window is stored (the retried ones marked :data:`RETRIED_PREFIX`,
        :data:`WORKER_DIED_PREFIX`, :data:`NOT_IDLE_PREFIX` or :data:`UNCLEAN_PREFIX`); the
        verdict is the last's, the GPU time is all of theirs. When the window counted still
        cannot be trusted, the outcome's ``untrusted`` says why (the search then ends
        inconclusive).
        """
        spent: ProbeOutcome | None = None
        lag_retried, idle_retries = False, 0
        while True:
            self.progress.begin(step)
            outcome = self.runner.run(plan)
            summary = outcome.summary
            if (late := late_schedule_reason(summary)) is not None:
                # A pass on arrivals the client did not send as asked: no verdict. Measured
                # once more below; a second such window leaves the result inconclusive.
                mark_cut(summary, late, tag=LATE_SCHEDULE_TAG)
            cost = window_cost(plan, summary)
            spent = cost if spent is None else _plus(spent, cost)
            self._note(step, plan, outcome)
            retry = False
            if summary.failure_reason == NOT_IDLE_TAG:
                # Its own bounded tries, each after a longer wait; the last one's stays
                # invalid and untrusted (the result is then inconclusive).
                if idle_retries < IDLE_RETRIES:
                    idle_retries += 1
                    retry = self._mark_not_idle(step, summary, idle_retries)
            elif not lag_retried and not summary.slo_pass:
                retry = lag_retried = self._mark_retry(step, summary)
            self._warn_client_bound(summary)
            store(outcome)
            self._log_requests(outcome)
            self.checkpoint()
            self.runner.stop.raise_if_requested()
            # Nothing answered, or the connection failed: is the engine still there? (One
            # that died late in a window still answered most of it.)
            transport = {"connect", "disconnect"} & set(summary.error_kinds)
            if (summary.completed == 0 and summary.errors > 0) or transport:
                self._check_engine_after(summary)
            if not retry:
                break
        assert spent is not None
        return replace(spent, untrusted=untrusted_reason(summary))

    def _check_engine_after(self, summary: WindowSummary) -> None:
        """Ask whether the engine is still there; when it is gone, the stored window was
        cut by its death (not an SLO miss): marked so, checkpointed, and the death raised.

        Raises:
            EngineDiedError: the engine does not answer.
        """
        try:
            self.check_engine()
        except EngineError as exc:  # run.EngineDiedError (run imports this module)
            mark_cut(summary, f"the engine died during the window ({exc})", tag="engine_died")
            self.checkpoint()
            raise

    def _note(self, step: str, plan: WindowPlan, outcome: WindowOutcome) -> None:
        s = outcome.summary
        verdict = "meets the SLO" if s.slo_pass else f"misses: {s.failure_reason}"
        if s.failure_reason in (NOT_IDLE_TAG, LATE_SCHEDULE_TAG):
            verdict = f"no verdict ({s.invalid_reason})"
        load = f"{plan.rate_rps:.4g} req/s"
        if plan.concurrency is not None:
            load = f"{plan.concurrency} clients ({s.rate_rps:.4g} req/s measured)"
        # As the window tables name it: "load 1 of 3: 5 req/s", "probe 2 at 60 req/s".
        sep = ": " if self.spec.sweep.fixed else " at "
        self.progress.note(f"{step}{sep}{load}: {verdict}")
        for warning in outcome.warnings:
            self.progress.note(f"  warning: {warning}")

    def _mark_retry(self, step: str, summary: WindowSummary) -> bool:
        """Whether a missed window is measured again, and if so mark it: the client lagged
        (its own lateness may explain the miss) or a worker process died in it (a fault of
        the instrument, no verdict on the server). Its failure reason then starts with
        :data:`RETRIED_PREFIX` or :data:`WORKER_DIED_PREFIX`; or it cannot be trusted for
        another reason (:func:`~tokenwatt.records.untrusted_reason`: not proven idle, cut
        short, served other than asked), marked :data:`UNCLEAN_PREFIX`."""
        dead = [w.worker for w in summary.worker_lag if w.died]
        if dead:
            why = f"{WORKER_DIED_PREFIX} (worker {', '.join(map(str, dead))})"
            said = f"load-generator worker {', '.join(map(str, dead))} died"
        elif self._client_lagged(summary):
            why = f"{RETRIED_PREFIX} (send-lag p99 {summary.send_lag_p99_ms:.0f} ms)"
            said = f"the client lagged (send-lag p99 {summary.send_lag_p99_ms:.0f} ms)"
        elif not self.runner.stop.interrupted() and (unclean := untrusted_reason(summary)):
            # (A window a signal cut is kept as it is: the run stops after storing it.)
            why = f"{UNCLEAN_PREFIX} ({unclean})"
            said = f"the window could not be measured cleanly ({unclean})"
        else:
            return False
        self.progress.note(f"{step}: {said}; this window's verdict is not used, measuring again")
        summary.failure_reason = f"{why}, measured again: {summary.failure_reason}"
        return True

    def _mark_not_idle(self, step: str, summary: WindowSummary, tries: int) -> bool:
        """Mark a window that started not proven idle as measured again (its failure
        reason then starts with :data:`NOT_IDLE_PREFIX`); the next check waits longer
        (:class:`~tokenwatt.collect.measure.idle.IdlePolicy`)."""
        why = summary.invalid_reason or NOT_IDLE_PREFIX
        self.progress.note(
            f"{step}: {why.split(';')[0]}; no verdict, measuring again "
            f"(retry {tries} of {IDLE_RETRIES})"
        )
        summary.failure_reason = f"{NOT_IDLE_PREFIX}, measured again (retry {tries})"
        return True

    def _warn_client_bound(self, summary: WindowSummary) -> None:
        """Give a client-bound window its warning (on screen and in the record), unless
        :meth:`_mark_retry` already labelled it so: a window that met the SLO, or missed
        with a lag too small to explain it, is otherwise silent about it."""
        warning = client_bound_warning(summary)
        if warning is not None and warning not in summary.warnings:
            summary.warnings.append(warning)
            self.progress.note(f"  warning: {warning}")

    def _client_lagged(self, summary: WindowSummary) -> bool:
        limit_ms = CLIENT_LAG_RETRY_FRACTION * self.spec.slo.ttft_p99_ms
        lag = summary.send_lag_p99_ms  # None in a closed loop: no schedule to lag behind
        return summary.client_bound and lag is not None and lag > max(10.0, limit_ms)

    def probe(self, rate: float, phase: SearchPhase) -> ProbeOutcome:
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
        """The SLO search, then the repeats at the rate it found; fills ``record.result``
        with its status (measured, none_met or inconclusive, methods/goodput.md)."""
        spec, rec = self.spec, self.record
        if spec.sweep.fixed:
            measure_fixed(self)
            return
        if self.closed:
            ceiling = spec.measurement.max_concurrency
            trace = concurrency_search(self.probe, spec.sweep, ceiling)
        else:
            trace = slo_search(self.probe, spec.sweep, self.setup.options)
        # The search only knows that probes missed; its "lower the rate" advice is replaced
        # when they failed on something a lower rate cannot help (HTTP 400, no connection).
        probes = [p.window for p in rec.probes]
        endpoint = spec.engine.endpoint
        warnings = [fit_search_warning(w, probes, endpoint) for w in trace.warnings]
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
            floor_rps=trace.floor_rps,
        )
        if trace.found_rps is None:
            status, reason = self._search_status(trace)
            rec.result = result.model_copy(update={"status": status, "status_reason": reason})
            self.progress.note(f"{status.replace('_', ' ')}: {reason}")
            return
        # Until the repeats end (an interrupted run keeps this): no measurement yet.
        unfinished = "the repeats at the found load did not finish"
        rec.result = result.model_copy(
            update={"status": "inconclusive", "status_reason": unfinished}
        )
        s = spec.sweep
        reps = measure_repeats(
            self.repeat, trace.found_rps, spec.measurement.repeats, s.backoff, s.max_backoffs
        )
        rec.result = self._repeats_result(result, trace, reps)
        if rec.result.status_reason:
            self.progress.note(f"inconclusive: {rec.result.status_reason}")

    @property
    def _unit(self) -> str:
        return "clients" if self.closed else "req/s"

    def _search_status(self, trace: SearchTrace) -> tuple[ResultStatus, str]:
        """Status and reason of a search that found no load to repeat at."""
        if trace.inconclusive is not None:
            return "inconclusive", trace.inconclusive
        if trace.none_met:
            lowest = min(p.rate_rps for p in trace.steps)
            probes = [p.window for p in self.record.probes]
            not_load = not_load_reason(probes, self.spec.engine.endpoint)
            if not_load is not None:
                return "inconclusive", not_load
            return "none_met", f"no load met the SLO, down to {lowest:g} {self._unit}"
        return "inconclusive", "the search measured no window"

    def _repeats_result(
        self, result: SearchResult, trace: SearchTrace, reps: RepeatTrace
    ) -> SearchResult:
        """The result after the repeats: measured at the rate every repeat met, else
        inconclusive (a repeat not measured cleanly, or the boundary did not repeat)."""
        rec, unit = self.record, self._unit
        points = [(p.rate_rps, p.outcome.passed) for p in trace.steps]
        repeat_points = [(p.rate_rps, p.outcome.passed) for p in reps.steps]
        more = monotonicity_warnings(points, repeat_points, unit=unit)
        warnings = result.warnings + [w for w in more if w not in result.warnings]
        final = [r for r in rec.repeats if r.backoff == reps.backoffs and not retried(r.window)]
        passing = [r for r in final if r.window.slo_pass]
        reason: str | None = reps.inconclusive
        if reason is None and reps.rate_rps is None:
            last = reps.steps[-1].rate_rps if reps.steps else trace.found_rps
            reason = (
                f"the boundary did not repeat: search probes met the SLO at "
                f"{trace.found_rps:g} {unit}, but no repeat did there nor after "
                f"{reps.backoffs} back-off(s), down to {last:g} {unit}"
            )
        measured = reason is None
        rate = reps.rate_rps if measured and reps.rate_rps is not None else 0.0
        clients = None
        if self.closed and measured:
            # The closed loop's rate is what the passing repeats measured at the clients found.
            clients = backed_off_concurrency(rate)
            rate = sum(r.window.rate_rps for r in passing) / max(len(passing), 1)
        return result.model_copy(
            update={
                "rate_rps": rate,
                "concurrency": clients,
                "goodput_tok_s": repeats_goodput(final, confirmed=measured),
                "slo_pass_count": len(passing),
                "repeats": len(final),
                "backoffs": reps.backoffs,
                "gpu_seconds": trace.gpu_seconds + reps.gpu_seconds,
                "gpu_seconds_saved": trace.gpu_seconds_saved + reps.gpu_seconds_saved,
                "warnings": warnings,
                "status": "measured" if measured else "inconclusive",
                "status_reason": reason,
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
    the SLO; 0 (no measurement: the result is inconclusive) when the back-offs ran out
    without a rate whose every repeat met it.

    methods/goodput.md: goodput is taken at the highest rate whose windows meet the SLO. When the
    last back-off still had a miss there is no such rate, so a passing window measured
    before that miss is no goodput figure.
    """
    passing = [r for r in final if r.window.slo_pass]
    if not confirmed or not passing:
        return 0.0
    return sum(r.window.goodput_tok_s for r in passing) / len(passing)
