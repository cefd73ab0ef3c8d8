"""Why a probe missed the SLO: queueing/KV-bound, per-token-latency-bound, or errors.

The SLO search records, for every probe that misses, which limit gave way and what the
engine's own gauges said meanwhile. The first lab note (H100, Qwen3-30B-A3B, vLLM) is the
case this was built for: at 16 req/s the BF16-KV configuration ran out of KV-cache space
first — requests waited in the engine's queue and p99 TTFT reached about 32 s — while the
FP8-KV configuration, with twice the KV capacity, admitted more sequences at once and
missed on per-token latency instead (bigger batches, slower decode steps). The two failure
modes tell an operator what to change: KV capacity (KV dtype, memory fraction, max
sequences) for the first, batch size or hardware for the second.

Rules, in order, for a window that missed:

1. **errors** — requests failed for reasons other than timeouts and the collector's own
   cancellations (error kind ``cancelled``: early stop, end of the drain), and enough of them
   (at least 1% of the window's requests, the share that puts a p99 at infinity) to miss
   the SLO by themselves.
2. **queueing/KV-bound** — TTFT missed its limit and TPOT did not; or both missed while
   the engine showed pressure (without engine metrics: TTFT overshot its limit by the
   larger factor): a non-empty waiting queue (mean ≥ 0.5 requests), KV-cache
   usage at or above 95%, or preemptions. Timed-out requests count here when the queue was
   non-empty. Without engine metrics, a TTFT-only miss is still queueing (the request waited
   somewhere before its first token), since TTFT is measured from the scheduled send time.
3. **per-token-latency-bound** — TPOT missed with the waiting queue empty (or TPOT missed
   and TTFT did not).
4. A window that missed with both p99 within their limits: **queueing/KV-bound** when it
   did not sustain its rate (its queue grew, ``sustained`` False), **errors** when requests
   failed, else **served-other-than-asked** when the server ignored ``max_tokens`` or
   ``ignore_eos`` or changed the prompt (the window is invalid).

Pure: numbers in, a label out; imports only :mod:`tokenwatt.records`.
"""

from __future__ import annotations

from typing import Final

from tokenwatt.records import EngineMetrics, LatencyMs, SloSpec, WindowSummary

QUEUEING_KV_BOUND: Final = "queueing/KV-bound"
PER_TOKEN_LATENCY_BOUND: Final = "per-token-latency-bound"  # noqa: S105 (a label)
ERRORS: Final = "errors"
SERVED_OTHER: Final = "served-other-than-asked"
FAILURE_MODES: Final = (QUEUEING_KV_BOUND, PER_TOKEN_LATENCY_BOUND, ERRORS, SERVED_OTHER)

KV_NEAR_FULL_PCT: Final = 95.0
"""KV-cache usage (%) from which the cache counts as full (vLLM admits no new sequence
when it cannot allocate their blocks, so usage plateaus just below 100%)."""
WAITING_MEAN_MIN: Final = 0.5
"""Mean waiting requests over the window from which the queue counts as non-empty."""
CANCELLED: Final = "cancelled"
"""Error kind of a request the collector cancelled itself (early stop, end of the drain)."""
CENSORED: Final = "censored"
"""Error kind of a request still streaming when the window's tail cap cut it (a miss)."""
ERROR_SHARE_MIN: Final = 0.01
"""Share of failed requests that alone puts a p99 at infinity (methods/goodput.md: failures count
as infinitely slow)."""


def _exceeds(value: LatencyMs, limit_ms: float) -> bool:
    if value is None:
        return False
    if value == "inf":
        return True
    return float(value) > limit_ms


def _overshoot(value: LatencyMs, limit_ms: float) -> float:
    if value is None:
        return 0.0
    if value == "inf":
        return float("inf")
    return float(value) / limit_ms


