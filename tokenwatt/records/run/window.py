"""Per-window request statistics, as stored in run records.

A latency percentile is a number of ms, the string ``"inf"`` when failed requests (which
count as infinitely slow, methods/goodput.md) reach that percentile, or null when there were no
samples (e.g. TPOT when every request produced one token).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tokenwatt.records.shared.base import (
    ArrivalProcess,
    LoadProfile,
    NonNegFloat,
    NonNegInt,
    Percent,
    PosFloat,
    PosInt,
    StrictModel,
)
from tokenwatt.records.shared.interval import QuantileCI

LatencyMs = NonNegFloat | Literal["inf"] | None


class Percentiles(StrictModel):
    """p50/p90/p99 of one latency (ms), see :data:`LatencyMs`."""

    p50: LatencyMs = None
    """Median (ms); "inf" when failed requests (infinitely slow) reach it; null with no samples."""
    p90: LatencyMs = None
    """90th percentile (ms); "inf" when failed requests reach it; null with no samples."""
    p99: LatencyMs = None
    """99th percentile (ms); "inf" when failed requests reach it; null with no samples."""


class Spread(StrictModel):
    """p50/p90/p99 and mean of a non-latency quantity (e.g. tokens per chunk); None when
    there were no samples."""

    p50: NonNegFloat | None = None
    """Median of the quantity over the window's samples; null with no samples."""
    p90: NonNegFloat | None = None
    """90th percentile of the quantity; null with no samples."""
    p99: NonNegFloat | None = None
    """99th percentile of the quantity; null with no samples."""
    mean: NonNegFloat | None = None
    """Arithmetic mean of the quantity; null with no samples."""


class WorkerLag(StrictModel):
    """How late one load-generator worker process got round to its share of a window."""

    worker: NonNegInt = Field(description="The worker's number (arrival i goes to i mod N).")
    requests: NonNegInt = Field(
        description="In-window requests the worker sent (cancelled ones left out)."
    )
    send_lag_p99_ms: NonNegFloat = Field(
        description="p99 of its requests' send lag (dispatched - scheduled, ms)."
    )
    client_bound: bool = Field(description="Its send-lag p99 exceeds the 10 ms client-bound mark.")
    died: bool = Field(
        default=False,
        description="The process died mid-window; its unreported requests are lost "
        "(counted as cancelled by the client) and the window is invalid.",
    )
    host: str | None = Field(
        default=None,
        description="Host name the worker ran on, for a worker that ran as a Ray actor "
        "(collect --ray-address); None: a process on the driver's machine.",
    )
    node_id: str | None = Field(
        default=None, description="Ray's id of the node the worker's actor ran on (hex)."
    )
    clock_offset_ms: float | None = Field(
        default=None,
        description="The worker's monotonic clock minus the driver's, measured before the "
        "window by Cristian's algorithm (least-RTT of 8 round trips, ms); the worker got "
        "the window's start on its clock and its times were moved back to the driver's. "
        "None: the driver's own clock (a local process).",
    )
    clock_offset_uncertainty_ms: NonNegFloat | None = Field(
        default=None,
        description="Largest error of clock_offset_ms: half the kept round trip (ms). The "
        "worker's send and arrival times on the driver's clock are this uncertain; its "
        "latencies (differences on its own clock) are not.",
    )


class ErrorSample(StrictModel):
    """One failed request, as an example of its error kind (text capped and scrubbed of
    credentials by the load generator)."""

    kind: str = Field(description="The request's error kind (``timeout``, ``http_503``, ...).")
    exception: str | None = Field(
        default=None, description="Exception class behind the error, if any."
    )
    message: str | None = Field(default=None, description="The exception's message.")
    status: int | None = Field(default=None, description="HTTP status, if a response came.")
    body: str | None = Field(default=None, description="First bytes of the error body.")


TokenCountSource = Literal["usage", "tokenizer", "chunks-estimate"]


