"""The send timers: the queue's order, the release and lateness accounting with a fake clock,
the loop's own timerfd and the timer thread on the real clock, and a window's sends on real
sockets keeping their order and count under every way of waiting."""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
import time

import numpy as np
import pytest
from aiohttp import web
from loadgen_helpers import BOTH_LOOPS
from streaming_server import ScriptedServer, stream, tokens_stream

from tokenwatt.collect.load.arrivals import window_schedule
from tokenwatt.collect.load.loadgen import LoadConfig, run_window
from tokenwatt.collect.load.sends import (
    SEND_FD_BATCH_S,
    SEND_FD_EARLY_S,
    SEND_SPIN_S,
    SendTimerKind,
    SendWait,
)
from tokenwatt.collect.load.timers import (
    DueSends,
    FdTimer,
    ReleaseMargin,
    SendOrder,
    ThreadTimer,
    loop_timer,
    release,
)
from tokenwatt.collect.load.window_plan import WindowPlan
from tokenwatt.collect.workload.workload import RequestSpec
from tokenwatt.records.spec.spec import SloSpec

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="timerfd is Linux's")


def _futures(n: int) -> list[asyncio.Future[None]]:
    loop = asyncio.get_running_loop()
    return [loop.create_future() for _ in range(n)]


async def test_due_sends_come_out_in_time_order_and_ties_in_arrival_order() -> None:
    due = DueSends()
    a, b, c, d = _futures(4)
    loop = asyncio.get_running_loop()
    assert due.push(3.0, loop, a) is True  # the first is the earliest
    assert due.push(5.0, loop, b) is False
    assert due.push(1.0, loop, c) is True
    assert due.push(3.0, loop, d) is False  # ties a, after it
    assert due.next_target() == 1.0 and len(due) == 4
    assert due.pop_due(0.5) == []
    assert [f for _, _, f in due.pop_due(3.0)] == [c, a, d]
    assert due.next_target() == 5.0
    assert [t for t, _, _ in due.pop_due(99.0)] == [5.0]
    assert due.next_target() is None


def test_the_release_margin_after_idle_stretches_follows_their_p99_within_its_bounds() -> None:
    margin = ReleaseMargin(0.0002, 0.0015, 0.002)
    assert margin.margin_s(1.0) == (0.0002, True)  # the first follows an idle loop
    assert margin.margin_s(1.001) == (0.0002, False)  # 1 ms later: the loop is busy
    for _ in range(ReleaseMargin.EVERY):
        margin.note(0.003)
    assert margin.margin_s(1.01) == (0.0015, True)  # late wake-ups: up to the cap, not past it
    assert margin.margin_s(1.0105) == (0.0002, False)  # soon after: the base, whatever idles did
    for k in range(ReleaseMargin.KEPT):  # the loop wakes on time again: p99 0.5 ms
        margin.note(0.00001 if k % 50 else 0.0005)
    assert margin.margin_s(2.0)[0] == pytest.approx(0.0005)
    for _ in range(ReleaseMargin.KEPT):
        margin.note(0.00001)
    assert margin.margin_s(3.0) == (0.0002, True)  # never under the base


async def test_thread_timer_releases_what_is_due_and_records_how_late() -> None:
    now = [10.0]
    timer = ThreadTimer(clock=lambda: now[0], start=False)
    past = timer.wait_until(9.0)  # already passed: released at once, through the queue
    await asyncio.sleep(0)
    assert past.done() and timer.wakes == 1
    late, early, later = timer.wait_until(12.0), timer.wait_until(11.0), timer.wait_until(13.0)
    cancelled = timer.wait_until(11.5)
    cancelled.cancel()
    assert timer.fire(10.9) == 0 and timer.wakes == 1
    assert timer.fire(11.6) == 2  # 11.0 and the cancelled 11.5
    await asyncio.sleep(0)  # the release runs on the loop (call_soon_threadsafe)
    assert early.done() and not late.done() and cancelled.cancelled()
    assert timer.fire(13.25) == 2
    await asyncio.sleep(0)
    assert late.done() and later.done()
    assert timer.lateness_s == pytest.approx([1.0, 0.6, 0.1, 1.25, 0.25])
    assert timer.wakes == 3


