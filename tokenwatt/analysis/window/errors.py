"""Failed and cancelled requests of one window: counts by kind and a few samples (pure).

A request the client cancelled itself (error kind ``cancelled``: our early stop, the end of
the keep-load tail) is not the engine's failure: it is counted apart
(``cancelled_by_client``) and enters no error count, error kind or error rate. Every other
failed request keeps its kind, and each kind keeps its first few requests as samples —
exception class, message, HTTP status and the first bytes of the error body, as the load
generator recorded them (capped and scrubbed of credentials there).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Final

from tokenwatt.records import ErrorSample, RequestResult

CANCELLED: Final = "cancelled"
"""Error kind of a request the client cancelled itself."""
NO_TOKEN: Final = "no_token"  # noqa: S105 (an error kind)
"""Kind given to a request that ended without error but produced no token."""
SAMPLES_PER_KIND: Final = 3
"""Samples kept per error kind: enough to see whether the failures agree, few enough to keep
a record of thousands of failures small."""


def cancelled(r: RequestResult) -> bool:
    """True for a request the client cancelled itself (never an engine error)."""
    return r.error == CANCELLED


def error_kind(r: RequestResult) -> str | None:
    """The engine-side failure kind of a request, or None when it succeeded or the client
    cancelled it."""
    if cancelled(r):
        return None
    if r.error is not None:
        return r.error
    return NO_TOKEN if r.first_token_s is None else None


def error_kinds(requests: Sequence[RequestResult]) -> dict[str, int]:
    """Failed requests per kind, sorted by kind; cancelled requests are left out."""
    counts = Counter(kind for r in requests if (kind := error_kind(r)) is not None)
    return dict(sorted(counts.items()))


def error_samples(
    requests: Sequence[RequestResult], per_kind: int = SAMPLES_PER_KIND
) -> dict[str, list[ErrorSample]]:
    """The first ``per_kind`` failed requests of each kind (in the order given), as samples.

    Raises:
        ValueError: ``per_kind`` below 1.
    """
    if per_kind < 1:
        raise ValueError(f"per_kind must be at least 1, got {per_kind}")
    samples: dict[str, list[ErrorSample]] = {}
    for r in requests:
        kind = error_kind(r)
        if kind is None:
            continue
        kept = samples.setdefault(kind, [])
        if len(kept) < per_kind:
            kept.append(
                ErrorSample(
                    kind=kind,
                    exception=r.error_class,
                    message=r.error_message,
                    status=r.status,
                    body=r.error_body,
                )
            )
    return dict(sorted(samples.items()))
