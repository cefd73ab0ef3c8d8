"""The one interface every power source implements, and what it returns.

A source reads the hardware when asked (:meth:`PowerSource.read`); the meter
(:mod:`tokenwatt.telemetry.meter`) decides when, stamps the time and hands the samples to
:func:`tokenwatt.analysis.power.power.summarise_power_window`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from tokenwatt.errors import TelemetryError
from tokenwatt.records import PowerMethod, PowerSample, PowerScope


class DeviceLostError(TelemetryError):
    """A device disappeared mid-window (e.g. ``NVMLError_GpuIsLost``): the window is invalid."""


class ReadError(TelemetryError):
    """One reading failed (timeout, HTTP error, unparsable output); the sample is skipped.

    Skipped samples only invalidate the window when they leave a gap longer than 3 s.
    """


MAX_READING_W = 1e7
"""Largest power reading taken from any source (W): 10 MW is a whole data-centre hall, so
more is a wrong unit or garbage (``1e308`` would overflow a window's energy integral)."""


@dataclass(frozen=True)
class HardwareIdentity:
    """What the meter found: the accelerators, their driver and rated memory bandwidth.

    Attributes:
        vendor: ``NVIDIA``, ``AMD``, ``sim`` or ``unknown``.
        accelerator: the name the driver reports, e.g. ``NVIDIA H100 80GB HBM3``.
        count: accelerators measured.
        driver: driver version string, if known.
        rated_bw_tbs_per_gpu: rated memory bandwidth per accelerator (TB/s, 10^12 B/s) from
            the spec, else from :mod:`tokenwatt.telemetry.hardware`'s table; None if unknown.
        rated_bw_source: where that figure came from (``spec`` or the table row's source).
        memory_bytes_per_gpu: device memory per accelerator (bytes), if known.
        table_key: the hardware table row that matched (e.g. ``h100-sxm``), if any.
        device_ids: the measured devices (UUIDs, BDFs or series names), in order.
        power_limit_w: the devices' power limits summed (W) — NVML's enforced power limit,
            AMD SMI's power cap — or None when unknown; it bounds plausible board readings.
    """

    vendor: str
    accelerator: str
    count: int
    driver: str | None = None
    rated_bw_tbs_per_gpu: float | None = None
    rated_bw_source: str | None = None
    memory_bytes_per_gpu: int | None = None
    table_key: str | None = None
    device_ids: tuple[str, ...] = ()
    power_limit_w: float | None = None


@runtime_checkable
class WindowSeriesSource(Protocol):
    """A source that can also answer for a past time range (Prometheus ``query_range``).

    The meter then takes the window's timeline from this series (its own resolution)
    instead of from the live samples, which for a scraped exporter repeat stale values.
    """

    def window_series(
        self, start_unix: float, end_unix: float, step_s: float
    ) -> list[tuple[float, float]]:
        """``(unix time, W)`` points over the range. Raises :class:`ReadError`."""
        ...


@runtime_checkable
class PowerSource(Protocol):
    """A power source: NVML, AMD SMI, Redfish, IPMI, a command, Prometheus, the simulator.

    Attributes:
        name: the source's name in records (``nvml``, ``amdsmi``, ``redfish`` …).
        scope: what its figures cover (``board``, ``node``, ``module``, ``sim``).
        power_method: how power is read (``instant``, ``average`` — flagged — or ``reading``).
        devices: how many devices the readings are summed over.
        notes: remarks for every window (e.g. a fallback in use).
    """

    name: str
    scope: PowerScope
    power_method: PowerMethod
    devices: int
    notes: list[str]

    def identity(self) -> HardwareIdentity:
        """The hardware behind the source."""
        ...

    def read(self) -> PowerSample:
        """Read once. Raises :class:`DeviceLostError` or :class:`ReadError`."""
        ...

    def close(self) -> None:
        """Release the library or connection; safe to call twice."""
        ...
