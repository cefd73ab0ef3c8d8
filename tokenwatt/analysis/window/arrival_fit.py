"""Were a window's sends Poisson on the wire? A K-S test of the actual send gaps (pure).

The schedule of a Poisson window is Poisson by construction; what the server saw is the
*actual* send times, which an event loop can bunch (a send due while the loop reads a
response waits for it; a plain ``asyncio.sleep`` wakes on millisecond ticks). The test is
the one-sample Kolmogorov–Smirnov test (:func:`scipy.stats.kstest`) of the gaps between
consecutive actual sends, in wire order, against the exponential distribution of mean
``1 / rate``: the gaps of a Poisson process of that rate (Ross, *Introduction to
Probability Models*, §5.3). A count-conditioned window (``measurement.arrivals:
conditioned``) has the gaps of n sorted uniform times, exchangeable and with mean
``T / (n + 1)`` — for the window sizes measured the same distribution within far less than
the test can resolve.

Below :data:`KS_ALPHA` the record warns that the wire's arrivals were not Poisson; the
figures still stand (send lag says how late), but a reader comparing against another load
generator should know. ``benchmarks/wire_arrivals.py`` measures the same test against an
instant server.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats

from tokenwatt.records import RequestResult, WindowSummary

KS_ALPHA = 0.01
"""Significance below which the sends' gaps are called not exponential (issue target: p > 0.01)."""
MIN_SENDS = 20
"""Fewest sends the test is run on: with fewer gaps it can reject almost nothing."""


def send_gaps_ks_p(results: Sequence[RequestResult], rate_rps: float) -> float | None:
    """The K-S p-value of the gaps between the requests' actual sends against Poisson arrivals.

    Args:
        results: the window's requests; those never sent (``sent_s`` before their
            scheduled time, as a request cancelled before its send keeps the default) are
            left out. Times in seconds on one clock.
        rate_rps: the window's target arrival rate (req/s); the exponential's mean is its
            inverse.

    Returns:
        The p-value in [0, 1], rounded to 4 significant digits; None with fewer than
        :data:`MIN_SENDS` sends or a non-positive rate.
    """
    sends = np.sort([r.sent_s for r in results if r.sent_s >= r.scheduled_s])
    if len(sends) < MIN_SENDS or rate_rps <= 0:
        return None
    p = float(stats.kstest(np.diff(sends), stats.expon(scale=1.0 / rate_rps).cdf).pvalue)
    return float(f"{p:.4g}")


BUNCHED_PREFIX = "sends not Poisson on the wire"
"""Start of :func:`bunched_sends_warning`'s warning."""


def bunched_sends_warning(p: float | None, rate_rps: float, send_lag_p99_ms: float) -> str | None:
    """The window warning for sends whose gaps fail the K-S test, or None when they pass.

    Args:
        p: the p-value from :func:`send_gaps_ks_p` (None: not tested, no warning).
        rate_rps: the window's target rate (req/s), named in the warning.
        send_lag_p99_ms: the window's send-lag p99 (ms), named beside it.
    """
    if p is None or p >= KS_ALPHA:
        return None
    return (
        f"{BUNCHED_PREFIX}: the gaps between the client's actual sends fail a "
        f"K-S test against Poisson arrivals at {rate_rps:g} req/s (p = {p:.2g} < {KS_ALPHA}; "
        f"send-lag p99 {send_lag_p99_ms:g} ms); more worker processes (--workers) spread "
        f"the sends"
    )


LATE_SCHEDULE_TAG = "late_schedule"
"""``failure_reason`` of a window that met the SLO on arrivals the client did not send as
asked (:func:`late_schedule_reason`): invalid, no verdict."""


def late_schedule_reason(w: WindowSummary) -> str | None:
    """Why a window that met the SLO cannot be trusted because the client did not keep
    its schedule, or None when it can.

    Both marks must be crossed: the window is client-bound (send-lag p99 above the 10 ms
    mark of methods/goodput.md) *and* its actual send gaps fail the K-S test against the
    target's exponential (p below :data:`KS_ALPHA`). Then the server was sent another
    arrival process than the one asked for, so a pass says nothing about the asked load.
    A lag alone (a single stall, a constant-rate window with no K-S) or a failed K-S alone
    (sends closer than one write can go, at a high rate) stays a warning. A window that
    missed is left to the collector's own retry (a late client may explain the miss).
    """
    p, lag = w.send_gaps_ks_p, w.send_lag_p99_ms
    if not (w.slo_pass and w.client_bound) or p is None or p >= KS_ALPHA or lag is None:
        return None
    return (
        f"the client did not keep its schedule: send-lag p99 {lag:.1f} ms and its sends' "
        f"gaps fail the K-S test against Poisson arrivals at {w.rate_rps:g} req/s "
        f"(p = {p:.2g}), so the pass was on another arrival process than asked; more "
        "load-generator workers (--workers) or cores keep it"
    )
