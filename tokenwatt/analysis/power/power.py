"""Power figures of one measurement window, from samples: pure functions, no I/O.

The telemetry stage reads the hardware and hands this module a list of :class:`PowerSample`;
everything that turns samples into the record's figures lives here so it can be checked
against synthetic traces with known integrals:

- energy from a hardware counter (difference over the window) when every device has one,
  else the trapezoid integral of the power samples (``numpy.trapezoid``), flagged
  ``integrated`` (methods/energy.md);
- validity: a counter that goes backwards (driver reload) invalidates the window's energy;
  a gap between power samples longer than :data:`MAX_SAMPLE_GAP_S` invalidates the power
  figure; implausible readings (negative, outside the device's band, a frozen counter:
  :mod:`tokenwatt.analysis.power.power_validity`) invalidate it too; all are written to
  ``invalid_reasons`` and never patched;
- throttle counts: for each clock-event reason, the number of samples that had it set
  (methods/energy.md; seed: 199 of 240 one-second samples ≈ 83%).
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Literal

import numpy as np

from tokenwatt.analysis.power.power_agreement import (
    MIN_CHECK_SAMPLES,
    MIN_CHECK_SPAN_S,
    CounterEnergy,
    counter_energy,
    disagreement,
)
from tokenwatt.analysis.power.power_band import Resolution, plausible_band, resolution_problems
from tokenwatt.analysis.power.power_validity import plausibility_problems
from tokenwatt.records import PowerMethod, PowerSample, PowerScope, PowerWindow

MAX_SAMPLE_GAP_S = 3.0
"""Longest allowed gap between power samples (s); longer gaps invalidate the power figure."""

COVERAGE_NOTE = 0.99
"""Readings spanning less than this share of the window get a note; the energy is the
readings' mean power × the window's length either way (a slow source's first reading lands
late, so its span can be much shorter than the window)."""

MAX_TIMELINE_POINTS = 1800
"""Timeline points kept per window; longer timelines are thinned evenly (30 min at 1 Hz)."""

NOT_COVERED_BY_SCOPE: dict[str, str] = {
    "board": (
        "Whole-node power: energy figures are GPU board power only "
        "(no CPUs, memory, NICs, fans or PSU losses)"
    ),
    "module": (
        "Whole-node power: energy figures are accelerator module power only "
        "(no host CPUs outside the module, NICs, fans or PSU losses)"
    ),
    "node": (
        "Facility power: energy figures are the node's own reading "
        "(no PSU-to-wall losses beyond what the BMC measures, no cooling or network switches)"
    ),
    "sim": "Real power: energy figures come from the simulated engine's load model, not hardware",
}


def not_covered_text(scope: PowerScope) -> str:
    """The report's not-covered sentence for power figures of the given scope.

    ``board``: GPU board power only; ``module``: accelerator module (e.g. a superchip);
    ``node``: the BMC's node reading; ``sim``: modelled, not measured.
    """
    return NOT_COVERED_BY_SCOPE[scope]


def trapezoid_energy_j(times_s: Sequence[float], power_w: Sequence[float]) -> float:
    """Energy (J) under a power trace (W over s) by the trapezoid rule (``numpy.trapezoid``).

    Raises:
        ValueError: lengths differ, fewer than two samples, or times not increasing.
    """
    if len(times_s) != len(power_w):
        raise ValueError(f"{len(times_s)} times but {len(power_w)} power values")
    if len(times_s) < 2:
        raise ValueError("need at least two samples to integrate")
    t = np.asarray(times_s, dtype=float)
    if np.any(np.diff(t) <= 0):
        raise ValueError("sample times must be strictly increasing")
    return float(np.trapezoid(np.asarray(power_w, dtype=float), t))


def sample_gaps(
    times_s: Sequence[float], duration_s: float, max_gap_s: float = MAX_SAMPLE_GAP_S
) -> list[tuple[float, float]]:
    """Gaps longer than ``max_gap_s`` (s) in a window ``[0, duration_s]`` covered by samples.

    The window's start and end count as edges, so a source that stopped answering halfway
    through shows a gap up to the end.

    Returns:
        ``(from_s, to_s)`` pairs, in time order.
    """
    edges = [0.0, *sorted(times_s), duration_s]
    return [(a, b) for a, b in itertools.pairwise(edges) if b - a > max_gap_s]


def throttle_counts(samples: Iterable[PowerSample]) -> dict[str, int]:
    """For each throttle reason, how many counted samples had it set (sorted by name)."""
    counts: Counter[str] = Counter()
    for s in samples:
        if s.counted:
            counts.update(s.throttle)
    return dict(sorted(counts.items()))


def throttle_share_pct(count: int, samples: int) -> float:
    """Share (%) of samples with a throttle reason set: 100 × count / samples.

    Seed check: 199 of 240 → 82.9%.

    Raises:
        ValueError: no samples, or a count outside ``[0, samples]``.
    """
    if samples <= 0:
        raise ValueError("no samples")
    if not 0 <= count <= samples:
        raise ValueError(f"count {count} outside 0..{samples}")
    return 100.0 * count / samples


def sum_throttle_counts(windows: Iterable[PowerWindow]) -> tuple[dict[str, int], int]:
    """Throttle counts and sample totals summed over windows (e.g. a run's repeats).

    Returns:
        ``(counts per reason, total samples)``; the seed's 199 of 240 is two 120-sample
        windows summed this way.
    """
    counts: Counter[str] = Counter()
    total = 0
    for w in windows:
        counts.update(w.throttle_counts)
        total += w.samples
    return dict(sorted(counts.items())), total


def window_tokens_per_joule(window: PowerWindow, output_tokens: float) -> float | None:
    """Tokens per joule = goodput tokens in the window / energy in the window (J).

    methods/energy.md. None when the window is invalid or has no energy.
    Seed check: 4572.3 tok/s × 120 s / (637 W × 120 s) ≈ 7.18.
    """
    if not window.valid or window.energy_j is None or window.energy_j <= 0:
        return None
    return output_tokens / window.energy_j


def _mean(values: Iterable[float | None]) -> float | None:
    kept = [v for v in values if v is not None and math.isfinite(v)]
    return sum(kept) / len(kept) if kept else None


def _thin(n: int, max_points: int) -> list[int]:
    if n <= max_points:
        return list(range(n))
    step = (n - 1) / (max_points - 1)
    return sorted({round(i * step) for i in range(max_points)})


def _sample_means(
    powered: Sequence[PowerSample],
) -> tuple[float | None, float | None, float]:
    """The samples' trapezoid integral (J), their time-weighted mean (W) and span (s)."""
    times = [s.t_s for s in powered]
    watts = [float(s.power_w) for s in powered if s.power_w is not None]
    if len(powered) >= 2 and times[-1] > times[0]:
        integral = trapezoid_energy_j(times, watts)
        return integral, integral / (times[-1] - times[0]), times[-1] - times[0]
    return None, (watts[0] if watts else None), 0.0


def _cross_check(
    counter: CounterEnergy | None,
    sample_mean_w: float | None,
    powered: Sequence[PowerSample],
    *,
    source: str,
    devices: int | None,
) -> tuple[list[str], list[str]]:
    """Reasons (a disagreement) and notes (too short to compare) from counter vs samples."""
    if counter is None or counter.energy_j is None or sample_mean_w is None:
        return [], []
    span = powered[-1].t_s - powered[0].t_s if powered else 0.0
    if counter.span_s <= 0:
        return [], []
    if span < MIN_CHECK_SPAN_S or len(powered) < MIN_CHECK_SAMPLES:
        return [], [
            f"energy counter not cross-checked against the power samples: {len(powered)} "
            f"samples over {span:.1f} s (at least {MIN_CHECK_SAMPLES} over "
            f"{MIN_CHECK_SPAN_S:g} s needed)"
        ]
    reason = disagreement(
        counter_mean_w=counter.energy_j / counter.span_s,
        sample_mean_w=sample_mean_w,
        source=source,
        devices=devices,
    )
    return ([reason] if reason else []), []


def _energy(
    counter: CounterEnergy | None,
    integral_j: float | None,
    sample_mean_w: float | None,
    sample_span_s: float,
    *,
    duration_s: float,
    notes: list[str],
) -> tuple[Literal["counter", "integrated"] | None, float | None, float | None]:
    """The window's energy method, energy (J) and mean power (W); a coverage note is
    appended to ``notes`` when the readings span less than the window."""
    method: Literal["counter", "integrated"] | None
    if counter is not None:
        method, energy_j, span_s = "counter", counter.energy_j, counter.span_s
        mean_w = energy_j / span_s if energy_j is not None and span_s > 0 else sample_mean_w
    else:
        method = "integrated" if integral_j is not None else None
        energy_j, mean_w, span_s = integral_j, sample_mean_w, sample_span_s
    if energy_j is not None and mean_w is not None and 0 < span_s < duration_s:
        # Readings that cover only part of the window (a slow source's first reading lands
        # late) would charge the whole window's tokens to part of its energy.
        energy_j = mean_w * duration_s
        if span_s < COVERAGE_NOTE * duration_s:
            notes.append(
                f"readings cover {span_s:.1f} s of the {duration_s:.1f} s window: energy is "
                "their mean power × the window"
            )
    return method, energy_j, mean_w


def summarise_power_window(
    samples: Sequence[PowerSample],
    *,
    duration_s: float,
    source: str,
    scope: PowerScope,
    power_method: PowerMethod | None = None,
    devices: int | None = None,
    lost_reason: str | None = None,
    notes: Sequence[str] = (),
    max_gap_s: float = MAX_SAMPLE_GAP_S,
    max_timeline_points: int = MAX_TIMELINE_POINTS,
    power_limit_w: float | None = None,
    resolution: Resolution | None = None,
    accelerators: int | None = None,
) -> PowerWindow:
    """Turn one window's samples into the run record's :class:`PowerWindow`.

    Energy (J): the counters' difference when every sample set carries counters for every
    device (``energy_method="counter"``; wrap-arounds of a known modulus added back), else
    the trapezoid integral of the power samples (``"integrated"``). Mean power (W): energy /
    the span the counters cover when the counter is used, else the trapezoid integral / the
    span of the power samples (a time-weighted mean). When the readings span less than the
    window, the energy is that mean × the window's length (noted below 99% coverage), so the
    window's tokens are never divided by the energy of part of it. The window is invalid
    (figures kept for inspection, never patched) when a counter was reset, the counter and
    the samples disagree beyond the source's tolerance
    (:mod:`~tokenwatt.analysis.power.power_agreement`), a power-sample gap exceeds ``max_gap_s``,
    the device was lost (``lost_reason``), there were no power samples, a reading is
    implausible (:func:`~tokenwatt.analysis.power.power_validity.plausibility_problems`), or the
    source's resolution is too coarse for the window
    (:func:`~tokenwatt.analysis.power.power_band.resolution_problems`).

    Args:
        samples: the readings, baseline (``counted=False``) first; any order is accepted.
        duration_s: the window's length (s).
        source: the source's name for the record (``nvml``, ``redfish`` …).
        scope: what the figure covers (board, node, module, sim).
        power_method: how power was read (see :class:`PowerWindow`).
        devices: number of devices summed over.
        lost_reason: set when the device disappeared mid-window.
        notes: remarks that do not invalidate the window.
        power_limit_w: the accelerators' summed power limit (W) when known; it sets the
            plausible band of any scope
            (:func:`~tokenwatt.analysis.power.power_band.plausible_band`).
        resolution: the source's counter step, counter modulus and reading interval.
        accelerators: how many accelerators a node or module reading includes (for its
            band); None: ``devices`` for board readings, unknown for node readings.

    Raises:
        ValueError: ``duration_s`` not positive.
    """
    if not duration_s > 0:
        raise ValueError(f"window duration must be positive, got {duration_s} s")
    res = resolution or Resolution()
    ordered = sorted(samples, key=lambda s: s.t_s)
    counted = [s for s in ordered if s.counted]
    powered = [s for s in ordered if s.power_w is not None]
    reasons = [lost_reason] if lost_reason else []
    if not powered:
        reasons.append("no power samples in the window")
    for a, b in sample_gaps([s.t_s for s in powered], duration_s, max_gap_s):
        reasons.append(
            f"gap of {b - a:.1f} s between power samples ({a:.1f}–{b:.1f} s after the start; "
            f"limit {max_gap_s:g} s): power figure not used"
        )
    integral_j, sample_mean_w, sample_span_s = _sample_means(powered)
    band = plausible_band(
        scope,
        devices=accelerators if accelerators is not None or scope != "board" else devices,
        power_limit_w=power_limit_w,
    )
    reasons += plausibility_problems(ordered, devices=devices, band=band)
    counter = counter_energy(ordered, wrap_j=res.counter_wrap_j)
    notes = list(notes)
    if counter is not None:
        reasons.extend(counter.reasons)
        notes.extend(counter.notes)
    agree_reasons, agree_notes = _cross_check(
        counter, sample_mean_w, powered, source=source, devices=devices
    )
    reasons += agree_reasons
    notes += agree_notes

    method, energy_j, mean_w = _energy(
        counter, integral_j, sample_mean_w, sample_span_s, duration_s=duration_s, notes=notes
    )
    # The samples' energy is the yardstick: a counter too coarse to move has counted 0 J.
    yardstick_j = sample_mean_w * duration_s if sample_mean_w else energy_j
    reasons += resolution_problems(
        powered, res, duration_s=duration_s, energy_j=yardstick_j, used_counter=method == "counter"
    )
    return _window(
        counted, powered, reasons, notes, duration_s=duration_s, source=source, scope=scope,
        mean_w=mean_w, energy_j=energy_j, method=method, power_method=power_method,
        devices=devices, max_timeline_points=max_timeline_points,
    )  # fmt: skip


def _window(
    counted: Sequence[PowerSample],
    powered: Sequence[PowerSample],
    reasons: list[str],
    notes: list[str],
    *,
    duration_s: float,
    source: str,
    scope: PowerScope,
    mean_w: float | None,
    energy_j: float | None,
    method: Literal["counter", "integrated"] | None,
    power_method: PowerMethod | None,
    devices: int | None,
    max_timeline_points: int,
) -> PowerWindow:
    """The record of a summarised window: figures, reasons, notes, timeline and clocks."""
    keep = _thin(len(powered), max_timeline_points)
    timeline = [(round(powered[i].t_s, 3), round(float(powered[i].power_w or 0), 2)) for i in keep]
    timeline_throttle = [sorted(powered[i].throttle) for i in keep]
    temps = [s.temperature_c for s in counted if s.temperature_c is not None]
    return PowerWindow(
        source=source,
        scope=scope,
        samples=len(counted),
        duration_s=duration_s,
        mean_power_w=None if mean_w is None else max(mean_w, 0.0),
        energy_j=None if energy_j is None else max(energy_j, 0.0),
        energy_method=method,
        valid=not reasons,
        invalid_reasons=reasons,
        throttle_counts=throttle_counts(counted),
        sm_clock_mhz_mean=_mean(s.sm_clock_mhz for s in counted),
        mem_clock_mhz_mean=_mean(s.mem_clock_mhz for s in counted),
        temperature_c_max=max(temps) if temps else None,
        timeline=timeline,
        timeline_throttle=timeline_throttle,
        power_method=power_method,
        devices=devices,
        notes=notes,
    )
