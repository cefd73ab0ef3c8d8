"""The power meter: samples a source in a background thread during each window.

Timing: :meth:`PowerMeter.start_window` reads the source once at once (the baseline, at
t = 0: counters and power), then a thread reads it at t = k / ``sampling_hz`` for k = 1, 2, …
until :meth:`PowerMeter.stop_window`, which reads once more at the end unless the thread has
just done so. A 120 s window at 1 Hz therefore has 120 counted samples — the seed's
"240 one-second samples" over two repeats — plus the baseline.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from types import TracebackType

from tokenwatt.analysis import Resolution, summarise_power_window
from tokenwatt.errors import TelemetryError
from tokenwatt.records import MeasuredDevice, PowerSample, PowerWindow
from tokenwatt.telemetry.base import (
    MAX_READING_W,
    DeviceLostError,
    HardwareIdentity,
    PowerSource,
    ReadError,
    WindowSeriesSource,
)
from tokenwatt.telemetry.clock import Clock, SystemClock
from tokenwatt.telemetry.gpu_selection import Selection

_SAME_INSTANT_S = 1e-3
"""A final reading closer than this (s) to the thread's last sample would duplicate it."""


MAX_COUNTER_J = 2.0**64 / 1000.0
"""Largest energy counter value taken (J): what NVML's unsigned 64-bit millijoule counter
can hold (about 1.8e16 J); a counter near it is about to wrap, which the window's summary
detects and adds back."""


def unusable(reading: PowerSample) -> str | None:
    """Why a reading cannot be a sample (non-finite or absurd numbers), or None when usable.

    Negative power passes: the window's plausibility rules name it, so the whole window is
    refused rather than quietly thinned.
    """
    if reading.power_w is not None and (
        not math.isfinite(reading.power_w) or abs(reading.power_w) > MAX_READING_W
    ):
        return (
            f"power reading {reading.power_w!r} W is not a finite value up to {MAX_READING_W:g} W"
        )
    for dev, joules in (reading.counters_j or {}).items():
        if not math.isfinite(joules) or abs(joules) > MAX_COUNTER_J:
            return f"energy counter of {dev} read {joules!r} J, not a finite value"
    return None


def source_resolution(source: PowerSource) -> Resolution:
    """What a source declares about its resolution: optional attributes ``counter_step_j``
    (J), ``counter_wrap_j`` (J) and ``reading_interval_s`` (s); absent ones are None."""

    def number(name: str) -> float | None:
        value = getattr(source, name, None)
        return float(value) if isinstance(value, int | float) and value > 0 else None

    return Resolution(
        counter_step_j=number("counter_step_j"),
        counter_wrap_j=number("counter_wrap_j"),
        reading_interval_s=number("reading_interval_s"),
    )


def with_devices(window: PowerWindow, source: PowerSource) -> PowerWindow:
    """The window with the source's measured devices and how they were chosen (a source
    with a ``selection``, :class:`~tokenwatt.telemetry.gpu_selection.Selection`)."""
    selection = getattr(source, "selection", None)
    if not isinstance(selection, Selection):
        return window
    devices = [MeasuredDevice(uuid=d.uuid, name=d.name, bus_id=d.bus_id) for d in selection.devices]
    return window.model_copy(
        update={"measured_devices": devices, "device_selection": selection.method}
    )


