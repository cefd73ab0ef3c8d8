"""The two precise timers a send can wait on: :class:`FdTimer` (an event loop's own Linux
``timerfd``) and :class:`ThreadTimer` (one thread per process, elsewhere), and the time-ordered
queue of pending send times they share (:class:`DueSends`).

Either wakes once per due instant, whatever the number of requests waiting, and records how
late each release was (``lateness_s``) beside the send lag every request keeps
(``dispatched_s - scheduled_s``). :mod:`tokenwatt.collect.load.sends` says how a send uses them.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import heapq
import itertools
import math
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

LATENESS_KEPT = 100_000
"""Releases whose lateness a timer keeps (s each; a window of an hour at 30 req/s)."""


@dataclass(order=True)
class _Pending:
    target: float
    seq: int
    loop: asyncio.AbstractEventLoop = field(compare=False)
    future: asyncio.Future[None] = field(compare=False)


Due = tuple[float, asyncio.AbstractEventLoop, asyncio.Future[None]]
"""A released send: its time (s), the loop that waits for it, and the future it waits on."""


class DueSends:
    """Pending send times in time order (a heap; ties in the order they were added).

    Not thread-safe by itself: :class:`ThreadTimer` holds its lock around every call.
    """

    def __init__(self) -> None:
        self._heap: list[_Pending] = []
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def push(
        self, target: float, loop: asyncio.AbstractEventLoop, future: asyncio.Future[None]
    ) -> bool:
        """Add a send time (s); True when it is now the earliest (the timer must re-arm)."""
        entry = _Pending(target, next(self._seq), loop, future)
        heapq.heappush(self._heap, entry)
        return self._heap[0] is entry

    def next_target(self) -> float | None:
        """The earliest pending send time (s), or None when none is pending."""
        return self._heap[0].target if self._heap else None

    def pop_due(self, until: float) -> list[Due]:
        """Remove and return every send due by ``until`` (s), earliest first."""
        due = []
        while self._heap and self._heap[0].target <= until:
            p = heapq.heappop(self._heap)
            due.append((p.target, p.loop, p.future))
        return due


def release(futures: list[asyncio.Future[None]]) -> None:
    """Mark the futures of released sends done, on their loop's thread; one that is done
    already (its request was cancelled) is left alone."""
    for fut in futures:
        if not fut.done():
            fut.set_result(None)


def _keep_lateness(kept: list[float], now: float, due: list[Due]) -> None:
    room = LATENESS_KEPT - len(kept)
    kept.extend(now - target for target, _, _ in due[: max(room, 0)])


class ReleaseMargin:
    """How early a timer releases a send (s): ``base_s``, or after an idle stretch the 99th
    percentile of how late the releases after idle stretches reached their task, within
    ``[base_s, cap_s]``.

    A loop that slept wakes late now and then: on a virtual machine an idle vCPU took up to
    3 ms to run again at p99 (``benchmarks/wire_arrivals.py``, 200 req/s), far more than a busy
    loop's 0.1-0.3 ms. So a release that follows the previous one by at least ``idle_s`` (the
    loop has probably slept) gets the margin such releases have needed, re-estimated every
    :attr:`EVERY` of them over the last :attr:`KEPT`; the others get ``base_s``, so at high
    rates, where the loop never sleeps long, the busy wait stays short.

    Args:
        base_s: the margin of a release soon after another, and the least (s).
        cap_s: the most (s).
        idle_s: the gap after which a release counts as after an idle stretch (s).
    """

    KEPT = 256
    EVERY = 32

    def __init__(self, base_s: float, cap_s: float, idle_s: float) -> None:
        self.base_s, self.cap_s, self.idle_s = base_s, cap_s, idle_s
        self.idle_margin_s = base_s
        self._recent: deque[float] = deque(maxlen=self.KEPT)
        self._seen = 0
        self._last = -math.inf

    def margin_s(self, target: float) -> tuple[float, bool]:
        """The margin (s) for a send at ``target`` (s), and whether it follows an idle
        stretch (then :meth:`note` how late its release ran)."""
        idle = target - self._last >= self.idle_s
        self._last = max(self._last, target)
        return (self.idle_margin_s if idle else self.base_s), idle

    def note(self, late_s: float) -> None:
        """Count one release after an idle stretch that reached its task ``late_s`` (s) after
        its release time."""
        self._recent.append(late_s)
        self._seen += 1
        if self._seen % self.EVERY == 0:
            ranked = sorted(self._recent)
            p99 = ranked[min(len(ranked) - 1, int(0.99 * len(ranked)))]
            self.idle_margin_s = min(max(p99, self.base_s), self.cap_s)


class SendOrder:
    """The schedule's order among the sends of one loop: a send may go out only once every
    send due before it has (:meth:`first`), so that no stall, margin or yield lets a later
    send overtake an earlier one. Entries leave when their send goes out or is cancelled."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int]] = []
        self._gone: set[int] = set()
        self._seq = itertools.count()

    def enter(self, target: float) -> int:
        """Join with a send due at ``target`` (s); the token it leaves with."""
        token = next(self._seq)
        heapq.heappush(self._heap, (target, token))
        return token

    def _prune(self) -> None:
        while self._heap and self._heap[0][1] in self._gone:
            self._gone.discard(heapq.heappop(self._heap)[1])

    def first(self, token: int) -> bool:
        """Whether no send due before this one is still waiting."""
        self._prune()
        return not self._heap or self._heap[0][1] == token

    def next_target(self) -> float | None:
        """The time (s) of the earliest send still waiting, or None when none is."""
        self._prune()
        return self._heap[0][0] if self._heap else None

    def leave(self, token: int) -> None:
        """The send went out, or will not."""
        if self._heap and self._heap[0][1] == token:
            heapq.heappop(self._heap)
        else:
            self._gone.add(token)


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