class WindowSummary(StrictModel):
    """What one measurement window saw.

    ``output_tokens`` counts tokens of requests that *arrived* in the window (from the
    server's ``usage``; ``usage_missing`` counts requests whose tokens were counted by the
    client instead). ``goodput_tok_s`` = output tokens / ``duration_s`` (methods/goodput.md).

    TTFT (ms) counts from each request's *scheduled* time, including any wait for a
    ``max_concurrency`` slot; ``ttft_from_send_ms`` counts from the actual send.
    ``send_lag_p99_ms`` is the p99 of how late the client got round to a request
    (dispatched − scheduled, ms): a wait for a concurrency slot is the server's backlog,
    not client lateness, so it is left out here (it is in TTFT); with no slot wait this
    equals sent − scheduled. ``client_bound`` is set when that p99 exceeds 10 ms.

    ``errors`` and ``error_kinds`` count the engine's failures only: requests the client
    cancelled itself (early stop) are ``cancelled_by_client``, in no error count or rate;
    they never finished, so (``cancelled_policy: miss``) they count as infinitely slow in
    every percentile and as misses in ``slo_attainment_pct``.
    The methods page (goodput) states every definition; the fields below the verdict say
    whether the window can be trusted at all: ``valid`` is False when the server did not
    serve what was asked or did not keep up, and such a window fails the SLO.
    """

    rate_rps: PosFloat
    """The window's load in requests per second: the arrival rate set for an open-loop window
    (poisson, constant); for a closed-loop window (profile concurrency) the rate measured (requests
    / duration_s)."""
    duration_s: PosFloat
    """Length of the measurement window (s), warm-up excluded: requests that arrive in it are the
    window's."""
    requests: NonNegInt
    """Requests that arrived in the window, those the client cancelled itself included (warm-up and
    drain requests excluded)."""
    completed: NonNegInt
    """Requests of the window that finished without error."""
    errors: NonNegInt
    """Requests of the window the engine failed (connection error, timeout, HTTP error, broken
    stream); requests the client cancelled are not errors."""
    error_kinds: dict[str, NonNegInt] = Field(default_factory=dict)
    """Failed requests counted per error kind (connect, timeout, http_500, ...)."""
    input_tokens: NonNegInt = 0
    """Prompt tokens of the window's non-cancelled requests, summed (from the server's usage, else
    as sent)."""
    output_tokens: NonNegInt = 0
    """Output tokens of the window's completed requests, summed (token_count_source says where
    counted)."""
    usage_missing: NonNegInt = 0
    """Completed requests whose response carried no usage, so the client counted their output
    tokens."""
    without_done: NonNegInt = Field(
        default=0,
        description="Completed requests whose stream ended without 'data: [DONE]' after a "
        "chunk with finish_reason (the body closed cleanly): counted as complete, as vLLM's "
        "bench serve does; a stream that ends without either is a protocol error.",
    )
    achieved_rps: NonNegFloat = 0.0
    """Completed requests / duration_s (req/s)."""
    goodput_tok_s: NonNegFloat = 0.0
    """Output tokens of the window's completed requests / duration_s (tok/s); the SLO search's
    goodput when the window passes."""
    ttft_ms: Percentiles = Field(default_factory=Percentiles)
    """Time to first token (ms), from each request's scheduled time (any wait for a client
    concurrency slot included); failed requests, and those the client cancelled, count as
    infinite."""
    ttft_from_send_ms: Percentiles = Field(default_factory=Percentiles)
    """Time to first token (ms) from the moment the request was actually sent."""
    tpot_ms: Percentiles = Field(default_factory=Percentiles)
    """Time per output token (ms): (end - first token) / (output tokens - 1) per request; one-token
    outputs are left out (tpot_one_token); failed requests count as infinite."""
    itl_ms: Percentiles = Field(default_factory=Percentiles)
    """Inter-token latency (ms): every gap between consecutive streamed text chunks, pooled over the
    window's requests; a failed request adds one infinite gap."""
    e2e_ms: Percentiles = Field(default_factory=Percentiles)
    """End-to-end latency (ms): from the scheduled time to the end of the response stream; a
    timed-out request's is the time until the client gave up, any other failure counts as infinite.
    """
    send_lag_p99_ms: NonNegFloat | None = Field(
        default=0.0,
        description="p99 of the send lag (dispatched - scheduled, ms); null for a "
        "closed-loop window (profile 'concurrency'), which has no schedule to lag behind.",
    )
    client_bound: bool = False
    """The send-lag p99 exceeds 10 ms: the load generator, not the server, may have limited the
    window."""
    slo_attainment_pct: Percent = 0.0
    """Share of the window's requests that met both SLO limits individually (%, DistServe's
    attainment; the methods page, goodput); requests the client cancelled count as misses
    (cancelled_policy)."""
    slo_pass: bool = False
    """The window's verdict: p99 TTFT and p99 TPOT within the spec's limits, the window valid and
    not stopped early."""
    failure_reason: str | None = None
    """Why the window failed the SLO, in words (the limit missed with its value, an invalid window,
    a client-bound retry); null when it passed."""
    stopped_early: bool = False
    """The window was cut short because it had already missed the SLO beyond doubt (its unfinished
    requests were cancelled by the client)."""
    warnings: list[str] = Field(
        default_factory=list, description="Human-readable flags of this window, one a line."
    )
    valid: bool = Field(
        default=True,
        description="False when the window's figures cannot stand for the rate: the server "
        "served other than was asked beyond the threshold, or did not sustain the rate. "
        "An invalid window fails the SLO.",
    )
    invalid_reason: str | None = Field(
        default=None, description="Why the window is invalid (sentences joined by '; ')."
    )
    cancelled_by_client: NonNegInt = Field(
        default=0,
        description="Requests the client cancelled itself (early stop); not errors. They "
        "count as infinitely slow in the percentiles and as misses in SLO attainment "
        "(cancelled_policy 'miss'); records before that policy left them out.",
    )
    cancelled_policy: Literal["miss", "left_out"] = Field(
        default="left_out",
        description="How the window's cancelled_by_client requests enter its percentiles and "
        "SLO attainment: 'miss' (infinitely slow, not meeting the SLO; every record written "
        "since this field exists) or 'left_out' (older records: left out of both, so an "
        "early-stopped window's figures describe only its finished requests).",
    )
    error_samples: dict[str, list[ErrorSample]] = Field(
        default_factory=dict, description="A few failed requests per error kind."
    )
    transport_retries: NonNegInt = Field(
        default=0,
        description="Sends repeated on a new connection after a failure that cannot have "
        "reached the server (summed over the window's requests).",
    )
    token_count_source: TokenCountSource = Field(
        default="usage",
        description="Where output token counts come from: the server's usage; the "
        "model's tokenizer over the streamed text (some request lacked usage); or the "
        "number of text chunks, an estimate (some request lacked usage and no tokenizer "
        "was given).",
    )
    short_outputs: NonNegInt = Field(
        default=0,
        description="Requests asked for exactly max_tokens (ignore_eos) whose usage reports "
        "fewer output tokens.",
    )
    long_outputs: NonNegInt = Field(
        default=0, description="Requests whose usage reports more output tokens than max_tokens."
    )
    prompt_mismatches: NonNegInt = Field(
        default=0,
        description="Requests sent as token ids whose usage reports a different prompt "
        "token count (e.g. a truncated prompt).",
    )
    sustained: bool | None = Field(
        default=None,
        description="False when the server did not keep up with the window's arrivals: it "
        "started serving them (first token) at under 95% of the rate they arrived, beyond "
        "noise (methods page); None when not judged: fewer than 20 finished requests, stopped "
        "early, or a window shorter than 10 service times (there a filling batch and a "
        "backlog look alike; use longer windows to have it judged).",
    )
    completion_ratio: NonNegFloat | None = Field(
        default=None,
        description="Completion rate / arrival rate of the window's requests, between the "
        "median completions of their first and last quarter (methods page).",
    )
    start_ratio: NonNegFloat | None = Field(
        default=None,
        description="The same for first tokens: the rate requests started being served / "
        "the rate they arrived; the sustained verdict's figure.",
    )
    drain_s: NonNegFloat | None = Field(
        default=None,
        description="From the last in-window arrival to the end of the last in-window request (s).",
    )
    tail_s: NonNegFloat | None = Field(
        default=None,
        description="How long the load went on after the window's end (s): until its last "
        "request ended or the tail cap (tail_cap_s) cut it; null in older records.",
    )
    tail_cap_s: PosFloat | None = Field(
        default=None,
        description="The longest the load may go on after the window (s): min(request "
        "timeout, TTFT limit + TPOT limit x (largest max_tokens of the window - 1)) + 1 s; "
        "a request of the window still open then has provably missed a limit (methods page, "
        "goodput). Null when the window stopped before its end, and in older records.",
    )
    tail_arrivals: NonNegInt | None = Field(
        default=None,
        description="Requests sent after the window's end, to keep the load on while the "
        "window's requests finished (cancelled at the end, not counted); null in older records.",
    )
    cancelled_at_cap: NonNegInt | None = Field(
        default=None,
        description="Requests of the window still open at the tail cap, cancelled there and "
        "counted as misses: those without a first token as timeouts (past the TTFT limit), "
        "those still streaming as censored; null in older records.",
    )
    censored: NonNegInt | None = Field(
        default=None,
        description="Of cancelled_at_cap, the requests still streaming at the cap (error kind "
        "'censored'): their latencies are unknown beyond having missed the TTFT or the TPOT "
        "limit, so they count as misses (infinitely slow); null in older records.",
    )
    slot_wait_p99_ms: NonNegFloat = Field(
        default=0.0,
        description="p99 of the wait for a client concurrency slot (sent − dispatched, ms).",
    )
    concurrency_capped: bool = Field(
        default=False,
        description="The client's max_concurrency held requests back: slot-wait p99 above 1 ms.",
    )
    send_gaps_ks_p: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="Kolmogorov-Smirnov p-value of the gaps between the window's actual "
        "sends (wire order) against the exponential of the target rate: below 0.01 the "
        "client's sends were not Poisson on the wire (a warning says so). Null for "
        "constant-rate and closed-loop windows, fewer than 20 sends, and older records.",
    )
    ttfc_ms: Percentiles = Field(
        default_factory=Percentiles,
        description="Time to first *content* token (ms, from the scheduled time): differs "
        "from TTFT for reasoning output; failed requests count as infinite.",
    )
    reasoning_requests: NonNegInt = Field(
        default=0, description="Completed requests whose stream carried reasoning text."
    )
    one_token_outputs: NonNegInt = Field(
        default=0,
        description="Completed requests with one output token: they have no TPOT (see "
        "tpot_one_token).",
    )
    tpot_one_token: Literal["excluded"] = Field(
        default="excluded",
        description="Policy for one-output-token requests: 'excluded' — no TPOT, left out "
        "of the TPOT percentiles, and counted as meeting the TPOT limit in SLO attainment.",
    )
    tokens_per_chunk: Spread = Field(
        default_factory=Spread,
        description="Output tokens per text chunk, per completed request (tokens / chunks).",
    )
    itl_per_token_ms: Percentiles = Field(
        default_factory=Percentiles,
        description="ITL per token (ms): each chunk gap divided by its request's mean "
        "tokens per chunk; equals itl_ms when every chunk carries one token.",
    )
    ttft_p99_ci_ms: QuantileCI | None = Field(
        default=None,
        description="95% distribution-free confidence interval of the p99 TTFT (ms), from "
        "the same values (failed requests infinite); null when there were none, when the "
        "window was stopped early (its cancelled requests are in no percentile), or in "
        "records made before intervals were kept.",
    )
    tpot_p99_ci_ms: QuantileCI | None = Field(
        default=None,
        description="The same for the p99 TPOT (one-token outputs left out, as in the p99).",
    )
    slo_beyond_doubt: bool | None = Field(
        default=None,
        description="Whether the SLO verdict holds across both p99 intervals: a pass whose "
        "p99 intervals lie at or below both limits, or a miss whose interval lies wholly "
        "above a limit it missed. False: 'pass, but not beyond doubt' or 'miss, but not "
        "beyond doubt'. Null when the intervals do not bear on the verdict (an invalid, "
        "stopped-early or empty window) or were not computed. Never changes slo_pass.",
    )
    workers: PosInt = Field(
        default=1,
        description="Load-generator processes that shared this window's one schedule "
        "(round-robin by arrival); send_lag_p99_ms and client_bound are over all of them.",
    )
    worker_lag: list[WorkerLag] = Field(
        default_factory=list,
        description="Send lag and the client-bound flag per worker process (empty with "
        "one worker).",
    )
    arrivals: ArrivalProcess | None = Field(
        default="poisson",
        description="How the window's arrival times were drawn: 'conditioned' — exactly "
        "round(rate_rps × duration_s) arrivals in the window, a Poisson process conditioned "
        "on that count; 'poisson' — the unconditioned process, whose count in the window is "
        "random (about 1/sqrt(rate × duration) relative noise on goodput). Records made "
        "before this field existed read as 'poisson', which is what they used. Null when "
        "the profile is not Poisson (constant rate, closed loop).",
    )
    profile: LoadProfile = Field(
        default="poisson",
        description="How the window offered its load: 'poisson' (open loop, Poisson "
        "arrivals at rate_rps), 'constant' (open loop, one arrival every 1/rate_rps s) or "
        "'concurrency' (closed loop: 'concurrency' clients, each sending its next request "
        "when its previous one ended; rate_rps is then the measured rate). Records made "
        "before this field existed read as 'poisson', which is what they used.",
    )
    concurrency: PosInt | None = Field(
        default=None,
        description="Closed-loop clients of the window (profile 'concurrency'); null for "
        "open-loop windows. With it, rate_rps is the rate requests were sent in the window "
        "(requests / duration_s, at least 1e-9 when none was), measured rather than set.",
    )


