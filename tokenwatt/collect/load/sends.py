"""When each request goes out: the wait for its send time (:class:`SendWait`).

The schedule fixes every send time before the window starts (:mod:`~tokenwatt.collect.load.
arrivals`); this module makes the send happen then. asyncio alone cannot: its sleeps wake on
the selector's timeout, which epoll rounds up to whole milliseconds, so a plain
``asyncio.sleep`` sends up to 1 ms late and bunches sends on millisecond ticks (their gaps
then fail a K-S test against the exponential, ``benchmarks/wire_arrivals.py``).

The ways to wait, :data:`SendTimerKind` (ARCHITECTURE.md, "Precise sends", says why the first
is the default):

* ``timerfd``: the event loop's own Linux ``timerfd``
  (:class:`~tokenwatt.collect.load.timers.FdTimer`) releases each send
  :data:`SEND_FD_EARLY_S` before its time (more after an idle stretch, when its wake-ups run
  late; then, awake early, the send waits on the timer again), with every other send due
  within :data:`SEND_FD_BATCH_S`; each released task holds the thread for the rest (a sleep,
  then a spin of at most :data:`SEND_FD_SPIN_S`) and sends. One wake-up per due instant; the loop
  sleeps in between. Where there is no ``timerfd`` (not Linux) it falls back to ``thread``.
* ``thread``: one timer thread per process
  (:class:`~tokenwatt.collect.load.timers.ThreadTimer`) releases each send
  :data:`SEND_THREAD_EARLY_S` early; the task yields to the loop until
  :data:`SEND_THREAD_BUSY_S` before its time (so the thread can take the GIL to release the
  next) and busy-waits the rest. Its sends keep the schedule's order on each loop
  (:meth:`~tokenwatt.collect.load.timers.ThreadTimer.order`), as the ``timerfd``'s do.
* ``spin`` (:func:`sleep_until`, the design before these timers): each request's own task
  sleeps to :data:`SEND_SPIN_S` before its time, then yields to the loop until
  :data:`SEND_BUSY_S` before it and busy-waits the rest. Precise, but every request within its
  last 1.5 ms turns the loop, so above a few hundred req/s the loop never sleeps; and after a
  stall a late send may overtake an earlier one.
* ``plain``: ``asyncio.sleep`` alone (millisecond-bunched): the benchmarks' control.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, get_args

from tokenwatt.collect.load.timers import ReleaseMargin, loop_timer, process_timer

SendTimerKind = Literal["timerfd", "thread", "spin", "plain"]
"""How a request waits for its send time (this module's docstring)."""

SEND_SPIN_S = 0.0015
"""How long before a send time the dispatcher creates the request's task (s), and how long a
``spin`` send yields: asyncio's sleeps wake up to 1 ms late (epoll's whole-millisecond timeout,
rounded up), and 1.5 ms covers that rounding plus a little wake-up jitter."""

SEND_BUSY_S = 0.0003
"""The last stretch before a send time (s) that a ``spin`` send busy-waits, without yielding:
a callback that runs in it (a response being read) would make the send late."""

SEND_FD_EARLY_S = 0.0002
"""How early the ``timerfd`` releases a send at least, and the longest it holds the thread
(s): the rest of the loop iteration that woke (the responses read in it) runs before the
released task, 0.1 ms and more under load at 800 req/s on this VM
(``benchmarks/wire_arrivals.py``); a smaller lead (50 or 10 us) made late sends bunch and
failed the K-S test. After an idle stretch (:data:`SEND_FD_IDLE_S`), whose wake-up may run
later (an idle virtual CPU takes milliseconds now and then), the margin is the p99 of how
late such releases ran, up to :data:`SEND_SPIN_S`
(:class:`~tokenwatt.collect.load.timers.ReleaseMargin`), and a task released that early waits
on the timer again for this much before its time."""

SEND_FD_SPIN_S = 0.00006
"""Below this much left before its time (s), a released ``timerfd`` send spins rather than
sleeps; with more left it sleeps the loop's thread (``time.sleep``) until
:data:`SEND_FD_WAKE_S` before its time, then spins. A sleep costs about 22 us of CPU on this
VM whatever its length (the timer's programming and the wake-up are charged to the thread),
so a shorter one costs more than the spin it saves (``benchmarks/wait_cost.py``: 15-22 us
per wait); ``benchmarks/loadgen.py`` measured 0.5-0.7 us per chunk less at 800 req/s (5
alternating trials, near the noise) than sleeping to 50 us before the time, as before. Either
way the loop runs nothing else in the last :data:`SEND_FD_EARLY_S`; sleeping frees the core
for the engine meanwhile (spinning all of it cost 3 us more per chunk at 800 req/s)."""

SEND_FD_WAKE_S = 0.000035
"""How late a short ``time.sleep`` of the loop's thread wakes (s), its timer slack cut to
1 ns: about 30 us on this VM (5-10 us on bare metal), so the sleep ends this long before the
send time and a spin does the rest."""

SEND_FD_IDLE_S = 0.002
"""A send this long (s) after the previous one follows an idle stretch of the loop, whose
wake-up may run late: its release margin follows how late such wake-ups have been."""

SEND_FD_LEAD_S = 0.003
"""How early the dispatcher creates a ``timerfd`` send's task at least (s): its own sleep
wakes up to 1 ms late, and the release margin may be 1.5 ms; a task created after its release
time could not tell how late the loop wakes, and the margin would stay where it is."""

SEND_FD_BATCH_S = 0.0003
"""Sends due this soon after a released one (s) are released with it: released apart, the
second waits for the loop's next iteration and goes out late, which removes the schedule's
smallest gaps (a K-S test of 2,400 gaps at 800 req/s failed without it)."""

SEND_THREAD_EARLY_S = 0.0003
"""How early the timer thread releases a send (s): its own wake-up (about 35 us with its
timer slack cut) plus the loop's (the self-pipe, the GIL) took 0.1-0.3 ms at p99."""

SEND_THREAD_BUSY_S = 0.00005
"""The last stretch before its time (s) that a ``thread`` send busy-waits; longer holds the
GIL the timer thread needs to release the next send."""


async def _yield_then_busy(target: float, busy_s: float) -> None:
    # time.perf_counter looked up at each call, so a Ray actor's test-only skew applies.
    clock = time.perf_counter
    while clock() < target - busy_s:  # noqa: ASYNC110  (a deadline: nothing signals it)
        await asyncio.sleep(0)
    while clock() < target:
        pass


async def sleep_until(target: float, *, spin_s: float = SEND_SPIN_S) -> None:
    """Return at ``target`` (s on ``time.perf_counter``, looked up at each call so a Ray
    actor's test-only skewed clock applies, :mod:`tokenwatt.collect.load.pool.ray_actor`), to
    within the event loop's iteration time (``spin`` and ``plain`` sends).

    Sleeps until ``spin_s`` before ``target``, then yields with ``asyncio.sleep(0)`` until
    :data:`SEND_BUSY_S` before it, so other tasks and I/O keep running while it waits, and
    waits out the rest in a busy loop; ``spin_s=0`` is a plain ``asyncio.sleep`` (millisecond
    granularity). Returns at once when ``target`` has passed, so after the loop was held up a
    late send can overtake an earlier one still sleeping (the timers keep the order). The
    yielding costs CPU: about ``spin_s`` of busy loop per call at most
    (``benchmarks/wire_arrivals.py`` measures it). Never returns before ``target``, on
    uvloop either, whose sleeps may end about 1.5 ms early.
    """
    delay = target - time.perf_counter()
    if delay > spin_s:
        await asyncio.sleep(delay - spin_s)
    if spin_s > 0:
        await _yield_then_busy(target, SEND_BUSY_S)
        return
    # uvloop's sleeps run on its clock, which moves in whole milliseconds and may lag behind
    # the iteration it is read in: a sleep can end about 1.5 ms early (asyncio's never does).
    while (rest := target - time.perf_counter()) > 0:  # noqa: ASYNC110  (a deadline)
        await asyncio.sleep(rest)


async def _thread_released(target: float) -> None:
    timer = process_timer()
    order = timer.order()
    token = order.enter(target)
    try:
        await timer.wait_until(target - SEND_THREAD_EARLY_S)
        while not order.first(token):  # noqa: ASYNC110  (an earlier send goes first)
            await asyncio.sleep(0)
        await _yield_then_busy(target, SEND_THREAD_BUSY_S)
    finally:
        order.leave(token)


def _margin() -> ReleaseMargin:
    return ReleaseMargin(SEND_FD_EARLY_S, SEND_SPIN_S, SEND_FD_IDLE_S)


def _settle(target: float, clock: Callable[[], float]) -> None:
    """Hold the thread until ``target`` (s on ``clock``): with more than
    :data:`SEND_FD_SPIN_S` left, a sleep to :data:`SEND_FD_WAKE_S` before it; then a spin."""
    rest = target - clock()
    if rest > SEND_FD_SPIN_S:
        time.sleep(rest - SEND_FD_WAKE_S)
    while clock() < target:
        pass


async def _fd_released(target: float) -> None:
    try:
        timer = loop_timer(SEND_FD_BATCH_S, _margin)
    except OSError:
        await _thread_released(target)
        return
    clock = time.perf_counter
    token = timer.order.enter(target)
    try:
        margin, after_idle = timer.margin.margin_s(target)
        release = target - margin
        waited = release > clock()
        await timer.wait_until(release)
        if waited and after_idle:  # a task created late says nothing of how late loops wake
            timer.margin.note(clock() - release)
        if target - clock() > SEND_FD_EARLY_S:
            # Released early for an idle loop's slow wake-up, which did not come: the loop is
            # awake now, so the timer's next release is on time, and the loop sleeps till then.
            await timer.wait_until(target - SEND_FD_EARLY_S)
        while not timer.order.first(token):  # noqa: ASYNC110  (an earlier send goes first)
            await asyncio.sleep(0)
        # The sends released with this one run right after it, in time order.
        _settle(target, clock)
    finally:
        timer.order.leave(token)


@dataclass(frozen=True)
class SendWait:
    """How a window's requests wait for their send times.

    Attributes:
        kind: ``timerfd``, ``thread``, ``spin`` or ``plain`` (this module's docstring).
        lead_s: how long before its send time the dispatcher creates a request's task (s);
            ``spin`` also yields for that long. 0 with ``plain``.
    """

    kind: SendTimerKind = "timerfd"
    lead_s: float = SEND_SPIN_S

    def until(self, target: float) -> Awaitable[None]:
        """An awaitable that is done at ``target`` (s on ``time.perf_counter``)."""
        if self.kind == "timerfd":
            return _fd_released(target)
        if self.kind == "thread":
            return _thread_released(target)
        return sleep_until(target, spin_s=self.lead_s if self.kind == "spin" else 0.0)


def send_wait(kind: SendTimerKind, lead_s: float = SEND_SPIN_S) -> SendWait:
    """The :class:`SendWait` of a plan's ``send_timer`` and ``send_spin_s`` (``plain``: no
    lead; ``timerfd``: at least :data:`SEND_FD_LEAD_S`, so that a release the margin moves
    up to 1.5 ms early is still ahead of the task's creation).

    Raises:
        ValueError: ``kind`` is none of :data:`SendTimerKind` (never a silent plain sleep).
    """
    if kind not in get_args(SendTimerKind):
        raise ValueError(
            f"send_timer must be one of {', '.join(get_args(SendTimerKind))}: {kind!r}"
        )
    if kind == "plain":
        return SendWait(kind, 0.0)
    return SendWait(kind, max(lead_s, SEND_FD_LEAD_S) if kind == "timerfd" else lead_s)


__all__ = [
    "SEND_BUSY_S",
    "SEND_FD_BATCH_S",
    "SEND_FD_EARLY_S",
    "SEND_FD_IDLE_S",
    "SEND_FD_LEAD_S",
    "SEND_FD_SPIN_S",
    "SEND_FD_WAKE_S",
    "SEND_SPIN_S",
    "SEND_THREAD_BUSY_S",
    "SEND_THREAD_EARLY_S",
    "SendTimerKind",
    "SendWait",
    "send_wait",
    "sleep_until",
]