@BOTH_LOOPS
async def test_thread_timer_wakes_its_loop_at_each_time_in_order() -> None:
    timer = ThreadTimer()
    t0 = time.perf_counter()
    offsets = [0.030, 0.010, 0.020, 0.015, 0.040]
    seen: list[tuple[float, float]] = []

    async def wait(offset: float) -> None:
        await timer.wait_until(t0 + offset)
        seen.append((offset, time.perf_counter() - t0))

    await asyncio.gather(*(wait(x) for x in offsets))
    assert [x for x, _ in seen] == sorted(offsets)
    assert all(at >= x for x, at in seen)  # never before its time
    assert len(timer.lateness_s) == len(offsets) and min(timer.lateness_s) >= 0


@linux_only
@BOTH_LOOPS
async def test_timerfd_releases_in_order_never_early_and_batches_close_times() -> None:
    timer = loop_timer(SEND_FD_BATCH_S, lambda: ReleaseMargin(SEND_FD_EARLY_S, SEND_SPIN_S, 1.0))
    assert isinstance(timer, FdTimer) and loop_timer(0.5, lambda: ReleaseMargin(0, 0, 0)) is timer
    wakes = timer.wakes
    t0 = time.perf_counter()
    # Two pairs closer than the batch (0.1 ms apart), far apart from each other.
    offsets = [0.0301, 0.010, 0.0101, 0.030]
    seen: list[float] = []

    async def wait(offset: float) -> None:
        await timer.wait_until(t0 + offset)
        seen.append(offset)
        assert time.perf_counter() - t0 >= offset - SEND_FD_BATCH_S

    await asyncio.gather(*(wait(x) for x in offsets))
    assert seen == sorted(offsets)
    assert timer.wakes - wakes == 2  # one wake-up per pair
    assert len(timer.lateness_s) >= 4


@linux_only
@BOTH_LOOPS
async def test_timerfd_rearmed_for_the_next_time_wakes_its_loop_only_then() -> None:
    calls = 0

    class Counted(FdTimer):
        def _on_ready(self) -> None:
            nonlocal calls
            calls += 1
            super()._on_ready()

    timer = Counted(asyncio.get_running_loop(), 0.0, ReleaseMargin(0, 0, 1.0))
    try:
        t0 = time.perf_counter()
        first, second = timer.wait_until(t0 + 0.01), timer.wait_until(t0 + 0.2)
        await first
        # Re-armed for the second, the timer's readiness is cleared: the loop sleeps till then
        # (a readiness left set would call back at every turn of the loop meanwhile).
        await asyncio.sleep(0.05)
        assert calls == 1 and not second.done()
        await second
        assert calls == 2 and time.perf_counter() - t0 >= 0.2
        await asyncio.sleep(0.02)  # nothing pending: read, not re-armed, and quiet again
        assert calls == 2
    finally:
        timer.close()


async def _window(kind: SendTimerKind, base: str, rate: float) -> tuple[list[float], list[float]]:
    cfg = LoadConfig(
        endpoint=base, model="tiny", slo=SloSpec(ttft_p99_ms=5000, tpot_p99_ms=5000),
        max_concurrency=64, request_timeout_s=10.0,
    )  # fmt: skip
    plan = WindowPlan(
        rate_rps=rate, duration_s=1.0, warmup_s=0.0, seed=5, keep_load=False, send_timer=kind
    )
    spec = itertools.repeat(RequestSpec(prompt=[1, 2, 3], max_tokens=2))
    result = await run_window(cfg, plan, spec)
    reqs = [r for r in result.requests if r.in_window]
    assert all(r.error is None for r in reqs), [r.error_message for r in reqs if r.error]
    return [r.scheduled_s for r in reqs], [r.sent_s for r in reqs]


