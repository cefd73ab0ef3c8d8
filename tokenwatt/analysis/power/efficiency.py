"""Efficiency figures: tokens per joule and relative deltas."""

from __future__ import annotations

import math


def tokens_per_joule(goodput_tok_s: float, mean_power_w: float) -> float:
    """Tokens per joule = goodput (tok/s) / mean summed board power (W = J/s).

    Equal to goodput tokens / energy (J) over equally long windows, and used only for records
    that keep no per-window energy (methods/energy.md; seed: 4572.3 / 637 ≈ 7.18); a report's
    figure is :func:`tokenwatt.analysis.stats.repeat_stats.config_tokens_per_joule`.

    Raises:
        ValueError: power not positive or either input not finite.
    """
    return _per_positive(goodput_tok_s, mean_power_w, "goodput and power", "mean power", "W")


def tokens_per_joule_above_idle(
    goodput_tok_s: float, mean_power_w: float, idle_power_w: float
) -> float | None:
    """Tokens per joule of the power drawn above the boards' idle floor:
    goodput (tok/s) / (mean power − idle power) (W). The plain figure charges the idle
    floor to the tokens too; this one shows what the work itself cost. None when the mean
    power is not above idle (nothing to divide by).

    Raises:
        ValueError: an input not finite, or idle power negative.
    """
    if not all(math.isfinite(x) for x in (goodput_tok_s, mean_power_w, idle_power_w)):
        raise ValueError("goodput and powers must be finite")
    if idle_power_w < 0:
        raise ValueError(f"idle power must not be negative, got {idle_power_w} W")
    above = mean_power_w - idle_power_w
    return goodput_tok_s / above if above > 0 else None


def tokens_per_joule_from_energy(output_tokens: float, energy_j: float) -> float:
    """Tokens per joule from a window's goodput tokens and its measured energy (J).

    methods/energy.md: goodput tokens in the window / energy in the window.

    Raises:
        ValueError: energy not positive or either input not finite.
    """
    return _per_positive(output_tokens, energy_j, "tokens and energy", "energy", "J")


def _per_positive(num: float, den: float, both: str, den_name: str, unit: str) -> float:
    """``num / den`` for finite inputs and a positive ``den`` (in ``unit``), else ValueError."""
    if not (math.isfinite(num) and math.isfinite(den)):
        raise ValueError(f"{both} must be finite")
    if den <= 0:
        raise ValueError(f"{den_name} must be positive, got {den} {unit}")
    return num / den


def delta_pct(value: float, baseline: float) -> float:
    """Relative change (%) of ``value`` against ``baseline``: 100 × (value − base) / base.

    Raises:
        ValueError: baseline is zero.
    """
    if baseline == 0:
        raise ValueError("baseline is zero; a relative change is undefined")
    return 100.0 * (value - baseline) / baseline
