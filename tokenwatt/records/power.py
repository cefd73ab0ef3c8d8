"""Power and clock figures for one measurement window, as stored in run records."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tokenwatt.records.base import BoundedFloat, NonNegFloat, NonNegInt, StrictModel

PowerScope = Literal["board", "node", "module", "sim"]


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
    power_method: Literal["instant", "average", "reading"] | None = None
    """How the power samples were read: ``instant`` (NVML field value / socket power),
    ``average`` (a driver-side running average, e.g. ``nvmlDeviceGetPowerUsage``: flagged,
    transients are smoothed), ``reading`` (whatever a BMC, exporter or command reported)."""
    devices: NonNegInt | None = None
    """How many devices (GPUs, or series for Prometheus) the figures are summed over."""
    notes: list[str] = Field(default_factory=list)
    """Remarks that do not invalidate the window (fallbacks used, reads that failed)."""
