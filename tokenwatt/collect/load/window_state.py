"""The state of one running window on one event loop (:class:`WindowState`), and its one
dispatch loop (:meth:`WindowState.dispatch`), shared by the one-process load generator
(:mod:`tokenwatt.collect.load.loadgen`), the closed loop and every worker process or Ray actor
(:mod:`tokenwatt.collect.load.pool.worker_proc`).

Send times: the dispatch loop creates each request's task a few milliseconds before its
scheduled time (:attr:`~tokenwatt.collect.load.sends.SendWait.lead_s`); the task takes its
slot and its connection, then waits the rest (:class:`~tokenwatt.collect.load.sends.
SendWait`: by default the loop's own timerfd releases it) right before its first byte and
sends at once: sends are not bunched on the selector's millisecond ticks, nor delayed by a
hop through the dispatcher or by aiohttp's own work for the request
(``benchmarks/wire_arrivals.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import NamedTuple

import aiohttp

from tokenwatt.analysis import percentile, send_lag_ms, tpot_ms, ttft_ms
from tokenwatt.collect.load.http import Sender, fail
from tokenwatt.collect.load.loadconfig import LoadConfig
from tokenwatt.collect.load.sends import SendWait
from tokenwatt.collect.load.window_plan import WindowPhase, WindowProgress
from tokenwatt.records import RequestResult, WindowSummary

CANCELLED_MESSAGE = "cancelled by the client (early stop, or the end of the keep-load tail)"
"""``error_message`` of a request the client cancelled itself."""


class Item(NamedTuple):
    """One arrival to send: its place in the window's schedule (``seq``), its offset from
    ``t0`` (s), whether it is in the measured window, its request body and what the
    request asked for (for the served-vs-asked checks)."""

    seq: int
    offset: float
    in_window: bool
    body: bytes
    prompt_tokens: int
    max_tokens: int | None
    prompt_ids_sent: int | None
    prompt_text_tokens: int | None = None


@dataclass
class WindowResult:
    """One window's summary and every request sent (warm-up and drain ones included,
    ``in_window=False``). Times are ``time.perf_counter`` seconds; ``wall_start_unix`` is
    the wall-clock time of ``window_start_s`` (for lining up power samples)."""

    summary: WindowSummary
    requests: list[RequestResult]
    window_start_s: float
    window_end_s: float
    wall_start_unix: float

    def __repr__(self) -> str:
        # asyncio may repr a finished task's result; tens of thousands of requests would
        # make that take longer than the window's own bookkeeping.
        return f"WindowResult({len(self.requests)} requests, summary={self.summary!r})"


def cancelled_by_client(res: RequestResult) -> None:
    """Mark a request the client itself cancelled (never an engine error), unless it had
    already failed."""
    if res.error is None:
        res.error, res.error_class = "cancelled", "CancelledError"
        res.error_message = CANCELLED_MESSAGE


class WindowState:
    """The requests of one window on one event loop: the concurrency slots, the sender,
    every result, the in-window count still open, and the counters of a live display.

    Args:
        cfg: endpoint, limits (its ``max_concurrency`` sizes the slots).
        session: the aiohttp session the requests go out on.
    """

    def __init__(self, cfg: LoadConfig, session: aiohttp.ClientSession) -> None:
        self.cfg = cfg
        self.sender = Sender(
            session,
            cfg.url,
            cfg.headers(),
            cfg.request_timeout_s,
            cfg.max_concurrency,
            keep_alive=cfg.keep_alive,
            secrets=((cfg.api_key,) if cfg.api_key else ()) + tuple(cfg.path.secrets),
            path=cfg.path,
        )
        self.slots = asyncio.Semaphore(cfg.max_concurrency)
        self.results: list[RequestResult] = []
        self.window_results: list[RequestResult] = []
        self.tasks: set[asyncio.Task[None]] = set()
        self.window_pending = 0
        self.window_dispatched = False
        self.window_done = asyncio.Event()
        self.dispatched = asyncio.Event()
        self.on_dispatched: Callable[[], None] | None = None
        self.completed = 0
        self.errors = 0
        self.ttfts_ms: list[float] = []
        self.tpots_ms: list[float] = []

    def mark_dispatched(self) -> None:
        """No more in-window request will be sent: the window is done once the open ones
        end (at once when none is open)."""
        if self.window_dispatched:
            return
        self.window_dispatched = True
        self.dispatched.set()
        if self.window_pending == 0:
            self.window_done.set()
        if self.on_dispatched is not None:
            self.on_dispatched()

    def add(self, res: RequestResult) -> None:
        """Count a request about to be sent (an in-window one keeps the window open)."""
        self.results.append(res)
        if res.in_window:
            self.window_results.append(res)
            self.window_pending += 1

    async def dispatch(
        self,
        next_item: Callable[[], Awaitable[Item | None]],
        *,
        t0: float,
        window_end_offset: float,
        stop: asyncio.Event,
        sends: SendWait,
        on_sent: Callable[[Item, RequestResult], None] | None = None,
    ) -> None:
        """Send every item ``next_item`` gives at ``t0 + item.offset`` (s, on
        ``time.perf_counter``), each on a task of its own, until it gives None or, past
        the window (``window_end_offset``), ``stop`` is set; each task is created
        ``sends.lead_s`` early and waits the rest with ``sends``. ``on_sent`` sees each request
        as it goes out. The window counts as dispatched (:meth:`mark_dispatched`) at the
        first item past it and when this returns, however it returns."""
        loop = asyncio.get_running_loop()
        clock = time.perf_counter
        try:
            while (item := await next_item()) is not None:
                tail = item.offset >= window_end_offset
                if tail:
                    self.mark_dispatched()
                target = t0 + item.offset
                delay = target - clock()
                if tail:
                    # Past the window, a send waits for its time or for the stop, not both.
                    if stop.is_set() or (delay > 0 and await _set_within(stop, delay)):
                        return
                elif delay > sends.lead_s:
                    await asyncio.sleep(delay - sends.lead_s)
                res = RequestResult(
                    scheduled_s=target,
                    in_window=item.in_window,
                    prompt_tokens=item.prompt_tokens,
                    max_tokens=item.max_tokens,
                    ignore_eos=self.cfg.ignore_eos,
                    prompt_ids_sent=item.prompt_ids_sent,
                    prompt_text_tokens=item.prompt_text_tokens,
                )
                self.add(res)
                if on_sent is not None:
                    on_sent(item, res)
                task = loop.create_task(self.request(res, item.body, sends))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
        finally:
            self.mark_dispatched()

    async def request(self, res: RequestResult, body: bytes, sends: SendWait) -> None:
        """Send one request at its scheduled time (waited for with ``sends``) and stream its
        response into ``res``.

        The task takes its concurrency slot and lets aiohttp get a connection for it first,
        in its lead before the send time; the wait for the send time comes last, just before
        the request's first byte (:meth:`Sender.send`'s ``at_send``), so aiohttp's work for
        a request is not between the send time and the send. ``sent_s`` is then;
        ``dispatched_s`` too, unless the task had to wait for its slot and got it after the
        send time (the engine's backlog held it up, not the client): then the later of the
        send time and when the task was ready. A task that starts late and finds a slot free
        is the client's lateness, all of it send lag.
        """
        clock = time.perf_counter
        target = res.scheduled_s
        try:
            ready = clock()
            # The timeout counts from the scheduled time and covers the wait for a slot:
            # an overloaded server fills every slot, and a request queued behind them must
            # still end at its timeout (E2E = timeout), not when a slot frees up.
            deadline = target + self.cfg.request_timeout_s
            queued = self.slots.locked()  # every slot taken: this one waits for the engine
            if not await self._slot(deadline - ready):
                res.dispatched_s = max(ready, target)
                fail(res, "timeout", TimeoutError(), message=self._no_slot)
                return
            held = queued and clock() > target  # the backlog held it past its send time

            async def at_send() -> None:
                await sends.until(target)
                res.sent_s = clock()
                res.dispatched_s = max(ready, target) if held else res.sent_s

            try:
                await self.sender.send(res, body, budget_s=deadline - clock(), at_send=at_send)
            finally:
                self.slots.release()
        except asyncio.CancelledError:
            cancelled_by_client(res)
            raise
        except Exception as exc:  # a fault of the load generator itself: said, never silent
            fail(res, "client", exc, message=f"the load generator failed to send it: {exc!r}")
        finally:
            self.finish(res)

    def finish(self, res: RequestResult) -> None:
        """Count a request that has ended (however it ended) and release the window's wait
        when it was the window's last. ``finished_s`` is now, unless the stream already
        ended it (a body held open after ``[DONE]``: :data:`~tokenwatt.collect.load.stream.
        DONE_GRACE_S`)."""
        if res.finished_s is None:
            res.finished_s = time.perf_counter()
        if res.error is None:
            self.completed += 1
        else:
            self.errors += 1
        if res.in_window:
            # Kept as they come, so a progress snapshot never walks every request.
            self.ttfts_ms.append(ttft_ms(res))
            tpot = tpot_ms(res)
            if tpot is not None:
                self.tpots_ms.append(tpot)
            self.window_pending -= 1
            if self.window_pending == 0 and self.window_dispatched:
                self.window_done.set()

    def close_unstarted(self) -> None:
        """After the window's tasks were cancelled and awaited: mark every request whose task
        was cancelled before its first step (so its own handler never ran, and it would
        stay unfinished with no error) as cancelled by the client, and count it ended."""
        for res in self.results:
            if res.finished_s is None:
                cancelled_by_client(res)
                self.finish(res)

    @property
    def _no_slot(self) -> str:
        return (
            f"no concurrency slot (measurement.max_concurrency {self.cfg.max_concurrency}) "
            f"within the {self.cfg.request_timeout_s:g} s request timeout: never sent"
        )

    async def _slot(self, budget_s: float) -> bool:
        """Take a concurrency slot within ``budget_s`` (s); False when none came."""
        if not self.slots.locked():  # free: taken at once, with no deadline to arm and cancel
            await self.slots.acquire()
            return True
        try:
            async with asyncio.timeout(max(budget_s, 0.0)):
                await self.slots.acquire()
        except TimeoutError:
            return False
        return True

    def snapshot(
        self, phase: WindowPhase, rate: float, elapsed: float, total: float
    ) -> WindowProgress:
        """The live display's view now (``rate`` req/s, ``elapsed`` and ``total`` s)."""
        recent = self.results[-2000:]  # send lag of the latest requests: is the client behind?
        return WindowProgress(
            phase=phase,
            rate_rps=rate,
            elapsed_s=elapsed,
            total_s=total,
            sent=len(self.results),
            in_flight=len(self.tasks),
            completed=self.completed,
            errors=self.errors,
            ttft_p99_ms=percentile(self.ttfts_ms, 99),
            tpot_p99_ms=percentile(self.tpots_ms, 99),
            send_lag_p99_ms=percentile([send_lag_ms(r) for r in recent], 99),
        )


async def _set_within(event: asyncio.Event, delay_s: float) -> bool:
    """Wait up to ``delay_s`` (s) for ``event``; True when it was set."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), delay_s)
    return event.is_set()


__all__ = [
    "CANCELLED_MESSAGE",
    "Item",
    "WindowResult",
    "WindowState",
    "cancelled_by_client",
]
