"""One load-generator worker process: its share of a window's schedule, sent on time.

The parent (:class:`tokenwatt.collect.load.pool.workers.WorkerPool`) owns the schedule, the prompts
and the verdict; a worker only sends. Per window it gets a :class:`WorkerJob`, then its
arrivals as :class:`Item` batches (offset, pre-built body) a little ahead of their time,
then the shared start time ``t0`` on ``time.perf_counter``'s clock (``CLOCK_MONOTONIC``:
one clock for every process of the machine). It dispatches its items with the one dispatch
loop of :func:`tokenwatt.collect.load.loadgen.run_window`
(:meth:`~tokenwatt.collect.load.window_state.WindowState.dispatch`: each request's task is
released by the worker's own precise timer, :mod:`~tokenwatt.collect.load.sends`), on its own
event loop and aiohttp session, reports
progress every :data:`UPDATE_INTERVAL_S`, and on ``end`` cancels what is in flight and
returns every result. It ignores SIGINT, SIGTERM and SIGHUP (a terminal sends them to the
whole process group): only the parent decides when a window ends; it exits when the
parent's pipe closes.

Messages, parent to worker: ``("prepare", WorkerJob)``, ``("items", [Item, ...])``,
``("no_more",)``, ``("go", t0)``, ``("end",)``, ``("quit",)``. Worker to parent:
``("ready", k)``, ``("update", Update)``, ``("final", [(index, RequestResult), ...],
error)``: exactly one ``final`` per ``prepare``, after ``end``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import signal
import threading
import traceback
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from tokenwatt.analysis import send_lag_ms
from tokenwatt.collect.load.event_loop import EventLoopKind, held_collections, run_load
from tokenwatt.collect.load.http import open_session
from tokenwatt.collect.load.loadconfig import LoadConfig
from tokenwatt.collect.load.sends import SendTimerKind, send_wait
from tokenwatt.collect.load.window_state import Item, WindowState
from tokenwatt.records import RequestResult

UPDATE_INTERVAL_S = 0.1
"""How often a worker tells the parent what finished (s): the parent's early stop, drain
end and live display see the worker's requests at most this late."""


@dataclass(frozen=True)
class WorkerJob:
    """One window's settings for worker ``worker``: ``cfg`` with this worker's share of the
    concurrency cap (and no tokenizer: outputs are counted in the parent), the offset (s)
    where the measured window ends, the send-spin time (s) and how sends wait for their times
    (:mod:`~tokenwatt.collect.load.sends`), whether to freeze the garbage collector for
    the window, and the event loop it runs on (:mod:`~tokenwatt.collect.load.event_loop`)."""

    worker: int
    cfg: LoadConfig
    window_end_offset: float
    send_spin_s: float
    freeze_gc: bool = True
    send_timer: SendTimerKind = "timerfd"
    event_loop: EventLoopKind = "uvloop"


@dataclass
class Update:
    """What a worker has to tell since its last update.

    Attributes:
        worker: the worker's number.
        finished: in-window requests that ended since the last update, in full.
        first_tokens: in-window requests still streaming whose first token came, as
            ``(index, first_token_s)`` (for the early-stop rule).
        lags_ms: send lag of every request dispatched since the last update (ms).
        sent, in_flight, completed, errors: the worker's counters so far.
        window_done: every in-window request of this worker was dispatched and has ended.
    """

    worker: int
    finished: list[tuple[int, RequestResult]] = field(default_factory=list)
    first_tokens: list[tuple[int, float]] = field(default_factory=list)
    lags_ms: list[float] = field(default_factory=list)
    sent: int = 0
    in_flight: int = 0
    completed: int = 0
    errors: int = 0
    window_done: bool = False


def worker_main(worker: int, inbox: Connection, outbox: Connection) -> None:
    """The worker's entry point: windows until ``quit`` or the parent is gone.

    In a worker process it runs in the main thread and ignores the terminal's signals; in
    a Ray actor (:mod:`tokenwatt.collect.load.pool.ray_actor`) it runs in a thread of the actor,
    where Python allows no signal handlers (Ray owns the actor's signals).
    """
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
    while True:
        try:
            msg = inbox.recv()
        except (EOFError, OSError):
            return
        if msg[0] == "quit":
            return
        if msg[0] != "prepare":
            continue  # a stray message of a window that already ended
        state = WorkerWindow(msg[1], inbox, outbox)
        error = None
        try:
            run_load(state.run(), state.job.event_loop)
        except Exception:
            error = traceback.format_exc(limit=8)[-2000:]
        try:
            outbox.send(("final", state.final(), error))
        except (BrokenPipeError, OSError):
            return
        if state.reader is not None:
            # Until the parent's ``end`` (sent to every worker, failed or not): only then
            # is this thread the pipe's one reader again.
            state.reader.join()
        if state.parent_gone:
            return


