"""Power and clock figures: one reading of a power source, and one window as stored in run
records."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from pydantic import Field

from tokenwatt.records.base import BoundedFloat, NonNegFloat, NonNegInt, StrictModel

PowerScope = Literal["board", "node", "module", "sim"]

PowerMethod = Literal["instant", "average", "reading"]
"""How a source reads power: ``instant`` (NVML field value / socket power), ``average`` (a
driver-side running average: flagged, transients are smoothed), ``reading`` (whatever a
BMC, exporter or command reported)."""


@dataclass(frozen=True)
class PowerSample:
    """One reading of a power source, summed or merged over its devices.

    A source's ``read()`` returns one with ``t_s`` left at 0; the meter
    (:mod:`tokenwatt.telemetry.meter`) stamps the time since the window's start and whether
    it counts, and :func:`tokenwatt.analysis.summarize_window` turns a window's samples into
    a :class:`PowerWindow`.

    Attributes:
        t_s: time since the window started (s).
        power_w: power summed over the devices (W), or None when it could not be read.
        counters_j: cumulative energy counter per device id (J), or None when the source has
            no counter (energy is then integrated from ``power_w``). Differences over the
            window give the energy.
        sm_clock_mhz: mean SM (graphics) clock over the devices (MHz).
        mem_clock_mhz: mean memory clock over the devices (MHz).
        temperature_c: hottest device (°C).
        throttle: clock-event (throttle) reasons active on any device, by name.
        counted: False for the baseline reading taken at the window's start; it anchors the
            integral and the counters but is not one of the window's sampling intervals.
    """

    t_s: float = 0.0
    power_w: float | None = None
    counters_j: Mapping[str, float] | None = None
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    temperature_c: float | None = None
    throttle: frozenset[str] = field(default_factory=frozenset)
    counted: bool = True


class PowerWindow(StrictModel):
    """Power over one window, summed over GPUs (or the node, per ``scope``).

    ``energy_method`` is ``counter`` (difference of a hardware energy counter) or
    ``integrated`` (trapezoid over power samples; flagged as less exact). When ``valid`` is
    false the figures must not be used and ``invalid_reasons`` says why (counter went
    backwards, sample gap > 3 s, device lost).
    """

    source: str
    scope: PowerScope
    samples: NonNegInt
    duration_s: NonNegFloat
    mean_power_w: NonNegFloat | None = None
    energy_j: NonNegFloat | None = None
    energy_method: Literal["counter", "integrated"] | None = None
    valid: bool = True
    invalid_reasons: list[str] = Field(default_factory=list)
    throttle_counts: dict[str, NonNegInt] = Field(default_factory=dict)
    sm_clock_mhz_mean: NonNegFloat | None = None
    mem_clock_mhz_mean: NonNegFloat | None = None
    temperature_c_max: float | None = Field(default=None, ge=-273.15, le=1000)
    timeline: list[tuple[NonNegFloat, BoundedFloat]] = Field(default_factory=list)
    """(seconds from window start, W) pairs for the timeline chart."""
    timeline_throttle: list[list[str]] = Field(default_factory=list)
    """Active throttle reasons per timeline sample, same length as ``timeline``."""
    power_method: PowerMethod | None = None
    """How the power samples were read: ``instant`` (NVML field value / socket power),
    ``average`` (a driver-side running average, e.g. ``nvmlDeviceGetPowerUsage``: flagged,
    transients are smoothed), ``reading`` (whatever a BMC, exporter or command reported)."""
    devices: NonNegInt | None = None
    """How many devices (GPUs, or series for Prometheus) the figures are summed over."""
    notes: list[str] = Field(default_factory=list)
    """Remarks that do not invalidate the window (fallbacks used, reads that failed)."""
