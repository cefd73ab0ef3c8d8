"""Load past one core: one window's Poisson schedule sent by N worker processes.

One Python process streams about 1,000–2,000 short requests a second on one core, and at
500 req/s and above its sends no longer pass a K-S test against the exponential (one event
loop that also reads the responses delays about 1% of sends). :class:`WorkerPool` runs the
same window with ``measurement.workers`` processes (``--workers``):

* **One schedule.** The parent computes the window's seeded schedule once, exactly as
  :func:`~tokenwatt.collect.load.loadgen.run_window` does, draws every request from the run's
  one prompt stream in schedule order, and hands arrival *i* to worker *i* mod N
  (round-robin). Round-robin keeps the workers' loads equal to within one request, and each
  worker's gaps are sums of N exponential gaps (Erlang-N), so two of one worker's sends
  fall within the CPU cost of a send far less often than in one process; contiguous blocks
  would load one worker at a time. The union of all sends is the one Poisson schedule.
* **One start time.** ``time.perf_counter`` is ``CLOCK_MONOTONIC`` on Linux: one clock for
  every process of the machine, so the parent hands the workers an absolute ``t0``
  (:data:`~tokenwatt.collect.load.loadgen.LEAD_S` after the instruments are handed the window,
  as in one process). Bodies go to the workers :data:`FEED_AHEAD_S` ahead of their send
  time, so memory stays bounded however long the window.
* **Started once per run.** The processes are started (``spawn``: no fork of a process
  with threads and a running loop) when the pool opens, before the first window, and
  reused; each window only waits for every worker to say it is ready (its session open)
  before ``t0`` is fixed, so process start-up never eats the schedule. A worker that died
  is replaced before the next window.
* **Exact merge.** Every worker returns its :class:`~tokenwatt.records.run.request.RequestResult`
  list; the parent summarises the union with the same function as one process
  (:func:`~tokenwatt.collect.load.loadgen.window_summary`): percentiles of the union, never an
  average of percentiles. Send lag and the client-bound flag are kept per worker
  (``WindowSummary.worker_lag``) and over the union.
* **Stopping.** The early-stop rule, a signal's ``interrupt`` and the end of the drain are
  decided in the parent and sent to every worker (``end``): each cancels what is in flight
  and returns what it has. A worker that dies mid-window leaves the window valid as a
  record but marked invalid (``worker_died``), its unreported requests counted as cancelled
  by the client. The client-wide ``max_concurrency`` is split among the workers.

The instruments (power, ``/metrics``) stay in the parent.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing as mp
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, Self

import numpy as np

from tokenwatt.collect.load.arrivals import load_schedule
from tokenwatt.collect.load.loadconfig import LoadConfig
from tokenwatt.collect.load.pool.pool_window import PoolWindow, WorkerLink
from tokenwatt.collect.load.pool.worker_proc import worker_main
from tokenwatt.collect.load.window_plan import WindowHooks, WindowPlan
from tokenwatt.collect.load.window_state import WindowResult
from tokenwatt.collect.workload.workload import (
    DEFAULT_OUTPUT_TOKENS,
    RequestSpec,
    WorkloadStream,
    lognormal_params,
)

if TYPE_CHECKING:
    from tokenwatt.records import Spec

FEED_AHEAD_S = 0.5
"""How far ahead of its send time a request's body is handed to its worker (s)."""
READY_TIMEOUT_S = 60.0
"""Longest wait for the workers to be ready for a window (s): the first window also waits
for their start-up (imports, about a second each)."""
CHUNKS_PER_WORKER_S = 25_000
"""Streamed chunks per second that ``auto`` gives one worker: ``benchmarks/loadgen.py`` kept
send-lag p99 under 5 ms on one core up to about 1,000 req/s of 32-chunk streams (32,000
chunks/s, 10–16 µs of client CPU each); a quarter below that is left for bursts."""
RATE_PER_WORKER_RPS = 250.0
"""Arrivals per second that ``auto`` gives one worker: one event loop's sends passed the K-S
test at 200 and 500 req/s but not at 1,000 (``benchmarks/wire_arrivals.py``, timerfd sends),
and less on a machine where other jobs run."""


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask, as ``taskset`` or a container
    limits it; ``os.cpu_count()`` where the platform has no affinity call)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def auto_workers(spec: Spec, stream: WorkloadStream | None = None, cores: int | None = None) -> int:
    """How many workers ``measurement.workers: auto`` uses.

    ``ceil(max(peak × (chunks + 1) / CHUNKS_PER_WORKER_S, peak / RATE_PER_WORKER_RPS))``,
    at least 1 and at most the usable cores less one (the parent keeps a core for the
    bodies, the merge and the instruments). ``peak`` is the highest rate the search may
    try (``sweep.max_rps`` or the last of ``sweep.rates``); ``chunks`` the expected output
    tokens per request (the lognormal mean of ``workload.output_tokens``, or of chat-mix's
    default lengths when the spec gives none; a trace's mean ``max_tokens``), one chunk per
    token as most engines stream. So a 2-core machine always gets 1.
    """
    if cores is None:
        cores = usable_cores()
    sweep = spec.sweep
    peak = max(sweep.rates) if sweep.rates else sweep.max_rps
    chunks = _mean_output_tokens(spec, stream)
    need = max(peak * (chunks + 1) / CHUNKS_PER_WORKER_S, peak / RATE_PER_WORKER_RPS, 1.0)
    return max(1, min(math.ceil(need), cores - 1))


