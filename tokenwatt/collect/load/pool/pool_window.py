"""The parent's side of one window sent by worker processes (:class:`PoolWindow`).

Used by :class:`tokenwatt.collect.load.pool.workers.WorkerPool` (the design is in its module): feeds
each worker its round-robin share of the schedule with pre-built bodies, fixes ``t0``,
watches the merged progress for the early stop, the signal's interrupt and the end of the
drain, tells every worker to end, and merges their results into one
:class:`~tokenwatt.collect.load.loadgen.WindowResult`.

It talks to each worker through a :class:`WorkerLink`: a process's two pipe ends
(:class:`~tokenwatt.collect.load.pool.workers.WorkerHandle`) or a Ray actor's proxy
(:class:`~tokenwatt.collect.load.pool.ray_pool.ActorLink`); only the transport differs.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from tokenwatt.analysis import BUNCHED_PREFIX, percentile, tpot_ms, ttft_ms, worker_lags
from tokenwatt.collect.load.loadconfig import LoadConfig
from tokenwatt.collect.load.loadgen import (
    LEAD_S,
    AtCap,
    judge_at_cap,
    note_tail,
    window_summary,
    window_tail_cap,
)
from tokenwatt.collect.load.pool.worker_proc import Update, worker_job
from tokenwatt.collect.load.window_plan import WindowHooks, WindowPhase, WindowPlan, WindowProgress
from tokenwatt.collect.load.window_state import Item, WindowResult
from tokenwatt.collect.workload.workload import RequestSpec
from tokenwatt.errors import TokenwattError
from tokenwatt.records import RequestResult, WindowSummary

POLL_S = 0.02
"""Longest the parent waits for a worker's message before feeding and checking again (s)."""
END_TIMEOUT_S = 10.0
"""Longest wait for a worker's results after ``end`` (s); one still silent is killed."""
ABORT_TIMEOUT_S = 2.0
"""The same wait when the window is abandoned (Ctrl-C, an error in the parent)."""
WORKER_DIED = "worker_died"
"""``failure_reason`` of a window in which a worker process died or failed."""


class WorkerSender(Protocol):
    """Where messages to a worker go (a pipe end, or a Ray actor's proxy)."""

    def send(self, obj: Any) -> None:
        """Hand ``obj`` to the worker. Raises OSError when the worker is gone."""


class WorkerLink(Protocol):
    """One worker as :class:`PoolWindow` sees it.

    ``send`` takes the messages of :mod:`tokenwatt.collect.load.pool.worker_proc`'s protocol.

    Attributes:
        worker: the worker's number (arrival i goes to worker i mod N).
        recv: the worker's messages, on a real pipe end (for
            :func:`multiprocessing.connection.wait`), times on the parent's clock.
    """

    worker: int
    recv: Connection

    @property
    def send(self) -> WorkerSender:
        """Messages to the worker."""

    @property
    def sentinel(self) -> Any:
        """Something :func:`multiprocessing.connection.wait` sees ready once the worker is
        gone (a process sentinel, a pipe end)."""

    def alive(self) -> bool:
        """True while the worker can still take messages."""

    def kill(self) -> None:
        """End the worker now (bounded)."""

    def how_ended(self) -> str:
        """How a gone worker ended, in a few words (``exit status -9``, ``no answer``)."""


class WorkerStartError(TokenwattError):
    """A load-generator worker process did not get ready for a window in time."""


@dataclass
class WorkerSeen:
    """What the parent knows of one worker in this window."""

    counters: Update | None = None
    done: bool = False
    final: list[tuple[int, RequestResult]] | None = None
    failure: str | None = None


@dataclass
class MergedSoFar:
    """The in-window requests as the workers reported them so far."""

    view: dict[int, RequestResult] = field(default_factory=dict)  # placeholders, then news
    full: dict[int, RequestResult] = field(default_factory=dict)  # finished, in full
    ttfts_ms: list[float] = field(default_factory=list)
    tpots_ms: list[float] = field(default_factory=list)
    lags_ms: deque[float] = field(default_factory=lambda: deque(maxlen=2000))


