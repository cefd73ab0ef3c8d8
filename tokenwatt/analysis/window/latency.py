"""Latency percentiles, goodput and the SLO verdict of one measurement window (pure).

Definitions (stated for users on the methods page, ``site_templates/methods/goodput.md``):

- **TTFT** from the request's *scheduled* time to the first chunk carrying generated text of
  any kind, reasoning or content (``ttft_from_send_ms`` from the actual send, as vLLM's
  ``bench serve`` and GuideLLM measure); **time to first content token** (``ttfc``) beside it
  for reasoning output;
- **TPOT** per request = (last token − first token) / (output tokens − 1); a one-token
  output has none: it is left out of the TPOT percentiles and meets the TPOT limit (vLLM's
  ``bench serve`` likewise appends no TPOT and counts it as 0 for goodput);
- **ITL** = gaps between successive text chunks, pooled over requests, as vLLM's
  ``bench serve`` reports it; ``itl_per_token`` divides each gap by its request's mean
  tokens per chunk;
- **E2E** from the scheduled time to the end of the response (the end of the stream, after
  ``[DONE]``: ``finished_s``), not the last token; a timed-out request's E2E is the time
  until the client gave up (its timeout), not infinity;
- a request that failed (error, timeout, no token) counts as **infinitely** slow in the
  TTFT, TPOT and ITL percentiles and in time to first content -- never dropped; other
  failures are infinite in E2E too. A request the client cancelled itself (our early stop,
  a stop signal, a dead worker) never finished in the window: it counts the same way,
  infinitely slow in every percentile and a miss in SLO attainment, but apart from the
  engine's errors (``cancelled_by_client``, never in ``errors`` or the error allowance);
- goodput (tok/s) = output tokens of the window's completed requests / window length;
- SLO attainment = share of the window's requests meeting both limits individually
  (DistServe, Zhong et al., OSDI 2024), cancelled ones counted as misses; the SLO passes
  when p99 TTFT <= ``ttft_p99_ms`` and p99 TPOT <=
  ``tpot_p99_ms``, errors stay within what a p99 absorbs, and the window is valid
  (:mod:`tokenwatt.analysis.window.window_checks`: served what was asked, sustained the rate).

Percentile definition: the "linear" method (Hyndman & Fan type 7), which is
``numpy.percentile``'s default and so what vLLM's ``bench serve`` reports
(``np.percentile(values, p)``). The rank q·(n−1)/100 is computed in exact integer arithmetic
so that infinite values are judged exactly: numpy's float rank 0.99 × 100 = 99.00000000000001
would interpolate towards an infinite neighbour and call a passing window failed. On finite
data the result equals ``numpy.percentile(values, q, method="linear")``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from tokenwatt.analysis.window.doubt import beyond_doubt, p99_ci
from tokenwatt.analysis.window.errors import cancelled, error_kinds, error_samples
from tokenwatt.analysis.window.token_counts import (
    CountTokens,
    recount,
    token_warning,
    tokens_per_chunk,
)
from tokenwatt.analysis.window.window_checks import (
    SLOT_WAIT_CAPPED_MS,
    Served,
    Sustained,
    served_vs_asked,
    served_warnings,
    slot_wait_ms,
    sustained_check,
)
from tokenwatt.records import (
    NOT_SUSTAINED_PREFIX,
    LatencyMs,
    Percentiles,
    RequestResult,
    SloSpec,
    Spread,
    WindowSummary,
    WorkerLag,
)

INF = math.inf
PERCENTILES = (50, 90, 99)
# A window whose send-lag p99 exceeds this is flagged client-bound (methods page, TTFT).
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
    """True when the request errored, timed out, was cancelled, or never produced a token."""
    return r.error is not None or r.first_token_s is None


def ttft_ms(r: RequestResult) -> float:
    """TTFT (ms) from the scheduled time to the first token of any kind; infinite when
    failed."""
    if failed(r) or r.first_token_s is None:
        return INF
    return (r.first_token_s - r.scheduled_s) * 1e3


def ttft_from_send_ms(r: RequestResult) -> float:
    """TTFT (ms) from the actual send; infinite for a failed request."""
    if failed(r) or r.first_token_s is None:
        return INF
    return (r.first_token_s - r.sent_s) * 1e3


def ttfc_ms(r: RequestResult) -> float:
    """Time to first *content* token (ms) from the scheduled time.

    Equals TTFT for output without reasoning; infinite for a failed request and for a
    reasoning one whose content never came (it spent its tokens thinking).
    """
    if failed(r):
        return INF
    at = r.first_content_s
    if at is None and not r.reasoning:
        at = r.first_token_s
    return INF if at is None else (at - r.scheduled_s) * 1e3


def tpot_ms(r: RequestResult) -> float | None:
    """TPOT (ms): (last − first) / (output tokens − 1); None for a one-token output,
    infinite for a failed request."""
    if failed(r) or r.first_token_s is None or r.last_token_s is None:
        return INF
    if r.output_tokens <= 1:
        return None
    return (r.last_token_s - r.first_token_s) / (r.output_tokens - 1) * 1e3


def e2e_ms(r: RequestResult) -> float:
    """E2E latency (ms) from the scheduled time to the end of the response.

    The end is ``finished_s`` (the stream's end, after ``[DONE]``; ``last_token_s`` for a
    result without it). A timed-out request's E2E is the time until the client gave up;
    any other failure is infinite.
    """
    if r.error == "timeout" and r.finished_s is not None:
        return (r.finished_s - r.scheduled_s) * 1e3
    end = r.finished_s if r.finished_s is not None else r.last_token_s
    if failed(r) or end is None:
        return INF
    return (end - r.scheduled_s) * 1e3


def itl_ms(r: RequestResult) -> list[float]:
    """Gaps (ms) between successive text chunks; one infinite gap for a failed request."""
    if failed(r):
        return [INF]
    return list(np.diff(np.asarray(r.chunk_s, dtype=np.float64)) * 1e3)


def itl_per_token_ms(r: RequestResult) -> list[float]:
    """Chunk gaps (ms) divided by the request's mean tokens per chunk; ``[inf]`` when failed.

    With one token per chunk this equals :func:`itl_ms`; with k tokens per chunk each gap
    is spread over its k tokens.
    """
    per_chunk = tokens_per_chunk(r)
    if per_chunk is None or per_chunk <= 0:
        return [INF] if failed(r) else []
    return [gap / per_chunk for gap in itl_ms(r)]


def send_lag_ms(r: RequestResult) -> float:
    """How late the client got round to the request (ms): ``dispatched − scheduled``.

    The wait for a concurrency slot (``sent − dispatched``) is the server's backlog, not the
    client's lateness, so it is left out here (it is inside TTFT). Results without
    ``dispatched_s`` use ``sent_s``.
    """
    at = r.dispatched_s if r.dispatched_s is not None else r.sent_s
    return max(0.0, (at - r.scheduled_s) * 1e3)


def worker_lags(
    requests: Sequence[RequestResult], worker_of: Sequence[int], workers: int
) -> list[WorkerLag]:
    """Send lag per load-generator worker over a window's requests.

    ``worker_of[i]`` is the worker that sent ``requests[i]``. Cancelled requests are left
    out, as in the window's own send-lag p99; a worker's ``client_bound`` uses the same
    10 ms mark. ``died`` is left False (the caller knows which worker died).
    """
    lags: list[list[float]] = [[] for _ in range(workers)]
    for r, k in zip(requests, worker_of, strict=True):
        if not cancelled(r):
            lags[k].append(send_lag_ms(r))
    out = []
    for k, values in enumerate(lags):
        p99 = percentile(values, 99) or 0.0
        out.append(
            WorkerLag(
                worker=k,
                requests=len(values),
                send_lag_p99_ms=round(p99, 4),
                client_bound=p99 > CLIENT_BOUND_SEND_LAG_MS,
            )
        )
    return out


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
    count (``collect.load.arrivals.window_request_count``) or an upper bound.
    """
    allowed = misses_allowed(expected_total)
    ttft_misses = tpot_misses = 0
    ttft_limit_s = slo.ttft_p99_ms / 1e3
    for r in requests_so_far:
        if cancelled(r):
            continue
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


