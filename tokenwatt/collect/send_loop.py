"""The event loop a window's load runs on: epoll, with a microsecond-precise wait.

asyncio's ``EpollSelector`` rounds every wait up to whole milliseconds (epoll_wait takes
milliseconds), so a request task sleeping until its send time wakes up to 1 ms late.
Precise sends therefore stop sleeping early and wait out the rest by yielding to the loop
(:func:`~tokenwatt.collect.arrivals.sleep_until`), and every loop turn spent so costs CPU:
on a plain loop the margin has to cover the rounding (1.5 ms per send).

:class:`PreciseSelector` keeps epoll for readiness (any number of connections) and does
the wait itself with ``select(2)`` on the epoll descriptor, whose timeout is in
microseconds; the epoll descriptor becomes readable as soon as any registered socket (or
the loop's self-pipe, which signals and other threads write to) is ready, so I/O wakes the
loop exactly as before. The wake-up is then late only by the kernel's timer latency, and
the margin before each send drops to :data:`~tokenwatt.collect.arrivals.SEND_SPIN_S`
(0.5 ms). Measured on this project's 2-core VM against the nginx stub, 32-chunk streams:
12–15% less client CPU per request at 300–1,000 req/s with the same K-S results of the
sends (``benchmarks/loadgen.py``; the README has the figures).

Loops made by :func:`new_loop` are remembered, so that :func:`send_margin_s` can give the
plain-loop margin to a window run on any other loop (a test's ``asyncio.run``, uvloop).
"""

from __future__ import annotations

import asyncio
import select
import selectors
import weakref
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

PLAIN_LOOP_SPIN_S = 0.0015
"""Margin before a send time (s) on a loop whose waits are rounded up to whole
milliseconds: the rounding plus a little wake-up jitter."""

_PRECISE_LOOPS: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()


class PreciseSelector(selectors.EpollSelector):
    """An epoll selector whose timed waits are ``select(2)`` on the epoll descriptor
    (microsecond timeout) followed by a non-blocking epoll poll for the events.

    Falls back to epoll's own millisecond wait when ``select`` cannot take the descriptor
    (a number at or above ``FD_SETSIZE``, 1024). ``select`` is restarted after a signal
    with the remaining time (PEP 475); a signal handled by asyncio writes to its self-pipe,
    which is registered here, so the wait ends at once.
    """

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        """Wait up to ``timeout`` seconds (None: until an event) for registered events."""
        if timeout is not None and timeout > 0:
            try:
                select.select([self.fileno()], [], [], timeout)
            except ValueError:  # descriptor too high for select(2)
                return super().select(timeout)
            timeout = 0
        return super().select(timeout)


def new_loop() -> asyncio.AbstractEventLoop:
    """A new event loop on :class:`PreciseSelector` (a plain one where epoll is missing)."""
    if not hasattr(selectors, "EpollSelector"):
        return asyncio.new_event_loop()
    loop = asyncio.SelectorEventLoop(PreciseSelector())
    _PRECISE_LOOPS.add(loop)
    return loop


def run(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on a loop from :func:`new_loop`: run ``coro`` and close the loop."""
    with asyncio.Runner(loop_factory=new_loop) as runner:
        return runner.run(coro)


def send_margin_s(spin_s: float) -> float:
    """The margin before each send (s) for the running loop: ``spin_s`` on a loop from
    :func:`new_loop`, at least :data:`PLAIN_LOOP_SPIN_S` on any other (0 stays 0, a plain
    ``asyncio.sleep``). Call it from inside the loop."""
    if spin_s <= 0 or asyncio.get_running_loop() in _PRECISE_LOOPS:
        return spin_s
    return max(spin_s, PLAIN_LOOP_SPIN_S)


__all__ = ["PLAIN_LOOP_SPIN_S", "PreciseSelector", "new_loop", "run", "send_margin_s"]
