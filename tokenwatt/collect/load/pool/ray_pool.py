"""Load past one host: the window's workers as Ray actors across a cluster (:class:`RayPool`).

``collect --ray-address ADDR`` (or ``measurement.ray_address``) connects to an existing
Ray cluster and runs each worker as an actor (:class:`~tokenwatt.collect.load.pool.ray_actor.
WorkerActor`) that hosts the worker processes' own loop. By default one actor per node
that has a CPU to give (pinned there with Ray's node-affinity strategy); with
``measurement.workers`` N above 1, N actors placed with Ray's ``SPREAD`` strategy. Each
actor asks for one CPU.

Everything else is :class:`~tokenwatt.collect.load.pool.workers.WorkerPool`'s window
(:class:`~tokenwatt.collect.load.pool.pool_window.PoolWindow`: one seeded schedule round-robin, the
exact merge, the early stop, the died-worker flag): the driver reaches each actor through
an :class:`ActorLink`, a small pipe-like proxy. Messages to the worker are actor calls
(numbered, so a threaded actor passes them on in order); a thread per actor waits on the
worker's messages (an actor call that waits up to :data:`TAKE_WAIT_S`) and puts them on a
local pipe the window reads as it reads a worker process's. A call that fails or does not
answer within its deadline means the actor is gone, as a closed pipe does.

**Clocks.** Before every window the driver measures each actor's clock offset by
Cristian's algorithm (:mod:`tokenwatt.collect.load.pool.clock_sync`: eight round trips, the least
RTT kept, uncertainty ±RTT/2), hands the actor the window's start time on its own clock,
and translates every time the actor reports back to the driver's clock (every
``RequestResult`` field ending in ``_s``). Send lag is a difference on one clock and needs
no translation. Each worker's host, Ray node and offset with its uncertainty go in the
window's ``worker_lag``. The remaining error of a time on the driver's clock is the
offset's uncertainty (milliseconds over a LAN): small beside a TTFT, but the latencies
themselves (TTFT, TPOT, E2E) are differences on the actor's clock and carry none of it.

Ray is an optional extra (``pip install 'tokenwatt-bench[ray]'``), imported when a pool
starts; every host needs the same tokenwatt-bench installed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import logging
import multiprocessing as mp
import socket
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tokenwatt.collect.load.loadgen import WindowResult
from tokenwatt.collect.load.pool.clock_sync import SAME_CLOCK, ClockOffset, measure_offset
from tokenwatt.collect.load.pool.pool_window import WorkerLink, WorkerStartError
from tokenwatt.collect.load.pool.ray_actor import ACTOR_CONCURRENCY, WorkerActor
from tokenwatt.collect.load.pool.workers import READY_TIMEOUT_S, WindowPool
from tokenwatt.errors import InputError, Problem
from tokenwatt.records import RequestResult

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

RAY_EXTRA = "pip install 'tokenwatt-bench[ray]'"
"""How to install Ray for ``--ray-address``."""
CONNECT_TIMEOUT_S = 5.0
"""Deadline for reaching a ``HOST:PORT`` Ray address before ``ray.init`` (s)."""
CALL_TIMEOUT_S = 10.0
"""Deadline of an actor call (a message, a clock read, ``take``'s answer beyond its wait)
(s): an actor that does not answer within it is taken for gone."""
TAKE_WAIT_S = 0.05
"""How long an actor holds a ``take`` call open waiting for the worker's next message (s):
the worker reports every 0.1 s, so messages reach the driver at most this much later."""
TIME_FIELDS = tuple(f.name for f in dataclasses.fields(RequestResult) if f.name.endswith("_s"))
"""``RequestResult``'s times (s, on the sender's clock), translated to the driver's."""


def import_ray(field: str = "--ray-address", file: str = "") -> Any:
    """The ``ray`` module.

    Raises:
        InputError: Ray is not installed (named ``field``, exit status 2).
    """
    try:
        return importlib.import_module("ray")
    except ImportError:
        message = f"needs Ray, which is not installed: {RAY_EXTRA}"
        raise InputError([Problem(file or field, field if file else "", message)]) from None


