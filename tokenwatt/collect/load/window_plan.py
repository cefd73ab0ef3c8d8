"""What one window is asked to do (:class:`WindowPlan`), what it calls back
(:class:`WindowHooks`), what it shows while it runs (:class:`WindowProgress`), and how long
its load may go on after it (:func:`tail_cap_s`).

One plan and one hooks object travel whole through every way a window is sent: one event
loop (:func:`tokenwatt.collect.load.loadgen.run_window`), the closed loop
(:func:`tokenwatt.collect.load.closedloop.run_closed_window`) and the pool of worker processes
or Ray actors (:meth:`tokenwatt.collect.load.pool.workers.WindowPool.run_window`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from tokenwatt.collect.load.event_loop import EventLoopKind
from tokenwatt.collect.load.sends import SEND_SPIN_S, SendTimerKind
from tokenwatt.records import RequestResult, SloSpec

WindowPhase = Literal["warmup", "window", "drain"]

TAIL_GRACE_S = 1.0
"""Seconds added to the tail cap (:func:`tail_cap_s`): time for the last chunk, the usage
chunk and ``[DONE]`` of a request that just made its limits to reach the client, and for
the event loop to notice."""


@dataclass(frozen=True, kw_only=True)
class WindowPlan:
    """What one window measures and how its load is sent.

    Attributes:
        rate_rps: open-loop arrival rate (req/s; Poisson or constant as the spec's
            ``measurement.profile`` says); unused for a closed-loop window.
        duration_s: the measured window (s); the goodput denominator.
        warmup_s: load before the window, not summarised (s).
        seed: seed of the arrival schedule.
        early_stop: stop the window once it has missed the SLO beyond doubt (open-loop
            probes; a closed loop has no expected count to judge against and runs to its end).
        concurrency: closed-loop clients (``measurement.profile: concurrency``); None for
            an open-loop window.
        keep_load: after the window, arrivals go on at the same rate (the closed loop's
            clients keep sending) while the window's requests finish, at most for the
            tail cap (:func:`tail_cap_s`), so the last of them do not see an emptying
            server; those extra requests are cancelled at the end and not counted. False:
            no load after the window (its requests are still waited for, up to the cap).
        send_spin_s: how long before its send time a request's task is created (s); with
            ``send_timer="spin"`` the task yields to the loop for that long
            (:mod:`~tokenwatt.collect.load.sends`).
        send_timer: how requests wait for their send times: the loop's own ``timerfd``
            (the default; a timer thread where there is none), one timer thread per process
            (``thread``), each request yielding and spinning (``spin``), or a plain
            millisecond-bunched ``asyncio.sleep`` (``plain``); the benchmarks compare them.
        freeze_gc: keep the garbage collector from pausing the window
            (:func:`~tokenwatt.collect.load.event_loop.held_collections`): the objects alive
            before it frozen (a 200 ms pause was seen without) and no full collection during
            it (one scanned the window's own results for 7-10 ms at 3,000 req/s).
        event_loop: the event loop the window's load runs on where this project starts it
            (uvloop where installed, or asyncio's own:
            :mod:`~tokenwatt.collect.load.event_loop`), in every worker process and Ray
            actor too.
    """

    rate_rps: float
    duration_s: float
    warmup_s: float
    seed: int
    early_stop: bool = False
    concurrency: int | None = None
    keep_load: bool = True
    send_spin_s: float = SEND_SPIN_S
    send_timer: SendTimerKind = "timerfd"
    freeze_gc: bool = True
    event_loop: EventLoopKind = "uvloop"

    def check_open_loop(self) -> None:
        """Refuse an open-loop plan that cannot run.

        Raises:
            ValueError: ``rate_rps`` or ``duration_s`` not positive, ``warmup_s`` negative.
        """
        if not self.rate_rps > 0 or not self.duration_s > 0 or not self.warmup_s >= 0:
            raise ValueError("rate_rps and duration_s must be positive and warmup_s non-negative")


@dataclass(frozen=True)
class WindowProgress:
    """A snapshot for a live display (latencies in ms; ``math.inf`` when failures reach p99).

    ``elapsed_s`` counts from the start of the warm-up; ``total_s`` is warm-up + window.
    TTFT and TPOT p99 are over the in-window requests finished so far (None before any);
    send-lag p99 over the latest 2,000 requests sent.
    """

    phase: WindowPhase
    rate_rps: float
    elapsed_s: float
    total_s: float
    sent: int
    in_flight: int
    completed: int
    errors: int
    ttft_p99_ms: float | None
    tpot_p99_ms: float | None
    send_lag_p99_ms: float | None


@dataclass(frozen=True)
class WindowHooks:
    """What a running window calls back (every one optional).

    Attributes:
        progress: called every ``progress_interval_s`` with a :class:`WindowProgress`.
        stop_early: called every ``check_interval_s`` during the window and its tail with
            the in-window requests sent so far (finished or not) and the seconds since the
            window started; True stops the window (``summary.stopped_early``), cancelling
            the requests in flight (error ``cancelled``).
        interrupt: called every ``check_interval_s`` in every phase, warm-up included; True
            stops the window as ``stop_early`` does (a signal asked the run to stop).
        on_start: called once right before the window's start time is fixed (a pool: once
            every worker is ready), where the instruments are handed the window.
        progress_interval_s: seconds between ``progress`` calls.
        check_interval_s: seconds between ``stop_early`` and ``interrupt`` checks.
    """

    progress: Callable[[WindowProgress], None] | None = None
    stop_early: Callable[[Sequence[RequestResult], float], bool] | None = None
    interrupt: Callable[[], bool] | None = None
    on_start: Callable[[], None] | None = None
    progress_interval_s: float = 1.0
    check_interval_s: float = 0.5

    def interrupted(self) -> bool:
        """True when ``interrupt`` is set and says stop."""
        return self.interrupt is not None and self.interrupt()


def tail_cap_s(
    request_timeout_s: float,
    slo: SloSpec | None,
    max_output_tokens: int | None,
    *,
    grace_s: float = TAIL_GRACE_S,
) -> float:
    """The longest the load goes on after a window's end (s): ``min(request_timeout_s,
    TTFT_lim + TPOT_lim × (n − 1)) + grace_s``, with ``n`` the largest ``max_tokens`` of
    the window's requests and the limits in seconds (methods/goodput.md, "The tail").

    Why that bound: every in-window request was scheduled before the window's end, so at
    the cap it has been open at least ``TTFT_lim + TPOT_lim × (n − 1)``. A request not done
    by then has E2E above that; if its TTFT was within ``TTFT_lim``, its decode took
    ``E2E − TTFT > TPOT_lim × (n − 1) ≥ TPOT_lim × (m − 1)`` for its own ``m ≤ n`` output
    tokens, so its TPOT is above ``TPOT_lim``. Either way it has missed a per-request limit,
    so cancelling it cannot turn a pass into a miss: it is judged a miss (a censored
    observation when it was streaming). Past ``request_timeout_s`` every request has
    ended by itself (timed out), so the cap is never longer.

    With no TPOT limit (``slo`` None) or no known ``max_tokens`` (None or below 1), a
    request that streams can still pass until its timeout: the cap is
    ``request_timeout_s + grace_s``.

    Raises:
        ValueError: ``request_timeout_s`` not positive or ``grace_s`` negative.
    """
    if not request_timeout_s > 0 or not grace_s >= 0:
        raise ValueError("request_timeout_s must be positive and grace_s non-negative")
    bound = math.inf
    if slo is not None and max_output_tokens is not None and max_output_tokens >= 1:
        bound = (slo.ttft_p99_ms + slo.tpot_p99_ms * (max_output_tokens - 1)) / 1e3
    return min(request_timeout_s, bound) + grace_s


__all__ = [
    "TAIL_GRACE_S",
    "WindowHooks",
    "WindowPhase",
    "WindowPlan",
    "WindowProgress",
    "tail_cap_s",
]
