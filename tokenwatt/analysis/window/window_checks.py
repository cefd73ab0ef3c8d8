"""Can a window's figures stand for its rate? Served vs asked, sustained, client slots (pure).

**Served vs asked.** Per completed request whose server reported ``usage``: *short* when it
asked for exactly ``max_tokens`` (``ignore_eos``) and got fewer output tokens, *long* when it
got more than ``max_tokens``, *prompt mismatch* when its prompt went as token ids and usage
reports another prompt length (a truncated prompt, say). Client-counted tokens (no usage)
are not judged: a tokenizer's recount of streamed text can differ by a token from what the
engine generated. They are only warned of when, asking for exactly ``max_tokens``, the
client counted fewer than half of it (:data:`UNSURE_SHORT_SHARE`): too far off for a
recount's token, though a stream whose chunks hold several tokens each could still explain
it. The window is invalid when these requests are more than a p99 can absorb
— more than ``floor((n − 1) / 100)`` of the n judged, just under 1% — the same allowance as
for errors: past it, the p99 may be a request that was not the one asked for.

**Sustained.** MLPerf LoadGen's Server scenario reports the rate its queries were scheduled
at and the rate they completed at, each as (samples − 1) over the time to the last one
(``results.cc``: "Subtract 1 from sample count since the start of the final sample
represents the open end of the time range", logged as ``result_scheduled_samples_per_sec``
and ``result_completed_samples_per_sec``; since v4.1 the submission checker takes the
*completed* rate as the Server result). A system that cannot keep up completes its queries
more slowly than they were scheduled, over the run and its drain. MLPerf states no tolerance
between the two; ours is 5%: a window is sustained when its requests completed at no less
than 95% of the rate they arrived.

MLPerf's runs last at least 600 s, so the last query's own latency is negligible next to the
run. Our windows last seconds to minutes, and a request's latency (seconds, for long
outputs) would be charged as backlog. So the rates are compared between the *median*
arrival and the median event of the window's first and last quarter of requests (by
scheduled time): arrivals span ``A4 − A1``, events ``(A4 + L4) − (A1 + L1)`` with ``L`` the
median time from scheduled to the event in each quarter, so the event rate over the arrival
rate is ``(A4 − A1) / (A4 − A1 + L4 − L1)``. A server that keeps up has ``L4 ≈ L1``
(ratio 1); one whose queue grows all the way through has ``L4 − L1`` growing with the
window (a queue growing at 3 requests a second for every 4 arriving gives 0.25).

Two events are measured: completion (``completion_ratio``, MLPerf's figure, reported) and
the first token (``start_ratio``), which decides. A completion also holds the request's
decode, which grows while an engine's running batch fills after the warm-up — a transient
towards a steady state, not a backlog — whereas a request that waits (in the client's
slot queue or the engine's waiting queue) waits before its first token. The window is
*not sustained* when ``start_ratio`` is below 0.95 **and** the growth ``L4 − L1`` is beyond
three standard errors of the two medians (from each quarter's interquartile range), so
that a short window's noise is not taken for a backlog. Windows with fewer than 20
finished requests, or stopped early, are not judged (``None``); nor is a window whose
arrivals span less than 10 service times — the 10th percentile, over the first quarter of
requests, of the time from send to the end of the response: a request that met no queue.
In so short a window the running batch is still filling after the warm-up, and the
first-token latency grows with it for reasons that are not a backlog (2 s windows of a
simulated engine well below its capacity were judged not sustained before this rule).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from tokenwatt.analysis.window.errors import cancelled
from tokenwatt.records import RequestResult, RunRecord, WindowSummary

SUSTAINED_MIN_RATIO: Final = 0.95
"""Completion rate / arrival rate below which a window is not sustained (5%)."""
SUSTAINED_MIN_REQUESTS: Final = 20
"""Finished requests below which a window's sustained rate is not judged."""
SUSTAINED_MIN_SERVICE_TIMES: Final = 10.0
"""Shortest arrival span, in service times (p10 of send → end), of a window that is judged."""
SUSTAINED_SIGMAS: Final = 3.0
"""Standard errors by which the latency growth must exceed zero to count as a backlog."""
SLOT_WAIT_CAPPED_MS: Final = 10.0
"""Slot-wait p99 (ms) above which the client's concurrency cap counts as reached. Not 0: the
measured wait also holds the event loop's delay in starting the request's task (a few ms
on a busy machine); 10 ms is the client-bound send-lag limit too."""