def engine_under_pressure(metrics: EngineMetrics | None) -> bool | None:
    """Whether the engine queued requests or filled its KV cache (None: no metrics).

    True when the waiting queue's mean is ≥ :data:`WAITING_MEAN_MIN`, KV usage reached
    :data:`KV_NEAR_FULL_PCT`, or any request was preempted.
    """
    if metrics is None or metrics.scrapes == 0:
        return None
    signals = [
        metrics.waiting_mean is not None and metrics.waiting_mean >= WAITING_MEAN_MIN,
        metrics.kv_usage_max_pct is not None and metrics.kv_usage_max_pct >= KV_NEAR_FULL_PCT,
        metrics.preemptions is not None and metrics.preemptions > 0,
    ]
    if metrics.waiting_mean is None and metrics.kv_usage_max_pct is None:
        return None if metrics.preemptions is None else signals[2]
    return any(signals)


def _timeouts(summary: WindowSummary) -> int:
    # A request still streaming at the window's tail cap ("censored") was too slow, as a
    # timeout is, not broken: it is no hard error.
    return sum(
        n
        for kind, n in summary.error_kinds.items()
        if "timeout" in kind.lower() or kind == CENSORED
    )


def classify_failure(
    summary: WindowSummary, metrics: EngineMetrics | None, *, slo: SloSpec | None = None
) -> str | None:
    """The failure mode of a window that missed the SLO, or None when it met it.

    Args:
        summary: the window (its ``slo_pass``, p99 TTFT/TPOT in ms, errors and error kinds).
        metrics: the engine's ``/metrics`` over the window, or None when not scraped.
        slo: the limits (ms). Without them, which limit was missed is read from the
            window's own ``failure_reason`` text when it names TTFT or TPOT, else from the
            engine's pressure alone.

    Returns:
        :data:`QUEUEING_KV_BOUND`, :data:`PER_TOKEN_LATENCY_BOUND`, :data:`ERRORS`, or None
        for a window that met the SLO (rules in the module docstring).
    """
    if summary.slo_pass:
        return None
    pressure = engine_under_pressure(metrics)
    timeouts = _timeouts(summary)
    # Requests the collector cancelled itself (early stop, drain) are not the engine's errors.
    hard_errors = summary.errors - timeouts - summary.error_kinds.get(CANCELLED, 0)
    if summary.requests and hard_errors / summary.requests >= ERROR_SHARE_MIN:
        return ERRORS

    if slo is not None:
        ttft_missed = _exceeds(summary.ttft_ms.p99, slo.ttft_p99_ms)
        tpot_missed = _exceeds(summary.tpot_ms.p99, slo.tpot_p99_ms)
    else:
        reason = (summary.failure_reason or "").lower()
        ttft_missed = "ttft" in reason
        tpot_missed = "tpot" in reason
        if not ttft_missed and not tpot_missed:
            if summary.sustained is False:
                return QUEUEING_KV_BOUND
            if pressure is None:
                return ERRORS if summary.errors else None
            return QUEUEING_KV_BOUND if pressure else PER_TOKEN_LATENCY_BOUND

    if timeouts and not ttft_missed and not tpot_missed:
        # Only timeouts missed the SLO: a queue explains them, a slow decode otherwise.
        return QUEUEING_KV_BOUND if pressure is not False else PER_TOKEN_LATENCY_BOUND
    if ttft_missed and not tpot_missed:
        return QUEUEING_KV_BOUND
    if tpot_missed and not ttft_missed:
        return PER_TOKEN_LATENCY_BOUND
    if ttft_missed and tpot_missed:
        if pressure is None and slo is not None:
            # No engine view: the limit overshot by the larger factor decides.
            ttft_x = _overshoot(summary.ttft_ms.p99, slo.ttft_p99_ms)
            tpot_x = _overshoot(summary.tpot_ms.p99, slo.tpot_p99_ms)
            return QUEUEING_KV_BOUND if ttft_x >= tpot_x else PER_TOKEN_LATENCY_BOUND
        return QUEUEING_KV_BOUND if pressure else PER_TOKEN_LATENCY_BOUND
    # Missed without either p99 over its limit: a backlog the limits were too lenient to
    # catch (the window did not sustain its rate), or failures, or a server that served
    # other than was asked.
    if summary.sustained is False:
        return QUEUEING_KV_BOUND
    if summary.errors:
        return ERRORS
    return SERVED_OTHER if not summary.valid else None