@pytest.mark.parametrize("kind", ["timerfd", "thread", "spin", "plain"])
@BOTH_LOOPS
async def test_a_windows_sends_keep_their_count_and_the_timers_their_order(
    kind: SendTimerKind, server: ScriptedServer
) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return await stream(request, tokens_stream(2))

    server.handler = handler
    rate = 300.0
    scheduled, sent = await _window(kind, server.base, rate)
    expected = window_schedule(rate, warmup_s=0.0, duration_s=1.0, tail_s=0.0, seed=5)
    assert len(sent) == len(expected)
    assert np.allclose(np.sort(scheduled) - min(scheduled), expected - expected[0])
    if kind in ("timerfd", "thread"):  # the wire order is the schedule's, even after a stall
        order = np.argsort(scheduled, kind="stable")
        assert list(np.argsort(sent, kind="stable")) == list(order)
    lag = np.asarray(sent) - np.asarray(scheduled)
    assert lag.min() >= 0  # nothing before its time (how precise: benchmarks/wire_arrivals.py)


@linux_only
async def test_timerfd_releases_a_late_send_after_the_earlier_ones_still_waiting() -> None:
    timer = loop_timer(SEND_FD_BATCH_S, lambda: ReleaseMargin(SEND_FD_EARLY_S, SEND_SPIN_S, 1.0))
    t0 = time.perf_counter()
    order: list[str] = []

    async def wait(name: str, target: float) -> None:
        await timer.wait_until(target)
        order.append(name)

    first = asyncio.ensure_future(wait("earlier", t0 + 0.002))
    await asyncio.sleep(0)  # the earlier one waits on the timer
    time.sleep(0.004)  # noqa: ASYNC251  (the loop held up past both times, as a stall does)
    second = asyncio.ensure_future(wait("later", t0 + 0.003))
    await asyncio.gather(first, second)
    assert order == ["earlier", "later"]


@linux_only
def test_a_closed_loops_timerfd_is_closed_when_the_next_loop_sends() -> None:
    async def make() -> FdTimer:
        return loop_timer(SEND_FD_BATCH_S, lambda: ReleaseMargin(SEND_FD_EARLY_S, SEND_SPIN_S, 1))

    first = asyncio.run(make())
    assert not first.closed  # its loop has closed, but nothing asked since
    second = asyncio.run(make())
    assert first.closed and not second.closed and second is not first
    open_fds = len(os.listdir("/proc/self/fd"))
    for _ in range(20):  # twenty more loops, one window each: no descriptor left behind
        asyncio.run(make())
    assert len(os.listdir("/proc/self/fd")) <= open_fds


def test_send_order_lets_a_send_go_only_after_every_earlier_one() -> None:
    order = SendOrder()
    late, early, mid = order.enter(3.0), order.enter(1.0), order.enter(2.0)
    assert order.first(early) and not order.first(mid) and not order.first(late)
    order.leave(mid)  # cancelled before its turn: it holds nobody up
    assert not order.first(late)
    order.leave(early)
    assert order.first(late)


@linux_only
@BOTH_LOOPS
async def test_timerfd_sends_keep_the_schedules_order_across_a_stall() -> None:
    sends = SendWait("timerfd")
    loop = asyncio.get_running_loop()
    for _ in range(60):  # past the margin's re-estimate: the stalls make it grow, and yield
        seen: list[str] = []

        async def send(name: str, target: float, seen: list[str] = seen) -> None:
            await sends.until(target)
            seen.append(name)

        t = time.perf_counter()
        tasks = [loop.create_task(send("first", t + 0.0012))]  # waits on the timer
        await asyncio.sleep(0)
        time.sleep(0.003)  # noqa: ASYNC251  (a stall: the first one's time passes)
        now = time.perf_counter()
        tasks.append(loop.create_task(send("late", now - 0.0001)))  # passed already
        tasks.append(loop.create_task(send("soon", now + 0.0003)))
        await asyncio.gather(*tasks)
        assert seen == ["first", "late", "soon"]
        await asyncio.sleep(0.01)  # idle: the next first send follows an idle stretch


