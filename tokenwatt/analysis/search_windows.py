"""A run's SLO search as the report keeps it: every probe and every repeat, in order.

Pure: run records in, :class:`~tokenwatt.records.report_v3.SearchWindowV3` rows out. The
same rows feed the report record (``configs[].search``), the page's whole-search table and
the one-sentence explanation of the result (:mod:`tokenwatt.analysis.search_story`), so the
terminal and the page tell the same story from the same numbers.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tokenwatt.records.report_v3 import ErrorSampleV3, LatencyMsV3, SearchWindowV3
from tokenwatt.records.run import RunRecord
from tokenwatt.records.window import LatencyMs, WindowSummary, retried

SAMPLES_PER_KIND = 3
"""Error samples kept per error kind and window in a report (the run may keep more)."""
MESSAGE_CHARS = 300
"""Longest error message kept (characters), the collector's own cap."""
BODY_CHARS = 512
"""Longest error body kept (characters), the collector's own cap."""


def search_windows(run: RunRecord) -> list[SearchWindowV3]:
    """Every window of a run's search in the order measured: probes, then repeats.

    A window the collector measured again because the client lagged is kept and marked
    ``remeasured``; repeats carry their back-off count (0 at the found rate). p99s are
    rounded to 0.01 ms and goodput to 0.1 tok/s, as the report stores them.
    """
    out = [_window(p.window, step="probe", phase=p.phase, backoff=None) for p in run.probes]
    out += [_window(r.window, step="repeat", phase=None, backoff=r.backoff) for r in run.repeats]
    return out


def _p99(value: LatencyMs) -> LatencyMsV3:
    if isinstance(value, int | float):
        return round(float(value), 2)
    return value


def _window(
    w: WindowSummary, *, step: str, phase: str | None, backoff: int | None
) -> SearchWindowV3:
    # warnings, valid, invalid_reason and error_samples are the window fields the latency
    # work adds to WindowSummary; read them only where a record has them.
    warnings = getattr(w, "warnings", None) or []
    return SearchWindowV3.model_validate(
        {
            "step": step,
            "phase": phase,
            "backoff": backoff,
            "rate_rps": w.rate_rps,
            "slo_pass": w.slo_pass,
            "remeasured": retried(w),
            "failure_reason": w.failure_reason,
            "stopped_early": w.stopped_early,
            "ttft_p99_ms": _p99(w.ttft_ms.p99),
            "tpot_p99_ms": _p99(w.tpot_ms.p99),
            "goodput_tok_s": round(w.goodput_tok_s, 1),
            "requests": w.requests,
            "errors": w.errors,
            "error_kinds": dict(sorted(w.error_kinds.items())),
            "error_samples": error_samples(getattr(w, "error_samples", None)),
            "warnings": [str(x) for x in warnings],
            "valid": bool(getattr(w, "valid", True)),
            "invalid_reason": getattr(w, "invalid_reason", None),
        }
    )


def _first(sample: Any, *names: str) -> Any:
    """The first of ``names`` the sample has, as attribute or mapping key; else None."""
    for name in names:
        value = sample.get(name) if isinstance(sample, dict) else getattr(sample, name, None)
        if value is not None:
            return value
    return None


def _capped(value: Any, limit: int) -> str | None:
    return None if value is None else str(value)[:limit]


def error_samples(samples: Any) -> list[ErrorSampleV3]:
    """A window's error samples (kind → samples, each with the exception class, message,
    HTTP status and the first bytes of the body) as a flat list, at most
    :data:`SAMPLES_PER_KIND` per kind, kinds in name order, texts capped."""
    if not samples:
        return []
    out: list[ErrorSampleV3] = []
    for kind in sorted(samples):
        items: Iterable[Any] = samples[kind] or []
        for sample in list(items)[:SAMPLES_PER_KIND]:
            status = _first(sample, "status", "http_status", "status_code")
            out.append(
                ErrorSampleV3(
                    kind=str(_first(sample, "kind") or kind) or "unknown",
                    exception=_capped(_first(sample, "exception", "error_class"), 120),
                    message=_capped(_first(sample, "message", "error_message"), MESSAGE_CHARS),
                    status=status if isinstance(status, int) else None,
                    body=_capped(_first(sample, "body", "error_body"), BODY_CHARS),
                )
            )
    return out
