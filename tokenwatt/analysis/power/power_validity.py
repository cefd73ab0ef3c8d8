"""Plausibility rules for a window's power readings (pure functions, no I/O).

A power series can be wrong without any read failing: an energy counter that stops moving
while the board draws hundreds of watts, a negative reading, an H100 "drawing" 1.5 W under
load. Such a window's figures must not reach a tokens-per-joule headline, so each rule
below returns the reasons that make the window invalid; :func:`summarise_power_window
<tokenwatt.analysis.power.power.summarise_power_window>` adds them to ``invalid_reasons``.

The bar is the field's own validity checks: MLPerf's power rules refuse a run whose meter
readings are out of range or missing, and Zeus and InferenceX discard windows whose energy
counter does not advance. The thresholds are deliberately wide, so that only readings
that cannot be physical are refused:

- **band**: a floor and a ceiling for every source kind, from the devices and their power
  limits (:mod:`tokenwatt.analysis.power.power_band`), naming the likely unit of a reading off by
  about 1,000;
- **frozen counter**: a device's energy counter that does not move over a window of at least
  :data:`FROZEN_MIN_SPAN_S` while the power readings say the board draws at least the floor.
"""

from __future__ import annotations

from collections.abc import Sequence

from tokenwatt.analysis.power.power_band import (
    CEILING_FACTOR,
    FLOOR_W_PER_DEVICE,
    Band,
    band_problems,
)
from tokenwatt.records import PowerSample

FROZEN_MIN_SPAN_S = 1.0
"""A counter is judged frozen only over at least this many seconds of readings (s)."""


def negative_readings(samples: Sequence[PowerSample]) -> list[str]:
    """A reason when any power reading is below zero (W); none otherwise."""
    negative = [s.power_w for s in samples if s.power_w is not None and s.power_w < 0]
    if not negative:
        return []
    return [
        f"{len(negative)} power readings were negative (lowest {min(negative):.1f} W): "
        "power figure not used"
    ]


def frozen_counters(samples: Sequence[PowerSample], *, floor_w: float) -> list[str]:
    """Reasons for energy counters that did not move while power was drawn.

    A device's counter is frozen when its first and last readings in the window are equal,
    the readings span at least :data:`FROZEN_MIN_SPAN_S`, and the mean of the power readings
    over that span is at least ``floor_w`` (so a truly idle, unpowered reading is not blamed).
    """
    with_counters = [s for s in samples if s.counters_j is not None]
    if len(with_counters) < 2:
        return []
    first, last = with_counters[0], with_counters[-1]
    span = last.t_s - first.t_s
    watts = [s.power_w for s in samples if s.power_w is not None]
    if span < FROZEN_MIN_SPAN_S or not watts:
        return []
    mean_w = sum(watts) / len(watts)
    if mean_w < floor_w:
        return []
    assert first.counters_j is not None and last.counters_j is not None
    stuck = sorted(
        dev
        for dev, start in first.counters_j.items()
        if dev in last.counters_j and last.counters_j[dev] == start
    )
    return [
        f"energy counter of {dev} did not move over {span:.1f} s while power read "
        f"{mean_w:.0f} W on average: window energy not used"
        for dev in stuck
    ]


def plausibility_problems(
    samples: Sequence[PowerSample],
    *,
    devices: int | None,
    band: Band | None,
) -> list[str]:
    """Every plausibility reason for one window's readings (empty when all look physical).

    Args:
        samples: the window's readings, in time order.
        devices: how many devices the readings sum over (None: one).
        band: the plausible band (:func:`~tokenwatt.analysis.power.power_band.plausible_band`), or
            None for modelled power (the simulator), which has no physical band.
    """
    reasons = negative_readings(samples)
    if band is not None:
        reasons += band_problems(samples, band)
    reasons += frozen_counters(samples, floor_w=FLOOR_W_PER_DEVICE * max(devices or 1, 1))
    return reasons


__all__ = [
    "CEILING_FACTOR",
    "FLOOR_W_PER_DEVICE",
    "FROZEN_MIN_SPAN_S",
    "frozen_counters",
    "negative_readings",
    "plausibility_problems",
]
