"""Request results built for analysis tests: finished requests with a given TTFT and TPOT."""

from __future__ import annotations

from tokenwatt.records.run.request import RequestResult


def ok(ttft_ms: float, tokens: int = 5, tpot: float = 10.0, at: float = 0.0) -> RequestResult:
    """A finished request scheduled at ``at`` s with the given TTFT and TPOT (ms)."""
    first = at + ttft_ms / 1e3
    chunks = [first + i * tpot / 1e3 for i in range(tokens)]
    return RequestResult(
        scheduled_s=at,
        sent_s=at,
        dispatched_s=at,
        first_token_s=first,
        chunk_s=chunks,
        last_token_s=chunks[-1],
        prompt_tokens=8,
        output_tokens=tokens,
        status=200,
        finished_s=chunks[-1],
    )
