"""Clocks for the sampler: the real one, and a manual one so tests never sleep.

The sampler thread asks the clock to wait until a deadline or until it is told to stop.
:class:`SystemClock` waits for real; :class:`ManualClock` waits until a test calls
:meth:`ManualClock.advance`, which hands the sampler every deadline it passes, one at a time,
and returns only after the sampler has taken each sample.
"""

from __future__ import annotations

import functools
import threading
import time
from typing import Protocol


class Clock(Protocol):
    """Monotonic time in seconds, and a wait that a stop event can cut short."""

    def now(self) -> float:
        """Monotonic seconds."""
        ...

    def wall(self) -> float:
        """Wall-clock seconds since the Unix epoch (for sources that query by time)."""
        ...

    def wait_until(self, deadline: float, stop: threading.Event) -> bool:
        """Block until ``now() >= deadline`` or ``stop`` is set; True if stopped."""
        ...

    def wake(self) -> None:
        """Wake any waiter so it notices that its stop event was set."""
        ...

    def enter(self) -> None:
        """A sampler thread attaches (before its first wait)."""
        ...

    def leave(self) -> None:
        """The sampler thread is done (after its last wait)."""
        ...


class SystemClock:
    """The real clock: ``time.monotonic`` and ``Event.wait``."""

    def now(self) -> float:
        """Monotonic seconds (``time.monotonic``)."""
        return time.monotonic()

    def wall(self) -> float:
        """Unix time (``time.time``)."""
        return time.time()

    def wait_until(self, deadline: float, stop: threading.Event) -> bool:
        """Wait for real until the deadline or the stop event."""
        remaining = deadline - time.monotonic()
        if remaining > 0:
            return stop.wait(remaining)
        return stop.is_set()

    def wake(self) -> None:
        """Nothing to do: ``Event.wait`` returns as soon as the event is set."""

    def enter(self) -> None:
        """Nothing to track."""

    def leave(self) -> None:
        """Nothing to track."""


class ManualClock:
    """A clock that moves only when :meth:`advance` is called (for tests and benchmarks).

    One sampler thread may wait on it at a time. ``advance(dt)`` moves time forward through
    each deadline the waiter asked for, waits until the waiter has taken its sample and asked
    for the next deadline (or stopped), then sets the time to the target.
    """

    def __init__(
        self,
        start: float = 1000.0,
        handoff_timeout_s: float = 10.0,
        wall_offset: float = 1.7e9,
    ) -> None:
        self._now = start
        self.wall_offset = wall_offset
        self._cond = threading.Condition()
        self._deadline: float | None = None
        self._entries = 0
        self._active = False
        self._handoff_timeout_s = handoff_timeout_s

    def now(self) -> float:
        """The manual time (s)."""
        with self._cond:
            return self._now

    def wall(self) -> float:
        """The manual time plus ``wall_offset`` (s since the epoch)."""
        with self._cond:
            return self._now + self.wall_offset

    def wait_until(self, deadline: float, stop: threading.Event) -> bool:
        """Block (without sleeping) until :meth:`advance` reaches the deadline or stop is set."""
        with self._cond:
            self._deadline = deadline
            self._entries += 1
            self._cond.notify_all()
            while self._now < deadline and not stop.is_set():
                self._cond.wait()
            self._deadline = None
            self._cond.notify_all()
            return stop.is_set()

    def wake(self) -> None:
        """Wake the waiter so it sees its stop event."""
        with self._cond:
            self._cond.notify_all()

    def wait_for_waiter(self) -> None:
        """Block until a sampler thread is waiting on this clock (it has started).

        Raises:
            TimeoutError: no waiter within the hand-off timeout (a bug in the caller).
        """
        with self._cond:
            if not self._cond.wait_for(
                lambda: self._deadline is not None, timeout=self._handoff_timeout_s
            ):
                raise TimeoutError("no sampler is waiting on the manual clock")

    def advance(self, dt: float) -> None:
        """Move time forward by ``dt`` seconds, letting the waiter sample at each deadline.

        Raises:
            TimeoutError: the waiter did not come back within the hand-off timeout.
        """
        with self._cond:
            target = self._now + dt
            while self._deadline is not None and self._deadline <= target:
                self._now = max(self._now, self._deadline)
                entries = self._entries
                self._cond.notify_all()
                # The waiter takes its sample outside the lock, then either asks for the
                # next deadline (entries grows) or leaves for good (deadline stays None).
                ok = self._cond.wait_for(
                    functools.partial(self._moved_on, entries), timeout=self._handoff_timeout_s
                )
                if not ok:
                    raise TimeoutError("sampler did not return to the manual clock")
            self._now = max(self._now, target)
            self._cond.notify_all()

    def _moved_on(self, entries: int) -> bool:
        # The waiter woke for a deadline: it has moved on once it asked for the next one
        # (entries grew) or left for good (no deadline, and :meth:`leave` cleared _active).
        return self._entries > entries or (self._deadline is None and not self._active)

    def enter(self) -> None:
        """Mark a sampler thread as attached (called by the sampler before its loop)."""
        with self._cond:
            self._active = True

    def leave(self) -> None:
        """Mark the sampler thread as gone (called by the sampler when its loop ends)."""
        with self._cond:
            self._active = False
            self._cond.notify_all()
