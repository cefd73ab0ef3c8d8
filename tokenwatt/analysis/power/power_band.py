"""The plausible band of a power reading for every source kind, the unit a reading off by
about 1,000 is likely in, and whether a source's resolution can measure a window (pure
functions, no I/O).

Band (methods/energy.md):

- ``board`` (NVML, AMD SMI, a DCGM exporter): floor :data:`FLOOR_W_PER_DEVICE` per device;
  ceiling :data:`CEILING_FACTOR` × the devices' summed power limit, or
  × :data:`GENERIC_DEVICE_MAX_W` per device where no limit is known (the most any
  accelerator board draws today: B200/B300 and MI355X boards are rated 1,000–1,400 W);
- ``node`` and ``module`` (Redfish, IPMI, a command, a superchip's module counter): floor
  :data:`NODE_FLOOR_W`; ceiling :data:`CEILING_FACTOR` × the accelerators' summed limit
  plus a host allowance of max(:data:`HOST_ALLOWANCE_MIN_W`, :data:`HOST_ALLOWANCE_SHARE` ×
  the summed limit) for CPUs, memory, NICs, fans, switches and power-supply losses (an
  8× H100 HGX node is rated 10.2 kW for 5.6 kW of GPUs); with no device count known,
  :data:`NODE_DEVICES_ASSUMED` devices are assumed;
- ``sim``: none (modelled power).

Resolution: a counter whose step, or a reading whose refresh interval, is more than
:data:`RESOLUTION_SHARE` of the window's energy (of its length) cannot measure that
window; the reason names the window length that would be long enough.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from tokenwatt.records import PowerSample, PowerScope

FLOOR_W_PER_DEVICE = 5.0
"""Lowest plausible board power per device (W): idle data-centre accelerators draw tens of
watts (an idle H100 SXM about 70 W, an L4 about 16 W)."""

CEILING_FACTOR = 1.3
"""Highest plausible reading as a multiple of the (summed) power limit: boards briefly exceed
their limit by a few percent in instant readings; 30% above it is not physical."""

GENERIC_DEVICE_MAX_W = 1500.0
"""Power limit assumed per device (W) where none is known."""

NODE_FLOOR_W = 30.0
"""Lowest plausible node or module reading (W): a server with accelerators idles at
hundreds of watts; 30 W leaves room for a small workstation."""

HOST_ALLOWANCE_MIN_W = 2000.0
"""Smallest allowance (W) for everything in a node besides the accelerators."""

HOST_ALLOWANCE_SHARE = 0.8
"""Host allowance as a share of the accelerators' summed limit, when that is larger."""

NODE_DEVICES_ASSUMED = 8
"""Devices assumed in a node whose accelerator count is unknown (an HGX board's eight)."""

UNIT_FACTOR = 1000.0
"""A reading this many times off names the likely unit (mW or kW read as W)."""

RESOLUTION_SHARE = 0.02
"""Largest share of a window's energy (or length) one counter step (or reading interval)
may be."""


@dataclass(frozen=True)
class Band:
    """The plausible range of a (summed) power reading, in W, and how it was set."""

    floor_w: float
    ceiling_w: float
    basis: str


@dataclass(frozen=True)
class Resolution:
    """What a source says about its own resolution (all optional).

    Attributes:
        counter_step_j: the energy counter's smallest increment (J).
        counter_wrap_j: the counter's modulus (J) where it wraps around.
        reading_interval_s: how often the power reading is refreshed at the source (s).
    """

    counter_step_j: float | None = None
    counter_wrap_j: float | None = None
    reading_interval_s: float | None = None


def plausible_band(
    scope: PowerScope, *, devices: int | None, power_limit_w: float | None
) -> Band | None:
    """The band for a reading of ``scope`` over ``devices`` with a summed limit (W).

    None for ``sim`` (modelled power has no physical band). See the module docstring.
    """
    if scope == "sim":
        return None
    n = max(devices or 0, 0)
    if power_limit_w is not None and power_limit_w > 0:
        limit, basis = power_limit_w, f"the power limit of {power_limit_w:g} W"
    else:
        n_assumed = n or (NODE_DEVICES_ASSUMED if scope != "board" else 1)
        limit = GENERIC_DEVICE_MAX_W * n_assumed
        basis = f"no known power limit: {GENERIC_DEVICE_MAX_W:g} W for each of {n_assumed} devices"
    if scope == "board":
        return Band(FLOOR_W_PER_DEVICE * max(n, 1), CEILING_FACTOR * limit, basis)
    host = max(HOST_ALLOWANCE_MIN_W, HOST_ALLOWANCE_SHARE * limit)
    return Band(
        NODE_FLOOR_W, CEILING_FACTOR * limit + host, f"{basis}, plus a host allowance of {host:g} W"
    )


