"""The load generator: one measurement window of Poisson arrivals, streamed over HTTP.

Every request's send time is fixed in advance (``arrivals.window_schedule``: by default a
Poisson process conditioned on an exact count in the window), so a client
that falls behind shows up as send lag, not as a lower rate. Requests stream
``/v1/completions`` (or ``/v1/chat/completions``) with ``stream_options.include_usage``,
exact ``max_tokens`` and ``ignore_eos``; each keeps its raw timings in a
:class:`~tokenwatt.records.run.request.RequestResult`, summarised by
:func:`tokenwatt.analysis.window.latency.summarise_window`.

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

Send times: see :mod:`tokenwatt.collect.load.window_state`, whose dispatch loop this
module and every worker process share.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import aiohttp
import numpy as np
import numpy.typing as npt

from tokenwatt.analysis import bunched_sends_warning, send_gaps_ks_p, summarise_window
from tokenwatt.collect.load.arrivals import load_schedule
from tokenwatt.collect.load.event_loop import held_collections
from tokenwatt.collect.load.http import open_session
from tokenwatt.collect.load.loadconfig import LoadConfig
from tokenwatt.collect.load.sends import send_wait
from tokenwatt.collect.load.window_plan import (
    WindowHooks,
    WindowPhase,
    WindowPlan,
    WindowProgress,
    tail_cap_s,
)
from tokenwatt.collect.load.window_state import Item, WindowResult, WindowState
from tokenwatt.collect.workload.workload import RequestSpec
from tokenwatt.records import RequestResult, WindowSummary

LEAD_S = 0.05
"""Seconds from entering :func:`run_window` to the start of its schedule (the warm-up), so
the first send is on time; the instruments time their window from the same constant."""


CENSORED = "censored"
"""Error kind of an in-window request still streaming when the tail cap cut it: a censored
observation, counted as a miss (methods/goodput.md, "The tail")."""


def window_tail_cap(cfg: LoadConfig, window_results: Sequence[RequestResult]) -> float:
    """The tail cap (s) of a window whose in-window requests are ``window_results``
    (:func:`~tokenwatt.collect.load.window_plan.tail_cap_s` with their largest
    ``max_tokens``; a request whose ``max_tokens`` is unknown leaves only the timeout)."""
    asked = [r.max_tokens for r in window_results]
    n = None if not asked or None in asked else max(a for a in asked if a is not None)
    return tail_cap_s(cfg.request_timeout_s, cfg.slo, n)


@dataclass(frozen=True)
class AtCap:
    """The in-window requests still open at the tail cap: ``cut`` in all, ``censored``
    of them still streaming."""

    cut: int = 0
    censored: int = 0


def judge_at_cap(window_results: Sequence[RequestResult], cap_s: float) -> AtCap:
    """In a window that ran to its end (not stopped), judge every in-window request the
    client cancelled when the tail ended (error ``cancelled``) by what is known: no first
    token yet is a ``timeout`` (past the TTFT limit, :func:`~tokenwatt.collect.load.
    window_plan.tail_cap_s`); still streaming is :data:`CENSORED`. Both are failures, so
    they count as infinitely slow and as misses. ``cap_s`` (s) goes in their message."""
    cut = censored = 0
    for res in window_results:
        if res.error != "cancelled":
            continue
        cut += 1
        if res.first_token_s is None:
            res.error, res.error_class = "timeout", "TimeoutError"
            res.error_message = (
                f"no first token within the window's {cap_s:.3g} s tail cap: past the TTFT limit"
            )
        else:
            censored += 1
            res.error, res.error_class = CENSORED, "Censored"
            res.error_message = (
                f"still streaming at the window's {cap_s:.3g} s tail cap: past the TTFT or "
                "the TPOT limit (censored, counted as a miss)"
            )
    return AtCap(cut=cut, censored=censored)


def note_tail(
    summary: WindowSummary,
    requests: Sequence[RequestResult],
    *,
    window_end: float,
    end: float,
    cap_s: float | None,
    at_cap: AtCap,
) -> None:
    """Write the tail's record into ``summary``: its length (``end − window_end``, s, at
    least 0), its cap, the requests sent in it and the in-window ones cut at the cap."""
    summary.tail_s = round(max(end - window_end, 0.0), 6)
    summary.tail_cap_s = cap_s
    summary.tail_arrivals = sum(
        1 for r in requests if not r.in_window and r.scheduled_s >= window_end
    )
    summary.cancelled_at_cap = at_cap.cut
    summary.censored = at_cap.censored


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
    stop, at least 1 ms) instead of ``duration_s``. Call :func:`judge_at_cap` first on a
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
    plan: WindowPlan,
    requests: Iterator[RequestSpec],
    hooks: WindowHooks | None = None,
    *,
    session: aiohttp.ClientSession | None = None,
) -> WindowResult:
    """Run one open-loop window: ``plan.warmup_s`` of load, then ``plan.duration_s``
    measured, then the drain.

    Requests whose scheduled offset falls in ``[warmup_s, warmup_s + duration_s)`` are
    ``in_window`` and summarised; the window waits for them to finish, at most for the tail
    cap after its end (:func:`~tokenwatt.collect.load.window_plan.tail_cap_s`). While it
    waits, arrivals go on at the same rate (``plan.keep_load``) so the last requests do not
    see an emptying server; those extra requests are cancelled at the end and not counted.
    At the cap, arrivals stop and every open request is cancelled; the window's own are
    judged by :func:`judge_at_cap` (timeouts and censored misses). The summary keeps the
    tail's length, cap, arrivals and cuts (:func:`note_tail`).

    Args:
        cfg: endpoint, model, limits.
        plan: rate (req/s; with ``cfg.arrivals`` ``conditioned`` the window gets exactly
            ``round(rate_rps × duration_s)`` arrivals), lengths, seed and sending knobs.
        requests: the workload (consumed one request per arrival; a finite iterator that
            runs out ends the arrivals early).
        hooks: progress, early stop and interrupt (``on_start`` is called right before the
            schedule's start is fixed).
        session: an aiohttp session to reuse; by default one is opened and closed here.

    Returns:
        A :class:`WindowResult`.

    Raises:
        ValueError: ``rate_rps`` or ``duration_s`` not positive, ``warmup_s`` negative.
        InputError: a request the API cannot take (token ids for chat).
    """
    plan.check_open_loop()
    return await OpenWindow(cfg, plan, requests, hooks or WindowHooks(), session).run()


class OpenWindow:
    """One open-loop window on this event loop (:func:`run_window` runs it): the seeded
    schedule, the dispatch (:meth:`WindowState.dispatch`), the watch for progress, early
    stop and interrupt, the drain, and the summary."""

    def __init__(
        self,
        cfg: LoadConfig,
        plan: WindowPlan,
        requests: Iterator[RequestSpec],
        hooks: WindowHooks,
        session: aiohttp.ClientSession | None,
    ) -> None:
        self.cfg, self.plan, self.requests, self.hooks = cfg, plan, requests, hooks
        self.offsets: npt.NDArray[np.float64] = load_schedule(
            plan.rate_rps,
            warmup_s=plan.warmup_s,
            duration_s=plan.duration_s,
            tail_s=cfg.request_timeout_s if plan.keep_load else 0.0,
            seed=plan.seed,
            arrivals=cfg.arrivals,
            profile=cfg.profile,
        )
        self.end_offset = plan.warmup_s + plan.duration_s
        self.own_session = session is None
        self.http = session or open_session(cfg.max_concurrency, keep_alive=cfg.keep_alive)
        self.state = WindowState(cfg, self.http)
        self.stopped = False
        self.t0 = 0.0
        self.cap_s: float | None = None
        self._pending_items = self._items()

    @property
    def window_start(self) -> float:
        """The measured window's start (s, ``time.perf_counter``)."""
        return self.t0 + self.plan.warmup_s

    @property
    def window_end(self) -> float:
        """The measured window's end (s, ``time.perf_counter``)."""
        return self.t0 + self.end_offset

    async def run(self) -> WindowResult:
        """Send, watch, drain and summarise the window (see :func:`run_window`)."""
        if self.hooks.on_start is not None:
            self.hooks.on_start()
        self.t0 = time.perf_counter() + LEAD_S
        wall_start = time.time() + LEAD_S + self.plan.warmup_s
        # A full collection would scan every object alive (the imports alone make that tens
        # of milliseconds), and the window's results as they grow: event_loop's docstring.
        with held_collections(self.plan.freeze_gc):
            try:
                end = await self._send_and_drain()
            finally:
                await self.state.sender.close()
                if self.own_session:
                    await self.http.close()
        at_cap = AtCap()
        if not self.stopped:
            at_cap = judge_at_cap(self.state.window_results, self.cap_s or 0.0)
        summary = window_summary(
            self.cfg,
            self.state.window_results,
            rate_rps=self.plan.rate_rps,
            duration_s=self.plan.duration_s,
            stopped=self.stopped,
            measured_s=min(end, self.window_end) - self.window_start,
        )
        note_tail(
            summary,
            self.state.results,
            window_end=self.window_end,
            end=end,
            cap_s=self.cap_s,
            at_cap=at_cap,
        )
        return WindowResult(
            summary=summary,
            requests=self.state.results,
            window_start_s=self.window_start,
            window_end_s=self.window_end,
            wall_start_unix=wall_start,
        )

    async def _send_and_drain(self) -> float:
        """Dispatch, watch and wait for the window's requests; cancel whatever is still
        running (also on errors and Ctrl-C). Returns when the window ended (s)."""
        state, loop = self.state, asyncio.get_running_loop()
        dispatcher = loop.create_task(
            state.dispatch(
                self._next_item,
                t0=self.t0,
                window_end_offset=self.end_offset,
                stop=state.window_done,
                sends=send_wait(self.plan.send_timer, self.plan.send_spin_s),
            )
        )
        watcher = loop.create_task(self._monitor(dispatcher))
        dispatched = loop.create_task(state.dispatched.wait())
        try:
            # Until every in-window request is out (or a stop, or a callback that raised);
            # asyncio.wait returns, rather than raises, when stop_early cancels the dispatcher.
            await asyncio.wait({dispatched, watcher}, return_when=asyncio.FIRST_COMPLETED)
            _raise_failure(watcher)  # a progress or stop_early callback that raised
            if dispatcher.done():
                _raise_failure(dispatcher)
            if not self.stopped:
                # Past the window, the tail goes on until its requests end or the cap;
                # every one of them still open then has provably missed a limit.
                self.cap_s = window_tail_cap(self.cfg, state.window_results)
                await self._drain(watcher, self.window_end + self.cap_s)
            if dispatcher.done():
                _raise_failure(dispatcher)
            return time.perf_counter()
        finally:
            # At the cap, on a stop, on errors and Ctrl-C: arrivals stop, and every open
            # request is cancelled (its connection closed, which the engine sees as an abort).
            for task in (dispatcher, watcher, dispatched):
                task.cancel()
            leftover = list(state.tasks)
            for task in leftover:
                task.cancel()
            await asyncio.gather(*leftover, watcher, dispatcher, dispatched, return_exceptions=True)
            state.close_unstarted()

    async def _drain(self, watcher: asyncio.Task[None], deadline: float) -> None:
        """Wait until every in-window request has ended, the watcher stops the window, or
        ``deadline`` (s, ``time.perf_counter``)."""
        waiter = asyncio.get_running_loop().create_task(self.state.window_done.wait())
        try:
            await asyncio.wait(
                {waiter, watcher},
                timeout=max(deadline - time.perf_counter(), 0.0),
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            waiter.cancel()
        _raise_failure(watcher)

    def _items(self) -> Iterator[Item]:
        """The schedule's arrivals with their requests, drawn from the workload as they
        are reached (none is drawn once the window is done, nor past the workload's end)."""
        state, end_offset, cfg = self.state, self.end_offset, self.cfg
        last_spec: RequestSpec | None = None
        body = b""
        for seq, offset in enumerate(self.offsets.tolist()):
            if offset >= end_offset:
                state.mark_dispatched()
                if state.window_done.is_set():
                    return
            spec = next(self.requests, None)
            if spec is None:
                return
            if spec is not last_spec:  # the same request again (a fixed workload): reuse
                body, last_spec = cfg.body(spec), spec
            yield Item(
                seq,
                offset,
                self.plan.warmup_s <= offset < end_offset,
                body,
                spec.prompt_tokens or 0,
                spec.max_tokens,
                spec.prompt_tokens,
                spec.text_tokens,
            )

    async def _next_item(self) -> Item | None:
        return next(self._pending_items, None)

    async def _monitor(self, dispatcher: asyncio.Task[None]) -> None:
        """Every ``check_interval_s``: progress, then the interrupt and early-stop checks;
        a stop cancels the dispatcher and releases the drain."""
        hooks, plan, state = self.hooks, self.plan, self.state
        next_progress = 0.0
        total = plan.warmup_s + plan.duration_s
        while True:
            await asyncio.sleep(hooks.check_interval_s)
            now = time.perf_counter()
            elapsed = now - self.t0
            phase: WindowPhase = (
                "warmup"
                if now < self.window_start
                else "window"
                if now < self.window_end
                else "drain"
            )
            if hooks.progress is not None and elapsed >= next_progress:
                next_progress = elapsed + hooks.progress_interval_s
                hooks.progress(state.snapshot(phase, plan.rate_rps, elapsed, total))
            if hooks.interrupted() or (
                hooks.stop_early is not None
                and phase != "warmup"
                and hooks.stop_early(list(state.window_results), now - self.window_start)
            ):
                self.stopped = True
                dispatcher.cancel()
                state.window_done.set()
                return


def _raise_failure(task: asyncio.Task[None]) -> None:
    if task.done() and not task.cancelled() and (problem := task.exception()) is not None:
        raise problem


__all__ = [
    "CENSORED",
    "LEAD_S",
    "AtCap",
    "LoadConfig",
    "OpenWindow",
    "WindowHooks",
    "WindowPlan",
    "WindowProgress",
    "WindowResult",
    "judge_at_cap",
    "note_tail",
    "run_window",
    "window_summary",
    "window_tail_cap",
]