def _spread(values: Sequence[float]) -> Spread:
    if not values:
        return Spread()
    return Spread(
        **{f"p{q}": round(percentile(values, q) or 0.0, 4) for q in PERCENTILES},
        mean=round(float(np.mean(values)), 4),
    )


def summarise_window(
    requests: Sequence[RequestResult],
    *,
    rate_rps: float,
    duration_s: float,
    slo: SloSpec,
    stopped_early: bool = False,
    count_tokens: CountTokens | None = None,
) -> WindowSummary:
    """Summarise the requests that arrived in one window (warm-up already left out).

    Args:
        requests: the window's requests (those scheduled inside it), finished or failed.
        rate_rps: the target arrival rate (req/s).
        duration_s: the window's length (s), the goodput denominator.
        slo: the latency limits (ms).
        stopped_early: the probe was stopped once it had missed the SLO beyond doubt; such a
            window never passes.
        count_tokens: the model's tokenizer as text → token count; when given, requests
            the server sent no ``usage`` for are recounted from their streamed text
            (:func:`tokenwatt.analysis.window.token_counts.recount`); errors it raises propagate.

    Returns:
        A :class:`WindowSummary` with 95% intervals of both p99s and whether the verdict
        holds across them (:mod:`tokenwatt.analysis.window.doubt`; the verdict is the p99s' own);
        ``failure_reason`` lists what failed, comma-separated:
        ``ttft``, ``tpot``, ``errors`` (failed requests alone push p99 to infinity),
        ``served_mismatch`` and ``not_sustained`` (the window is invalid, see
        :mod:`tokenwatt.analysis.window.window_checks`), ``no_requests``, ``stopped_early``.
    """
    requests, token_source, usage_less = recount(requests, count_tokens)
    live = [r for r in requests if not cancelled(r)]
    ok = [r for r in live if not failed(r)]
    summary = _latencies(requests, live, ok, rate_rps=rate_rps, duration_s=duration_s, slo=slo)
    summary.cancelled_by_client = len(requests) - len(live)
    summary.cancelled_policy = "miss"
    summary.stopped_early = stopped_early
    if stopped_early:
        # The stop censored the window: intervals of a p99 over requests cut off at an
        # arbitrary moment would describe no sample the window could have had.
        summary.ttft_p99_ci_ms = summary.tpot_p99_ci_ms = None
    summary.error_kinds = error_kinds(live)
    summary.error_samples = error_samples(live)
    summary.transport_retries = sum(r.transport_retries for r in requests)
    summary.token_count_source = token_source
    served = served_vs_asked(ok)
    sustained = sustained_check(requests, stopped_early=stopped_early)
    _record_checks(summary, served, sustained)
    warning = token_warning(token_source, usage_less, len(ok))
    if warning:
        summary.warnings.append(warning)
    _verdict(summary, slo, len(live), served, sustained)
    summary.slo_beyond_doubt = beyond_doubt(
        slo_pass=summary.slo_pass,
        failure_reason=summary.failure_reason,
        ttft_ci=summary.ttft_p99_ci_ms,
        tpot_ci=summary.tpot_p99_ci_ms,
        ttft_limit_ms=slo.ttft_p99_ms,
        tpot_limit_ms=slo.tpot_p99_ms,
    )
    return summary