_CLOCK_MONOTONIC = 1  # <time.h>; time.perf_counter reads it on Linux
_TFD_TIMER_ABSTIME = 1  # <sys/timerfd.h>


class FdTimer:
    """An event loop's own precise timer: a Linux ``timerfd`` (timerfd_create(2)) armed at the
    earliest pending time and watched by the loop's selector, so the kernel wakes the loop
    itself then, on its high-resolution timers, with no thread and no hand-over of the GIL.

    Each wake-up releases every pending time up to ``batch_s`` ahead, so sends closer together
    than a loop iteration are released together and their tasks run one after another in
    the next iteration, each in time order.

    Args:
        loop: the event loop whose selector watches the timer.
        batch_s: how far ahead of the wake-up pending times are released with it (s).
        margin: how early its users ask for their releases (:class:`ReleaseMargin`).

    Raises:
        OSError: no ``timerfd`` here (not Linux), or a loop that cannot watch one (Windows'
            proactor loop): use :class:`ThreadTimer`.
    """

    def __init__(
        self, loop: asyncio.AbstractEventLoop, batch_s: float, margin: ReleaseMargin
    ) -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            self._settime = libc.timerfd_settime
            fd = libc.timerfd_create(_CLOCK_MONOTONIC, os.O_NONBLOCK | os.O_CLOEXEC)
        except (AttributeError, TypeError) as exc:  # no timerfd, or no C library by that name
            raise OSError("this C library has no timerfd") from exc
        if fd < 0:
            raise OSError(ctypes.get_errno(), "timerfd_create failed")
        self._fd = fd
        self._spec = _Itimerspec()  # reused: one per arm cost a ctypes allocation each
        self._spec_ref = ctypes.byref(self._spec)
        self._due = DueSends()
        self._loop = loop
        self.batch_s = batch_s
        self.margin = margin
        self.order = SendOrder()
        self.lateness_s: list[float] = []
        self.wakes = 0
        self.closed = False
        try:
            loop.add_reader(fd, self._on_ready)
        except (NotImplementedError, ValueError, RuntimeError) as exc:  # a loop with no selector
            os.close(fd)
            raise OSError(f"{type(loop).__name__} cannot watch a timerfd") from exc

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop whose selector watches the timer."""
        return self._loop

    def close(self) -> None:
        """Stop watching and close the timer's file descriptor; what still waits on it is
        never released (its loop has closed)."""
        if self.closed:
            return
        self.closed = True
        if not self._loop.is_closed():
            self._loop.remove_reader(self._fd)
        os.close(self._fd)
        self._due = DueSends()

    def wait_until(self, target: float) -> asyncio.Future[None]:
        """A future that is done at ``target`` (s on ``time.perf_counter``). One whose time has
        passed is done at the loop's next turn, after every earlier one. Call it on the
        timer's loop."""
        fut: asyncio.Future[None] = self._loop.create_future()
        now = time.perf_counter()
        if self._due.push(target, self._loop, fut) and target > now:
            self._arm(target)
        if target <= now:
            # Passed already (the loop was late): released through the queue, after every
            # earlier send still waiting, so a late send never overtakes an earlier one.
            due = self._due.pop_due(now)
            _keep_lateness(self.lateness_s, now, due)
            self._loop.call_soon(release, [f for _, _, f in due])
        return fut

    def _arm(self, target: float) -> None:
        # perf_counter and the timerfd both read CLOCK_MONOTONIC; they differ only when a test
        # skews perf_counter (pool.ray_actor.skew_clock).
        at = target - (time.perf_counter() - time.monotonic())
        value = self._spec.it_value
        value.tv_sec = int(at)
        value.tv_nsec = max(int((at - int(at)) * 1e9), 1)  # all zero would disarm it
        if self._settime(self._fd, _TFD_TIMER_ABSTIME, self._spec_ref, None) != 0:
            raise OSError(ctypes.get_errno(), "timerfd_settime failed")

    def _on_ready(self) -> None:
        now = time.perf_counter()
        due = self._due.pop_due(now + self.batch_s)
        if due:
            self.wakes += 1
            _keep_lateness(self.lateness_s, now, due)
            release([fut for _, _, fut in due])
        if (nxt := self._due.next_target()) is not None:
            self._arm(nxt)  # re-arming resets the expiry count, which clears the readiness
        else:
            with contextlib.suppress(BlockingIOError, InterruptedError):
                os.read(self._fd, 8)  # the expiry count; reading it clears the readiness


