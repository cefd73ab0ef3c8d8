"""A remote clock's offset against this process's, by Cristian's algorithm.

``time.perf_counter`` (``CLOCK_MONOTONIC`` on Linux) is one clock for every process of a
machine but counts from an arbitrary instant per machine (its boot): a Ray actor on another
host reads another clock. To send on the driver's schedule, the actor needs the driver's
start time in its own clock, and what it measures must come back in the driver's.

Cristian's algorithm (F. Cristian, "Probabilistic clock synchronization", Distributed
Computing 3(3):146–158, 1989): the driver reads its clock (``t_send``), asks the remote
for its clock (``t_remote``), reads its clock again (``t_recv``). The remote read happened
somewhere within ``[t_send, t_recv]``, so with the midpoint as the estimate,

    offset = t_remote − (t_send + t_recv) / 2,   |error| ≤ (t_recv − t_send) / 2 = RTT / 2

whatever the two directions' delays are. Of several round trips the one with the least
RTT is kept: it has the tightest bound. The bound assumes neither clock drifts noticeably
within a round trip (milliseconds; ``CLOCK_MONOTONIC`` is slewed by NTP at most 500 ppm,
i.e. 0.5 µs per ms), and it holds between windows only as well as the clocks keep their
rates: the offset is measured again before every window.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

ROUNDS = 8
"""Round trips per measurement: the least RTT of eight is rarely far from the floor."""


@dataclass(frozen=True)
class ClockOffset:
    """A remote clock against the local one.

    Attributes:
        offset_s: remote clock minus local clock (s).
        uncertainty_s: the largest the error of ``offset_s`` can be (s): half the round
            trip of the kept exchange.
        rtt_s: that round trip (s).
    """

    offset_s: float
    uncertainty_s: float
    rtt_s: float

    def to_remote(self, t_local: float) -> float:
        """A local time (s) on the remote clock."""
        return t_local + self.offset_s

    def to_local(self, t_remote: float) -> float:
        """A remote time (s) on the local clock."""
        return t_remote - self.offset_s


SAME_CLOCK = ClockOffset(offset_s=0.0, uncertainty_s=0.0, rtt_s=0.0)
"""The offset of a clock against itself."""


def cristian_offset(samples: Sequence[tuple[float, float, float]]) -> ClockOffset:
    """The offset from round trips ``(t_send, t_remote, t_recv)`` (s), by Cristian's
    algorithm (module docstring): the exchange with the least RTT, its midpoint.

    Raises:
        ValueError: no samples, or one whose ``t_recv`` is before its ``t_send``.
    """
    if not samples:
        raise ValueError("no round trips to estimate a clock offset from")
    if any(recv < send for send, _, recv in samples):
        raise ValueError("a round trip ended before it began (t_recv < t_send)")
    send, remote, recv = min(samples, key=lambda s: s[2] - s[0])
    rtt = recv - send
    return ClockOffset(offset_s=remote - (send + recv) / 2, uncertainty_s=rtt / 2, rtt_s=rtt)


def measure_offset(
    read_remote: Callable[[], float],
    rounds: int = ROUNDS,
    clock: Callable[[], float] = time.perf_counter,
) -> ClockOffset:
    """Measure a remote clock's offset with ``rounds`` round trips of ``read_remote``
    (a blocking call that returns the remote's clock, in s; its own deadline is the
    caller's), by :func:`cristian_offset`.

    Raises:
        ValueError: ``rounds`` below 1.
        Whatever ``read_remote`` raises.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    samples = []
    for _ in range(rounds):
        send = clock()
        remote = read_remote()
        samples.append((send, remote, clock()))
    return cristian_offset(samples)


__all__ = ["ROUNDS", "SAME_CLOCK", "ClockOffset", "cristian_offset", "measure_offset"]