def _mean_output_tokens(spec: Spec, stream: WorkloadStream | None) -> float:
    entries = stream.trace_entries if stream is not None else None
    if entries:
        return float(np.mean([e.max_tokens for e in entries]))
    dist = spec.workload.output_tokens or DEFAULT_OUTPUT_TOKENS
    mu, sigma = lognormal_params(dist)
    return math.exp(mu + sigma**2 / 2)


def resolve_workers(spec: Spec, stream: WorkloadStream | None = None) -> int:
    """``measurement.workers`` as a number (``auto`` resolved by :func:`auto_workers`)."""
    setting = spec.measurement.workers
    return auto_workers(spec, stream) if setting == "auto" else setting


@dataclass
class WorkerHandle:
    """One worker process and the two ends of its pipes the parent holds."""

    worker: int
    process: Any  # multiprocessing's SpawnProcess
    send: Connection
    recv: Connection

    def alive(self) -> bool:
        """True while the process runs."""
        return bool(self.process.is_alive())

    def kill(self) -> None:
        """SIGKILL the process and reap it (bounded)."""
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=5.0)

    @property
    def sentinel(self) -> int:
        """The process's sentinel: ready for ``wait`` once it has ended."""
        return int(self.process.sentinel)

    def how_ended(self) -> str:
        """``exit status N``, or ``no answer`` while it still runs."""
        code = self.process.exitcode
        return f"exit status {code}" if code is not None else "no answer"


