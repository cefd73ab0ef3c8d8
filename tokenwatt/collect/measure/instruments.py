"""The run's instruments — the power meter and the ``/metrics`` scraper — beside the load.

Nothing here runs on the load generator's event loop. Three threads of their own:

* ``tokenwatt-instruments``: an asyncio loop that scrapes ``/metrics`` (httpx) and times
  each window's power start and stop;
* ``tokenwatt-power-calls``: makes the power meter's blocking calls
  (:meth:`~tokenwatt.telemetry.meter.PowerMeter.start_window` reads the baseline,
  :meth:`~tokenwatt.telemetry.meter.PowerMeter.stop_window` the last reading), one at a
  time, so a source that hangs holds only this thread;
* the meter's own sampler thread (:mod:`tokenwatt.telemetry.meter`).

The load generator's side is a handoff: :meth:`Instruments.begin` schedules a window
(a thread-safe call, microseconds), :meth:`InstrumentWindow.end_now` ends it early, and
:meth:`Instruments.collect` waits for the readings at most :data:`INSTRUMENT_DEADLINE_S`
once the load has returned. A slow, hung or failing source makes only its own readings
invalid, with the reason in the record, and delays neither a request nor the window's end
by more than that deadline (plus :data:`~tokenwatt.collect.engine.engine_metrics.SCRAPE_DEADLINE_S`
per idle-check scrape before the warm-up).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

import httpx

from tokenwatt.collect.engine.engine_metrics import SCRAPE_DEADLINE_S, MetricsScraper, ScrapeError
from tokenwatt.collect.load.loadgen import LEAD_S
from tokenwatt.errors import TelemetryError
from tokenwatt.netpath import ProxyChoice
from tokenwatt.records import EngineMetrics, IdleStart, PowerWindow
from tokenwatt.telemetry import PowerMeter

T = TypeVar("T")

INSTRUMENT_DEADLINE_S = 5.0
"""Once the load generator has returned, the longest the window waits for the power meter
and the scraper to hand over their readings (s); past it they are invalid ("did not hand
over … within 5 s"). A meter's stop takes one in-flight read plus one last read; a
one-second BMC or command source needs about 2 s."""
IDLE_POLL_S = 0.25
"""Seconds between ``/metrics`` reads while waiting for an idle engine."""
CLOSE_DEADLINE_S = 5.0
"""Longest wait for the meter and the instruments' thread to close at the end of a run (s);
a source still hung then is left behind in its daemon thread."""


class _CallWorker:
    """A daemon thread that makes blocking calls one at a time; a hung call holds only it."""

    def __init__(self, name: str) -> None:
        self._calls: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]] | None]
        self._calls = queue.SimpleQueue()
        self._pending = 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def submit(self, call: Callable[[], T]) -> Future[T]:
        """Queue ``call``; its result or exception comes back in the future."""
        done: Future[T] = Future()
        with self._lock:
            self._pending += 1
        self._calls.put((call, done))
        return done

    def busy(self) -> bool:
        """Whether a call is running or queued."""
        with self._lock:
            return self._pending > 0

    def close(self) -> None:
        """Let the thread end once the queued calls are made."""
        self._calls.put(None)

    def _serve(self) -> None:
        while (item := self._calls.get()) is not None:
            call, done = item
            try:
                done.set_result(call())
            except BaseException as exc:  # handed to the waiter, whatever it is
                done.set_exception(exc)
            finally:
                with self._lock:
                    self._pending -= 1


@dataclass(frozen=True)
class InstrumentReadings:
    """What the instruments measured over one window.

    Attributes:
        power: the power window; None without a meter or when the window never began;
            invalid (``valid`` false, with reasons) when the source failed or was late.
        metrics: the engine's ``/metrics`` over the window; None when not scraped or the
            window never began; invalid (with ``invalid_reason``) when it did not answer.
    """

    power: PowerWindow | None
    metrics: EngineMetrics | None


class InstrumentWindow:
    """One window's instruments while the load runs (made by :meth:`Instruments.begin`).

    ``starts_at`` and ``ends_at`` are ``time.perf_counter`` seconds: the load generator's
    window start and end. Its futures are completed on the instruments' thread.
    """

    def __init__(
        self, loop: asyncio.AbstractEventLoop, *, starts_at: float, duration_s: float
    ) -> None:
        self._loop = loop
        self.starts_at = starts_at
        self.ends_at = starts_at + duration_s
        self.duration_s = duration_s
        self.scrape_interval_s = min(1.0, duration_s / 4)
        self._ended = asyncio.Event()  # bound to the instruments' loop at its first wait
        self.power: Future[PowerWindow | None] = Future()
        self.metrics: Future[EngineMetrics | None] = Future()

    def end_now(self) -> None:
        """End the window now (early stop, an error, Ctrl-C); thread-safe, never blocks."""
        with contextlib.suppress(RuntimeError):  # the loop is already closed: nothing runs
            self._loop.call_soon_threadsafe(self._ended.set)

    async def until(self, t: float) -> bool:
        """Wait (on the instruments' loop) until ``perf_counter()`` reaches ``t``; False when
        the window was ended first."""
        if self._ended.is_set():
            return False
        delay = t - time.perf_counter()
        if delay <= 0:
            return True
        try:
            await asyncio.wait_for(self._ended.wait(), delay)
        except TimeoutError:
            return True
        return False


class Instruments:
    """The power meter and the ``/metrics`` scraper of one run, off the load's event loop.

    Use as a context manager (or call :meth:`close`). One window at a time.

    Args:
        endpoint: the engine's URL (``/metrics`` is read at its root).
        api_key: bearer token for ``/metrics`` (never stored).
        meter: the power meter (owned: closed with the instruments); None: no power.
        scrape: read ``/metrics`` (False only for benchmarks of the instruments' cost).
        scrape_deadline_s: deadline of one ``/metrics`` scrape (s).
        deadline_s: how long :meth:`collect` waits for a window's readings (s).
        proxy: the spec's ``engine.proxy`` (:func:`tokenwatt.netpath.network_path`).
    """

    def __init__(
        self,
        endpoint: str,
        *,
        api_key: str | None = None,
        meter: PowerMeter | None = None,
        scrape: bool = True,
        scrape_deadline_s: float = SCRAPE_DEADLINE_S,
        deadline_s: float = INSTRUMENT_DEADLINE_S,
        proxy: ProxyChoice = "auto",
    ) -> None:
        self.meter = meter
        self.deadline_s = deadline_s
        self._scrape = scrape
        self._scraper_args: dict[str, Any] = {
            "endpoint": endpoint,
            "api_key": api_key,
            "timeout_s": scrape_deadline_s,
            "proxy": proxy,
        }
        self._scrape_deadline_s = scrape_deadline_s
        self._power = _CallWorker("tokenwatt-power-calls")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="tokenwatt-instruments", daemon=True
        )
        self._thread.start()
        self._client: httpx.AsyncClient | None = None
        if scrape:
            # Built once, here: a client's TLS context takes milliseconds of CPU, which a
            # window's start must not pay while the load generator sends.
            self._client = self._call(self._open_client(), timeout_s=CLOSE_DEADLINE_S)
        self._closed = False

    def _call(self, coro: Coroutine[Any, Any, T], *, timeout_s: float) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=timeout_s)

    async def _open_client(self) -> httpx.AsyncClient:
        return MetricsScraper(**self._scraper_args).open_client()

    # -- the idle check ----------------------------------------------------------------
    def wait_idle(self, *, max_wait_s: float, persist: bool = False) -> IdleStart:
        """Poll ``/metrics`` until the running and waiting gauges read zero, at most
        ``max_wait_s`` (s, plus one scrape deadline). Call it before the warm-up, while no
        load runs; it blocks the caller. :class:`~tokenwatt.collect.measure.idle.IdleGate`
        adds the client's own count and says what proved idleness.

        Args:
            max_wait_s: the bound (s).
            persist: a read that fails is retried until the bound (the gauges have
                answered before in this run: an overloaded engine may not answer within
                the scrape deadline); False: the first failed read ends the check.

        Returns:
            An :class:`IdleStart`: ``idle`` True when idle, False (with a warning in
            ``note``) when the wait ran out, None when not read (no gauges, no answer).
        """
        if not self._scrape:
            return IdleStart(waited_s=0.0, idle=None, note="/metrics is not read; not checked")
        limit = max_wait_s + 2 * self._scrape_deadline_s + 1.0
        try:
            return self._call(self._await_idle(max_wait_s, persist), timeout_s=limit)
        except TimeoutError:
            return IdleStart(waited_s=limit, idle=None, note="the idle check did not finish")

    async def _await_idle(self, max_wait_s: float, persist: bool) -> IdleStart:
        scraper = MetricsScraper(**self._scraper_args, client=self._client)
        t0 = time.monotonic()
        failed = 0
        while True:
            try:
                s = await scraper.read()
            except ScrapeError as exc:
                failed += 1
                waited = time.monotonic() - t0
                if not persist or waited >= max_wait_s:
                    tries = f" in {failed} reads over {waited:.1f} s" if persist else ""
                    note = f"/metrics did not answer{tries} ({exc})"
                    return IdleStart(waited_s=waited, idle=None, note=note)
                await asyncio.sleep(min(IDLE_POLL_S, max(0.0, max_wait_s - waited)))
                continue
            waited = time.monotonic() - t0
            gauges = [v for v in (s.running, s.waiting) if v is not None]
            if not gauges:
                note = "the engine exposes no running/waiting gauges"
                return IdleStart(waited_s=waited, idle=None, note=note)
            if all(v == 0 for v in gauges):
                return IdleStart(waited_s=waited, idle=True, running=s.running, waiting=s.waiting)
            if waited >= max_wait_s:
                note = (
                    f"the engine was not idle after {waited:.1f} s ({s.running or 0:g} running, "
                    f"{s.waiting or 0:g} waiting)"
                )
                return IdleStart(
                    waited_s=waited, idle=False, running=s.running, waiting=s.waiting, note=note
                )
            await asyncio.sleep(min(IDLE_POLL_S, max(0.0, max_wait_s - waited)))

    # -- windows -----------------------------------------------------------------------
    def begin(self, *, warmup_s: float, duration_s: float) -> InstrumentWindow:
        """Schedule a window that starts ``LEAD_S + warmup_s`` from now, as the load
        generator's does when :func:`~tokenwatt.collect.load.loadgen.run_window` is called right
        after. Never blocks: the work is handed to the instruments' thread."""
        win = InstrumentWindow(
            self._loop, starts_at=time.perf_counter() + LEAD_S + warmup_s, duration_s=duration_s
        )
        asyncio.run_coroutine_threadsafe(self._run(win), self._loop)
        return win

    def collect(self, win: InstrumentWindow) -> InstrumentReadings:
        """End the window and wait at most ``deadline_s`` (s) for its readings; a reading
        not handed over by then is invalid, saying so."""
        win.end_now()
        timeout_s = self.deadline_s
        deadline = time.monotonic() + timeout_s
        late = f"did not hand over the window's readings within {timeout_s:g} s"
        power = _settled(win.power, deadline, lambda why: self._invalid_power(win, why), late)
        metrics = _settled(
            win.metrics,
            deadline,
            lambda why: EngineMetrics(valid=False, invalid_reason=f"/metrics scraper: {why}"),
            late,
        )
        return InstrumentReadings(power=power, metrics=metrics)

    async def _run(self, win: InstrumentWindow) -> None:
        await asyncio.gather(
            _settle(win.power, self._power_part(win)), _settle(win.metrics, self._metrics(win))
        )

    async def _power_part(self, win: InstrumentWindow) -> PowerWindow | None:
        meter = self.meter
        if meter is None or not await win.until(win.starts_at):
            return None
        if self._power.busy():
            return self._invalid_power(
                win, "the source was still busy with the previous window's reads; not metered"
            )
        started = self._power.submit(meter.start_window)
        await win.until(win.ends_at)
        stopped = self._power.submit(meter.stop_window)
        try:
            await asyncio.wrap_future(started)
            return await asyncio.wrap_future(stopped)
        except TelemetryError as exc:
            return self._invalid_power(win, f"the power meter failed: {exc}")

    async def _metrics(self, win: InstrumentWindow) -> EngineMetrics | None:
        if not self._scrape or not await win.until(win.starts_at):
            return None
        scraper = MetricsScraper(
            **self._scraper_args, interval_s=win.scrape_interval_s, client=self._client
        )
        await scraper.start()
        await win.until(win.ends_at)
        return await scraper.stop()

    def _invalid_power(self, win: InstrumentWindow, reason: str) -> PowerWindow | None:
        if self.meter is None:
            return None
        src = self.meter.source
        return PowerWindow(
            source=src.name,
            scope=src.scope,
            samples=0,
            duration_s=win.duration_s,
            valid=False,
            invalid_reasons=[f"power: {reason}"],
            power_method=src.power_method,
            devices=src.devices,
        )

    # -- the end -----------------------------------------------------------------------
    def close(self) -> None:
        """Close the meter (within :data:`CLOSE_DEADLINE_S`), the HTTP client and the
        thread. Safe to call twice; a source still hung is left in its daemon thread."""
        if self._closed:
            return
        self._closed = True
        if self.meter is not None:
            closing = self._power.submit(self.meter.close)
            with contextlib.suppress(TimeoutError, TelemetryError):
                closing.result(timeout=CLOSE_DEADLINE_S)
        self._power.close()
        with contextlib.suppress(TimeoutError):
            self._call(self._shutdown(), timeout_s=CLOSE_DEADLINE_S)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=CLOSE_DEADLINE_S)
        if not self._thread.is_alive():
            self._loop.close()

    async def _shutdown(self) -> None:
        me = asyncio.current_task()
        others = [t for t in asyncio.all_tasks() if t is not me]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)
        if self._client is not None:
            await self._client.aclose()

    def __enter__(self) -> Instruments:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


async def _settle(done: Future[T], work: Coroutine[Any, Any, T]) -> None:
    try:
        done.set_result(await work)
    except Exception as exc:  # the waiter turns it into an invalid reading
        done.set_exception(exc)


def _settled(
    done: Future[T | None], deadline: float, invalid: Callable[[str], T | None], late: str
) -> T | None:
    """The future's result by ``deadline`` (monotonic s), else ``invalid(reason)``."""
    try:
        return done.result(timeout=max(0.0, deadline - time.monotonic()))
    except TimeoutError:
        return invalid(late)
    except Exception as exc:  # a reader that failed in an unforeseen way: only it is lost
        return invalid(f"failed: {type(exc).__name__}: {exc}"[:300])
