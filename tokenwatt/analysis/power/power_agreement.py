"""Cross-checks of a window's energy figures against each other (pure functions, no I/O).

A window that has both an energy counter and power samples measures the same energy twice.
The two must agree: an energy counter that counts more than the board (the module counter
of a CPU+GPU superchip such as GH200 or GB200 counts the Grace CPU and its memory too), a
counter read in the wrong unit, or a power reading that is a stale or smoothed value all
show up as a disagreement, and the window's power is then invalid with both figures
(methods/energy.md).

Tolerances per source kind (relative, of the larger of the two means):

- ``nvml`` and ``amdsmi``: :data:`TOLERANCE_BOARD` (10%). NVML's instant power field and
  AMD SMI's socket power are point readings of a sensor that itself samples only part of
  the time (Yang et al., arXiv 2312.02741: about 25% of the runtime on A100/H100);
  ``nvmlDeviceGetPowerUsage`` is a one-second running average on Ampere (except GA100) and
  newer, which lags a changing load by about half a second. Over a window of tens of
  seconds either stays within a few percent of the counter; 10% leaves room for bursty
  loads sampled at 1 Hz and nothing for a counter that counts a CPU as well;
- every other source (``redfish``, ``prometheus``, ``ipmi``, ``command``):
  :data:`TOLERANCE_OTHER` (15%): a BMC or exporter refreshes its reading every few seconds,
  so the sampled series is coarser.

Counter discontinuities: a counter that goes down is a **wrap-around** when its previous
value lay in the top half of a known modulus (the counter's register width) and the new
one in the bottom half — the energy is then recovered by adding the modulus, and a note
says so; any other decrease is a **reset** (driver reload, BMC restart) and the window's
energy is not used. A counter that jumps up by more than the window could physically draw
is caught by the agreement check.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tokenwatt.records import PowerSample

TOLERANCE_BOARD = 0.10
"""Largest relative disagreement between counter and sample means for NVML and AMD SMI."""

TOLERANCE_OTHER = 0.15
"""Largest relative disagreement for node-level and exporter sources."""

TOLERANCE_BY_SOURCE: Mapping[str, float] = {"nvml": TOLERANCE_BOARD, "amdsmi": TOLERANCE_BOARD}
"""Tolerance per source name; a source not named here gets :data:`TOLERANCE_OTHER`."""

ABS_SLACK_W_PER_DEVICE = 2.0
"""Absolute slack per device (W) added to the tolerance, so two near-idle figures a watt
apart are not called a disagreement."""

MIN_CHECK_SPAN_S = 5.0
"""Shortest span of readings (s) over which the two figures are compared; shorter windows
get a note instead (too few samples for a fair integral)."""

MIN_CHECK_SAMPLES = 4
"""Fewest power samples over which the two figures are compared."""


def tolerance_for(source: str) -> float:
    """Relative tolerance between counter and sample means for a source name."""
    return TOLERANCE_BY_SOURCE.get(source, TOLERANCE_OTHER)


@dataclass(frozen=True)
class CounterEnergy:
    """A window's counter energy with its discontinuities resolved.

    Attributes:
        energy_j: summed counter energy (J), or None when it cannot be used.
        span_s: time between the first and last counter readings (s).
        reasons: why the counter energy cannot be used (resets, missing devices).
        notes: remarks that do not invalidate it (a wrap-around recovered).
    """

    energy_j: float | None
    span_s: float
    reasons: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def _device_energy(
    dev: str, points: Sequence[tuple[float, float]], wrap_j: float | None
) -> tuple[float | None, list[str], list[str]]:
    """One device's energy over its counter readings ``(t_s, J)``, wraps added back."""
    total, reasons, notes = 0.0, [], []
    for (_, prev), (t, value) in itertools.pairwise(points):
        step = value - prev
        if step >= 0:
            total += step
            continue
        if wrap_j is not None and prev >= wrap_j / 2 and value < wrap_j / 2:
            total += value + wrap_j - prev
            notes.append(
                f"energy counter of {dev} wrapped around at t={t:.1f} s "
                f"(modulus {wrap_j:.6g} J): the wrap was added back"
            )
            continue
        reasons.append(
            f"energy counter of {dev} went backwards by {-step:.1f} J at t={t:.1f} s "
            "(counter reset or driver reload): window energy not used"
        )
    return (None if reasons else total), reasons, notes


def counter_energy(
    samples: Sequence[PowerSample], *, wrap_j: float | None = None
) -> CounterEnergy | None:
    """Counter energy over the window, summed over devices, resets and wraps detected.

    Args:
        samples: the window's readings in time order.
        wrap_j: the counters' modulus (J) when the source knows its register width, else
            None (every decrease is then a reset).

    Returns:
        None when no sample carries counters.
    """
    with_counters = [s for s in samples if s.counters_j is not None]
    if not with_counters:
        return None
    first, last = with_counters[0], with_counters[-1]
    assert first.counters_j is not None and last.counters_j is not None
    reasons: list[str] = []
    notes: list[str] = []
    missing = sorted(set(first.counters_j) ^ set(last.counters_j))
    if missing:
        reasons.append(
            "energy counter missing at the window's start or end for " + ", ".join(missing)
        )
    if last is first:
        reasons.append("only one energy counter reading in the window")
    total = 0.0
    for dev in sorted(first.counters_j):
        points = [
            (s.t_s, s.counters_j[dev])
            for s in with_counters
            if s.counters_j is not None and dev in s.counters_j
        ]
        energy, dev_reasons, dev_notes = _device_energy(dev, points, wrap_j)
        reasons += dev_reasons
        notes += dev_notes
        total += energy or 0.0
    span = last.t_s - first.t_s
    return CounterEnergy(
        energy_j=None if reasons else total, span_s=span, reasons=tuple(reasons), notes=tuple(notes)
    )


def disagreement(
    *,
    counter_mean_w: float,
    sample_mean_w: float,
    source: str,
    devices: int | None,
) -> str | None:
    """The reason the counter and the samples disagree, or None when they agree.

    They agree when ``|counter − samples| ≤ tolerance × max(counter, samples) + slack``,
    with the tolerance of :func:`tolerance_for` and :data:`ABS_SLACK_W_PER_DEVICE` per
    device. Both means are in W.
    """
    tol = tolerance_for(source)
    slack = ABS_SLACK_W_PER_DEVICE * max(devices or 1, 1)
    diff = abs(counter_mean_w - sample_mean_w)
    if diff <= tol * max(counter_mean_w, sample_mean_w) + slack:
        return None
    ratio = counter_mean_w / sample_mean_w if sample_mean_w > 0 else float("inf")
    hint = ""
    if ratio > 1 + tol:
        hint = (
            " (the counter counts more than the power readings: on a CPU+GPU superchip "
            "such as GH200/GB200 the counter covers the whole module)"
        )
    return (
        f"energy counter says {counter_mean_w:.1f} W on average but the power samples "
        f"integrate to {sample_mean_w:.1f} W ({ratio:.2f}×; {source} tolerance "
        f"{100 * tol:g}% + {slack:g} W){hint}: power figure not used"
    )


__all__ = [
    "ABS_SLACK_W_PER_DEVICE",
    "MIN_CHECK_SAMPLES",
    "MIN_CHECK_SPAN_S",
    "TOLERANCE_BOARD",
    "TOLERANCE_BY_SOURCE",
    "TOLERANCE_OTHER",
    "CounterEnergy",
    "counter_energy",
    "disagreement",
    "tolerance_for",
]