_FD_TIMERS: list[FdTimer] = []
"""The live timers, one per event loop that has sent; a closed loop's is closed when the next
one is asked for, so at most one descriptor outlives its loop."""
_FD_TIMERS_LOCK = threading.Lock()


def loop_timer(batch_s: float, margin: Callable[[], ReleaseMargin]) -> FdTimer:
    """The running loop's :class:`FdTimer`, made on first use (``batch_s``: its release-ahead,
    s; ``margin``: makes its :class:`ReleaseMargin`; both fixed then); the first use also
    cuts the loop thread's timer slack to 1 ns, so its short sleeps end on time.

    Raises:
        OSError: no ``timerfd`` here (not Linux).
    """
    loop = asyncio.get_running_loop()
    with _FD_TIMERS_LOCK:  # loops in several threads (Ray actors) share the list
        if (found := running_loop_timer()) is not None:
            return found
        for timer in [t for t in _FD_TIMERS if t.loop.is_closed()]:
            timer.close()
            _FD_TIMERS.remove(timer)
        timer = FdTimer(loop, batch_s, margin())
        _FD_TIMERS.append(timer)
        # The loop's thread sleeps out the last moments before a send (sends._settle).
        _fine_timer_slack()
        return timer


def running_loop_timer() -> FdTimer | None:
    """The running loop's :class:`FdTimer` if it has one (none is made here)."""
    loop = asyncio.get_running_loop()
    for timer in reversed(_FD_TIMERS):  # appended under the lock; reading a list is safe
        if timer.loop is loop:
            return timer
    return None


MAKE_WAY_S = 0.0005
"""How soon a send must be due (s) for :func:`make_way` to wait for it: the release margin
(0.2 ms, :data:`~tokenwatt.collect.load.sends.SEND_FD_EARLY_S`), a slice of work (about
0.06 ms) and as much again for the rest of the loop's iteration."""


async def make_way(*, yield_anyway: bool) -> None:
    """Let a send due soon go first: called before a stretch of work that can wait (a slice of
    a response's decode, :mod:`tokenwatt.collect.load.stream_reads`). When a send waiting on
    this loop's :class:`FdTimer` is due within :data:`MAKE_WAY_S`, wait on the timer until its
    time, so that the send's release finds the loop free and the work runs after it; else
    yield to the loop once if ``yield_anyway``. A loop that sends with no timer (``spin``,
    ``plain``, ``thread`` sends) only yields.

    Measured at 600 req/s with 256-chunk streams (``benchmarks/loadgen.py``): without it a
    release found the loop busy with other responses' decodes, late sends bunched one write
    apart, and the sends' gaps failed the K-S test (p < 0.001 in 3 of 3 trials; with it
    0.07-0.42).
    """
    timer = running_loop_timer()
    if timer is not None:
        nxt = timer.order.next_target()
        if nxt is not None and nxt - time.perf_counter() < MAKE_WAY_S:
            await timer.wait_until(nxt)
            return
    if yield_anyway:
        await asyncio.sleep(0)


