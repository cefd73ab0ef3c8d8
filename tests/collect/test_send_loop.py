"""The load's event loop: sub-millisecond timed waits, I/O and other threads still wake it."""

from __future__ import annotations

import asyncio
import os
import resource
import socket
import statistics
import threading
import time

import pytest

from tokenwatt.collect import send_loop
from tokenwatt.collect.arrivals import SendMargin, sleep_until
from tokenwatt.collect.send_loop import PLAIN_LOOP_SPIN_S, PreciseSelector


async def _wait_lengths(delay_s: float, n: int) -> list[float]:
    lengths = []
    for _ in range(n):
        start = time.perf_counter()
        await asyncio.sleep(delay_s)
        lengths.append(time.perf_counter() - start)
    return lengths


def test_timed_waits_are_not_rounded_up_to_milliseconds() -> None:
    # epoll rounds a 0.2 ms wait up to 1 ms, so a plain loop never waits less than 1 ms;
    # the precise loop waits 0.2 ms plus the kernel's timer latency.
    precise = statistics.median(send_loop.run(_wait_lengths(0.0002, 50)))
    plain = min(asyncio.run(_wait_lengths(0.0002, 20)))
    assert plain >= 0.001
    assert 0.0002 <= precise < 0.0009


def test_a_socket_wakes_a_long_wait() -> None:
    async def main() -> float:
        loop = asyncio.get_running_loop()
        a, b = socket.socketpair()
        got = loop.create_future()
        loop.add_reader(a.fileno(), lambda: got.set_result(time.perf_counter()))
        sleeper = asyncio.ensure_future(asyncio.sleep(30))
        threading.Timer(0.05, b.send, args=(b"x",)).start()
        start = time.perf_counter()
        woke = await asyncio.wait_for(got, 10)
        sleeper.cancel()
        loop.remove_reader(a.fileno())
        a.close()
        b.close()
        return woke - start

    assert 0.04 < send_loop.run(main()) < 5


def test_another_thread_wakes_a_long_wait() -> None:
    async def main() -> float:
        loop = asyncio.get_running_loop()
        got = loop.create_future()
        start = time.perf_counter()
        threading.Timer(0.05, loop.call_soon_threadsafe, args=(got.set_result, None)).start()
        await asyncio.wait_for(got, 10)
        return time.perf_counter() - start

    assert 0.04 < send_loop.run(main()) < 5


def test_margin_follows_the_loop() -> None:
    async def margin(spin_s: float) -> float:
        return send_loop.send_margin_s(spin_s)

    assert send_loop.run(margin(0.0005)) == 0.0005
    assert asyncio.run(margin(0.0005)) == PLAIN_LOOP_SPIN_S
    assert asyncio.run(margin(0.002)) == 0.002
    assert asyncio.run(margin(0.0)) == 0.0
    assert send_loop.run(margin(0.0)) == 0.0


def test_a_descriptor_beyond_select_falls_back_to_epoll() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1100:
        pytest.fail(f"the test needs 1,100 open files; the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1100), hard))
    held = []
    try:
        while True:  # take every low descriptor, so the epoll one lands above FD_SETSIZE
            fd = os.open(os.devnull, os.O_RDONLY)
            held.append(fd)
            if fd >= 1030:
                break
        os.close(held.pop())  # the next descriptor (epoll's) is this one, above 1024
        selector = PreciseSelector()
        assert selector.fileno() >= 1024
        os.close(held.pop())
        os.close(held.pop())  # two descriptors for the socket pair
        a, b = socket.socketpair()
        selector.register(a, 1)
        start = time.perf_counter()
        assert selector.select(0.02) == []  # a timed wait, on epoll's own timeout
        assert time.perf_counter() - start >= 0.019
        b.send(b"x")
        events = selector.select(1.0)
        assert [key.fileobj for key, _ in events] == [a]
        selector.close()
        a.close()
        b.close()
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_send_margin_decays_to_its_floor_and_widens_with_late_wakeups() -> None:
    margin = SendMargin(0.0005)
    assert margin.current_s == pytest.approx(0.0015)  # starts at the plain-loop margin
    # Remembered lateness 1.3 ms decays by 0.98 a send; the margin is it + 0.2 ms until the
    # floor: 1.3 ms × 0.98^k + 0.2 ms <= 0.5 ms from k = 73 (ln(0.3/1.3) / ln(0.98) = 72.6).
    for _ in range(72):
        margin.observe(0.0)
    assert margin.current_s > 0.0005
    margin.observe(0.0)
    assert margin.current_s == 0.0005
    margin.observe(0.001)  # a wake-up 1 ms late (a busy machine)
    assert margin.current_s == pytest.approx(0.0012)
    margin.observe(0.0001)  # one on time does not undo it at once
    assert margin.current_s == pytest.approx(0.001 * 0.98 + 0.0002)
    margin.observe(0.010)
    assert margin.current_s == 0.0015  # capped at the plain-loop margin


def test_sleep_until_gives_its_lateness_to_the_margin() -> None:
    async def main() -> tuple[float, float]:
        margin = SendMargin(0.0001, start_s=0.0)  # 0.2 ms: no lateness remembered yet
        target = time.perf_counter() + 0.02
        await sleep_until(target, margin=margin)
        return time.perf_counter() - target, margin.current_s

    after, current = send_loop.run(main())
    assert after >= 0.0
    # No wake-up is early, and the kernel's is never instant: the margin widened by it.
    assert current > 0.0002
