"""A run's SLO search as the report keeps it: every probe and every repeat, in order.

Pure: run records in, :class:`~tokenwatt.records.report.report_v3.SearchWindowV3` rows out. The
same rows feed the report record (``configs[].search``), the page's whole-search table and
the one-sentence explanation of the result (:mod:`tokenwatt.analysis.window.search_story`), so the
terminal and the page tell the same story from the same numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tokenwatt.records import (
    EngineMetrics,
    ErrorSample,
    ErrorSampleV3,
    LatencyMs,
    LatencyMsV3,
    RunRecord,
    SearchWindowV3,
    WindowSummary,
    retried,
)

SAMPLES_PER_KIND = 3
"""Error samples kept per error kind and window in a report (the run may keep more)."""
MESSAGE_CHARS = 300
"""Longest error message kept (characters), the collector's own cap."""
BODY_CHARS = 512
"""Longest error body kept (characters), the collector's own cap."""


def search_windows(run: RunRecord) -> list[SearchWindowV3]:
    """Every window of a run's search in the order measured: probes, then repeats.

    A window the collector measured again because the client lagged is kept and marked
    ``remeasured``; repeats carry their back-off count (0 at the found rate), probes whether
    they were scouts (:func:`scout_probe`). p99s and medians are rounded to 0.01 ms and
    goodput to 0.1 tok/s, as the report stores them.
    """
    search_s = run.spec.measurement.search_window_s
    out = [
        _window(
            p.window,
            step="probe",
            phase=p.phase,
            backoff=None,
            metrics=p.metrics,
            scout=scout_probe(p.window, search_s),
        )
        for p in run.probes
    ]
    out += [
        _window(r.window, step="repeat", phase=None, backoff=r.backoff, metrics=r.metrics)
        for r in run.repeats
    ]
    return out


def scout_probe(w: WindowSummary, search_window_s: float) -> bool:
    """Whether a probe was a scout (``--fast-search``): a window shorter than the spec's
    ``search_window_s`` (s) that was not cut short by an early stop."""
    return not w.stopped_early and w.duration_s < search_window_s * (1 - 1e-9)


def _ms(value: LatencyMs) -> LatencyMsV3:
    if isinstance(value, int | float):
        return round(float(value), 2)
    return value


def _window(
    w: WindowSummary,
    *,
    step: str,
    phase: str | None,
    backoff: int | None,
    metrics: EngineMetrics | None,
    scout: bool = False,
) -> SearchWindowV3:
    return SearchWindowV3.model_validate(
        {
            "step": step,
            "phase": phase,
            "backoff": backoff,
            "rate_rps": w.rate_rps,
            "profile": w.profile,
            "concurrency": w.concurrency,
            "slo_pass": w.slo_pass,
            "remeasured": retried(w),
            "failure_reason": w.failure_reason,
            "stopped_early": w.stopped_early,
            "ttft_p99_ms": _ms(w.ttft_ms.p99),
            "tpot_p99_ms": _ms(w.tpot_ms.p99),
            "ttft_p50_ms": _ms(w.ttft_ms.p50),
            "tpot_p50_ms": _ms(w.tpot_ms.p50),
            "goodput_tok_s": round(w.goodput_tok_s, 1),
            "requests": w.requests,
            "errors": w.errors,
            "error_kinds": dict(sorted(w.error_kinds.items())),
            "error_samples": error_samples(w.error_samples),
            "warnings": list(w.warnings),
            "valid": w.valid,
            "invalid_reason": w.invalid_reason,
            "transport_retries": w.transport_retries,
            "cancelled_by_client": w.cancelled_by_client,
            "ttft_p99_ci_ms": w.ttft_p99_ci_ms,
            "tpot_p99_ci_ms": w.tpot_p99_ci_ms,
            "slo_beyond_doubt": w.slo_beyond_doubt,
            "scout": scout,
            "prefix_cache_hit_pct": (
                round(metrics.prefix_cache_hit_pct, 1)
                if metrics is not None and metrics.prefix_cache_hit_pct is not None
                else None
            ),
        }
    )


def _capped(value: str | None, limit: int) -> str | None:
    return None if value is None else value[:limit]


def error_samples(samples: Mapping[str, Sequence[ErrorSample]]) -> list[ErrorSampleV3]:
    """A window's error samples (kind → samples, each with the exception class, message,
    HTTP status and the first bytes of the body) as a flat list, at most
    :data:`SAMPLES_PER_KIND` per kind, kinds in name order, texts capped."""
    return [
        ErrorSampleV3(
            kind=sample.kind or kind,
            exception=_capped(sample.exception, 120),
            message=_capped(sample.message, MESSAGE_CHARS),
            status=sample.status,
            body=_capped(sample.body, BODY_CHARS),
        )
        for kind in sorted(samples)
        for sample in list(samples[kind])[:SAMPLES_PER_KIND]
    ]
