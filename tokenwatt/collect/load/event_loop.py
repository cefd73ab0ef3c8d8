"""What a window's load runs in: its event loop (:func:`run_load`: uvloop where it is
installed, a dependency on Linux and macOS, else asyncio's own) and its garbage collector,
kept from pausing the window (:func:`held_collections`).

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

Why the collector is held: CPython's full (generation-2) collection scans every object it
tracks that is not frozen, and a window's own results are such objects, a
:class:`~tokenwatt.records.RequestResult` and its list of chunk times per request. With the
objects alive before the window frozen, a full collection still came once in a 3 s window at
3,000 req/s of 32-chunk streams on this project's VM and held the loop 7-10 ms (it freed
nothing: the results are alive), and every send due meanwhile went out that late, plus the
catch-up: it alone set the window's send-lag p99 (8.3 ms against 1.4-2.3 ms in the windows
where it fell after the end). Each full collection comes once the objects it tracks have grown
by a quarter, so a longer window's would scan more results, and pause longer. Young
collections (generations 0 and 1, under 1 ms each there) go on as usual and free what dies
young; what becomes cyclic garbage after surviving into the old generation waits for the
window's end: little, measured there (a full collection after a 3 s window of 3,000 requests
found 23 such objects when every request succeeded, and 2,778 when every connection was
refused, 3,421 without the hold).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import threading
from collections.abc import Callable, Coroutine, Iterator
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


FULL_COLLECTIONS_HELD = 1_000_000_000
"""The collector's third threshold while a window runs: the young collections between two
full ones (CPython's default is 10), so many that none comes."""

_HOLD_LOCK = threading.Lock()  # windows on loops in several threads (Ray actors) share the GC
_holds = 0
_saved_threshold: tuple[int, int, int] | None = None


@contextlib.contextmanager
def held_collections(enabled: bool = True) -> Iterator[None]:
    """Around a window: freeze the objects alive now (``gc.freeze``: no collection scans them)
    and hold off full collections until it ends (``gc.set_threshold`` with
    :data:`FULL_COLLECTIONS_HELD`); young collections go on. On the way out, whatever
    happened, the collector is as it was: unfrozen and its thresholds restored, once the last
    of several overlapping windows in this process has ended. ``enabled=False`` (a plan's
    ``freeze_gc`` off) leaves the collector alone. The module docstring says why.
    """
    if not enabled:
        yield
        return
    global _holds, _saved_threshold
    with _HOLD_LOCK:
        if _holds == 0:
            _saved_threshold = gc.get_threshold()
            young, older, _ = _saved_threshold
            gc.set_threshold(young, older, FULL_COLLECTIONS_HELD)
        _holds += 1
        gc.freeze()  # a second window's objects alive before it too
    try:
        yield
    finally:
        with _HOLD_LOCK:
            _holds -= 1
            if _holds == 0:
                gc.unfreeze()
                if _saved_threshold is not None:
                    gc.set_threshold(*_saved_threshold)


__all__ = [
    "FULL_COLLECTIONS_HELD",
    "EventLoopKind",
    "held_collections",
    "loop_factory",
    "run_load",
]