@dataclass(frozen=True)
class Served:
    """Counts of requests served other than asked (see module docstring)."""

    judged: int
    short: int
    long: int
    prompt_mismatch: int
    short_unsure: int = 0
    """Requests without usage, asking for exactly ``max_tokens``, whose client count was
    under :data:`UNSURE_SHORT_SHARE` of it: warned of, not judged."""
    unsure_of: int = 0
    """Completed requests without usage (what ``short_unsure`` is out of)."""

    @property
    def flagged(self) -> int:
        """Requests with at least one mismatch."""
        return self.short + self.long + self.prompt_mismatch

    @property
    def invalid(self) -> bool:
        """More mismatched requests than a p99 can absorb."""
        return self.flagged > max(self.judged - 1, 0) // 100


UNSURE_SHORT_SHARE = 0.5
"""Below this share of ``max_tokens`` a client-counted output (no usage) asking for exactly
``max_tokens`` is warned of as possibly short (module docstring)."""


def served_vs_asked(requests: Sequence[RequestResult]) -> Served:
    """Count short, long and prompt-mismatched requests among completed ones with usage,
    and the client-counted ones far short of an exact ``max_tokens``."""
    judged = short = long = mismatch = unsure = unsure_of = 0
    for r in requests:
        if not r.ok:
            continue
        if r.usage_missing:
            unsure_of += 1
            exact = r.max_tokens is not None and r.ignore_eos
            if exact and r.output_tokens < UNSURE_SHORT_SHARE * (r.max_tokens or 0):
                unsure += 1
            continue
        judged += 1
        if r.max_tokens is not None:
            if r.ignore_eos and r.output_tokens < r.max_tokens:
                short += 1
            elif r.output_tokens > r.max_tokens:
                long += 1
        if r.prompt_ids_sent is not None and r.prompt_tokens != r.prompt_ids_sent:
            mismatch += 1
    return Served(
        judged=judged,
        short=short,
        long=long,
        prompt_mismatch=mismatch,
        short_unsure=unsure,
        unsure_of=unsure_of,
    )


def served_warnings(served: Served) -> list[str]:
    """One sentence per kind of mismatch found."""
    n = served.judged
    out = []
    if served.short:
        out.append(
            f"{served.short} of {n} requests got fewer output tokens than max_tokens "
            "although they asked for ignore_eos (the server stops early)"
        )
    if served.long:
        out.append(
            f"{served.long} of {n} requests got more output tokens than max_tokens "
            "(the server ignores max_tokens)"
        )
    if served.prompt_mismatch:
        out.append(
            f"{served.prompt_mismatch} of {n} requests report another prompt length than "
            "the token ids sent (the server truncated or changed the prompt)"
        )
    if served.short_unsure:
        out.append(
            f"{served.short_unsure} of {served.unsure_of} requests without usage got, by the "
            f"client's count, under {UNSURE_SHORT_SHARE:.0%} of the max_tokens they asked for "
            "with ignore_eos: the server may stop early (not judged without usage; a chunk "
            "holding several tokens would also explain it)"
        )
    return out


@dataclass(frozen=True)
class Sustained:
    """Did the server keep up with the window's arrivals (see module docstring)?"""

    sustained: bool | None
    completion_ratio: float | None
    start_ratio: float | None
    drain_s: float | None


def _median_se(values: np.ndarray) -> float:
    """Standard error of a sample median: 1.2533 σ / √n, σ from the IQR (σ ≈ IQR / 1.349)."""
    q75, q25 = np.percentile(values, [75, 25])
    return 1.2533 * (float(q75 - q25) / 1.349) / math.sqrt(len(values))


def _rate_ratio(
    first: Sequence[RequestResult],
    last: Sequence[RequestResult],
    end: Callable[[RequestResult], float],
) -> tuple[float | None, float, float]:
    """(ratio, growth, noise) of one event (``end``) between the first and last quarter."""
    span = float(
        np.median([r.scheduled_s for r in last]) - np.median([r.scheduled_s for r in first])
    )
    lag1 = np.asarray([end(r) - r.scheduled_s for r in first])
    lag4 = np.asarray([end(r) - r.scheduled_s for r in last])
    growth = float(np.median(lag4) - np.median(lag1))
    noise = SUSTAINED_SIGMAS * math.hypot(_median_se(lag1), _median_se(lag4))
    if span <= 0 or span + growth <= 0:
        return None, growth, noise
    return span / (span + growth), growth, noise