def unit_hint(reading_w: float, band: Band) -> str:
    """The likely unit of a reading outside the band, e.g. ``" (likely milliwatts …)"``;
    empty when a factor of :data:`UNIT_FACTOR` does not bring it into the band."""
    if reading_w > band.ceiling_w and band.floor_w <= reading_w / UNIT_FACTOR <= band.ceiling_w:
        return f" (likely milliwatts read as watts: {reading_w / UNIT_FACTOR:.1f} W if mW)"
    if 0 < reading_w < band.floor_w and band.floor_w <= reading_w * UNIT_FACTOR <= band.ceiling_w:
        return f" (likely kilowatts read as watts: {reading_w * UNIT_FACTOR:.0f} W if kW)"
    return ""


def band_problems(samples: Sequence[PowerSample], band: Band) -> list[str]:
    """Reasons for readings outside ``band``, each naming the likely unit where it can."""
    watts = [s.power_w for s in samples if s.power_w is not None and s.power_w >= 0]
    reasons: list[str] = []
    low = [w for w in watts if w < band.floor_w]
    if low:
        reasons.append(
            f"{len(low)} power readings below the plausible floor of {band.floor_w:g} W "
            f"(lowest {min(low):.1f} W){unit_hint(statistics.median(low), band)}: "
            "power figure not used"
        )
    high = [w for w in watts if w > band.ceiling_w]
    if high:
        reasons.append(
            f"{len(high)} power readings above the plausible ceiling of {band.ceiling_w:g} W "
            f"({CEILING_FACTOR:g}× {band.basis}; highest {max(high):.1f} W)"
            f"{unit_hint(statistics.median(high), band)}: power figure not used"
        )
    return reasons


def resolution_problems(
    samples: Sequence[PowerSample],
    resolution: Resolution,
    *,
    duration_s: float,
    energy_j: float | None,
    used_counter: bool,
) -> list[str]:
    """Reasons a source's resolution is too coarse for a window of ``duration_s`` (s).

    A counter step above :data:`RESOLUTION_SHARE` × the window's energy ``energy_j`` (J), or
    a reading interval above :data:`RESOLUTION_SHARE` × the window's length where the energy
    is integrated from the readings, makes the window unmeasurable; each reason names the
    window length that would do at this power.
    """
    reasons: list[str] = []
    step = resolution.counter_step_j
    if used_counter and step and energy_j and energy_j > 0 and step > RESOLUTION_SHARE * energy_j:
        mean_w = energy_j / duration_s
        needed = step / (RESOLUTION_SHARE * mean_w)
        reasons.append(
            f"energy counter step of {step:.6g} J is {100 * step / energy_j:.0f}% of the "
            f"window's {energy_j:.0f} J (at most {100 * RESOLUTION_SHARE:g}%): the counter "
            f"cannot measure a {duration_s:.0f} s window; at {mean_w:.0f} W it needs "
            f"at least {needed:.0f} s"
        )
    interval = resolution.reading_interval_s
    # A counter's energy does not depend on how often the power reading refreshes.
    if interval and samples and not used_counter and interval > RESOLUTION_SHARE * duration_s:
        reasons.append(
            f"power reading refreshed every {interval:g} s, "
            f"{100 * interval / duration_s:.0f}% of the {duration_s:.0f} s window (at most "
            f"{100 * RESOLUTION_SHARE:g}%): the window needs at least "
            f"{interval / RESOLUTION_SHARE:.0f} s"
        )
    return reasons


__all__ = [
    "CEILING_FACTOR",
    "FLOOR_W_PER_DEVICE",
    "GENERIC_DEVICE_MAX_W",
    "HOST_ALLOWANCE_MIN_W",
    "HOST_ALLOWANCE_SHARE",
    "NODE_DEVICES_ASSUMED",
    "NODE_FLOOR_W",
    "RESOLUTION_SHARE",
    "UNIT_FACTOR",
    "Band",
    "Resolution",
    "band_problems",
    "plausible_band",
    "resolution_problems",
    "unit_hint",
]