class WindowPool:
    """Workers that send each window's schedule, however they are reached: the base of
    :class:`WorkerPool` (local processes) and :class:`~tokenwatt.collect.load.pool.ray_pool.RayPool`
    (Ray actors across hosts). A subclass starts and replaces its workers (:meth:`start`),
    lists them (:meth:`links`) and may act around each window (:meth:`before_window`,
    :meth:`after_window`); the window itself (:class:`PoolWindow`) is one code path.
    """

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Start every worker that is not running (a dead one is replaced)."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop every worker (bounded)."""
        raise NotImplementedError

    def links(self) -> list[WorkerLink]:
        """The running workers, in worker order."""
        raise NotImplementedError

    def before_window(self) -> None:
        """Called once the workers run, before the window is handed out (no-op here)."""

    def after_window(self, result: WindowResult) -> None:
        """Called with the merged window before it is returned (no-op here)."""

    def run_window(
        self,
        cfg: LoadConfig,
        plan: WindowPlan,
        requests: Iterator[RequestSpec],
        hooks: WindowHooks | None = None,
    ) -> WindowResult:
        """One window, as :func:`~tokenwatt.collect.load.loadgen.run_window` runs it (same
        arguments, same result), sent by the pool's workers. Blocking (no event loop).

        ``hooks.on_start`` is called right before ``t0`` is fixed at ``LEAD_S`` from then,
        once every worker is ready: where the instruments are handed the window.

        Raises:
            ValueError: ``rate_rps`` or ``duration_s`` not positive, ``warmup_s`` negative.
            InputError: a request the API cannot take (token ids for chat).
            WorkerStartError: a worker did not get ready within :data:`READY_TIMEOUT_S`.
        """
        plan.check_open_loop()
        hooks = hooks or WindowHooks()
        self.start()
        # The same schedule as loadgen.run_window computes for one process.
        offsets = load_schedule(
            plan.rate_rps,
            warmup_s=plan.warmup_s,
            duration_s=plan.duration_s,
            tail_s=cfg.request_timeout_s if plan.keep_load else 0.0,
            seed=plan.seed,
            arrivals=cfg.arrivals,
            profile=cfg.profile,
        )
        self.before_window()
        window = PoolWindow(
            cfg, self.links(), plan, offsets=offsets, requests=requests, feed_ahead_s=FEED_AHEAD_S
        )
        try:
            window.prepare(ready_timeout_s=READY_TIMEOUT_S)
            if hooks.on_start is not None:
                hooks.on_start()
            window.go()
            window.watch(hooks)
            window.end()
        except BaseException:
            # Ctrl-C, a body the API cannot take, a callback that raised: the workers are
            # told to stop; any that does not return within the bound is killed.
            window.abort()
            raise
        result = window.result()
        self.after_window(result)
        return result


class WorkerPool(WindowPool):
    """``workers`` load-generator processes, started once and reused for every window.

    A context manager: the processes start on entry and are told to quit (then killed if
    they do not within 5 s) on exit. See the module docstring for the design.

    Raises:
        ValueError: ``workers`` below 1.
    """

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self.workers = workers
        self._ctx = mp.get_context("spawn")
        self.handles: list[WorkerHandle | None] = [None] * workers

    def start(self) -> None:
        """Start every worker that is not running (a dead one is replaced)."""
        for k, handle in enumerate(self.handles):
            if handle is None or not handle.alive():
                if handle is not None:
                    handle.kill()
                self.handles[k] = self._spawn(k)

    def _spawn(self, k: int) -> WorkerHandle:
        child_in, parent_send = self._ctx.Pipe(duplex=False)
        parent_recv, child_out = self._ctx.Pipe(duplex=False)
        proc = self._ctx.Process(
            target=worker_main,
            args=(k, child_in, child_out),
            name=f"tokenwatt-worker-{k}",
            daemon=True,
        )
        proc.start()
        child_in.close()
        child_out.close()
        return WorkerHandle(worker=k, process=proc, send=parent_send, recv=parent_recv)

    def close(self) -> None:
        """Tell every worker to quit; kill those still running after 5 s."""
        for handle in self.handles:
            if handle is not None and handle.alive():
                with contextlib.suppress(OSError):
                    handle.send.send(("quit",))
        deadline = time.monotonic() + 5.0
        for k, handle in enumerate(self.handles):
            if handle is None:
                continue
            handle.process.join(timeout=max(0.0, deadline - time.monotonic()))
            handle.kill()
            handle.send.close()
            handle.recv.close()
            self.handles[k] = None

    def links(self) -> list[WorkerLink]:
        """The worker processes' handles, in worker order."""
        return [h for h in self.handles if h is not None]

    def pids(self) -> list[int]:
        """The workers' process ids (for tests and diagnostics)."""
        return [h.process.pid for h in self.handles if h is not None]


__all__ = [
    "CHUNKS_PER_WORKER_S",
    "FEED_AHEAD_S",
    "RATE_PER_WORKER_RPS",
    "READY_TIMEOUT_S",
    "WindowPool",
    "WorkerHandle",
    "WorkerPool",
    "auto_workers",
    "resolve_workers",
    "usable_cores",
]
