"""Per-window request statistics, as stored in run records.

A latency percentile is a number of ms, the string ``"inf"`` when failed requests (which
count as infinitely slow, DESIGN.md) reach that percentile, or null when there were no
samples (e.g. TPOT when every request produced one token).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tokenwatt.records.base import NonNegFloat, NonNegInt, Percent, PosFloat, StrictModel

LatencyMs = NonNegFloat | Literal["inf"] | None


class Percentiles(StrictModel):
    """p50/p90/p99 of one latency (ms), see :data:`LatencyMs`."""

    p50: LatencyMs = None
    p90: LatencyMs = None
    p99: LatencyMs = None


class WindowSummary(StrictModel):
    """What one measurement window saw.

    ``output_tokens`` counts tokens of requests that *arrived* in the window (from the
    server's ``usage``; ``usage_missing`` counts requests whose tokens were counted by the
    client instead). ``goodput_tok_s`` = output tokens / ``duration_s`` (DESIGN.md).

    TTFT (ms) counts from each request's *scheduled* time, including any wait for a
    ``max_concurrency`` slot; ``ttft_from_send_ms`` counts from the actual send.
    ``send_lag_p99_ms`` is the p99 of how late the client got round to a request
    (dispatched − scheduled, ms): a wait for a concurrency slot is the server's backlog,
    not client lateness, so it is left out here (it is in TTFT); with no slot wait this
    equals DESIGN.md's sent − scheduled. ``client_bound`` is set when that p99 exceeds
    10 ms.
    """

    rate_rps: PosFloat
    duration_s: PosFloat
    requests: NonNegInt
    completed: NonNegInt
    errors: NonNegInt
    error_kinds: dict[str, NonNegInt] = Field(default_factory=dict)
    input_tokens: NonNegInt = 0
    output_tokens: NonNegInt = 0
    usage_missing: NonNegInt = 0
    achieved_rps: NonNegFloat = 0.0
    goodput_tok_s: NonNegFloat = 0.0
    ttft_ms: Percentiles = Field(default_factory=Percentiles)
    ttft_from_send_ms: Percentiles = Field(default_factory=Percentiles)
    tpot_ms: Percentiles = Field(default_factory=Percentiles)
    itl_ms: Percentiles = Field(default_factory=Percentiles)
    e2e_ms: Percentiles = Field(default_factory=Percentiles)
    send_lag_p99_ms: NonNegFloat = 0.0
    client_bound: bool = False
    slo_attainment_pct: Percent = 0.0
    slo_pass: bool = False
    failure_reason: str | None = None
    stopped_early: bool = False


RETRIED_PREFIX = "client-bound"
"""Start of ``failure_reason`` of a window that the collector measured again because the
client itself lagged (send-lag p99 above 10% of the TTFT limit): the window is kept in the
record, but its verdict is not used — the next window at the same rate replaces it."""


def retried(window: WindowSummary) -> bool:
    """True for a window that was measured again because the client lagged (its verdict
    was replaced by the next window's; see :data:`RETRIED_PREFIX`)."""
    return (window.failure_reason or "").startswith(RETRIED_PREFIX)