def _latencies(
    window: Sequence[RequestResult],
    live: Sequence[RequestResult],
    ok: Sequence[RequestResult],
    *,
    rate_rps: float,
    duration_s: float,
    slo: SloSpec,
) -> WindowSummary:
    """The window's counts, rates and latency percentiles.

    The percentiles and attainment are over every request of the ``window``, cancelled
    ones as failed (infinite, a miss); errors, send lag and token counts over the ``live``
    (not cancelled) ones, whose outcome was the engine's; output tokens over the ``ok``
    (completed) ones.
    """
    n = len(window)
    output_tokens = sum(r.output_tokens for r in ok)
    lag_p99 = percentile([send_lag_ms(r) for r in live], 99) or 0.0
    slot_p99 = percentile([slot_wait_ms(r) for r in live], 99) or 0.0
    per_chunk = [t for t in (tokens_per_chunk(r) for r in ok) if t is not None]
    ttfts = [ttft_ms(r) for r in window]
    tpots = [t for t in (tpot_ms(r) for r in window) if t is not None]
    return WindowSummary(
        rate_rps=rate_rps,
        duration_s=duration_s,
        requests=n,
        completed=len(ok),
        errors=len(live) - len(ok),
        input_tokens=sum(r.prompt_tokens for r in live),
        output_tokens=output_tokens,
        usage_missing=sum(1 for r in ok if r.usage_missing),
        without_done=sum(1 for r in ok if r.without_done),
        achieved_rps=round(len(ok) / duration_s, 4),
        goodput_tok_s=round(output_tokens / duration_s, 4),
        ttft_ms=percentiles_ms(ttfts),
        ttft_p99_ci_ms=p99_ci(ttfts),
        tpot_p99_ci_ms=p99_ci(tpots),
        ttft_from_send_ms=percentiles_ms([ttft_from_send_ms(r) for r in window]),
        ttfc_ms=percentiles_ms([ttfc_ms(r) for r in window]),
        tpot_ms=percentiles_ms(tpots),
        itl_ms=percentiles_ms([gap for r in window for gap in itl_ms(r)]),
        itl_per_token_ms=percentiles_ms([gap for r in window for gap in itl_per_token_ms(r)]),
        e2e_ms=percentiles_ms([e2e_ms(r) for r in window]),
        send_lag_p99_ms=round(lag_p99, 4),
        client_bound=lag_p99 > CLIENT_BOUND_SEND_LAG_MS,
        slot_wait_p99_ms=round(slot_p99, 4),
        concurrency_capped=slot_p99 > SLOT_WAIT_CAPPED_MS,
        slo_attainment_pct=round(100 * sum(meets_slo(r, slo) for r in window) / n, 4) if n else 0.0,
        reasoning_requests=sum(1 for r in ok if r.reasoning),
        one_token_outputs=sum(1 for r in ok if r.output_tokens <= 1),
        tokens_per_chunk=_spread(per_chunk),
    )


