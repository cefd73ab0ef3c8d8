"""Power and clock figures: one reading of a power source, and one window as stored in run
records."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from pydantic import Field

from tokenwatt.records.shared.base import BoundedFloat, NonNegFloat, NonNegInt, StrictModel

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
    it counts, and :func:`tokenwatt.analysis.summarise_power_window` turns a window's samples into
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


class MeasuredDevice(StrictModel):
    """One device whose power a window sums."""

    uuid: str
    """The device's UUID (NVML ``GPU-…``), or its PCI bus id where no UUID is read (AMD SMI)."""
    name: str
    """The model name the driver reports (e.g. NVIDIA H100 80GB HBM3)."""
    bus_id: str
    """PCI bus id (domain:bus:device.function), lower case."""


class PowerWindow(StrictModel):
    """Power over one window, summed over GPUs (or the node, per ``scope``).

    ``energy_method`` is ``counter`` (difference of a hardware energy counter) or
    ``integrated`` (trapezoid over power samples; flagged as less exact). When ``valid`` is
    false the figures must not be used and ``invalid_reasons`` says why (counter went
    backwards, sample gap > 3 s, device lost).
    """

    source: str
    """The power source that read the samples (nvml, amdsmi, ipmi, redfish, prometheus, command,
    sim)."""
    scope: PowerScope
    """What the figures cover: board (accelerator boards), node (the whole server), module or sim
    (the simulated engine's model)."""
    samples: NonNegInt
    """Power samples taken within the window."""
    duration_s: NonNegFloat
    """Length of the window the figures cover (s)."""
    mean_power_w: NonNegFloat | None = None
    """Mean power over the window (W), summed over the devices: energy counter difference / its time
    span, or the sample integral / its span; null without a reading."""
    energy_j: NonNegFloat | None = None
    """Energy over the window (J), summed over the devices (see energy_method); readings covering
    only part of the window are scaled to it as mean power × duration_s; null without a reading."""
    energy_method: Literal["counter", "integrated"] | None = None
    """How energy_j was found: counter (difference of a hardware energy counter) or integrated
    (trapezoid over the power samples, less exact); null without a reading."""
    valid: bool = True
    """False when the window's power figures must not be used (see invalid_reasons)."""
    invalid_reasons: list[str] = Field(default_factory=list)
    """Why the figures are invalid, in words: counter went backwards, a gap between samples longer
    than the limit, implausible readings, device lost."""
    throttle_counts: dict[str, NonNegInt] = Field(default_factory=dict)
    """For each clock-event (throttle) reason, the number of the window's samples that had it set.
    """
    sm_clock_mhz_mean: NonNegFloat | None = None
    """Mean SM (graphics) clock over the window's samples (MHz); null where the source does not read
    clocks."""
    mem_clock_mhz_mean: NonNegFloat | None = None
    """Mean memory clock over the window's samples (MHz); null where the source does not read
    clocks."""
    temperature_c_max: float | None = Field(default=None, ge=-273.15, le=1000)
    """Highest device temperature read in the window (°C); null where the source reads none."""
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
    measured_devices: list[MeasuredDevice] = Field(default_factory=list)
    """The devices measured (UUID, name, bus id), in the order read; empty where the source
    cannot name them (node-level readings, records before this field)."""
    device_selection: str | None = None
    """How the devices were chosen: engine processes (the GPUs running the launched engine's
    PIDs), CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES, spec hardware.gpus, or all visible;
    null where the source does not choose devices."""