class PoolWindow:
    """One window sent by the workers behind ``handles`` (see the module docstring)."""

    def __init__(
        self,
        cfg: LoadConfig,
        handles: Sequence[WorkerLink],
        plan: WindowPlan,
        *,
        offsets: npt.NDArray[np.float64],
        requests: Iterator[RequestSpec],
        feed_ahead_s: float,
    ) -> None:
        self.cfg = cfg
        self.plan = plan
        self.handles = list(handles)
        self.n = len(self.handles)
        self.offsets = offsets.tolist()
        self.requests = requests
        self.rate_rps = plan.rate_rps
        self.warmup_s = plan.warmup_s
        self.duration_s = plan.duration_s
        self.window_end_offset = plan.warmup_s + plan.duration_s
        self.feed_ahead_s = feed_ahead_s
        self.seen = [WorkerSeen() for _ in self.handles]
        self.merged = MergedSoFar()
        self.meta: dict[int, Item] = {}  # in-window items handed out (bodies dropped)
        self.next = 0
        self.fed_all = False
        self.last_spec: RequestSpec | None = None
        self.body = b""
        self.t0: float | None = None
        self.wall_start = 0.0
        self.end_s = 0.0
        self.cap_s: float | None = None  # the tail cap, once the window has ended
        self.stopped = False

    # --- before t0 ---

    def prepare(self, *, ready_timeout_s: float) -> None:
        """Hand every worker its job, wait until all are ready, feed the first bodies.

        Raises:
            WorkerStartError: a worker died or stayed silent for ``ready_timeout_s``.
        """
        for k, handle in enumerate(self.handles):
            job = worker_job(
                self.cfg,
                k,
                self.n,
                window_end_offset=self.window_end_offset,
                send_spin_s=self.plan.send_spin_s,
                send_timer=self.plan.send_timer,
                event_loop=self.plan.event_loop,
                freeze_gc=self.plan.freeze_gc,
            )
            handle.send.send(("prepare", job))
        waiting = set(range(self.n))
        deadline = time.monotonic() + ready_timeout_s
        while waiting and time.monotonic() < deadline:
            handles = [self.handles[k] for k in waiting]
            wait([h.recv for h in handles] + [h.sentinel for h in handles], POLL_S * 5)
            for k in list(waiting):
                handle = self.handles[k]
                with contextlib.suppress(EOFError, OSError):
                    while handle.recv.poll():
                        if handle.recv.recv()[0] == "ready":
                            waiting.discard(k)
                if k in waiting and not handle.alive():
                    raise WorkerStartError(f"load-generator worker {k} exited before the window")
        if waiting:
            raise WorkerStartError(
                f"load-generator workers {sorted(waiting)} were not ready within "
                f"{ready_timeout_s:g} s"
            )
        self._feed(self.feed_ahead_s)

    def go(self) -> None:
        """Fix the shared start time (``LEAD_S`` from now) and send it to every worker."""
        self.t0 = time.perf_counter() + LEAD_S
        self.wall_start = time.time() + LEAD_S + self.warmup_s
        for handle in self.handles:
            handle.send.send(("go", self.t0))
        for index, item in self.meta.items():
            self._placeholder(index, item)

    # --- feeding ---

    def _feed(self, until_offset: float) -> None:
        """Draw and hand out every arrival scheduled before ``until_offset`` (s)."""
        if self.fed_all:
            return
        batches: list[list[Item]] = [[] for _ in range(self.n)]
        while self.next < len(self.offsets) and self.offsets[self.next] < until_offset:
            spec = next(self.requests, None)
            if spec is None:
                self.fed_all = True
                break
            if spec is not self.last_spec:  # the same request again (a fixed workload)
                self.body, self.last_spec = self.cfg.body(spec), spec
            i, offset = self.next, self.offsets[self.next]
            in_window = self.warmup_s <= offset < self.window_end_offset
            item = Item(
                i,
                offset,
                in_window,
                self.body,
                spec.prompt_tokens or 0,
                spec.max_tokens,
                spec.prompt_tokens,
                spec.text_tokens,
            )
            batches[i % self.n].append(item)
            if in_window:
                self.meta[i] = item._replace(body=b"")
                if self.t0 is not None:
                    self._placeholder(i, item)
            self.next += 1
        if self.next >= len(self.offsets):
            self.fed_all = True
        for k, batch in enumerate(batches):
            if batch:
                self._send(k, ("items", batch))
        if self.fed_all:
            for k in range(self.n):
                self._send(k, ("no_more",))

    def _placeholder(self, index: int, item: Item) -> None:
        assert self.t0 is not None
        self.merged.view[index] = RequestResult(
            scheduled_s=self.t0 + item.offset,
            in_window=True,
            prompt_tokens=item.prompt_tokens,
            max_tokens=item.max_tokens,
            ignore_eos=self.cfg.ignore_eos,
            prompt_ids_sent=item.prompt_ids_sent,
            prompt_text_tokens=item.prompt_text_tokens,
        )

    def _send(self, k: int, msg: tuple[Any, ...]) -> None:
        # A worker that failed but lives still gets every message: it reads them until
        # ``end`` and is then ready for the next window.
        if not self.handles[k].alive():
            return
        try:
            self.handles[k].send.send(msg)
        except OSError:
            self._died(k)

    def _fed_past_window(self) -> bool:
        return self.fed_all or self.offsets[self.next] >= self.window_end_offset

    # --- while it runs ---

    def watch(self, hooks: WindowHooks) -> None:
        """Feed, merge and check until the window is over (drained, stopped, timed out)."""
        assert self.t0 is not None
        progress, stop_early = hooks.progress, hooks.stop_early
        check_interval_s = hooks.check_interval_s
        t0, clock = self.t0, time.perf_counter
        window_start, window_end = t0 + self.warmup_s, t0 + self.window_end_offset
        give_up = float("inf")
        next_check, next_progress = clock() + check_interval_s, 0.0
        while True:
            self._poll(POLL_S)
            now = clock()
            self._feed(now - t0 + self.feed_ahead_s)
            if now >= next_check:
                next_check = now + check_interval_s
                phase: WindowPhase = (
                    "warmup" if now < window_start else "window" if now < window_end else "drain"
                )
                if progress is not None and now - t0 >= next_progress:
                    next_progress = now - t0 + hooks.progress_interval_s
                    progress(self._snapshot(phase, now - t0))
                if hooks.interrupted() or (
                    stop_early is not None
                    and phase != "warmup"
                    and stop_early(self._so_far(now), now - window_start)
                ):
                    self.stopped = True
                    break
            if now >= window_end and self.cap_s is None:
                # Every in-window item is handed out by now: the tail's cap is known. At it
                # the workers are told to end, which cancels what they have open.
                self.cap_s = self._tail_cap()
                give_up = window_end + self.cap_s
            live = [s for s in self.seen if s.failure is None]
            if not live or now >= give_up:
                break
            if self._fed_past_window() and all(s.done for s in live):
                break
        self.end_s = clock()

    def _tail_cap(self) -> float:
        """The tail cap (s) from the in-window requests handed out."""
        asked = [self.merged.view[i] for i in self.meta if i in self.merged.view]
        return window_tail_cap(self.cfg, asked)

    def _so_far(self, now: float) -> list[RequestResult]:
        """The in-window requests due by ``now``, finished or not (for the early stop)."""
        return [r for r in self.merged.view.values() if r.scheduled_s <= now]

    def _snapshot(self, phase: WindowPhase, elapsed: float) -> WindowProgress:
        counters = [s.counters for s in self.seen if s.counters is not None]
        m = self.merged
        return WindowProgress(
            phase=phase,
            rate_rps=self.rate_rps,
            elapsed_s=elapsed,
            total_s=self.window_end_offset,
            sent=sum(c.sent for c in counters),
            in_flight=sum(c.in_flight for c in counters),
            completed=sum(c.completed for c in counters),
            errors=sum(c.errors for c in counters),
            ttft_p99_ms=percentile(m.ttfts_ms, 99),
            tpot_p99_ms=percentile(m.tpots_ms, 99),
            send_lag_p99_ms=percentile(list(m.lags_ms), 99),
        )

    def _poll(self, timeout_s: float) -> None:
        """Take every message waiting from a live worker; notice the ones that died."""
        live = [k for k, s in enumerate(self.seen) if s.final is None and s.failure is None]
        if not live:
            return
        handles = [self.handles[k] for k in live]
        wait([h.recv for h in handles] + [h.sentinel for h in handles], timeout_s)
        for k in live:
            handle = self.handles[k]
            try:
                while self.seen[k].final is None and handle.recv.poll():
                    self._on_message(k, handle.recv.recv())
            except (EOFError, OSError):
                pass
            if self.seen[k].final is None and not handle.alive():
                self._died(k)

    def _on_message(self, k: int, msg: tuple[Any, ...]) -> None:
        seen = self.seen[k]
        if msg[0] == "update":
            self._merge(msg[1])
            seen.counters = msg[1]
            seen.done = msg[1].window_done
        elif msg[0] == "final":
            seen.final = msg[1]
            if msg[2]:
                last = str(msg[2]).strip().splitlines()[-1]
                seen.failure = f"load-generator worker {k} failed mid-window: {last}"

    def _merge(self, update: Update) -> None:
        m = self.merged
        for index, res in update.finished:
            m.view[index] = m.full[index] = res
            m.ttfts_ms.append(ttft_ms(res))
            tpot = tpot_ms(res)
            if tpot is not None:
                m.tpots_ms.append(tpot)
        for index, first_token_s in update.first_tokens:
            placeholder = m.view.get(index)
            if placeholder is not None and index not in m.full:
                placeholder.first_token_s = first_token_s
        m.lags_ms.extend(update.lags_ms)

    def _died(self, k: int) -> None:
        seen = self.seen[k]
        if seen.failure is None:
            how = self.handles[k].how_ended()
            seen.failure = f"load-generator worker {k} died mid-window ({how})"
        seen.done = True

    # --- the end ---

    def end(self, timeout_s: float = END_TIMEOUT_S) -> None:
        """Tell every worker to end and take its results; one that stays silent is killed."""
        for k in range(self.n):
            self._send(k, ("end",))
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and any(
            s.final is None and s.failure is None for s in self.seen
        ):
            self._poll(POLL_S * 5)
        for k, seen in enumerate(self.seen):
            if seen.final is None:
                self.handles[k].kill()
                if seen.failure is None:
                    seen.failure = (
                        f"load-generator worker {k} did not return its results within "
                        f"{timeout_s:g} s of the window's end (killed)"
                    )

    def abort(self) -> None:
        """The window is abandoned: end it within :data:`ABORT_TIMEOUT_S`, keep nothing."""
        with contextlib.suppress(Exception):
            self.end(ABORT_TIMEOUT_S)

    def result(self) -> WindowResult:
        """The merged window: every worker's requests by schedule index, summarised as one."""
        assert self.t0 is not None
        by_index: dict[int, RequestResult] = {}
        for seen in self.seen:
            for index, res in seen.final or []:
                by_index[index] = res
        at_cap = AtCap()
        if not self.stopped:
            at_cap = judge_at_cap([r for r in by_index.values() if r.in_window], self.cap_s or 0.0)
        for index, item in self.meta.items():
            if index not in by_index:  # its worker died before reporting it
                by_index[index] = self.merged.full.get(index) or self._lost(index, item)
        order = sorted(by_index)
        requests = [by_index[i] for i in order]
        in_window = [i for i in order if by_index[i].in_window]
        window_results = [by_index[i] for i in in_window]
        window_start = self.t0 + self.warmup_s
        window_end = self.t0 + self.window_end_offset
        summary = window_summary(
            self.cfg,
            window_results,
            rate_rps=self.rate_rps,
            duration_s=self.duration_s,
            stopped=self.stopped,
            measured_s=min(self.end_s, window_end) - window_start,
        )
        note_tail(
            summary,
            requests,
            window_end=window_end,
            end=self.end_s,
            cap_s=self.cap_s,
            at_cap=at_cap,
        )
        summary.workers = self.n
        summary.worker_lag = worker_lags(window_results, [i % self.n for i in in_window], self.n)
        self._flag_failures(summary)
        return WindowResult(
            summary=summary,
            requests=requests,
            window_start_s=window_start,
            window_end_s=window_end,
            wall_start_unix=self.wall_start,
        )

    def _lost(self, index: int, item: Item) -> RequestResult:
        self._placeholder(index, item)
        res = self.merged.view[index]
        res.error, res.error_class = "cancelled", "WorkerDied"
        res.error_message = (
            f"lost: load-generator worker {index % self.n} died before reporting this request"
        )
        return res

    def _flag_failures(self, summary: WindowSummary) -> None:
        failures = [(k, s.failure) for k, s in enumerate(self.seen) if s.failure]
        if not failures:
            return
        for k, _ in failures:
            summary.worker_lag[k].died = True
        reason = "; ".join(f for _, f in failures if f)
        # The dead worker's sends are missing from the gaps tested: a failed K-S test says
        # nothing of the client's timing there, and "more workers" is no advice for it.
        summary.warnings = [w for w in summary.warnings if not w.startswith(BUNCHED_PREFIX)]
        summary.warnings.insert(0, reason)
        summary.valid = False
        summary.invalid_reason = "; ".join(r for r in (reason, summary.invalid_reason) if r)
        summary.slo_pass = False
        summary.slo_beyond_doubt = None  # the p99s of a window missing a worker's sends
        reasons = [r for r in (summary.failure_reason or "").split(",") if r]
        summary.failure_reason = ",".join([*reasons, WORKER_DIED])


__all__ = [
    "END_TIMEOUT_S",
    "POLL_S",
    "WORKER_DIED",
    "MergedSoFar",
    "PoolWindow",
    "WorkerLink",
    "WorkerSeen",
    "WorkerSender",
    "WorkerStartError",
]