def _record_checks(summary: WindowSummary, served: Served, sustained: Sustained) -> None:
    """Put the served-vs-asked and sustained checks, and their warnings, in the summary."""
    summary.short_outputs = served.short
    summary.long_outputs = served.long
    summary.prompt_mismatches = served.prompt_mismatch
    summary.sustained = sustained.sustained
    summary.completion_ratio = sustained.completion_ratio
    summary.start_ratio = sustained.start_ratio
    summary.drain_s = sustained.drain_s
    warnings = served_warnings(served)
    invalid = []
    if served.invalid:
        invalid.append(f"served other than asked: {served.flagged} of {served.judged} requests")
    if sustained.sustained is False:
        invalid.append(
            f"{NOT_SUSTAINED_PREFIX}: the server started requests at "
            f"{100 * (sustained.start_ratio or 0.0):.0f}% and completed them at "
            f"{100 * (sustained.completion_ratio or 0.0):.0f}% of the rate they arrived (the "
            f"last ended {sustained.drain_s} s after the last arrival)"
        )
    if summary.concurrency_capped:
        warnings.append(
            f"concurrency-capped: requests waited between dispatch and send (p99 "
            f"{summary.slot_wait_p99_ms:.1f} ms, inside TTFT) for a client concurrency slot "
            "or, on a busy client, for its event loop"
        )
    summary.warnings = invalid + warnings
    summary.valid = not invalid
    summary.invalid_reason = "; ".join(invalid) or None


def _verdict(
    summary: WindowSummary, slo: SloSpec, n: int, served: Served, sustained: Sustained
) -> None:
    """Set ``slo_pass`` and ``failure_reason``; ``n`` is the number of live requests.

    In a window stopped early the cancelled requests make the p99s infinite whatever the
    engine did, so ``ttft`` and ``tpot`` are not named from them: which limit the evidence
    missed is the collector's reading
    (:func:`tokenwatt.collect.measure.verdict.classification_view`).
    """
    reasons: list[str] = []
    if summary.requests == 0:
        reasons.append("no_requests")
    elif n:
        if not summary.stopped_early and _above(summary.ttft_ms.p99, slo.ttft_p99_ms):
            reasons.append("ttft")
        if not summary.stopped_early and _above(summary.tpot_ms.p99, slo.tpot_p99_ms):
            reasons.append("tpot")
        if summary.errors > (n - 1) // 100:
            reasons.append("errors")
        if served.invalid:
            reasons.append("served_mismatch")
        if sustained.sustained is False:
            reasons.append("not_sustained")
    if summary.stopped_early:
        reasons.append("stopped_early")
    summary.slo_pass = not reasons
    summary.failure_reason = ",".join(reasons) or None
