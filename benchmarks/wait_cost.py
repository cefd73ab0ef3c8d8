"""What a wait costs this machine's CPU: the client CPU of each way a thread can wait (prints).

Why (issue 25): a precise send waits twice on this VM, once in the event loop's selector until
the send's timer fires and once for the rest of its release margin (``sends._settle``), and a
plain ``asyncio.sleep`` schedule shares one wake-up among the sends of a millisecond. If a
wait costs far more CPU than a system call that does not wait, the number of waits per request
sets much of the client's CPU, whatever the code around them does.

Each way is called ``--calls`` times in a row in this process (pin it with ``taskset -c N``
for figures that compare), ``--rounds`` times, interleaved; it prints each way's median CPU
per call (µs: user + system, ``time.process_time``), the system part of it (µs), its wall
time and its voluntary context switches per call. The thread's timer slack is cut to 1 ns first, as
the load generator's loop thread does (``timers._fine_timer_slack``). Python's
``epoll.poll`` rounds its timeout up to whole milliseconds (epoll_wait(2) takes them), which
is asyncio's millisecond bunching. Linux only (timerfd, prctl).

Usage: taskset -c 0 python benchmarks/wait_cost.py [--calls 3000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import resource
import select
import statistics
import sys
import time
from collections.abc import Callable

_PR_SET_TIMERSLACK = 29  # prctl(2)
_CLOCK_MONOTONIC = 1


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


def _ways() -> dict[str, Callable[[], object]]:
    """Each way to wait (and two system calls that do not wait, for scale)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_TIMERSLACK, 1, 0, 0, 0) != 0:
        sys.exit("prctl(PR_SET_TIMERSLACK) failed: this script needs Linux")
    ep = select.epoll()
    tfd = libc.timerfd_create(_CLOCK_MONOTONIC, 0)
    if tfd < 0:
        sys.exit("timerfd_create failed: this script needs Linux")
    spec = _Itimerspec(_Timespec(0, 0), _Timespec(0, 100_000))  # 100 us, relative

    near = _Itimerspec(_Timespec(0, 0), _Timespec(0, 100_000))
    far = _Itimerspec(_Timespec(0, 0), _Timespec(0, 10_000_000))
    armed = libc.timerfd_create(_CLOCK_MONOTONIC, 0)  # armed again and again, never read

    def timerfd_read() -> None:
        libc.timerfd_settime(tfd, 0, ctypes.byref(spec), None)
        os.read(tfd, 8)  # blocks until it fires

    return {
        "getppid (no wait)": os.getppid,
        "epoll.poll(0) (no wait)": lambda: ep.poll(0),
        "arm a timerfd 10 ms ahead (no wait)": lambda: libc.timerfd_settime(
            armed, 0, ctypes.byref(far), None
        ),
        "arm a timerfd 0.1 ms ahead (no wait)": lambda: libc.timerfd_settime(
            armed, 0, ctypes.byref(near), None
        ),
        "time.sleep(0)": lambda: time.sleep(0),
        "time.sleep(20 us)": lambda: time.sleep(20e-6),
        "time.sleep(100 us)": lambda: time.sleep(100e-6),
        "epoll.poll(0.1 ms: 1 ms), none ready": lambda: ep.poll(100e-6),
        "timerfd 100 us, blocking read": timerfd_read,
    }


def _measure(way: Callable[[], object], calls: int) -> tuple[float, float, float, float]:
    """CPU µs per call, system µs per call, wall µs per call, voluntary switches per call."""
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(calls):
        way()
    c1, w1 = time.process_time(), time.perf_counter()
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    return (
        (c1 - c0) / calls * 1e6,
        (r1.ru_stime - r0.ru_stime) / calls * 1e6,
        (w1 - w0) / calls * 1e6,
        (r1.ru_nvcsw - r0.ru_nvcsw) / calls,
    )


def main() -> None:
    """Measure every way, interleaved, and print the medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000, help="calls per way and round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    args = parser.parse_args()
    ways = _ways()
    got: dict[str, list[tuple[float, float, float, float]]] = {name: [] for name in ways}
    for _ in range(args.rounds):
        for name, way in ways.items():
            got[name].append(_measure(way, args.calls))
    print(f"{args.calls} calls per way, median of {args.rounds} interleaved rounds")
    print(f"  {'way':36s} {'CPU µs':>8s} {'sys µs':>9s} {'wall µs':>8s} {'switches':>8s}")
    for name, rows in got.items():
        cpu, sys_, wall, switches = (statistics.median(col) for col in zip(*rows, strict=True))
        print(f"  {name:36s} {cpu:8.2f} {sys_:9.2f} {wall:8.1f} {switches:8.2f}")


if __name__ == "__main__":
    main()
