"""Poisson arrival schedules: every request's send time fixed before the window starts.

Gaps between arrivals are exponential with mean ``1 / rate_rps`` (a Poisson process), drawn
from :func:`numpy.random.default_rng` seeded with the window's seed. Because the whole
schedule is computed in advance, a client that falls behind does not stretch it: lateness
shows up as send lag (sent − scheduled), never as a lower arrival rate (methods/goodput.md).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

SEND_SPIN_S = 0.0015
"""How long before a send time :func:`sleep_until` stops sleeping and starts yielding (s).

asyncio's sleep wakes on the selector's timeout, which epoll rounds up to whole
milliseconds, so a plain ``asyncio.sleep`` sends up to 1 ms late and bunches sends on
millisecond ticks (at 200 req/s their gaps then fail a K-S test against the exponential;
``benchmarks/wire_arrivals.py``). 1.5 ms covers the rounding plus a little wake-up jitter."""

# Gaps are drawn in blocks of this many, so a schedule for a longer duration starts with
# exactly the schedule for a shorter one (same seed): extending a window never reshuffles it.
_BLOCK = 4096


def poisson_schedule(rate_rps: float, duration_s: float, seed: int) -> npt.NDArray[np.float64]:
    """Send offsets (s from the start) of a Poisson process, all below ``duration_s``.

    Args:
        rate_rps: mean arrival rate (requests/s), > 0.
        duration_s: length of the schedule (s), >= 0.
        seed: seed for ``numpy.random.default_rng``; the same seed gives the same offsets,
            and a longer ``duration_s`` gives the same offsets followed by more.

    Returns:
        Increasing float64 offsets (s); the first arrival is one exponential gap after 0.

    Raises:
        ValueError: when ``rate_rps`` <= 0 or ``duration_s`` < 0 or either is not finite.
    """
    if not np.isfinite(rate_rps) or rate_rps <= 0:
        raise ValueError(f"rate_rps must be a positive number, got {rate_rps!r}")
    if not np.isfinite(duration_s) or duration_s < 0:
        raise ValueError(f"duration_s must be a non-negative number, got {duration_s!r}")
    rng = np.random.default_rng(seed)
    scale = 1.0 / rate_rps
    blocks: list[npt.NDArray[np.float64]] = []
    last = 0.0
    while last < duration_s:
        offsets = last + np.cumsum(rng.exponential(scale, _BLOCK))
        blocks.append(offsets)
        last = float(offsets[-1])
    if not blocks:
        return np.empty(0, dtype=np.float64)
    everything = np.concatenate(blocks)
    return everything[everything < duration_s]


def window_request_count(rate_rps: float, warmup_s: float, duration_s: float, seed: int) -> int:
    """How many requests of a seeded schedule fall in the window ``[warmup, warmup + duration)``.

    Exact, not the mean ``rate × duration``: the same schedule :func:`poisson_schedule` gives
    the load generator. Useful as ``expected_total`` for
    :func:`tokenwatt.analysis.latency.missed_beyond_doubt`.
    """
    offsets = poisson_schedule(rate_rps, warmup_s + duration_s, seed)
    return int(np.count_nonzero(offsets >= warmup_s))


SEND_BUSY_S = 0.0003
"""The last stretch before a send time (s) waited in a busy loop, without yielding: a
callback that runs in it (a response being read) would make the send late, and 0.3 ms
per send is at most 6% of a core at 200 req/s (``benchmarks/wire_arrivals.py``)."""


async def sleep_until(
    target: float, *, spin_s: float = SEND_SPIN_S, clock: Callable[[], float] = time.perf_counter
) -> None:
    """Return at ``target`` on ``clock`` (s), to within the event loop's iteration time.

    Sleeps until ``spin_s`` before ``target``, then yields with ``asyncio.sleep(0)`` until
    :data:`SEND_BUSY_S` before it, so other tasks and I/O keep running while it waits, and
    waits out the rest in a busy loop; ``spin_s=0`` is a plain ``asyncio.sleep`` (millisecond
    granularity). Returns at once when ``target`` has passed. The yielding costs CPU: about
    ``spin_s`` of busy loop per call at most (``benchmarks/wire_arrivals.py`` measures it).
    """
    delay = target - clock()
    if delay > spin_s:
        await asyncio.sleep(delay - spin_s)
    # A deadline, not an event: nothing signals it, and the loop must keep turning meanwhile.
    while spin_s > 0 and clock() < target - SEND_BUSY_S:  # noqa: ASYNC110
        await asyncio.sleep(0)
    while spin_s > 0 and clock() < target:
        pass
