"""Plausibility rules for a window's power readings (pure functions, no I/O).

A power series can be wrong without any read failing: an energy counter that stops moving
while the board draws hundreds of watts, a negative reading, an H100 "drawing" 1.5 W under
load. Such a window's figures must not reach a tokens-per-joule headline, so each rule
below returns the reasons that make the window invalid; :func:`summarise_power_window
<tokenwatt.analysis.power.summarise_power_window>` adds them to ``invalid_reasons``.

The bar is the field's own validity checks: MLPerf's power rules refuse a run whose meter
readings are out of range or missing, and Zeus and InferenceX discard windows whose energy
counter does not advance. The thresholds are deliberately wide, so that only readings
that cannot be physical are refused:

- **floor**: :data:`FLOOR_W_PER_DEVICE` per device. Idle data-centre accelerators draw tens
  of watts (an idle H100 SXM about 70 W, an L4 about 16 W), so a reading under 5 W per board
  is a broken sensor or a wrong unit, not a quiet GPU;
- **ceiling**: :data:`CEILING_FACTOR` × the power limit (summed over the devices) where the
  limit is known (NVML's enforced power limit, amdsmi's power cap, or the spec). Boards
  briefly exceed their limit by a few percent in instant readings; 30% above it is not
  physical for any board we know;
- **frozen counter**: a device's energy counter that does not move over a window of at least
  :data:`FROZEN_MIN_SPAN_S` while the power readings say the board draws at least the floor.
"""

from __future__ import annotations

from collections.abc import Sequence

from tokenwatt.records import PowerSample

FLOOR_W_PER_DEVICE = 5.0
"""Lowest plausible board power per device (W); see the module docstring."""

CEILING_FACTOR = 1.3
"""Highest plausible reading as a multiple of the (summed) power limit."""

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


def out_of_band(
    samples: Sequence[PowerSample],
    *,
    floor_w: float | None,
    power_limit_w: float | None,
) -> list[str]:
    """Reasons for readings below ``floor_w`` or above :data:`CEILING_FACTOR` × the limit.

    Args:
        samples: the window's readings (power summed over the devices, W).
        floor_w: lowest plausible summed reading (W), or None for no floor.
        power_limit_w: the devices' summed power limit (W), or None when unknown.
    """
    reasons: list[str] = []
    watts = [s.power_w for s in samples if s.power_w is not None and s.power_w >= 0]
    if floor_w is not None:
        low = [w for w in watts if w < floor_w]
        if low:
            reasons.append(
                f"{len(low)} power readings below the plausible floor of {floor_w:g} W "
                f"(lowest {min(low):.1f} W): power figure not used"
            )
    if power_limit_w is not None and power_limit_w > 0:
        ceiling = CEILING_FACTOR * power_limit_w
        high = [w for w in watts if w > ceiling]
        if high:
            reasons.append(
                f"{len(high)} power readings above {CEILING_FACTOR:g}× the power limit of "
                f"{power_limit_w:g} W (highest {max(high):.1f} W): power figure not used"
            )
    return reasons


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
    power_limit_w: float | None,
    check_band: bool = True,
) -> list[str]:
    """Every plausibility reason for one window's readings (empty when all look physical).

    Args:
        samples: the window's readings, in time order.
        devices: how many devices the readings sum over (None: one).
        power_limit_w: the summed power limit (W), or None when unknown (no ceiling).
        check_band: False for modelled power (the simulator), which has no physical band.
    """
    floor_w = FLOOR_W_PER_DEVICE * max(devices or 1, 1)
    reasons = negative_readings(samples)
    if check_band:
        reasons += out_of_band(samples, floor_w=floor_w, power_limit_w=power_limit_w)
    reasons += frozen_counters(samples, floor_w=floor_w)
    return reasons


__all__ = [
    "CEILING_FACTOR",
    "FLOOR_W_PER_DEVICE",
    "FROZEN_MIN_SPAN_S",
    "frozen_counters",
    "negative_readings",
    "out_of_band",
    "plausibility_problems",
]
