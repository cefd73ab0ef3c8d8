"""Latency percentiles, goodput and the SLO verdict of one measurement window (pure).

Definitions follow DESIGN.md ("Metric definitions"):

- TTFT from the request's *scheduled* time to the first chunk carrying generated text
  (``ttft_from_send_ms`` from the actual send, as vLLM ``bench serve`` and GuideLLM measure);
- TPOT per request = (last token − first token) / (output tokens − 1), none for one-token
  outputs; ITL = gaps between successive chunks; E2E from the scheduled time to the last token;
- a request that failed (error, timeout, no token) counts as **infinitely** slow in every
  percentile -- never dropped;
- goodput (tok/s) = output tokens of the window's completed requests / window length;
- SLO attainment = share of requests meeting both limits individually (DistServe, Zhong et
  al., OSDI 2024); the SLO passes when p99 TTFT <= ``ttft_p99_ms`` and p99 TPOT <=
  ``tpot_p99_ms``.

Percentile definition: the "linear" method (Hyndman & Fan type 7), which is
``numpy.percentile``'s default and so what vLLM's ``bench serve`` reports
(``np.percentile(values, p)``). The rank q·(n−1)/100 is computed in exact integer arithmetic
so that infinite values are judged exactly: numpy's float rank 0.99 × 100 = 99.00000000000001
would interpolate towards an infinite neighbour and call a passing window failed. On finite
data the result equals ``numpy.percentile(values, q, method="linear")``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from tokenwatt.records.request import RequestResult
from tokenwatt.records.spec import SloSpec
from tokenwatt.records.window import LatencyMs, Percentiles, WindowSummary

INF = math.inf
PERCENTILES = (50, 90, 99)
# A window whose send-lag p99 exceeds this is flagged client-bound (DESIGN.md, TTFT).
CLIENT_BOUND_SEND_LAG_MS = 10.0


def percentile(values: Iterable[float], q: int) -> float | None:
    """The q-th percentile (integer q in 0..100) by the linear method; inf-aware.

    Returns None for no values, ``math.inf`` when the rank reaches an infinite value (or
    interpolates towards one).
    """
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be in 0..100, got {q}")
    data = values if isinstance(values, list | np.ndarray) else list(values)
    ordered = np.sort(np.asarray(data, dtype=np.float64))
    n = len(ordered)
    if n == 0:
        return None
    lo, rest = divmod(q * (n - 1), 100)
    low = float(ordered[lo])
    if rest == 0:
        return low
    high = float(ordered[lo + 1])
    if math.isinf(high):
        return INF
    return low + (high - low) * (rest / 100)


def _latency(value: float | None) -> LatencyMs:
    if value is None:
        return None
    if math.isinf(value):
        return "inf"
    return round(value, 4)


def percentiles_ms(values_ms: Sequence[float]) -> Percentiles:
    """p50/p90/p99 of latencies in ms (``"inf"`` where infinite, None when empty)."""
    return Percentiles(**{f"p{q}": _latency(percentile(values_ms, q)) for q in PERCENTILES})


def failed(r: RequestResult) -> bool:
    """True when the request errored, timed out, or never produced a token (an SLO miss)."""
    return r.error is not None or r.first_token_s is None


def ttft_ms(r: RequestResult) -> float:
    """TTFT (ms) from the scheduled time; infinite for a failed request."""
    if failed(r) or r.first_token_s is None:
        return INF
    return (r.first_token_s - r.scheduled_s) * 1e3


def ttft_from_send_ms(r: RequestResult) -> float:
    """TTFT (ms) from the actual send; infinite for a failed request."""
    if failed(r) or r.first_token_s is None:
        return INF
    return (r.first_token_s - r.sent_s) * 1e3


def tpot_ms(r: RequestResult) -> float | None:
    """TPOT (ms): (last − first) / (output tokens − 1); None for a one-token output,
    infinite for a failed request."""
    if failed(r) or r.first_token_s is None or r.last_token_s is None:
        return INF
    if r.output_tokens <= 1:
        return None
    return (r.last_token_s - r.first_token_s) / (r.output_tokens - 1) * 1e3


def e2e_ms(r: RequestResult) -> float:
    """E2E latency (ms) from the scheduled time to the last token; infinite when failed."""
    if failed(r) or r.last_token_s is None:
        return INF
    return (r.last_token_s - r.scheduled_s) * 1e3


def itl_ms(r: RequestResult) -> list[float]:
    """Gaps (ms) between successive text chunks; one infinite gap for a failed request."""
    if failed(r):
        return [INF]
    return list(np.diff(np.asarray(r.chunk_s, dtype=np.float64)) * 1e3)


def send_lag_ms(r: RequestResult) -> float:
    """How late the client got round to the request (ms): ``dispatched − scheduled``.

    The wait for a concurrency slot (``sent − dispatched``) is the server's backlog, not the
    client's lateness, so it is left out here (it is inside TTFT). Results without
    ``dispatched_s`` use ``sent_s``.
    """
    at = r.dispatched_s if r.dispatched_s is not None else r.sent_s
    return max(0.0, (at - r.scheduled_s) * 1e3)


def meets_slo(r: RequestResult, slo: SloSpec) -> bool:
    """True when the request met both limits individually (the attainment count)."""
    if failed(r) or ttft_ms(r) > slo.ttft_p99_ms:
        return False
    tpot = tpot_ms(r)
    return tpot is None or tpot <= slo.tpot_p99_ms


def misses_allowed(n: int) -> int:
    """Most requests above a limit that a p99 over n values can absorb and still pass.

    With k values above the limit among n, the type-7 p99 lies above it for certain once
    k > ceil((n − 1) / 100) (k > floor((n − 1) / 100) when they are infinite).
    """
    return -(-(max(n, 1) - 1) // 100)


def missed_beyond_doubt(
    requests_so_far: Sequence[RequestResult],
    expected_total: int,
    slo: SloSpec,
    *,
    now_s: float | None = None,
) -> bool:
    """True once the window's p99 TTFT or p99 TPOT can no longer meet the SLO.

    Counts, per limit, requests that have already missed it: failed ones, finished ones
    above the limit, and (TTFT only, when ``now_s`` is given on the requests' clock)
    unanswered ones already waiting longer than the TTFT limit. More than
    :func:`misses_allowed` of ``expected_total`` (just over 1%) means the p99 cannot pass,
    provided the window holds at most ``expected_total`` requests: pass the schedule's exact
    count (``collect.arrivals.window_request_count``) or an upper bound.
    """
    allowed = misses_allowed(expected_total)
    ttft_misses = tpot_misses = 0
    ttft_limit_s = slo.ttft_p99_ms / 1e3
    for r in requests_so_far:
        if r.error is not None:
            ttft_misses += 1
            tpot_misses += 1
            continue
        if r.first_token_s is None:
            if now_s is not None and now_s - r.scheduled_s > ttft_limit_s:
                ttft_misses += 1
            continue
        if r.first_token_s - r.scheduled_s > ttft_limit_s:
            ttft_misses += 1
        if r.finished_s is not None:
            tpot = tpot_ms(r)
            if tpot is not None and tpot > slo.tpot_p99_ms:
                tpot_misses += 1
    return ttft_misses > allowed or tpot_misses > allowed


def _above(value: LatencyMs, limit: float) -> bool:
    return value == "inf" or (isinstance(value, float | int) and value > limit)


def summarise_window(
    requests: Sequence[RequestResult],
    *,
    rate_rps: float,
    duration_s: float,
    slo: SloSpec,
    stopped_early: bool = False,
) -> WindowSummary:
    """Summarise the requests that arrived in one window (warm-up already left out).

    Args:
        requests: the window's requests (those scheduled inside it), finished or failed.
        rate_rps: the target arrival rate (req/s).
        duration_s: the window's length (s), the goodput denominator.
        slo: the latency limits (ms).
        stopped_early: the probe was stopped once it had missed the SLO beyond doubt; such a
            window never passes.

    Returns:
        A :class:`WindowSummary`; ``failure_reason`` lists what failed, comma-separated:
        ``ttft``, ``tpot``, ``errors`` (failed requests alone push p99 to infinity),
        ``no_requests``, ``stopped_early``.
    """
    ok = [r for r in requests if not failed(r)]
    n = len(requests)
    tpots = [t for t in (tpot_ms(r) for r in requests) if t is not None]
    itls = [gap for r in requests for gap in itl_ms(r)]
    error_kinds = Counter(r.error or "no_token" for r in requests if failed(r))
    output_tokens = sum(r.output_tokens for r in ok)
    lag_p99 = percentile([send_lag_ms(r) for r in requests], 99) or 0.0
    summary = WindowSummary(
        rate_rps=rate_rps,
        duration_s=duration_s,
        requests=n,
        completed=len(ok),
        errors=n - len(ok),
        error_kinds=dict(sorted(error_kinds.items())),
        input_tokens=sum(r.prompt_tokens for r in requests),
        output_tokens=output_tokens,
        usage_missing=sum(1 for r in ok if r.usage_missing),
        achieved_rps=round(len(ok) / duration_s, 4),
        goodput_tok_s=round(output_tokens / duration_s, 4),
        ttft_ms=percentiles_ms([ttft_ms(r) for r in requests]),
        ttft_from_send_ms=percentiles_ms([ttft_from_send_ms(r) for r in requests]),
        tpot_ms=percentiles_ms(tpots),
        itl_ms=percentiles_ms(itls),
        e2e_ms=percentiles_ms([e2e_ms(r) for r in requests]),
        send_lag_p99_ms=round(lag_p99, 4),
        client_bound=lag_p99 > CLIENT_BOUND_SEND_LAG_MS,
        slo_attainment_pct=round(100 * sum(meets_slo(r, slo) for r in requests) / n, 4)
        if n
        else 0.0,
        stopped_early=stopped_early,
    )
    reasons: list[str] = []
    if n == 0:
        reasons.append("no_requests")
    else:
        if _above(summary.ttft_ms.p99, slo.ttft_p99_ms):
            reasons.append("ttft")
        if _above(summary.tpot_ms.p99, slo.tpot_p99_ms):
            reasons.append("tpot")
        if summary.errors > (n - 1) // 100:
            reasons.append("errors")
    if stopped_early:
        reasons.append("stopped_early")
    summary.slo_pass = not reasons
    summary.failure_reason = ",".join(reasons) or None
    return summary