class ThreadTimer:
    """One thread that wakes each waiting event loop at its send times (where there is no
    ``timerfd``).

    :meth:`wait_until` is called on an event loop and returns a future that the loop sees done
    at the target. The thread sleeps on a condition variable's timed wait (``sem_clockwait`` on
    ``CLOCK_MONOTONIC``, its timer slack cut to 1 ns) until the earliest pending target, is
    woken early only when an earlier one arrives, and releases every time then due in one
    ``call_soon_threadsafe`` per loop. It needs the GIL to do so, so a loop that busy-waits
    delays it: a send waiting on it yields to the loop until its last moments.

    Args:
        clock: seconds on the targets' clock (default: ``time.perf_counter``, looked up at each
            call, so a Ray actor's test-only skew applies).
        start: start the thread (False: a test drives :meth:`fire` itself).
    """

    def __init__(self, clock: Callable[[], float] | None = None, *, start: bool = True) -> None:
        self._clock = clock
        self._cond = threading.Condition()
        self._due = DueSends()
        self.lateness_s: list[float] = []
        self.wakes = 0
        self.pid = os.getpid()
        self._orders: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, SendOrder] = (
            weakref.WeakKeyDictionary()
        )
        if start:
            threading.Thread(target=self._run, name="send-timer", daemon=True).start()

    def now(self) -> float:
        """The timer's clock now (s)."""
        return (self._clock or time.perf_counter)()

    def order(self) -> SendOrder:
        """The running loop's :class:`SendOrder`: the timer releases each loop's sends in time
        order, but after a stall the released tasks run in whatever order the loop's queue
        holds them, so the sends keep the schedule's order through this."""
        loop = asyncio.get_running_loop()
        order = self._orders.get(loop)
        if order is None:
            order = self._orders[loop] = SendOrder()
        return order

    def wait_until(self, target: float) -> asyncio.Future[None]:
        """A future of the running loop that is done at ``target`` (s on the timer's clock).
        One whose time has passed is released at once, in order with every earlier one."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        with self._cond:
            if self._due.push(target, loop, fut):
                self._cond.notify()
        if (now := self.now()) >= target:
            self.fire(now)  # passed already: released in order with every earlier one
        return fut

    def fire(self, now: float) -> int:
        """Release every time due at ``now`` (s) to its loop; how many. The thread calls it at
        each wake-up; a test with a fake clock calls it directly."""
        with self._cond:
            due = self._due.pop_due(now)
        if not due:
            return 0
        self.wakes += 1
        _keep_lateness(self.lateness_s, now, due)
        by_loop: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
        for _, loop, fut in due:
            by_loop.setdefault(loop, []).append(fut)
        for loop, futures in by_loop.items():
            with contextlib.suppress(RuntimeError):  # that loop has closed: nobody waits
                loop.call_soon_threadsafe(release, futures)
        return len(due)

    def _run(self) -> None:
        _fine_timer_slack()
        while True:
            with self._cond:
                while (target := self._due.next_target()) is None or (
                    delay := target - self.now()
                ) > 0:
                    self._cond.wait(None if target is None else delay)
            self.fire(self.now())


_PR_SET_TIMERSLACK = 29  # <linux/prctl.h>


def _fine_timer_slack() -> None:
    # Linux lets a thread's timed waits end up to its timer slack late (50 us by default);
    # 1 ns asks the kernel to wake this thread as near its deadline as it can (prctl(2)).
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_TIMERSLACK, 1, 0, 0, 0)


_TIMER: ThreadTimer | None = None
_TIMER_LOCK = threading.Lock()


def process_timer() -> ThreadTimer:
    """The process's one :class:`ThreadTimer`, started on first use (again in a child process,
    where the parent's thread does not run)."""
    global _TIMER
    timer = _TIMER
    if timer is None or timer.pid != os.getpid():
        with _TIMER_LOCK:
            if _TIMER is None or _TIMER.pid != os.getpid():
                _TIMER = ThreadTimer()
            timer = _TIMER
    return timer


__all__ = [
    "LATENESS_KEPT",
    "MAKE_WAY_S",
    "Due",
    "DueSends",
    "FdTimer",
    "ReleaseMargin",
    "SendOrder",
    "ThreadTimer",
    "loop_timer",
    "make_way",
    "process_timer",
    "release",
    "running_loop_timer",
]