RETRIED_PREFIX = "client-bound"
"""Start of ``failure_reason`` of a window that the collector measured again because the
client itself lagged (send-lag p99 above 10% of the TTFT limit): the window is kept in the
record, but its verdict is not used — the next window at the same rate replaces it."""


WORKER_DIED_PREFIX = "worker died"
"""Start of ``failure_reason`` of a window that the collector measured again because a
load-generator worker process (or Ray actor) died in it: the window is kept, invalid, and
its verdict is not used — a fault of the instrument is no verdict on the server."""


NOT_IDLE_PREFIX = "not proven idle"
"""Start of ``failure_reason`` of a window that the collector measured again because it
started without proof that the engine was idle (a backlog of an earlier window may have
loaded it): the window is kept, invalid (``invalid_reason`` says which check failed), and
it has no verdict."""

UNCLEAN_PREFIX = "not clean"
"""Start of ``failure_reason`` of a window that the collector measured again because it
could not be trusted (:func:`untrusted_reason`): kept, invalid, its verdict not used."""

NOT_SUSTAINED_PREFIX = "not sustained"
"""Start of the ``invalid_reason`` sentence of a window whose server did not keep up with
the rate (:func:`tokenwatt.analysis.window.latency.summarise_window`)."""


def retried(window: WindowSummary) -> bool:
    """True for a window that was measured again because the client lagged, one of its
    worker processes died, the engine was not proven idle at its start, or it could not be
    trusted for another reason (its verdict was replaced by the next window's; see
    :data:`RETRIED_PREFIX`, :data:`WORKER_DIED_PREFIX`, :data:`NOT_IDLE_PREFIX`,
    :data:`UNCLEAN_PREFIX`)."""
    prefixes = (RETRIED_PREFIX, WORKER_DIED_PREFIX, NOT_IDLE_PREFIX, UNCLEAN_PREFIX)
    return (window.failure_reason or "").startswith(prefixes)


def untrusted_reason(window: WindowSummary) -> str | None:
    """Why a window's verdict cannot be used for the SLO boundary, or None when it can.

    A valid window's verdict can. So can an invalid one whose only reason is that the
    server did not sustain the rate (:data:`NOT_SUSTAINED_PREFIX`): that is the overload
    the search looks for, a miss. Any other reason — the engine not proven idle before it,
    the window cut short, the server serving other than was asked — says nothing about the
    load, so a boundary must not rest on it (methods/goodput.md, "Inconclusive").
    """
    if window.valid:
        return None
    reasons = [r.strip() for r in (window.invalid_reason or "").split("; ") if r.strip()]
    other = [r for r in reasons if not r.startswith(NOT_SUSTAINED_PREFIX)]
    if reasons and not other:
        return None
    return "; ".join(other) or "the window is invalid"
