"""The closed-loop load generator: a fixed number of clients, each with one request in flight.

``measurement.profile: concurrency``. Each of ``concurrency`` clients sends a request, waits
for its response to end, and sends the next at once, so the engine always holds
``concurrency`` of this client's requests (the "closed system" of queueing theory; the
``--max-concurrency`` runs of vLLM's ``bench serve`` with an infinite request rate and
GuideLLM's ``concurrent`` profile offer load the same way). The arrival rate is then what
the engine's speed makes it: it is *measured* (requests sent in the window / window
length) and stored as the window's ``rate_rps``, never set.

There is no schedule: a request's ``scheduled_s`` is the moment its client was free to send
it (its previous request's end), equal to ``sent_s`` up to the event loop's microseconds.
Send lag therefore means nothing here; the summary stores it as null and never flags the
window client-bound. TTFT counts from that send. The sustained check
(:mod:`tokenwatt.analysis.window.window_checks`) still compares the rate requests started being
served with the rate they were sent; in a closed loop a backlog cannot grow past
``concurrency`` requests, so it reads as sustained unless the engine's own queue grows.

The window's timing otherwise follows :func:`tokenwatt.collect.load.loadgen.run_window`: every
client starts at the start of the warm-up; requests sent in ``[warmup_s, warmup_s +
duration_s)`` are ``in_window``; after the window the clients keep sending (so the last
in-window requests do not see an emptying engine) until every in-window request has ended,
at most for the tail cap after the window
(:func:`~tokenwatt.collect.load.window_plan.tail_cap_s`); then every open request is
cancelled, the tail's own not counted, the window's judged at the cap
(:func:`~tokenwatt.collect.load.loadgen.judge_at_cap`: timeouts and censored misses).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Iterator

import aiohttp

from tokenwatt.collect.load.event_loop import held_collections
from tokenwatt.collect.load.http import open_session
from tokenwatt.collect.load.loadconfig import LoadConfig
from tokenwatt.collect.load.loadgen import (
    LEAD_S,
    AtCap,
    judge_at_cap,
    note_tail,
    window_summary,
    window_tail_cap,
)
from tokenwatt.collect.load.window_plan import WindowHooks, WindowPhase, WindowPlan, WindowProgress
from tokenwatt.collect.load.window_state import WindowResult, WindowState, cancelled_by_client
from tokenwatt.collect.workload.workload import RequestSpec
from tokenwatt.errors import InputError, Problem
from tokenwatt.records import MIN_POSITIVE, RequestResult, Spec


class ClosedLoop:
    """The clients of one closed-loop window."""

    def __init__(
        self,
        state: WindowState,
        requests: Iterator[RequestSpec],
        *,
        window_start: float,
        window_end: float,
        keep_load: bool,
    ) -> None:
        self.state = state
        self.requests = requests
        self.window_start = window_start
        self.window_end = window_end
        self.keep_load = keep_load
        self.bodies: dict[int, bytes] = {}
        self.cap_s: float | None = None  # the tail cap, once the window has ended

    def _next(self) -> tuple[RequestResult, bytes] | None:
        """The next request of a free client, or None when the client should stop."""
        state, now = self.state, time.perf_counter()
        if now >= self.window_end and (not self.keep_load or state.window_done.is_set()):
            return None
        spec = next(self.requests, None)
        if spec is None:
            return None
        body = self.bodies.get(id(spec))
        if body is None:  # the same request again (a fixed workload) reuses its body
            self.bodies = {id(spec): state.cfg.body(spec)}
            body = self.bodies[id(spec)]
        in_window = self.window_start <= now < self.window_end
        res = RequestResult(
            scheduled_s=now,
            sent_s=now,
            in_window=in_window,
            prompt_tokens=spec.prompt_tokens or 0,
            max_tokens=spec.max_tokens,
            ignore_eos=state.cfg.ignore_eos,
            prompt_ids_sent=spec.prompt_tokens,
        )
        res.dispatched_s = now
        state.add(res)
        return res, body

    async def client(self) -> None:
        """One client: send, wait for the end of the response, send the next."""
        state = self.state
        while (item := self._next()) is not None:
            res, body = item
            try:
                await state.sender.send(res, body)
            except asyncio.CancelledError:
                cancelled_by_client(res)
                raise
            finally:
                state.finish(res)


async def run_closed_window(
    cfg: LoadConfig,
    plan: WindowPlan,
    requests: Iterator[RequestSpec],
    hooks: WindowHooks | None = None,
    *,
    session: aiohttp.ClientSession | None = None,
) -> WindowResult:
    """Run one closed-loop window: ``plan.concurrency`` clients for ``plan.warmup_s`` +
    ``plan.duration_s``.

    Args:
        cfg: endpoint, model, limits (``cfg.max_concurrency`` must be at least
            ``plan.concurrency``: the connection pool is sized by it).
        plan: the clients (``concurrency``, each with one request in flight, ≥ 1), the
            measured window (``duration_s``, s; the goodput and rate denominator), the
            warm-up (``warmup_s``, s, not summarised), ``keep_load`` (the clients keep
            sending after the window until every in-window request has ended; those extra
            requests are cancelled, not counted) and ``freeze_gc`` (as
            :func:`~tokenwatt.collect.load.loadgen.run_window`); its rate and seed are unused.
        requests: the workload (a finite iterator that runs out stops the clients).
        hooks: ``progress`` (its ``rate_rps`` is the rate measured so far in the window,
            0 before it) and ``interrupt`` (True stops the window: kept, marked stopped
            early, as a signal does in the open loop); ``on_start`` is called before the
            clients' start is fixed; ``stop_early`` is not used.
        session: an aiohttp session to reuse; by default one is opened and closed here.

    Returns:
        A :class:`~tokenwatt.collect.load.loadgen.WindowResult` whose summary has ``profile``
        ``concurrency``, ``concurrency`` set, ``rate_rps`` the measured rate (at least
        1e-9), ``send_lag_p99_ms`` null and ``client_bound`` false.

    Raises:
        ValueError: no ``concurrency``, or one below 1 or above ``cfg.max_concurrency``,
            ``duration_s`` not positive, ``warmup_s`` negative.
        InputError: a request the API cannot take (token ids for chat).
    """
    hooks = hooks or WindowHooks()
    concurrency = plan.concurrency or 0
    duration_s, warmup_s = plan.duration_s, plan.warmup_s
    if not 1 <= concurrency <= cfg.max_concurrency:
        raise ValueError(
            f"concurrency must be between 1 and max_concurrency ({cfg.max_concurrency}), "
            f"got {concurrency}"
        )
    if not duration_s > 0 or not warmup_s >= 0:
        raise ValueError("duration_s must be positive and warmup_s non-negative")
    own_session = session is None
    http = (
        open_session(cfg.max_concurrency, keep_alive=cfg.keep_alive) if session is None else session
    )
    state = WindowState(cfg, http)
    if hooks.on_start is not None:
        hooks.on_start()
    t0 = time.perf_counter() + LEAD_S
    wall_start = time.time() + LEAD_S + warmup_s
    window_start, window_end = t0 + warmup_s, t0 + warmup_s + duration_s
    clients = ClosedLoop(
        state,
        requests,
        window_start=window_start,
        window_end=window_end,
        keep_load=plan.keep_load,
    )
    with held_collections(plan.freeze_gc):
        try:
            stopped, end = await _drive(state, clients, plan, hooks, t0=t0)
        finally:
            await state.sender.close()
            if own_session:
                await http.close()
    at_cap = judge_at_cap(state.window_results, clients.cap_s or 0.0) if not stopped else AtCap()
    measured_s = max(min(end, window_end) - window_start, 1e-3) if stopped else duration_s
    summary = window_summary(
        cfg,
        state.window_results,
        rate_rps=max(len(state.window_results) / measured_s, MIN_POSITIVE),
        duration_s=duration_s,
        stopped=stopped,
        measured_s=measured_s,
    )
    note_tail(
        summary,
        state.results,
        window_end=window_end,
        end=end,
        cap_s=clients.cap_s,
        at_cap=at_cap,
    )
    summary.concurrency = concurrency
    summary.send_lag_p99_ms = None
    summary.client_bound = False
    return WindowResult(
        summary=summary,
        requests=state.results,
        window_start_s=window_start,
        window_end_s=window_end,
        wall_start_unix=wall_start,
    )


async def _drive(
    state: WindowState, clients: ClosedLoop, plan: WindowPlan, hooks: WindowHooks, *, t0: float
) -> tuple[bool, float]:
    """Start the clients at ``t0``, watch the window, wait for its drain; (stopped, end)."""
    loop = asyncio.get_running_loop()
    duration_s, warmup_s = plan.duration_s, plan.warmup_s
    progress, check_interval_s = hooks.progress, hooks.check_interval_s
    await asyncio.sleep(max(0.0, t0 - time.perf_counter()))
    tasks = [loop.create_task(clients.client()) for _ in range(plan.concurrency or 0)]
    window_start, window_end = t0 + warmup_s, t0 + warmup_s + duration_s
    deadline = float("inf")
    next_progress, stopped = 0.0, False
    try:
        while True:
            now = time.perf_counter()
            if now >= window_end and clients.cap_s is None:
                state.mark_dispatched()  # no more in-window sends can come
                # The clients keep sending until the window's requests end, at most until
                # the cap: every one of them still open then has provably missed a limit.
                clients.cap_s = window_tail_cap(state.cfg, state.window_results)
                deadline = window_end + clients.cap_s
            if state.window_done.is_set() or now >= deadline or all(t.done() for t in tasks):
                break
            if hooks.interrupted():
                stopped = True
                break
            if progress is not None and now - t0 >= next_progress:
                next_progress = now - t0 + hooks.progress_interval_s
                total = warmup_s + duration_s
                progress(_snapshot(state, now, t0=t0, window_start=window_start, total=total))
            wake = min(check_interval_s, (deadline if now >= window_end else window_end) - now)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(state.window_done.wait(), max(wake, 1e-3))
        for task in tasks:
            if task.done() and not task.cancelled() and (problem := task.exception()):
                raise problem
        return stopped, time.perf_counter()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _snapshot(
    state: WindowState, now: float, *, t0: float, window_start: float, total: float
) -> WindowProgress:
    elapsed = now - t0
    phase: WindowPhase = (
        "warmup" if now < window_start else "window" if elapsed < total else "drain"
    )
    in_window_s = min(now, t0 + total) - window_start
    rate = len(state.window_results) / in_window_s if in_window_s > 0 else 0.0
    snap = state.snapshot(phase, rate, elapsed, total)
    # No schedule, so no send lag: the display shows none rather than a meaningless 0.
    return dataclasses.replace(snap, send_lag_p99_ms=None)


def closed_loop_workers(spec: Spec, workers: int) -> int:
    """The load-generator processes of a run: ``workers`` for the open loop; 1 for the
    closed loop, whose clients all run in this process for now (splitting them across
    worker processes is not built).

    Raises:
        InputError: a closed-loop spec that asks for more than one worker by number
            (``measurement.workers`` or ``--workers``); ``auto`` quietly gives 1.
    """
    if spec.measurement.profile != "concurrency" or workers <= 1:
        return workers
    if spec.measurement.workers == "auto":
        return 1
    raise InputError(
        [
            Problem(
                "--workers",
                "measurement.workers",
                f"{workers} worker processes cannot drive a closed loop yet (measurement."
                "profile: concurrency runs its clients in one process); use 1 or auto",
            )
        ]
    )


__all__ = ["ClosedLoop", "closed_loop_workers", "run_closed_window"]