def _finished(r: RequestResult) -> float:
    return r.finished_s if r.finished_s is not None else r.scheduled_s


def _started(r: RequestResult) -> float:
    """When the request's first token came; its end when none came (a failure)."""
    return r.first_token_s if r.first_token_s is not None else _finished(r)


def sustained_check(requests: Sequence[RequestResult], *, stopped_early: bool) -> Sustained:
    """Judge whether the server kept up with the window's arrivals (module docstring)."""
    done = sorted(
        (r for r in requests if not cancelled(r) and r.finished_s is not None),
        key=lambda r: r.scheduled_s,
    )
    if not done:
        return Sustained(None, None, None, None)
    last_arrival = max(r.scheduled_s for r in requests)
    drain = round(max(0.0, max(_finished(r) for r in done) - last_arrival), 4)
    if stopped_early or len(done) < SUSTAINED_MIN_REQUESTS:
        return Sustained(None, None, None, drain)
    k = len(done) // 4
    first, last = done[:k], done[-k:]
    # The first quarter's fast requests: in a growing backlog the later ones hold the queue.
    service_s = float(np.percentile([_finished(r) - r.sent_s for r in first], 10))
    if done[-1].scheduled_s - done[0].scheduled_s < SUSTAINED_MIN_SERVICE_TIMES * service_s:
        return Sustained(None, None, None, drain)
    completion, _, _ = _rate_ratio(first, last, _finished)
    started, growth, noise = _rate_ratio(first, last, _started)
    if started is None:
        return Sustained(None, _round(completion), None, drain)
    kept_up = started >= SUSTAINED_MIN_RATIO or growth <= noise
    return Sustained(kept_up, _round(completion), _round(started), drain)


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def slot_wait_ms(r: RequestResult) -> float:
    """Time the request waited for a client concurrency slot (ms): ``sent − dispatched``."""
    if r.dispatched_s is None:
        return 0.0
    return max(0.0, (r.sent_s - r.dispatched_s) * 1e3)


def _why_not_judged(w: WindowSummary) -> str | None:
    """Why a window's keep-up check was not judged, from its summary (the reasons of
    :func:`sustained_check`); None when it was judged or had nothing to judge."""
    if w.sustained is not None or w.completed == 0:
        return None
    if w.stopped_early:
        return "stopped early"
    if w.completed < SUSTAINED_MIN_REQUESTS:
        return "short"
    return "span"


def sustained_note(record: RunRecord) -> str | None:
    """One line saying in how many windows the keep-up (sustained) check was not judged,
    and why; None when every window was judged (or stopped early, where it is moot).

    Windows whose arrivals span under :data:`SUSTAINED_MIN_SERVICE_TIMES` service times are
    told the shortest window that would be judged, from their slowest E2E p50 (an upper
    estimate of the p10 service time the check uses), rounded up to whole seconds.
    """
    windows = [p.window for p in record.probes] + [r.window for r in record.repeats]
    reasons = [_why_not_judged(w) for w in windows]
    few = reasons.count("short")
    span = [w for w, r in zip(windows, reasons, strict=True) if r == "span"]
    if not few and not span:
        return None
    parts = []
    if span:
        e2e_s = max(
            (float(w.e2e_ms.p50) / 1000 for w in span if isinstance(w.e2e_ms.p50, float | int)),
            default=None,
        )
        need = (
            f"; E2E p50 up to {e2e_s:.2g} s, so windows of about "
            f"{math.ceil(SUSTAINED_MIN_SERVICE_TIMES * e2e_s * 1.1)} s or more are judged"
            if e2e_s is not None and math.isfinite(e2e_s)
            else ""
        )
        parts.append(
            f"{len(span)} spanned under {SUSTAINED_MIN_SERVICE_TIMES:g} service times{need}"
        )
    if few:
        parts.append(f"{few} had fewer than {SUSTAINED_MIN_REQUESTS} finished requests")
    return (
        f"keep-up check not judged in {len(span) + few} of {len(windows)} windows: "
        + "; ".join(parts)
        + " (their verdicts rest on the SLO alone)"
    )