class WorkerWindow:
    """One window in a worker: the parent's messages in, its items sent, updates out."""

    def __init__(self, job: WorkerJob, inbox: Connection, outbox: Connection) -> None:
        self.job = job
        self.inbox = inbox
        self.outbox = outbox
        self.items: deque[Item] = deque()
        self.results: list[tuple[int, RequestResult]] = []
        self.pending: dict[int, RequestResult] = {}
        self.reported = 0
        self.no_more = False
        self.parent_gone = False
        self.t0: float | None = None
        self.reader: threading.Thread | None = None

    async def run(self) -> None:
        """Serve one ``prepare``: read the parent's messages, send every item at its time
        once ``go`` has come, report progress, and on ``end`` cancel what is in flight and
        send the one ``final`` message."""
        loop = asyncio.get_running_loop()
        self.more = asyncio.Event()
        self.started = asyncio.Event()
        self.end = asyncio.Event()
        self.done_changed = asyncio.Event()
        self.reader = threading.Thread(target=self._read, args=(loop,), daemon=True)
        self.reader.start()
        cfg = self.job.cfg
        http = open_session(cfg.max_concurrency, keep_alive=cfg.keep_alive)
        self.state = WindowState(cfg, http)
        self.state.on_dispatched = self.done_changed.set
        self.outbox.send(("ready", self.job.worker))
        tasks: list[asyncio.Task[None]] = []
        with held_collections(self.job.freeze_gc):  # as loadgen.run_window does
            try:
                await self.started.wait()
                if not self.end.is_set():  # ended before it started: nothing to send
                    tasks = [loop.create_task(self._dispatch()), loop.create_task(self._report())]
                    await self.end.wait()
            finally:
                for task in tasks:
                    task.cancel()
                leftover = list(self.state.tasks)
                for task in leftover:
                    task.cancel()
                await asyncio.gather(*tasks, *leftover, return_exceptions=True)
                self.state.close_unstarted()
                await self.state.sender.close()
                await http.close()

    def _read(self, loop: asyncio.AbstractEventLoop) -> None:
        """The pipe from the parent, read in a thread so the loop never waits on it."""
        while True:
            try:
                msg = self.inbox.recv()
            except Exception:  # closed (the parent is gone) or garbled: end the window
                self.parent_gone = True
                msg = ("end",)
            with contextlib.suppress(RuntimeError):  # the loop already closed
                loop.call_soon_threadsafe(self._on_message, msg)
            if msg[0] in ("end", "quit"):
                self.parent_gone = self.parent_gone or msg[0] == "quit"
                return

    def _on_message(self, msg: tuple[Any, ...]) -> None:
        kind = msg[0]
        if kind == "items":
            self.items.extend(msg[1])
            self.more.set()
        elif kind == "no_more":
            self.no_more = True
            self.more.set()
        elif kind == "go":
            self.t0 = float(msg[1])
            self.started.set()
        elif kind in ("end", "quit"):
            self.end.set()
            self.started.set()

    async def _next_item(self) -> Item | None:
        while not self.items:
            if self.no_more:
                return None
            self.more.clear()
            await self.more.wait()
        return self.items.popleft()

    async def _dispatch(self) -> None:
        assert self.t0 is not None
        await self.state.dispatch(
            self._next_item,
            t0=self.t0,
            window_end_offset=self.job.window_end_offset,
            stop=self.end,
            sends=send_wait(self.job.send_timer, self.job.send_spin_s),
            on_sent=self._sent,
        )

    def _sent(self, item: Item, res: RequestResult) -> None:
        self.results.append((item.seq, res))
        if item.in_window:
            self.pending[item.seq] = res

    async def _report(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.done_changed.wait(), UPDATE_INTERVAL_S)
            self.done_changed.clear()
            self.outbox.send(("update", self._update()))

    def _update(self) -> Update:
        state = self.state
        update = Update(
            worker=self.job.worker,
            sent=len(state.results),
            in_flight=len(state.tasks),
            completed=state.completed,
            errors=state.errors,
        )
        results = state.results
        while self.reported < len(results) and results[self.reported].dispatched_s is not None:
            update.lags_ms.append(send_lag_ms(results[self.reported]))
            self.reported += 1
        for index, res in list(self.pending.items()):
            if res.finished_s is not None:
                update.finished.append((index, res))
                del self.pending[index]
            elif res.first_token_s is not None:
                update.first_tokens.append((index, res.first_token_s))
        update.window_done = state.window_dispatched and not self.pending
        return update

    def final(self) -> list[tuple[int, RequestResult]]:
        """Every request this worker sent in the window, by schedule index."""
        return self.results


def worker_job(cfg: LoadConfig, worker: int, workers: int, **kw: Any) -> WorkerJob:
    """Worker ``worker``'s job: ``cfg`` with its share of ``max_concurrency`` (the cap split
    as evenly as it goes, at least 1 each) and no tokenizer (counted in the parent)."""
    cap, extra = divmod(cfg.max_concurrency, workers)
    share = max(1, cap + (1 if worker < extra else 0))
    mine = dataclasses.replace(cfg, max_concurrency=share, count_tokens=None)
    return WorkerJob(worker=worker, cfg=mine, **kw)


__all__ = [
    "UPDATE_INTERVAL_S",
    "Item",
    "Update",
    "WorkerJob",
    "WorkerWindow",
    "worker_job",
    "worker_main",
]
