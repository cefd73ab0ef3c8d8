"""Reading a probe's verdict: retried windows and the failure mode of early-stopped ones."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tokenwatt.records import RETRIED_PREFIX, WORKER_DIED_PREFIX, SloSpec, WindowSummary, retried

__all__ = ["RETRIED_PREFIX", "WORKER_DIED_PREFIX", "classification_view", "retried"]


def classification_view(
    result: Any, slo: SloSpec, *, count_tokens: Callable[[str], int] | None = None
) -> WindowSummary:
    """The window as its evidence stood when our early stop cut it short.

    The stop cancels the requests still in flight; the stored summary counts them as
    unfinished (infinite in every percentile, misses in attainment, apart from errors as
    ``cancelled_by_client``) and fails the window as ``stopped_early``, which does not say
    *which* limit was missed. Here the
    p99 TTFT and TPOT come from the requests that finished, except that a limit is marked
    missed (``"inf"``) when more requests than a p99 allows had already missed it —
    cancelled ones still waiting for a first token past the TTFT limit included — as
    :func:`tokenwatt.analysis.window.latency.missed_beyond_doubt` counts them. Cancelled
    requests are not counted as engine errors. Its ``failure_reason`` lists what the
    evidence shows (``ttft``, ``tpot``, ``errors`` for the engine's own failures) and
    ``stopped_early``; the collector puts it beside the failure mode.
    """
    from tokenwatt.analysis import misses_allowed, summarise_window, tpot_ms

    summary: WindowSummary = result.summary
    if not summary.stopped_early:
        return summary
    window = [r for r in result.requests if r.in_window]
    done = [r for r in window if r.error != "cancelled"]
    limit_s = slo.ttft_p99_ms / 1e3
    ttft_misses = sum(
        1
        for r in window
        if (r.chunk_s and r.chunk_s[0] - r.scheduled_s > limit_s)
        or (not r.chunk_s and (r.finished_s or r.scheduled_s) - r.scheduled_s > limit_s)
    )
    tpot_misses = sum(1 for r in done if r.error is None and (tpot_ms(r) or 0.0) > slo.tpot_p99_ms)
    allowed = misses_allowed(len(window))
    base = summarise_window(
        done,
        rate_rps=summary.rate_rps,
        duration_s=summary.duration_s,
        slo=slo,
        count_tokens=count_tokens,
    )
    update: dict[str, Any] = {}
    if ttft_misses > allowed:
        update["ttft_ms"] = base.ttft_ms.model_copy(update={"p99": "inf"})
    if tpot_misses > allowed:
        update["tpot_ms"] = base.tpot_ms.model_copy(update={"p99": "inf"})
    view = base.model_copy(update={**update, "slo_pass": False})
    view.failure_reason = ",".join(_reasons(view, slo, len(window)))
    return view


def _reasons(view: WindowSummary, slo: SloSpec, n: int) -> list[str]:
    """What the view missed, in :func:`~tokenwatt.analysis.window.latency.summarise_window`'s words.

    ``errors`` only for the engine's own failures (our cancellations are not among them).
    """
    reasons = []
    if _above(view.ttft_ms.p99, slo.ttft_p99_ms):
        reasons.append("ttft")
    if _above(view.tpot_ms.p99, slo.tpot_p99_ms):
        reasons.append("tpot")
    if view.errors > (max(n, 1) - 1) // 100:
        reasons.append("errors")
    return [*reasons, "stopped_early"]


def _above(value: object, limit_ms: float) -> bool:
    return value == "inf" or (isinstance(value, int | float) and value > limit_ms)
