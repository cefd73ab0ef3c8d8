"""The load generator: one measurement window of Poisson arrivals, streamed over HTTP.

Every request's send time is fixed in advance (``arrivals.window_schedule``: by default a
Poisson process conditioned on an exact count in the window), so a client
that falls behind shows up as send lag, not as a lower rate. Requests stream
``/v1/completions`` (or ``/v1/chat/completions``) with ``stream_options.include_usage``,
exact ``max_tokens`` and ``ignore_eos``; each keeps its raw timings in a
:class:`~tokenwatt.records.request.RequestResult`, summarised by
:func:`tokenwatt.analysis.latency.summarise_window`.

HTTP client: aiohttp (one ``ClientSession``, HTTP/1.1 keep-alive, a pool of
``max_concurrency`` connections). httpx was measured first and streamed at most about 850
req/s on one core against an instant server, below the 1,100 req/s target; aiohttp about
5,000 (``benchmarks/loadgen.py``). Sending, transport retries and error detail are in
:mod:`tokenwatt.collect.load.http`.

Spurious ``connect`` errors against llama.cpp's server (issue 8) were not the engine: its
server closes the connection about 1 ms after every streamed response while advertising
keep-alive, and aiohttp reused such a connection when a request was dispatched in that
millisecond ("Can not write request body", or "Server disconnected"; 5–10 in 1,500
requests at 20 req/s, each on a connection idle 0.1–0.4 ms — not the 5 s keep-alive
timeout). Requests to such a server now go on fresh connections, idle connections are kept
4 s (below common servers' 5 s), and a request that provably never reached the server is
sent again and counted as a transport retry (details in :mod:`tokenwatt.collect.load.http`).

Send times: the dispatcher creates each request's task 1.5 ms before its scheduled time,
and the task itself waits the rest with :func:`~tokenwatt.collect.load.arrivals.sleep_until`
(yielding to the loop, then a 0.3 ms busy wait) and sends at once: sends are not bunched on
the selector's millisecond ticks, nor delayed by a hop through the loop's queue
(``benchmarks/wire_arrivals.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import aiohttp

from tokenwatt.analysis import (
    bunched_sends_warning,
    percentile,
    send_gaps_ks_p,
    send_lag_ms,
    summarise_window,
    tpot_ms,
    ttft_ms,
)
from tokenwatt.collect.load.arrivals import SEND_SPIN_S, load_schedule, sleep_until
from tokenwatt.collect.load.http import Sender, fail, open_session
from tokenwatt.collect.load.loadconfig import LoadConfig
from tokenwatt.collect.workload.workload import RequestSpec
from tokenwatt.records import RequestResult, WindowSummary

Phase = Literal["warmup", "window", "drain"]
LEAD_S = 0.05
"""Seconds from entering :func:`run_window` to the start of its schedule (the warm-up), so
the first send is on time; the instruments time their window from the same constant."""
_CANCELLED = "cancelled by the client (early stop, or the end of the keep-load tail)"


@dataclass(frozen=True)
class WindowProgress:
    """A snapshot for a live display (latencies in ms; ``math.inf`` when failures reach p99).

    ``elapsed_s`` counts from the start of the warm-up; ``total_s`` is warm-up + window.
    TTFT and TPOT p99 are over the in-window requests finished so far (None before any);
    send-lag p99 over the latest 2,000 requests sent.
    """

    phase: Phase
    rate_rps: float
    elapsed_s: float
    total_s: float
    sent: int
    in_flight: int
    completed: int
    errors: int
    ttft_p99_ms: float | None
    tpot_p99_ms: float | None
    send_lag_p99_ms: float | None


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
        res.error, res.error_class, res.error_message = ("cancelled", "CancelledError", _CANCELLED)


def _raise_failure(task: asyncio.Task[None]) -> None:
    if task.done() and not task.cancelled() and (problem := task.exception()) is not None:
        raise problem


class _Window:
    """The state of one running window (internal)."""

    def __init__(self, cfg: LoadConfig, session: aiohttp.ClientSession) -> None:
        self.cfg = cfg
        self.sender = Sender(
            session,
            cfg.url,
            cfg.headers(),
            cfg.request_timeout_s,
            cfg.max_concurrency,
            keep_alive=cfg.keep_alive,
            secrets=(cfg.api_key,) if cfg.api_key else (),
        )
        self.slots = asyncio.Semaphore(cfg.max_concurrency)
        self.results: list[RequestResult] = []
        self.window_results: list[RequestResult] = []
        self.tasks: set[asyncio.Task[None]] = set()
        self.window_pending = 0
        self.window_dispatched = False
        self.window_done = asyncio.Event()
        self.completed = 0
        self.errors = 0
        self.ttfts_ms: list[float] = []
        self.tpots_ms: list[float] = []

    async def request(self, res: RequestResult, body: bytes, spin_s: float) -> None:
        try:
            # The request's own task waits out the last moments before its send time, so
            # the send follows at once: no hop through the dispatcher and the loop's queue.
            await sleep_until(res.scheduled_s, spin_s=spin_s)
            res.dispatched_s = time.perf_counter()
            # The timeout counts from the scheduled time and covers the wait for a slot:
            # an overloaded server fills every slot, and a request queued behind them must
            # still end at its timeout (E2E = timeout), not when a slot frees up.
            deadline = res.scheduled_s + self.cfg.request_timeout_s
            if not await self._slot(deadline - res.dispatched_s):
                fail(res, "timeout", TimeoutError(), message=self._no_slot)
                return
            try:
                res.sent_s = time.perf_counter()
                await self.sender.send(res, body, budget_s=deadline - res.sent_s)
            finally:
                self.slots.release()
        except asyncio.CancelledError:
            cancelled_by_client(res)
            raise
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

    @property
    def _no_slot(self) -> str:
        return (
            f"no concurrency slot (measurement.max_concurrency {self.cfg.max_concurrency}) "
            f"within the {self.cfg.request_timeout_s:g} s request timeout: never sent"
        )

    async def _slot(self, budget_s: float) -> bool:
        """Take a concurrency slot within ``budget_s`` (s); False when none came."""
        try:
            async with asyncio.timeout(max(budget_s, 0.0)):
                await self.slots.acquire()
        except TimeoutError:
            return False
        return True

    def snapshot(self, phase: Phase, rate: float, elapsed: float, total: float) -> WindowProgress:
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


def drain_ran_out(window_results: Sequence[RequestResult]) -> None:
    """In a window that ran to its end (not stopped), a request the client cancelled was
    still unanswered when the drain ran out: it becomes a ``timeout``."""
    for res in window_results:
        if res.error == "cancelled":
            res.error, res.error_class = "timeout", "TimeoutError"
            res.error_message = "still unanswered when the window's drain ran out"


def window_summary(
    cfg: LoadConfig,
    window_results: Sequence[RequestResult],
    *,
    rate_rps: float,
    duration_s: float,
    stopped: bool,
    measured_s: float,
) -> WindowSummary:
    """The summary of a finished window's in-window requests (one process's or the union
    of every worker's: the same function, so the merge is exact).

    A stopped window's length is ``measured_s`` (the time from the window's start to the
    stop, at least 1 ms) instead of ``duration_s``. Call :func:`drain_ran_out` first on a
    window that was not stopped.
    """
    summary = summarise_window(
        window_results,
        rate_rps=rate_rps,
        duration_s=max(measured_s, 1e-3) if stopped else duration_s,
        slo=cfg.slo,
        stopped_early=stopped,
        count_tokens=cfg.count_tokens,
    )
    summary.profile = cfg.profile
    summary.arrivals = cfg.arrivals if cfg.profile == "poisson" else None
    if cfg.profile == "poisson":
        summary.send_gaps_ks_p = send_gaps_ks_p(window_results, rate_rps)
        bunched = bunched_sends_warning(
            summary.send_gaps_ks_p, rate_rps, summary.send_lag_p99_ms or 0.0
        )
        if bunched:
            summary.warnings.append(bunched)
    return summary


async def run_window(
    cfg: LoadConfig,
    *,
    rate_rps: float,
    duration_s: float,
    warmup_s: float,
    requests: Iterator[RequestSpec],
    seed: int,
    progress: Callable[[WindowProgress], None] | None = None,
    stop_early: Callable[[Sequence[RequestResult], float], bool] | None = None,
    progress_interval_s: float = 1.0,
    check_interval_s: float = 0.5,
    keep_load_until_done: bool = True,
    session: aiohttp.ClientSession | None = None,
    freeze_gc: bool = True,
    send_spin_s: float = SEND_SPIN_S,
    interrupt: Callable[[], bool] | None = None,
) -> WindowResult:
    """Run one window: ``warmup_s`` of load, then ``duration_s`` measured, then the drain.

    Requests whose scheduled offset falls in ``[warmup_s, warmup_s + duration_s)`` are
    ``in_window`` and summarised; the window waits for them to finish (at most
    ``request_timeout_s`` after its end; stragglers then count as timeouts). While it waits,
    arrivals go on at the same rate (``keep_load_until_done``) so the last requests do not
    see an emptying server; those extra requests are cancelled at the end and not counted.

    Args:
        cfg: endpoint, model, limits.
        rate_rps: Poisson arrival rate (req/s); with ``cfg.arrivals`` ``conditioned`` the
            window gets exactly ``round(rate_rps × duration_s)`` arrivals.
        duration_s: measured window (s); the goodput denominator.
        warmup_s: load before the window (s), not summarised.
        requests: the workload (consumed one request per arrival; a finite iterator that
            runs out ends the arrivals early).
        seed: seed of the arrival schedule.
        progress: called every ``progress_interval_s`` with a :class:`WindowProgress`.
        stop_early: called every ``check_interval_s`` during the window and the drain with
            the in-window requests sent so far (finished or not) and the seconds since the
            window started; True stops the probe (``summary.stopped_early``), cancelling
            requests in flight (error ``cancelled``).
        session: an aiohttp session to reuse; by default one is opened and closed here.
        freeze_gc: ``gc.freeze()`` for the window, so that a full garbage collection does
            not scan the objects alive before it (a 200 ms pause was seen without).
        send_spin_s: how long before each send time the dispatcher stops sleeping and
            yields to the loop until it (s); 0 gives millisecond-bunched sends
            (:func:`~tokenwatt.collect.load.arrivals.sleep_until`).
        interrupt: called every ``check_interval_s`` in every phase, warm-up included; True
            stops the window as ``stop_early`` does (a signal asked the run to stop).

    Returns:
        A :class:`WindowResult`.

    Raises:
        ValueError: ``rate_rps`` or ``duration_s`` not positive, ``warmup_s`` negative.
        InputError: a request the API cannot take (token ids for chat).
    """
    if not rate_rps > 0 or not duration_s > 0 or not warmup_s >= 0:
        raise ValueError("rate_rps and duration_s must be positive and warmup_s non-negative")
    tail_s = cfg.request_timeout_s if keep_load_until_done else 0.0
    offsets = load_schedule(
        rate_rps,
        warmup_s=warmup_s,
        duration_s=duration_s,
        tail_s=tail_s,
        seed=seed,
        arrivals=cfg.arrivals,
        profile=cfg.profile,
    )
    window_end_offset = warmup_s + duration_s
    own_session = session is None
    http = (
        open_session(cfg.max_concurrency, keep_alive=cfg.keep_alive) if session is None else session
    )
    state = _Window(cfg, http)
    loop = asyncio.get_running_loop()
    t0 = time.perf_counter() + LEAD_S
    wall_start = time.time() + LEAD_S + warmup_s
    window_start = t0 + warmup_s
    window_end = t0 + window_end_offset
    stopped = False

    def window_dispatched() -> None:
        if not state.window_dispatched:
            state.window_dispatched = True
            if state.window_pending == 0:
                state.window_done.set()

    async def dispatch() -> None:
        try:
            await send_all()
        finally:
            window_dispatched()

    async def send_all() -> None:
        clock = time.perf_counter
        last_spec: RequestSpec | None = None
        body = b""
        for offset in offsets.tolist():
            in_window = warmup_s <= offset < window_end_offset
            if offset >= window_end_offset:
                window_dispatched()
                if state.window_done.is_set():
                    return
            spec = next(requests, None)
            if spec is None:
                return
            if spec is not last_spec:  # the same request again (a fixed workload): reuse
                body, last_spec = cfg.body(spec), spec
            target = t0 + offset
            delay = target - clock()
            if delay > 0:
                if offset >= window_end_offset:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(state.window_done.wait(), delay)
                    if state.window_done.is_set():
                        return
                elif delay > send_spin_s:
                    await asyncio.sleep(delay - send_spin_s)
            res = RequestResult(
                scheduled_s=target,
                in_window=in_window,
                prompt_tokens=spec.prompt_tokens or 0,
                max_tokens=spec.max_tokens,
                ignore_eos=cfg.ignore_eos,
                prompt_ids_sent=spec.prompt_tokens,
                prompt_text_tokens=spec.text_tokens,
            )
            state.results.append(res)
            if in_window:
                state.window_results.append(res)
                state.window_pending += 1
            task = loop.create_task(state.request(res, body, send_spin_s))
            state.tasks.add(task)
            task.add_done_callback(state.tasks.discard)

    async def monitor(dispatcher: asyncio.Task[None]) -> None:
        nonlocal stopped
        next_progress = 0.0
        total = warmup_s + duration_s
        while True:
            await asyncio.sleep(check_interval_s)
            now = time.perf_counter()
            elapsed = now - t0
            phase: Phase = (
                "warmup" if now < window_start else "window" if now < window_end else "drain"
            )
            if progress is not None and elapsed >= next_progress:
                next_progress = elapsed + progress_interval_s
                progress(state.snapshot(phase, rate_rps, elapsed, total))
            if (interrupt is not None and interrupt()) or (
                stop_early is not None
                and phase != "warmup"
                and stop_early(list(state.window_results), now - window_start)
            ):
                stopped = True
                dispatcher.cancel()
                state.window_done.set()
                return

    if freeze_gc:
        # A full collection scans every object alive; the imports alone make that tens of
        # milliseconds here, long enough to delay sends. Frozen objects are not scanned.
        gc.freeze()
    dispatcher = loop.create_task(dispatch())
    watcher = loop.create_task(monitor(dispatcher))
    try:
        # asyncio.wait returns, rather than raises, when stop_early cancels the dispatcher.
        await asyncio.wait({dispatcher, watcher}, return_when=asyncio.FIRST_COMPLETED)
        _raise_failure(watcher)  # a progress or stop_early callback that raised
        await asyncio.wait({dispatcher})
        _raise_failure(dispatcher)
        if not stopped:
            # Every in-window request ends by its scheduled time + the timeout (slot wait
            # included), so this deadline is a safety net.
            remaining = window_end + cfg.request_timeout_s - time.perf_counter()
            waiter = loop.create_task(state.window_done.wait())
            try:
                await asyncio.wait(
                    {waiter, watcher},
                    timeout=max(remaining, 0.0),
                    return_when=asyncio.FIRST_COMPLETED,
                )
            finally:
                waiter.cancel()
            _raise_failure(watcher)
        end = time.perf_counter()
    finally:
        # Also on errors and Ctrl-C: nothing is left running, the session is closed.
        dispatcher.cancel()
        watcher.cancel()
        leftover = list(state.tasks)
        for task in leftover:
            task.cancel()
        await asyncio.gather(*leftover, watcher, dispatcher, return_exceptions=True)
        await state.sender.close()
        if own_session:
            await http.close()
        if freeze_gc:
            gc.unfreeze()
    if not stopped:
        drain_ran_out(state.window_results)
    summary = window_summary(
        cfg,
        state.window_results,
        rate_rps=rate_rps,
        duration_s=duration_s,
        stopped=stopped,
        measured_s=min(end, window_end) - window_start,
    )
    return WindowResult(
        summary=summary,
        requests=state.results,
        window_start_s=window_start,
        window_end_s=window_end,
        wall_start_unix=wall_start,
    )


__all__ = [
    "LEAD_S",
    "LoadConfig",
    "WindowProgress",
    "WindowResult",
    "drain_ran_out",
    "run_window",
    "window_summary",
]
