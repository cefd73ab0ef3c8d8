"""The Ray actor that hosts one load-generator worker (:class:`WorkerActor`).

The actor runs :func:`~tokenwatt.collect.load.pool.worker_proc.worker_main`, the worker processes'
own loop (same dispatch code, same precise sends), in a thread, and speaks to it through
an in-actor pair of pipes exactly as the parent of a worker process does. The driver
(:class:`~tokenwatt.collect.load.pool.ray_pool.ActorLink`) reaches the pipes through actor methods:
:meth:`WorkerActor.put` (messages to the worker, numbered, since a threaded actor may run
two calls out of order), :meth:`WorkerActor.take` (the worker's messages, waited for up
to a bound) and :meth:`WorkerActor.clock` (the actor's ``time.perf_counter``, for the
clock offset, :mod:`tokenwatt.collect.load.pool.clock_sync`).

Times inside the actor are on its host's clock; the driver translates ``t0`` into it and
every time that comes back out of it. This module does not import Ray: the driver wraps
the class with ``ray.remote`` (so ``tokenwatt`` imports without Ray installed).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import socket
import threading
import time
from typing import Any

from tokenwatt.collect.load.pool.worker_proc import worker_main

ACTOR_CONCURRENCY = 4
"""Actor calls that may run at once: a waiting :meth:`WorkerActor.take`, a ``put`` and a
``clock`` must not queue behind one another."""
TAKE_MAX_WAIT_S = 1.0
"""Longest a :meth:`WorkerActor.take` waits for a message (s)."""


def skew_clock(skew_s: float) -> None:
    """Test-only: make this process's ``time.perf_counter`` read ``skew_s`` (s) ahead,
    as a host whose monotonic clock started earlier would. Every module of the load
    generator reads the clock as ``time.perf_counter()``, so all of them see the skew."""
    real = time.perf_counter

    def skewed() -> float:
        return real() + skew_s

    time.perf_counter = skewed


class WorkerActor:
    """One load-generator worker inside a Ray actor (see the module docstring).

    Args:
        worker: the worker's number.
        clock_skew_s: test-only: this actor's clock runs this far ahead (s)
            (:func:`skew_clock`); 0 in real use.
    """

    def __init__(self, worker: int, clock_skew_s: float = 0.0) -> None:
        if clock_skew_s:
            skew_clock(clock_skew_s)
        self.worker = worker
        worker_in, self._to_worker = mp.Pipe(duplex=False)
        self._from_worker, worker_out = mp.Pipe(duplex=False)
        self._lock = threading.Lock()
        self._next_seq = 0
        self._held: dict[int, Any] = {}
        self._thread = threading.Thread(
            target=worker_main,
            args=(worker, worker_in, worker_out),
            name=f"tokenwatt-worker-{worker}",
            daemon=True,
        )
        self._thread.start()

    def where(self) -> dict[str, Any]:
        """Where the actor runs: ``host`` (host name), ``node_id`` (Ray's node id), ``pid``."""
        # Ray is an optional extra, heavy to import: this module is loaded with the whole
        # collector, where Ray may not be installed, so Ray is imported here, in the actor.
        import ray

        return {
            "host": socket.gethostname(),
            "node_id": ray.get_runtime_context().get_node_id(),
            "pid": os.getpid(),
        }

    def clock(self) -> float:
        """The actor's ``time.perf_counter()`` (s)."""
        return time.perf_counter()

    def put(self, seq: int, msg: tuple[Any, ...]) -> None:
        """Message number ``seq`` (from 0) for the worker; passed on in number order."""
        with self._lock:
            self._held[seq] = msg
            while self._next_seq in self._held:
                self._to_worker.send(self._held.pop(self._next_seq))
                self._next_seq += 1

    def take(self, wait_s: float) -> list[tuple[Any, ...]]:
        """The worker's messages so far, after waiting up to ``wait_s`` (s, at most
        :data:`TAKE_MAX_WAIT_S`) for the first. Empty once the worker has quit.

        Raises:
            RuntimeError: the worker's thread ended without being told to quit.
        """
        msgs: list[tuple[Any, ...]] = []
        try:
            if self._from_worker.poll(min(max(wait_s, 0.0), TAKE_MAX_WAIT_S)):
                while self._from_worker.poll():
                    msgs.append(self._from_worker.recv())
        except (EOFError, OSError):
            pass
        if not msgs and not self._thread.is_alive() and not self._to_worker.closed:
            raise RuntimeError(f"load-generator worker {self.worker}'s thread ended")
        return msgs

    def quit(self) -> None:
        """Tell the worker to quit and wait for its thread (bounded, 5 s)."""
        with self._lock:
            if not self._to_worker.closed:
                self._to_worker.send(("quit",))
                self._to_worker.close()
        self._thread.join(timeout=5.0)


__all__ = ["ACTOR_CONCURRENCY", "TAKE_MAX_WAIT_S", "WorkerActor", "skew_clock"]
