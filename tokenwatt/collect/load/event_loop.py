"""The event loop a window's load runs on (:func:`run_load`): uvloop where it is installed
(a dependency on Linux and macOS), else asyncio's own.

Why uvloop: a load generator spends most of its CPU in the event loop and the HTTP
library's transport (each request's callbacks, its socket reads and writes), and uvloop
runs those in C on libuv. On this project's 2-core VM, against an instant server, the same
client code needed less CPU per chunk on uvloop in two 5-round runs of
``benchmarks/loadgen.py --compare`` (its ``ours asyncio`` row): 12.6 against 13.8 and 14.4
against 18.2 us at 800 req/s of 32-chunk streams, 2.5 against 2.9 and 3.0 against 3.8 at
600 req/s of 256, and its sends kept closer to the schedule (send-lag p99 about half;
on asyncio's loop the sent gaps failed the K-S test in 3 of 5 rounds of the noisier run,
on uvloop in none). The send path is the same on both: the loop's own ``timerfd``
(:mod:`tokenwatt.collect.load.timers`), watched with ``add_reader``, which both loops
provide; measurement times come from ``time.perf_counter``, never from the loop's clock
(uvloop's ``loop.time()`` moves in whole milliseconds and each delay is rounded to one, so
its sleeps may end about 1.5 ms early, 1.3 ms measured here; the plain send's
:func:`~tokenwatt.collect.load.sends.sleep_until` never goes out early for it).

A Ray actor runs its worker in a thread of its own, on a loop of this kind too (asyncio's
where the actor's node has no uvloop).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar, get_args

EventLoopKind = Literal["uvloop", "asyncio"]
"""Which event loop a window asks for: ``uvloop`` (asyncio's where uvloop is not installed)
or ``asyncio``'s own (the benchmarks' comparison)."""

T = TypeVar("T")


def loop_factory(kind: EventLoopKind) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """What makes the loop ``kind`` asks for: uvloop's ``new_event_loop``, or None for
    asyncio's default (asked for, or uvloop not installed).

    Raises:
        ValueError: ``kind`` is none of :data:`EventLoopKind`.
    """
    if kind not in get_args(EventLoopKind):
        raise ValueError(
            f"event_loop must be one of {', '.join(get_args(EventLoopKind))}: {kind!r}"
        )
    if kind == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:  # not installed (Windows has none): asyncio's own
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def run_load(coro: Coroutine[Any, Any, T], kind: EventLoopKind = "uvloop") -> T:
    """Run ``coro`` to its end on a new event loop of ``kind`` (:func:`loop_factory`), as
    ``asyncio.run`` does (Ctrl-C cancels it; the loop is closed after).

    Raises:
        Whatever ``coro`` raises; ValueError for an unknown ``kind``.
    """
    try:
        factory = loop_factory(kind)
    except ValueError:
        coro.close()  # never awaited: closed, so that it warns of nothing
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(coro)


__all__ = ["EventLoopKind", "loop_factory", "run_load"]
