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