class PowerMeter:
    """Measures power over windows from one :class:`PowerSource`.

    Use as a context manager, or call :meth:`close`. One window at a time.

    Args:
        source: the power source (owned: closed with the meter).
        sampling_hz: samples per second during a window (Hz).
        clock: time source; tests pass a :class:`~tokenwatt.telemetry.clock.ManualClock`.
        identity: overrides the source's identity (e.g. with the spec's rated bandwidth).

    Raises:
        TelemetryError: ``sampling_hz`` not positive.
    """

    def __init__(
        self,
        source: PowerSource,
        sampling_hz: float,
        *,
        clock: Clock | None = None,
        identity: HardwareIdentity | None = None,
    ) -> None:
        if not (sampling_hz > 0 and math.isfinite(sampling_hz)):
            raise TelemetryError(f"power.sampling_hz must be positive, got {sampling_hz}")
        self.source = source
        self.sampling_hz = sampling_hz
        self.clock: Clock = clock or SystemClock()
        self._identity = identity
        self._t0: float | None = None
        self._wall0 = 0.0
        self._samples: list[PowerSample] = []
        self._lost: str | None = None
        self._failures = 0
        self._last_error = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._limit_w: float | None = None
        self._accelerators: int | None = None

    # -- identity ----------------------------------------------------------------------
    def identity(self) -> HardwareIdentity:
        """The hardware measured (vendor, accelerator, count, driver, rated bandwidth)."""
        if self._identity is None:
            self._identity = self.source.identity()
        return self._identity

    # -- windows -----------------------------------------------------------------------
    def start_window(self) -> None:
        """Start a window: read the baseline now and start sampling in the background.

        Raises:
            TelemetryError: a window is already open, or the meter is closed.
        """
        if self._closed:
            raise TelemetryError("the power meter is closed")
        if self._t0 is not None:
            raise TelemetryError("a power window is already open; stop it first")
        self._samples = []
        self._limit_w, self._accelerators = self._band_inputs()  # read while the device is there
        self._lost = None
        self._failures = 0
        self._last_error = ""
        self._stop = threading.Event()
        self._t0 = self.clock.now()
        self._wall0 = self.clock.wall()
        self._take(counted=False)
        if self._lost is None:
            self._thread = threading.Thread(
                target=self._run, name="tokenwatt-power-sampler", daemon=True
            )
            self._thread.start()

    def stop_window(self) -> PowerWindow:
        """End the window: stop sampling, read once more, and summarise.

        Returns:
            The window's :class:`PowerWindow` (invalid, with reasons, when something went
            wrong; never raised for measurement problems).

        Raises:
            TelemetryError: no window is open.
        """
        if self._t0 is None:
            raise TelemetryError("no power window is open; call start_window() first")
        self._halt()
        t0 = self._t0
        end_s = self.clock.now() - t0
        last_t = self._samples[-1].t_s if self._samples else -math.inf
        if self._lost is None and end_s - last_t > _SAME_INSTANT_S:
            self._take(counted=True)
            end_s = max(end_s, self._samples[-1].t_s) if self._samples else end_s
        duration_s = max(end_s, last_t, 1e-9)
        notes = list(self.source.notes)
        if self._failures:
            notes.append(f"{self._failures} readings failed (last: {self._last_error})")
        window = summarise_power_window(
            self._samples,
            duration_s=duration_s,
            source=self.source.name,
            scope=self.source.scope,
            power_method=self.source.power_method,
            devices=self.source.devices,
            lost_reason=self._lost,
            notes=notes,
            power_limit_w=self._limit_w,
            resolution=source_resolution(self.source),
            accelerators=self._accelerators,
        )
        self._t0 = None
        window = with_devices(window, self.source)
        if isinstance(self.source, WindowSeriesSource) and window.samples:
            window = self._series_timeline(window)
        return window

    def _band_inputs(self) -> tuple[float | None, int | None]:
        """The accelerators' summed power limit (W) and count, for the plausible band of any
        scope (a node reading's band is the accelerators' plus a host allowance); None where
        unknown."""
        try:
            identity = self.identity()
        except Exception:  # a vendor library's own error class: the band falls back
            return None, None
        return identity.power_limit_w, (identity.count or None)

    def _series_timeline(self, window: PowerWindow) -> PowerWindow:
        """Replace the live timeline with the source's own series for the window."""
        step = max(1.0, 1.0 / self.sampling_hz)
        assert isinstance(self.source, WindowSeriesSource)
        try:
            series = self.source.window_series(self._wall0, self._wall0 + window.duration_s, step)
        except ReadError as exc:
            return window.model_copy(
                update={"notes": [*window.notes, f"range query for the timeline failed: {exc}"]}
            )
        if not series:
            return window
        timeline = [(round(t - self._wall0, 3), round(w, 2)) for t, w in series]
        return window.model_copy(
            update={
                "timeline": timeline,
                "timeline_throttle": [[] for _ in timeline],
                "notes": [*window.notes, "timeline from the source's range query"],
            }
        )

    def close(self) -> None:
        """Stop any open window's sampling and release the source. Safe to call twice."""
        if self._closed:
            return
        self._halt()
        self._t0 = None
        self._closed = True
        self.source.close()

    def __enter__(self) -> PowerMeter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- internals ---------------------------------------------------------------------
    def _halt(self) -> None:
        self._stop.set()
        self.clock.wake()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _take(self, *, counted: bool) -> None:
        assert self._t0 is not None
        try:
            reading = self.source.read()
        except DeviceLostError as exc:
            self._lost = f"device lost mid-window: {exc}"
            return
        except ReadError as exc:
            self._failures += 1
            self._last_error = str(exc)
            return
        problem = unusable(reading)
        if problem is not None:
            self._failures += 1
            self._last_error = problem
            return
        t_s = self.clock.now() - self._t0
        self._samples.append(dataclasses.replace(reading, t_s=t_s, counted=counted))

    def _run(self) -> None:
        assert self._t0 is not None
        t0, period = self._t0, 1.0 / self.sampling_hz
        self.clock.enter()
        try:
            k = 1
            while not self.clock.wait_until(t0 + k * period, self._stop):
                self._take(counted=True)
                if self._lost is not None:
                    return
                # A slow read skips the deadlines it overran instead of bunching samples.
                k = max(k + 1, math.floor((self.clock.now() - t0) / period) + 1)
        finally:
            self.clock.leave()