@linux_only
async def test_a_loop_that_cannot_watch_a_timerfd_sends_through_the_timer_thread(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return await stream(request, tokens_stream(2))

    server.handler = handler
    loop = asyncio.get_running_loop()

    def refuse(*_: object) -> None:
        raise NotImplementedError  # as Windows' proactor loop does

    monkeypatch.setattr(loop, "add_reader", refuse)
    open_fds = len(os.listdir("/proc/self/fd"))
    scheduled, sent = await _window("timerfd", server.base, 100.0)
    assert len(sent) == len(scheduled) > 50  # every one sent, on the thread's releases
    assert min(np.asarray(sent) - np.asarray(scheduled)) >= 0
    assert len(os.listdir("/proc/self/fd")) <= open_fds + 2  # the thread's, not one per send


def test_an_unknown_send_timer_is_refused() -> None:
    from tokenwatt.collect.load.sends import send_wait

    with pytest.raises(ValueError, match="send_timer must be one of timerfd, thread"):
        send_wait("busy")  # type: ignore[arg-type]
    assert send_wait("plain").lead_s == 0.0 and send_wait("timerfd").lead_s >= 0.003


async def test_thread_sends_keep_their_order_when_a_late_one_is_released_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The thread takes the earlier send off its list and, before it can hand it to the loop,
    a later send whose time has passed arrives and is released at once, ahead of it in the
    loop's queue: the earlier send must still go first."""
    import tokenwatt.collect.load.sends as sends_mod

    t0 = time.perf_counter() - 1.0  # both send times have passed on the real clock
    now = [t0 - 1.0]  # the timer's clock: before both
    timer = ThreadTimer(clock=lambda: now[0], start=False)
    monkeypatch.setattr(sends_mod, "process_timer", lambda: timer)
    wait = SendWait("thread")
    order: list[str] = []

    async def send(name: str, target: float) -> None:
        await wait.until(target)
        order.append(name)

    earlier = asyncio.ensure_future(send("earlier", t0))
    for _ in range(3):
        await asyncio.sleep(0)  # it waits on the timer
    taken = timer._due.pop_due(t0)  # the thread's wake-up, mid-way: taken, not yet handed over
    assert len(taken) == 1
    now[0] = t0 + 1.0
    later = asyncio.ensure_future(send("later", t0 + 0.001))
    for _ in range(3):
        await asyncio.sleep(0)  # passed already: released at once, first in the loop's queue
    asyncio.get_running_loop().call_soon_threadsafe(release, [fut for _, _, fut in taken])
    await asyncio.gather(earlier, later)
    assert order == ["earlier", "later"]


def test_a_released_send_sleeps_only_when_the_wait_is_worth_a_sleep(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tokenwatt.collect.load import sends as sends_module

    now = [0.0]

    def clock() -> float:
        now[0] += 1e-6  # each reading takes 1 us
        return now[0]

    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s + 30e-6  # a sleep wakes 30 us late here

    monkeypatch.setattr(sends_module.time, "sleep", sleep)
    sends_module._settle(now[0] + 0.0004, clock)  # 0.4 ms left: sleep, then spin the rest
    assert len(slept) == 1
    assert slept[0] == pytest.approx(0.0004 - 1e-6 - sends_module.SEND_FD_WAKE_S)
    assert now[0] >= 0.0004
    slept.clear()
    start = now[0]
    sends_module._settle(start + sends_module.SEND_FD_SPIN_S / 2, clock)  # too little to sleep
    assert slept == [] and now[0] >= start + sends_module.SEND_FD_SPIN_S / 2