def check_reachable(address: str) -> None:
    """Reach a ``HOST:PORT`` Ray address once, with a deadline, before ``ray.init``: Ray
    retries an address where nothing answers without end. ``auto`` and ``ray://``
    addresses are left to Ray.

    Raises:
        WorkerStartError: nothing answers at ``HOST:PORT`` within
            :data:`CONNECT_TIMEOUT_S`.
    """
    host, sep, port = address.rpartition(":")
    if not sep or "://" in address or not port.isdigit():
        return
    try:
        with socket.create_connection((host.strip("[]"), int(port)), CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        raise WorkerStartError(
            f"cannot reach the Ray cluster at {address} within {CONNECT_TIMEOUT_S:g} s "
            f"({exc.strerror or type(exc).__name__}); start it with `ray start --head` "
            "and give its address"
        ) from exc


def to_driver_clock(res: RequestResult, offset: ClockOffset) -> None:
    """Move ``res``'s times (every field in :data:`TIME_FIELDS`) from the actor's clock to
    the driver's, in place. A time of 0.0 is "not set" (``sent_s`` of a request that never
    got a concurrency slot) and stays 0.0."""
    for name in TIME_FIELDS:
        value = getattr(res, name)
        if isinstance(value, list):
            setattr(res, name, [offset.to_local(t) for t in value])
        elif value:
            setattr(res, name, offset.to_local(value))


class _ActorSender:
    """``send`` of an :class:`ActorLink` (the window's ``handle.send.send``)."""

    def __init__(self, link: ActorLink) -> None:
        self.link = link

    def send(self, obj: Any) -> None:
        """Hand ``obj`` to the actor's worker. Raises OSError when the actor is gone."""
        self.link.put(obj)


class ActorLink:
    """One worker actor as the window sees it (:class:`~tokenwatt.collect.load.pool.pool_window.
    WorkerLink`): ``send``, ``recv`` (a real pipe end, times on the driver's clock),
    ``sentinel``, ``alive``, ``kill``, ``how_ended``.

    Attributes:
        worker: the worker's number.
        actor: the Ray actor handle.
        host: the actor's host name; ``node_id``: its Ray node.
        offset: its clock against the driver's (measured before each window).
    """

    def __init__(self, worker: int, actor: Any, where: dict[str, Any], ray: Any) -> None:
        self.worker = worker
        self.actor = actor
        self.host = str(where.get("host", ""))
        self.node_id = str(where.get("node_id", ""))
        self.offset = SAME_CLOCK
        self._ray = ray
        self._seq = 0
        self._puts: list[Any] = []
        self._lock = threading.Lock()
        self._gone: str | None = None
        self.recv: Connection
        self.recv, self._recv_end = mp.Pipe(duplex=False)
        self._sentinel, self._sentinel_end = mp.Pipe(duplex=False)
        self.send = _ActorSender(self)
        self._closing = threading.Event()
        self._pump = threading.Thread(target=self._pump_loop, name=f"ray-link-{worker}")
        self._pump.daemon = True
        self._pump.start()

    @property
    def sentinel(self) -> Connection:
        """A pipe end that is ready (end of file) once the actor is gone."""
        return self._sentinel

    def alive(self) -> bool:
        """True until a call to the actor failed or went unanswered."""
        return self._gone is None

    def how_ended(self) -> str:
        """Why the actor is taken for gone, or ``no answer``."""
        return self._gone or "no answer"

    def _mark_gone(self, why: str) -> None:
        with self._lock:
            if self._gone is None:
                self._gone = why
                self._sentinel_end.close()

    def put(self, msg: tuple[Any, ...]) -> None:
        """Send ``msg`` to the worker (``go``'s ``t0`` translated to the actor's clock).

        Raises:
            OSError: the actor is gone.
        """
        if self._gone is not None:
            raise OSError(f"load-generator actor {self.worker} is gone ({self._gone})")
        if msg[0] == "go":
            msg = ("go", self.offset.to_remote(float(msg[1])))
        self._puts.append(self.actor.put.remote(self._seq, msg))
        self._seq += 1
        done, self._puts = self._ray.wait(
            self._puts, num_returns=len(self._puts), timeout=0, fetch_local=False
        )
        for ref in done:
            try:
                self._ray.get(ref, timeout=CALL_TIMEOUT_S)
            except Exception as exc:
                self._mark_gone(f"the Ray actor failed: {type(exc).__name__}")
                raise OSError(f"load-generator actor {self.worker} is gone") from exc

    def _pump_loop(self) -> None:
        """The worker's messages, from the actor to the local pipe (a thread)."""
        ray = self._ray
        while not self._closing.is_set():
            try:
                ref = self.actor.take.remote(TAKE_WAIT_S)
                msgs = ray.get(ref, timeout=TAKE_WAIT_S + CALL_TIMEOUT_S)
            except ray.exceptions.GetTimeoutError:
                self._mark_gone(f"no answer within {CALL_TIMEOUT_S:g} s")
                return
            except Exception as exc:
                self._mark_gone(f"the Ray actor died: {type(exc).__name__}")
                return
            try:
                for msg in msgs:
                    self._recv_end.send(self._translated(msg))
            except OSError:  # closed: the pool is closing
                return

    def _translated(self, msg: tuple[Any, ...]) -> tuple[Any, ...]:
        offset = self.offset
        if msg[0] == "update":
            update = msg[1]
            for _, res in update.finished:
                to_driver_clock(res, offset)
            update.first_tokens = [(i, offset.to_local(t)) for i, t in update.first_tokens]
        elif msg[0] == "final":
            for _, res in msg[1]:
                to_driver_clock(res, offset)
        return msg

    def measure_clock(self) -> ClockOffset:
        """Measure and keep the actor's clock offset (:func:`measure_offset`).

        Raises:
            WorkerStartError: the actor did not answer within :data:`CALL_TIMEOUT_S`.
        """
        try:
            self.offset = measure_offset(
                lambda: float(self._ray.get(self.actor.clock.remote(), timeout=CALL_TIMEOUT_S))
            )
        except Exception as exc:
            self._mark_gone(f"no clock reading: {type(exc).__name__}")
            raise WorkerStartError(
                f"load-generator actor {self.worker} on {self.host} did not answer a clock read"
            ) from exc
        return self.offset

    def kill(self) -> None:
        """End the actor now (``ray.kill``) and the pump thread (bounded)."""
        self._mark_gone("killed")
        self._closing.set()
        with contextlib.suppress(Exception):
            self._ray.kill(self.actor, no_restart=True)
        self._pump.join(timeout=TAKE_WAIT_S + CALL_TIMEOUT_S)

    def close(self) -> None:
        """Ask the worker to quit (bounded), end the actor, close the pipes."""
        if self._gone is None:
            with contextlib.suppress(Exception):
                self._ray.get(self.actor.quit.remote(), timeout=CALL_TIMEOUT_S)
        self.recv.close()  # a pump blocked on a full pipe gets EPIPE and ends
        self.kill()
        for end in (self._recv_end, self._sentinel):
            end.close()


class RayPool(WindowPool):
    """Load-generator workers as Ray actors across the cluster at ``address`` (see the
    module docstring). A context manager like :class:`~tokenwatt.collect.load.pool.workers.
    WorkerPool`; the actors start on entry and are ended on exit.

    Args:
        address: the Ray cluster (``ray.init``'s ``address``: ``HOST:6379``,
            ``ray://HOST:10001`` or ``auto``).
        workers: None: one actor per node with a CPU; N: N actors spread over the nodes.
        clock_skew_s: test-only: worker k's clock runs ``clock_skew_s[k]`` ahead (s).

    Raises:
        ValueError: ``workers`` below 1.
        InputError: Ray is not installed (on :meth:`start`).
        WorkerStartError: nothing answers at the address within
            :data:`CONNECT_TIMEOUT_S`, the cluster has no node with a CPU, or an actor was
            not placed and answering within
            :data:`~tokenwatt.collect.load.pool.workers.READY_TIMEOUT_S`.
    """

    def __init__(
        self, address: str, workers: int | None = None, *, clock_skew_s: Sequence[float] = ()
    ) -> None:
        if workers is not None and workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self.address = address
        self.workers = workers
        self.clock_skew_s = list(clock_skew_s)
        self.handles: list[ActorLink | None] = []
        self._placement: list[str | None] = []  # a node id, or None: SPREAD
        self._ray: Any = None
        self._own_ray = False

    def start(self) -> None:
        """Connect to the cluster (once), place the actors (once), and start an actor for
        every worker that has none or whose actor is gone."""
        if self._ray is None:
            self._ray = import_ray()
            if not self._ray.is_initialized():
                check_reachable(self.address)
                self._ray.init(
                    address=self.address, logging_level=logging.ERROR, log_to_driver=False
                )
                self._own_ray = True
        if not self._placement:
            self._placement = self._place()
            self.handles = [None] * len(self._placement)
        fresh: dict[int, Any] = {}
        for k, link in enumerate(self.handles):
            if link is None or not link.alive():
                if link is not None:
                    link.close()
                    self.handles[k] = None
                fresh[k] = self._actor(k)
        self._await_ready(fresh)

    def _place(self) -> list[str | None]:
        nodes = [
            n["NodeID"]
            for n in self._ray.nodes()
            if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) >= 1
        ]
        if not nodes:
            raise WorkerStartError(
                f"the Ray cluster at {self.address} has no live node with a CPU for a worker"
            )
        if self.workers is None:
            return list(nodes)
        return [None] * self.workers

    def _actor(self, k: int) -> Any:
        # Ray is an optional extra, heavy to import: loaded only once a Ray pool starts.
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        node = self._placement[k]
        strategy: Any = (
            "SPREAD" if node is None else NodeAffinitySchedulingStrategy(node, soft=False)
        )
        skew = self.clock_skew_s[k] if k < len(self.clock_skew_s) else 0.0
        cls = self._ray.remote(WorkerActor)
        return cls.options(
            num_cpus=1,
            max_concurrency=ACTOR_CONCURRENCY,
            scheduling_strategy=strategy,
            name=None,
        ).remote(k, skew)

    def _await_ready(self, fresh: dict[int, Any]) -> None:
        if not fresh:
            return
        ray = self._ray
        refs = {k: actor.where.remote() for k, actor in fresh.items()}
        try:
            wheres = ray.get(list(refs.values()), timeout=READY_TIMEOUT_S)
        except Exception as exc:
            for actor in fresh.values():
                with contextlib.suppress(Exception):
                    ray.kill(actor, no_restart=True)
            raise WorkerStartError(
                f"load-generator actors {sorted(fresh)} were not placed and answering within "
                f"{READY_TIMEOUT_S:g} s ({type(exc).__name__}); each needs one free CPU on "
                "a node with tokenwatt-bench installed"
            ) from exc
        for (k, actor), where in zip(fresh.items(), wheres, strict=True):
            self.handles[k] = ActorLink(k, actor, where, ray)

    def links(self) -> list[WorkerLink]:
        """The actors' links, in worker order."""
        return [link for link in self.handles if link is not None]

    def actors(self) -> list[Any]:
        """The Ray actor handles, in worker order (for tests and diagnostics)."""
        return [link.actor for link in self.handles if link is not None]

    def before_window(self) -> None:
        """Measure every actor's clock offset (:meth:`ActorLink.measure_clock`)."""
        for link in self.handles:
            if link is not None:
                link.measure_clock()

    def after_window(self, result: WindowResult) -> None:
        """Note each worker's host, node and clock offset in the window's ``worker_lag``."""
        for lag in result.summary.worker_lag:
            link = self.handles[lag.worker] if lag.worker < len(self.handles) else None
            if link is None:
                continue
            lag.host = link.host or None
            lag.node_id = link.node_id or None
            lag.clock_offset_ms = round(link.offset.offset_s * 1e3, 4)
            lag.clock_offset_uncertainty_ms = round(link.offset.uncertainty_s * 1e3, 4)

    def close(self) -> None:
        """End every actor (bounded) and leave the cluster if this pool joined it."""
        for k, link in enumerate(self.handles):
            if link is not None:
                link.close()
                self.handles[k] = None
        if self._own_ray and self._ray is not None:
            with contextlib.suppress(Exception):
                self._ray.shutdown()
            self._own_ray = False
        self._ray = None


__all__ = [
    "CALL_TIMEOUT_S",
    "CONNECT_TIMEOUT_S",
    "RAY_EXTRA",
    "TAKE_WAIT_S",
    "TIME_FIELDS",
    "ActorLink",
    "RayPool",
    "check_reachable",
    "import_ray",
    "to_driver_clock",
]
