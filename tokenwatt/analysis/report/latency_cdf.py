"""Latency distributions at the found operating point, from a run's per-request lines.

Pure: the caller (:mod:`tokenwatt.records_io`) reads ``RUN.requests.jsonl.gz`` and hands
over its repeat lines (:class:`~tokenwatt.records.RunInput` ``request_rows``); this module
picks the requests of the repeats at the found load and keeps their TTFT and TPOT as
quantiles on the fixed grid :data:`~tokenwatt.records.CDF_LEVELS_PCT`, which the report
page draws as CDFs.

The definitions are the windows' (:mod:`tokenwatt.analysis.window.latency`): TTFT from the
scheduled time to the first token, TPOT = (last − first token) / (output tokens − 1); a
failed request (an error, or no token) is infinitely slow in both, a one-token output has
no TPOT, and requests the client cancelled itself and those outside the window (warm-up,
drain) are left out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from tokenwatt.analysis.report.report_setup import final_repeats
from tokenwatt.records import CDF_LEVELS_PCT, LatencyDistributionV3, LatencyMsV3, RunRecord

CANCELLED = "cancelled"
"""The error kind the per-request file gives a request the client cancelled itself."""


def quantile(ordered: Sequence[float], level_pct: float) -> float:
    """The ``level_pct`` quantile of an ascending sample by the linear method (Hyndman and
    Fan's definition 7, NumPy's default): the value at rank level/100 × (n − 1),
    interpolated between neighbours; ``inf`` when the rank reaches an infinite value or
    interpolates towards one.

    Raises:
        ValueError: an empty sample or a level outside 0..100.
    """
    if not ordered:
        raise ValueError("no values")
    if not 0 <= level_pct <= 100:
        raise ValueError(f"level must be in 0..100, got {level_pct}")
    rank = level_pct / 100 * (len(ordered) - 1)
    lo = math.floor(rank)
    frac = rank - lo
    low = ordered[lo]
    if frac == 0 or lo + 1 >= len(ordered):
        return low
    high = ordered[lo + 1]
    if math.isinf(high):
        return math.inf
    return low + (high - low) * frac


def _ms(value: float) -> LatencyMsV3:
    return "inf" if math.isinf(value) else round(value, 3)


def _failed(row: Mapping[str, Any]) -> bool:
    return row["error"] is not None or row["first_token_s"] is None


def row_ttft_ms(row: Mapping[str, Any]) -> float:
    """One request line's TTFT (ms) from its scheduled time; ``inf`` when it failed."""
    if _failed(row) or row["scheduled_s"] is None:
        return math.inf
    return (float(row["first_token_s"]) - float(row["scheduled_s"])) * 1e3


def row_tpot_ms(row: Mapping[str, Any]) -> float | None:
    """One request line's TPOT (ms); None for a one-token output, ``inf`` when it failed."""
    if _failed(row) or row["last_token_s"] is None:
        return math.inf
    if int(row["output_tokens"]) <= 1:
        return None
    span_s = float(row["last_token_s"]) - float(row["first_token_s"])
    return span_s / (int(row["output_tokens"]) - 1) * 1e3


def operating_point_rows(
    run: RunRecord, rows: Sequence[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """The lines of the requests that count at the found operating point: in the window of
    a repeat at the found load (:func:`~tokenwatt.analysis.report.report_setup.final_repeats`),
    not cancelled by the client."""
    final = final_repeats(run)
    indices = {i for i, r in enumerate(run.repeats) if any(r is f for f in final)}
    return [
        row
        for row in rows
        if row["kind"] == "repeat"
        and row["index"] in indices
        and row["in_window"]
        and row["error"] != CANCELLED
    ]


def operating_point_distribution(
    run: RunRecord, rows: Sequence[Mapping[str, Any]] | None
) -> LatencyDistributionV3 | None:
    """TTFT and TPOT quantiles (ms) on :data:`~tokenwatt.records.CDF_LEVELS_PCT` over the
    requests of the repeats at the found load; None without per-request lines or without a
    request there."""
    if rows is None:
        return None
    picked = operating_point_rows(run, rows)
    if not picked:
        return None
    ttft = sorted(row_ttft_ms(r) for r in picked)
    tpot = sorted(v for v in (row_tpot_ms(r) for r in picked) if v is not None)
    return LatencyDistributionV3(
        levels_pct=list(CDF_LEVELS_PCT),
        requests=len(ttft),
        ttft_ms=[_ms(quantile(ttft, q)) for q in CDF_LEVELS_PCT],
        tpot_requests=len(tpot),
        tpot_ms=[_ms(quantile(tpot, q)) for q in CDF_LEVELS_PCT] if tpot else [],
    )
